"""This process's global random states (torch, NumPy, Python's ``random``) as checkpointable data:
SB3 draws from them (a policy's sampling, the off-policy warm-up), so a resumed rank continues
their streams."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

import numpy as np
import torch


def rng_state() -> dict:
    """This process's global RNG states (torch, numpy, random) as checkpointable data."""
    kind, keys, position, has_gauss, cached = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "numpy_keys": torch.from_numpy(keys.astype(np.int64)),
        "numpy_position": int(position),
        "numpy_has_gauss": int(has_gauss),
        "numpy_cached_gaussian": float(cached),
        "python": [int(v) for v in random.getstate()[1]],
    }


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    keys = state["numpy_keys"].numpy().astype(np.uint32)
    np.random.set_state(
        ("MT19937", keys, state["numpy_position"], state["numpy_has_gauss"], state["numpy_cached_gaussian"])
    )
    random.setstate((3, tuple(state["python"]), None))


@contextlib.contextmanager
def forked_rng(seed: int | None, device: torch.device) -> Iterator[None]:
    """Inside, torch's generators of the CPU and of ``device`` (if a GPU) draw from ``seed``; after, they
    continue as if nothing had drawn. ``None``: nothing changes (and nothing is forked)."""
    if seed is None:
        yield
        return
    gpus = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=gpus):
        torch.default_generator.manual_seed(seed)
        for index in gpus:
            with torch.cuda.device(index):
                torch.cuda.manual_seed(seed)
        yield
