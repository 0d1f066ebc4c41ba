"""A member's state as one flat buffer: every tensor the algorithm names as its state, in one
contiguous float32 array that the model's tensors are views of.

SB3's ``_get_torch_save_params()`` lists the modules and optimizers an algorithm saves (PPO:
``policy``, ``policy.optimizer``; SAC: ``policy`` with its actor, critics and target critics,
``actor.optimizer``, ``critic.optimizer``, and with a learned entropy coefficient
``ent_coef_optimizer`` and the tensor ``log_ent_coef``). Every parameter and buffer of those
modules (each once), each optimizer's state of every parameter (whatever the optimizer keeps:
Adam's ``step``, ``exp_avg`` and ``exp_avg_sq``, RMSprop's ``step`` and ``square_avg`` ...), and those
tensors, in that order, are moved into one buffer (:func:`bind_flat`): the buffer *is* the member's
networks and optimizer state, so MPI sends from it and receives into it with no packing copy.

**Any optimizer.** torch's optimizers create their state lazily, at a parameter's first step; evo
creates it when the member is built (:func:`init_optimizer_state`), so every member has the same
layout from the start, with the values the optimizer's own first step would create: those are
recorded from a throwaway copy of the optimizer stepping once on zero gradients, as it sets them
(before its update changes them). A number the optimizer keeps as a Python number (SB3's
``RMSpropTFLike`` counts steps in an int) is kept as a 0-d tensor, which its ``+=`` updates in place.

**Any dtype.** Most of the state is float32; a tensor of another dtype (CrossQ's batch-renorm step
count is an int64 buffer) takes the float32 words its bytes need, aligned to its item size, and the
model holds a view of those bytes as its own dtype: it moves bit for bit with the rest (MPI, the
checkpoint's tensor and ``np.copyto`` copy words, never convert them).

What to re-check when SB3 changes: ``_get_torch_save_params``. When torch changes: that an optimizer
creates its state by setting each key of ``optimizer.state[param]`` (recorded here), and reads it back
by the same keys at its next step.
"""

from __future__ import annotations

import copy
import operator
import weakref
from collections import defaultdict
from collections.abc import Callable

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from torch import nn

WORD = 4
"""Bytes of one element of the flat buffer (float32)."""


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


class _FirstValues(dict):
    """One parameter's optimizer state that keeps a copy of each value as it is first set: the
    optimizer's initial value, before its update changes the tensor in place."""

    def __init__(self) -> None:
        super().__init__()
        self.first: dict = {}

    def __setitem__(self, key, value) -> None:
        if key not in self.first:
            self.first[key] = value.detach().clone() if isinstance(value, torch.Tensor) else copy.deepcopy(value)
        super().__setitem__(key, value)


def _parameters(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [param for group in optimizer.param_groups for param in group["params"]]


def first_state(optimizer: torch.optim.Optimizer) -> list[dict[str, torch.Tensor]]:
    """Each parameter's state as ``optimizer``'s first step creates it, before that step's update: a copy
    of the optimizer steps once on zero gradients of copies of its parameters, and each value is recorded
    as the optimizer sets it. A number is given as a 0-d tensor (an int as int64, a float as float32)."""
    recording: defaultdict = defaultdict(_FirstValues)
    sandbox = copy.deepcopy(optimizer, memo={id(optimizer.state): recording})  # its state not copied: recorded
    for param in _parameters(sandbox):
        param.grad = torch.zeros_like(param)
    sandbox.step()
    states = []
    for param in _parameters(sandbox):
        recorded = sandbox.state[param].first if param in sandbox.state else {}
        states.append({key: _as_tensor(optimizer, key, value) for key, value in recorded.items()})
    return states


def _as_tensor(optimizer: torch.optim.Optimizer, key: str, value) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{type(optimizer).__name__} keeps {key!r} as a {type(value).__name__}: evo's flat state holds tensors "
            "and numbers only"
        )
    return torch.tensor(value, dtype=torch.int64 if isinstance(value, int) else torch.float32)


def init_optimizer_state(optimizer: torch.optim.Optimizer) -> None:
    """Create the optimizer's state now, as its own first step would (:func:`first_state`), so that
    every member has the same flat layout from the start and its first step computes what it would
    have. Parameters that already have state keep it. (An optimizer whose first step treats a missing
    value otherwise than its recorded one would differ at that step: torch's SGD with momentum and
    dampening; none that SB3 builds.)"""
    params = _parameters(optimizer)
    if all(optimizer.state.get(param) for param in params):
        return
    for param, state in zip(params, first_state(optimizer), strict=True):
        if not optimizer.state[param]:
            optimizer.state[param].update(state)


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
    a shared extractor several times; then each optimizer's state per parameter, in the order the
    optimizer created it; then the named tensors)."""
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
        for param in _parameters(optimizer):
            state = optimizer.state[param]
            for key, value in list(state.items()):
                if not isinstance(value, torch.Tensor):
                    state[key] = value = _as_tensor(optimizer, key, value)
                slots.append((value, lambda view, state=state, key=key: state.__setitem__(key, view)))
    for name in variables:
        tensor = operator.attrgetter(name)(model)
        if id(tensor) not in seen:
            seen.add(id(tensor))
            slots.append((tensor, lambda view, tensor=tensor: setattr(tensor, "data", view)))
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
                tensors += state[param].values()
    for name in variables:
        tensor = operator.attrgetter(name)(model)
        if id(tensor) not in seen:
            seen.add(id(tensor))
            tensors.append(tensor)
    return tensors


# --- where each tensor lies in the buffer -------------------------------------------------------


def _words(tensor: torch.Tensor) -> int:
    """The float32 words ``tensor``'s bytes take."""
    return -(-tensor.numel() * tensor.element_size() // WORD)


def offsets(tensors: list[torch.Tensor]) -> tuple[list[int], int]:
    """The word at which each tensor starts (a tensor of items wider than a word starts at a multiple of
    its item size), and the words of the whole buffer. float32 tensors lie back to back."""
    starts, offset = [], 0
    for tensor in tensors:
        align = max(tensor.element_size() // WORD, 1)
        offset = -(-offset // align) * align
        starts.append(offset)
        offset += _words(tensor)
    return starts, offset


def _view(base: torch.Tensor, start: int, tensor: torch.Tensor) -> torch.Tensor:
    """The part of ``base`` (float32) from word ``start`` that holds ``tensor``, as its dtype and shape."""
    words = base[start : start + _words(tensor)]
    if tensor.dtype == torch.float32:
        return words.view(tensor.shape)
    return words.view(torch.uint8)[: tensor.numel() * tensor.element_size()].view(tensor.dtype).view(tensor.shape)


def bind_flat(model: BaseAlgorithm, flat: np.ndarray | None = None, keep: bool = True) -> np.ndarray:
    """Move every state tensor into one contiguous buffer of float32 words and make the model use
    views of it, so the buffer *is* the member's networks and optimizer state: MPI sends
    from it and receives into it with no packing or unpacking copy. ``keep`` False: the model
    takes ``flat``'s contents as its state instead (a state received for a rebuilt model)."""
    if flat is None:
        flat = np.zeros(offsets([tensor for tensor, _ in _state_slots(model)])[1], dtype=np.float32)
        keep = True
    elif flat.dtype != np.float32:
        raise ValueError(f"flat buffer holds {flat.dtype}, the model needs float32 words")
    bind_tensor(model, torch.from_numpy(flat), keep)
    return flat


def bind_tensor(model: BaseAlgorithm, base: torch.Tensor, keep: bool = True) -> torch.Tensor:
    """:func:`bind_flat` onto a flat float32 tensor of any device (a GPU member's state lives there; its
    host copy is what travels: evo/sb3/learner.py). ``keep`` False: the model takes ``base``'s contents."""
    slots = _state_slots(model)
    starts, total = offsets([tensor for tensor, _ in slots])
    if base.numel() != total or base.dtype != torch.float32:
        raise ValueError(f"flat buffer holds {base.numel()} {base.dtype}, the model needs {total} float32 words")
    with torch.no_grad():
        for (tensor, put), start in zip(slots, starts, strict=True):
            view = _view(base, start, tensor)
            if view.data_ptr() != tensor.data_ptr():
                if keep:
                    view.copy_(tensor)
                put(view)
    _BOUND_ADDRESSES[model] = (base.data_ptr(), [int(base.data_ptr() + WORD * start) for start in starts])
    return base


def is_bound(model: BaseAlgorithm, flat: np.ndarray | torch.Tensor) -> bool:
    """Whether every state tensor is still the view of ``flat`` (a numpy buffer, or a tensor of any device)
    that bind_flat (bind_tensor) made."""
    tensors = state_tensors(model)
    address = flat.ctypes.data if isinstance(flat, np.ndarray) else flat.data_ptr()
    size = flat.size if isinstance(flat, np.ndarray) else flat.numel()
    cached = _BOUND_ADDRESSES.get(model)
    if cached is not None and cached[0] == address:  # what bind_flat made, checked fast
        return len(tensors) == len(cached[1]) and all(
            t.data_ptr() == a for t, a in zip(tensors, cached[1], strict=False)
        )
    starts, total = offsets(tensors)
    if total != size:
        return False
    return all(
        tensor.data_ptr() == address + WORD * start and tensor.is_contiguous()
        for tensor, start in zip(tensors, starts, strict=True)
    )


def flat_size(model: BaseAlgorithm) -> int:
    return offsets(state_tensors(model))[1]


def pack(model: BaseAlgorithm, out: np.ndarray) -> np.ndarray:
    """Copy the member's state tensors into ``out`` (float32, flat; the words between them zeroed)."""
    tensors = state_tensors(model)
    starts, total = offsets(tensors)
    if total != out.size:
        raise ValueError(f"flat buffer holds {out.size} floats, the model {total}")
    if total != sum(map(_words, tensors)):  # alignment left gaps
        out.fill(0)
    target = torch.from_numpy(out)
    with torch.no_grad():
        for tensor, start in zip(tensors, starts, strict=True):
            _view(target, start, tensor).copy_(tensor)
    return out


def unpack(model: BaseAlgorithm, buffer: np.ndarray) -> None:
    """Overwrite the member's state tensors from ``buffer``."""
    tensors = state_tensors(model)
    starts, total = offsets(tensors)
    source = torch.from_numpy(np.ascontiguousarray(buffer, dtype=np.float32))
    if total != source.numel():
        raise ValueError(f"flat buffer holds {source.numel()} floats, the model {total}")
    with torch.no_grad():
        for tensor, start in zip(tensors, starts, strict=True):
            tensor.copy_(_view(source, start, tensor))
