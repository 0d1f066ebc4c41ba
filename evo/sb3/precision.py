"""bfloat16 autocast for the policy's network, and torch's own word on whether the CPU has it.

What runs in bfloat16 (``precision: bf16``): the features extractor and the MLP extractor, the
network's body, under ``torch.autocast(device, dtype=torch.bfloat16)`` (the CPU's autocast, or CUDA's on a
GPU member: ``--device cuda``). Autocast runs the
convolutions and dense layers in bfloat16 (their weights cast from the float32 masters at each
forward), and the ReLUs, poolings and residual adds in between follow their inputs; the backward
pass runs in the forward's dtypes. The body's output is cast back to float32, so everything after
it stays float32: the action and value heads (two small dense layers), the action distribution
and its log-probabilities, the values SB3 stores in its rollout buffer, the advantages, the
probability ratios, the losses, gradient clipping and Adam. A log-ratio in bfloat16 (8 bits of
mantissa) would be off by about 1 % for a log-probability near -2, a fifth of PPO's clip range.

The parameters never change dtype: the weights and Adam's moments stay float32 (autocast casts
copies), so evo's flat float32 buffer, its exchanges and its checkpoints are the same in both
precisions, and members of either can copy each other.
"""

from __future__ import annotations

import contextlib

import torch

DTYPES: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16}
"""``precision`` -> the dtype the network's body runs in under autocast (None: float32, no autocast)."""


def body_dtype(precision: str) -> torch.dtype | None:
    if precision not in DTYPES:
        raise ValueError(f"precision {precision!r}: use one of {', '.join(DTYPES)}")
    return DTYPES[precision]


def autocast(dtype: torch.dtype | None, device_type: str = "cpu") -> contextlib.AbstractContextManager:
    """Autocast to ``dtype`` on ``device_type`` (the inputs' device: ``cpu``, or ``cuda`` through CUDA's
    autocast); nothing for None (float32)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type, dtype=dtype)


def require_bf16(device: torch.device) -> None:
    """Refuse to build a bfloat16 model where ``device`` would emulate bfloat16: a CPU without native
    bfloat16 (:func:`require_native_bf16`), a GPU without bfloat16 arithmetic (before NVIDIA's Ampere)."""
    if device.type == "cpu":
        require_native_bf16()
    elif device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise RuntimeError(f"precision bf16: {torch.cuda.get_device_name(device)} has no bfloat16 arithmetic; use fp32")


def as_float32(features: torch.Tensor | tuple[torch.Tensor, ...]) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """The body's output in float32 (a tensor, or the actor's and critic's pair); float32 passes as is."""
    if isinstance(features, tuple):
        return tuple(feature.float() for feature in features)
    return features.float()


def torch_bf16_support() -> tuple[bool, str]:
    """Whether torch runs bfloat16 natively here (oneDNN's bf16 kernels, which need avx512_bf16 or
    AMX), and what torch sees: its CPU capability and the instructions it detected."""
    capability = torch.backends.cpu.get_cpu_capability()
    try:
        avx512_bf16 = bool(torch.cpu._is_avx512_bf16_supported())
        amx = bool(torch.cpu._is_amx_tile_supported())
        onednn = torch.backends.mkldnn.is_available() and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # private helpers: a torch without them cannot promise bf16
        return False, f"capability {capability}; this torch cannot tell whether oneDNN has bfloat16 kernels"
    seen = f"capability {capability}, avx512_bf16 {avx512_bf16}, amx_tile {amx}, oneDNN bf16 {onednn}"
    return onednn and (avx512_bf16 or amx), seen


def require_native_bf16() -> None:
    """Refuse to build a bfloat16 model where torch would emulate bfloat16 (the config layer refused
    already from /proc/cpuinfo; this catches a torch built without oneDNN, or a CPU it does not know)."""
    native, seen = torch_bf16_support()
    if not native:
        raise RuntimeError(f"precision bf16: torch has no native bfloat16 on this CPU ({seen}); use fp32")
