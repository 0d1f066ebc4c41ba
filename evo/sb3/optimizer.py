"""torch's Adam and RMSprop, without importing torch._dynamo until something else does.

torch.optim wraps ``Optimizer.add_param_group``, ``zero_grad``, ``state_dict`` and
``load_state_dict`` in ``torch._disable_dynamo``, and ``Adam.step`` in
``_use_grad_for_differentiable``; both wrappers import torch._dynamo the first time they run, to
keep torch.compile out of the optimizer. That import costs every process that builds an
optimizer about 0.9 s of CPU and 71 MB of memory (torch 2.13 on an AMD EPYC, 2026-11-25): in a
CartPole member, a quarter of a 4096-step generation, and a fifth of a rank's memory.

While torch._dynamo is not imported nothing can be compiling, and the wrappers do nothing but
that import (``step``'s wrapper also sets grad mode to the optimizer's ``differentiable`` flag,
which :meth:`EagerAdam.step` does too). So :func:`eager` makes a subclass of a torch optimizer that runs the
functions inside the wrappers while torch._dynamo is absent, and torch's own wrappers once anything
has imported it: the same arithmetic either way (tests/unit/sb3/test_optimizer.py compares
:class:`EagerAdam` with torch's Adam and :class:`EagerRMSprop` with torch's RMSprop bit for bit).
:func:`stock_optimizer` gives back the torch class (what SB3 without evo loads).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable

import torch
from torch.optim import Adam, Optimizer, RMSprop
from torch.optim.optimizer import _use_grad_for_differentiable

DYNAMO = "torch._dynamo"


def dynamo_imported() -> bool:
    return DYNAMO in sys.modules


GUARDED = ("add_param_group", "zero_grad", "state_dict", "load_state_dict")
"""The methods torch.optim wraps in ``torch._disable_dynamo``."""


def _eager(name: str, function: Callable, guarded: Callable, owner: str) -> Callable:
    """Method ``name``: ``function`` itself, or ``guarded`` (torch's wrapper of it) once
    torch._dynamo is imported."""

    def method(self, *args, **kwargs):
        if dynamo_imported():
            return guarded(self, *args, **kwargs)
        return function(self, *args, **kwargs)

    method.__name__, method.__qualname__, method.__doc__ = name, f"{owner}.{name}", function.__doc__
    return method


def _without_dynamo_guard(name: str, owner: str) -> Callable:
    function = inspect.unwrap(getattr(Optimizer, name))
    return _eager(name, function, torch._disable_dynamo(function), owner)


def eager(optimizer_class: type[Optimizer]) -> type[Optimizer]:
    """``optimizer_class`` (a torch optimizer whose ``step`` torch wraps in ``_use_grad_for_differentiable``)
    with the same arguments, state and results, leaving torch._dynamo unimported."""
    owner = f"Eager{optimizer_class.__name__}"
    step = inspect.unwrap(optimizer_class.step)

    def grad_mode_step(self, closure=None):
        """The optimizer's step in the grad mode its wrapper sets (none unless ``differentiable``)."""
        with torch.set_grad_enabled(self.defaults["differentiable"]):
            return step(self, closure)

    methods = {name: _without_dynamo_guard(name, owner) for name in GUARDED}
    methods["step"] = _eager("step", grad_mode_step, _use_grad_for_differentiable(step), owner)
    doc = f"torch.optim.{optimizer_class.__name__} (same arguments, state and results), torch._dynamo left unimported."
    return type(owner, (optimizer_class,), {"__module__": __name__, "__doc__": doc, **methods})


EagerAdam = eager(Adam)
EagerRMSprop = eager(RMSprop)


def stock_optimizer(optimizer_class: type) -> type:
    """The torch optimizer an eager one stands in for (any other class as it is)."""
    return optimizer_class.__bases__[0] if optimizer_class in (EagerAdam, EagerRMSprop) else optimizer_class
