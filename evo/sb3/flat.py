"""A member's state as one flat buffer: every tensor the algorithm names as its state, in one
contiguous float32 array that the model's tensors are views of.

SB3's ``_get_torch_save_params()`` lists the modules and optimizers an algorithm saves (PPO:
``policy``, ``policy.optimizer``; SAC: ``policy`` with its actor, critics and target critics,
``actor.optimizer``, ``critic.optimizer``, and with a learned entropy coefficient
``ent_coef_optimizer`` and the tensor ``log_ent_coef``). Every parameter and buffer of those
modules (each once), Adam's ``step``, ``exp_avg`` and ``exp_avg_sq`` of every parameter of those
optimizers, and those tensors, in that order, are moved into one buffer (:func:`bind_flat`): the
buffer *is* the member's networks and optimizer state, so MPI sends from it and receives into it
with no packing copy.

What to re-check when SB3 changes: ``_get_torch_save_params``; Adam's state keys.
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from torch import nn


def named_state(model: BaseAlgorithm) -> tuple[list[nn.Module], list[torch.optim.Optimizer], list[str]]:
    """The modules, optimizers and tensor attributes the algorithm saves (``_get_torch_save_params``)."""
    state_dicts, variables = model._get_torch_save_params()
    modules, optimizers = [], []
    for name in state_dicts:
        found = operator.attrgetter(name)(model)
        if isinstance(found, torch.optim.Optimizer):
            optimizers.append(found)
        elif isinstance(found, nn.Module):
            modules.append(found)
        else:
            raise TypeError(f"{type(model).__name__}.{name} is neither a module nor an optimizer")
    return modules, optimizers, list(variables)


def optimizers_of(model: BaseAlgorithm) -> list[torch.optim.Optimizer]:
    return named_state(model)[1]


def init_optimizer_state(optimizer: torch.optim.Optimizer) -> None:
    """Create Adam's state now, exactly as its first step would (zeros, step 0), so that
    every member has the same flat layout from the start."""
    if not isinstance(optimizer, torch.optim.Adam):
        raise TypeError(f"evo moves Adam state; got {type(optimizer).__name__}")
    for group in optimizer.param_groups:
        for param in group["params"]:
            state = optimizer.state[param]
            if not state:
                state["step"] = torch.tensor(0.0, dtype=torch.float32)
                state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)


ADAM_STATE = ("step", "exp_avg", "exp_avg_sq")
_BUFFER_HOLDERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# model -> (address of its flat buffer, address of each state tensor in it), set by bind_flat
_BOUND_ADDRESSES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _buffer_holders(module: nn.Module) -> list[tuple[nn.Module, str]]:
    """(module, name) of each registered buffer, each tensor once, in module order (cached:
    the module tree does not change after construction)."""
    holders = _BUFFER_HOLDERS.get(module)
    if holders is None:
        holders, seen = [], set()
        for child in module.modules():
            for name, buffer in child._buffers.items():
                if buffer is not None and id(buffer) not in seen:
                    seen.add(id(buffer))
                    holders.append((child, name))
        _BUFFER_HOLDERS[module] = holders
    return holders


def _state_slots(model: BaseAlgorithm) -> list[tuple[torch.Tensor, Callable[[torch.Tensor], None]]]:
    """Every tensor of the member's state, in a fixed order, each with a function that puts
    another tensor in its place (module parameters and buffers, each once: SB3's state_dict lists
    a shared extractor several times; then Adam's state per parameter; then the named tensors)."""
    modules, optimizers, variables = named_state(model)
    slots: list[tuple[torch.Tensor, Callable]] = []
    seen: set[int] = set()
    for module in modules:
        for param in module.parameters():
            if id(param) not in seen:
                seen.add(id(param))
                slots.append((param, lambda view, param=param: setattr(param, "data", view)))
        _BUFFER_HOLDERS.pop(module, None)
        for holder, name in _buffer_holders(module):
            if id(holder._buffers[name]) not in seen:
                seen.add(id(holder._buffers[name]))
                slots.append((holder._buffers[name], lambda view, h=holder, n=name: h._buffers.__setitem__(n, view)))
    for optimizer in optimizers:
        init_optimizer_state(optimizer)
        for group in optimizer.param_groups:
            for param in group["params"]:
                state = optimizer.state[param]
                for key in ADAM_STATE:
                    slots.append((state[key], lambda view, state=state, key=key: state.__setitem__(key, view)))
    for name in variables:
        tensor = operator.attrgetter(name)(model)
        if id(tensor) not in seen:
            seen.add(id(tensor))
            slots.append((tensor, lambda view, tensor=tensor: setattr(tensor, "data", view)))
    for tensor, _ in slots:
        if tensor.dtype != torch.float32:
            raise TypeError(f"evo's flat buffer holds float32 tensors; found {tensor.dtype}")
    return slots


def state_tensors(model: BaseAlgorithm) -> list[torch.Tensor]:
    """The tensors of :func:`_state_slots`, in the same order (a lighter walk: it runs at every exchange)."""
    modules, optimizers, variables = named_state(model)
    tensors: list[torch.Tensor] = []
    seen: set[int] = set()
    for module in modules:
        for tensor in [*module.parameters(), *(h._buffers[n] for h, n in _buffer_holders(module))]:
            if id(tensor) not in seen:
                seen.add(id(tensor))
                tensors.append(tensor)
    for optimizer in optimizers:
        state = optimizer.state
        for group in optimizer.param_groups:
            for param in group["params"]:
                entry = state[param]
                tensors += (entry["step"], entry["exp_avg"], entry["exp_avg_sq"])
    for name in variables:
        tensor = operator.attrgetter(name)(model)
        if id(tensor) not in seen:
            seen.add(id(tensor))
            tensors.append(tensor)
    return tensors


def bind_flat(model: BaseAlgorithm, flat: np.ndarray | None = None, keep: bool = True) -> np.ndarray:
    """Move every state tensor into one contiguous float32 buffer and make the model use
    views of it, so the buffer *is* the member's networks and optimizer state: MPI sends
    from it and receives into it with no packing or unpacking copy. ``keep`` False: the model
    takes ``flat``'s contents as its state instead (a state received for a rebuilt model)."""
    if flat is None:
        flat = np.empty(sum(tensor.numel() for tensor, _ in _state_slots(model)), dtype=np.float32)
        keep = True
    elif flat.dtype != np.float32:
        raise ValueError(f"flat buffer holds {flat.dtype}, the model needs float32")
    bind_tensor(model, torch.from_numpy(flat), keep)
    return flat


def bind_tensor(model: BaseAlgorithm, base: torch.Tensor, keep: bool = True) -> torch.Tensor:
    """:func:`bind_flat` onto a flat float32 tensor of any device (a GPU member's state lives there; its
    host copy is what travels: evo/sb3/learner.py). ``keep`` False: the model takes ``base``'s contents."""
    slots = _state_slots(model)
    total = sum(tensor.numel() for tensor, _ in slots)
    if base.numel() != total or base.dtype != torch.float32:
        raise ValueError(f"flat buffer holds {base.numel()} {base.dtype}, the model needs {total} float32")
    offset = 0
    with torch.no_grad():
        for tensor, put in slots:
            size = tensor.numel()
            view = base[offset : offset + size].view(tensor.shape)
            if view.data_ptr() != tensor.data_ptr():
                if keep:
                    view.copy_(tensor)
                put(view)
            offset += size
    start = base.data_ptr()
    addresses = [start + 4 * first for first in np.cumsum([0] + [t.numel() for t, _ in slots[:-1]])]
    _BOUND_ADDRESSES[model] = (start, [int(a) for a in addresses])
    return base


def is_bound(model: BaseAlgorithm, flat: np.ndarray | torch.Tensor) -> bool:
    """Whether every state tensor is still the view of ``flat`` (a numpy buffer, or a tensor of any device)
    that bind_flat (bind_tensor) made."""
    tensors = state_tensors(model)
    start = flat.ctypes.data if isinstance(flat, np.ndarray) else flat.data_ptr()
    nbytes = flat.nbytes if isinstance(flat, np.ndarray) else flat.numel() * flat.element_size()
    cached = _BOUND_ADDRESSES.get(model)
    if cached is not None and cached[0] == start:  # what bind_flat made, checked fast
        return len(tensors) == len(cached[1]) and all(
            t.data_ptr() == a for t, a in zip(tensors, cached[1], strict=False)
        )
    address = start
    for tensor in tensors:
        if tensor.data_ptr() != address or not tensor.is_contiguous():
            return False
        address += tensor.numel() * 4
    return address == start + nbytes


def flat_size(model: BaseAlgorithm) -> int:
    return sum(t.numel() for t in state_tensors(model))


def pack(model: BaseAlgorithm, out: np.ndarray) -> np.ndarray:
    """Copy the member's state tensors into ``out`` (float32, flat)."""
    target = torch.from_numpy(out)
    offset = 0
    with torch.no_grad():
        for tensor in state_tensors(model):
            size = tensor.numel()
            target[offset : offset + size].view(tensor.shape).copy_(tensor)
            offset += size
    if offset != out.size:
        raise ValueError(f"flat buffer holds {out.size} floats, the model {offset}")
    return out


def unpack(model: BaseAlgorithm, buffer: np.ndarray) -> None:
    """Overwrite the member's state tensors from ``buffer``."""
    source = torch.from_numpy(np.ascontiguousarray(buffer, dtype=np.float32))
    offset = 0
    with torch.no_grad():
        for tensor in state_tensors(model):
            size = tensor.numel()
            tensor.copy_(source[offset : offset + size].view(tensor.shape))
            offset += size
    if offset != source.numel():
        raise ValueError(f"flat buffer holds {source.numel()} floats, the model {offset}")
