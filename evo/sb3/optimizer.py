"""torch's Adam, without importing torch._dynamo until something else does.

torch.optim wraps ``Optimizer.add_param_group``, ``zero_grad``, ``state_dict`` and
``load_state_dict`` in ``torch._disable_dynamo``, and ``Adam.step`` in
``_use_grad_for_differentiable``; both wrappers import torch._dynamo the first time they run, to
keep torch.compile out of the optimizer. That import costs every process that builds an
optimizer about 0.9 s of CPU and 71 MB of memory (torch 2.13 on an AMD EPYC, 2026-11-25): in a
CartPole member, a quarter of a 4096-step generation, and a fifth of a rank's memory.

While torch._dynamo is not imported nothing can be compiling, and the wrappers do nothing but
that import (``step``'s wrapper also sets grad mode to the optimizer's ``differentiable`` flag,
which :meth:`EagerAdam.step` does too). So :class:`EagerAdam` runs the functions inside the
wrappers while torch._dynamo is absent, and torch's own wrappers once anything has imported it:
the same arithmetic either way (tests/test_optimizer.py compares it with torch's Adam bit for bit).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable

import torch
from torch.optim import Adam, Optimizer
from torch.optim.optimizer import _use_grad_for_differentiable

DYNAMO = "torch._dynamo"


def dynamo_imported() -> bool:
    return DYNAMO in sys.modules


def _eager(name: str, function: Callable, guarded: Callable) -> Callable:
    """Method ``name``: ``function`` itself, or ``guarded`` (torch's wrapper of it) once
    torch._dynamo is imported."""

    def method(self, *args, **kwargs):
        if dynamo_imported():
            return guarded(self, *args, **kwargs)
        return function(self, *args, **kwargs)

    method.__name__, method.__qualname__, method.__doc__ = name, f"EagerAdam.{name}", function.__doc__
    return method


def _without_dynamo_guard(name: str) -> Callable:
    function = inspect.unwrap(getattr(Optimizer, name))
    return _eager(name, function, torch._disable_dynamo(function))


_ADAM_STEP = inspect.unwrap(Adam.step)


def _adam_step(self: Adam, closure=None):
    """Adam's step in the grad mode its wrapper sets (none unless ``differentiable``)."""
    with torch.set_grad_enabled(self.defaults["differentiable"]):
        return _ADAM_STEP(self, closure)


class EagerAdam(Adam):
    """torch.optim.Adam (same arguments, state and results) that leaves torch._dynamo unimported."""

    add_param_group = _without_dynamo_guard("add_param_group")
    zero_grad = _without_dynamo_guard("zero_grad")
    state_dict = _without_dynamo_guard("state_dict")
    load_state_dict = _without_dynamo_guard("load_state_dict")
    step = _eager("step", _adam_step, _use_grad_for_differentiable(_ADAM_STEP))
