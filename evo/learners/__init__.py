"""The learners evo trains, by ``--algo`` name (rl-baselines3-zoo's ``ALGOS``). Pure.

A learner is found by its files, with no list to edit: its declaration, evo/learners/<algo>.py,
whose ``SPEC`` (a :class:`~evo.learners.spec.LearnerSpec`) declares its settings once; its SB3
side, evo/sb3/<algo>.py, whose ``LEARNER`` builds and trains a member behind the learner
interface (:mod:`evo.learners.interface`); and its defaults and search spaces,
evo/hyperparams/<algo>.yml.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable

from evo.learners.spec import LearnerSpec, Reach, Setting

DEFAULT_ALGO = "ppo"

__all__ = ["DEFAULT_ALGO", "LearnerSpec", "Reach", "Setting", "algos", "learner_spec", "specs"]


@functools.cache
def specs() -> dict[str, LearnerSpec]:
    """Every learner's declaration by ``--algo`` name: the modules of this package with a SPEC."""
    found = {}
    for module in pkgutil.iter_modules(__path__):
        spec = getattr(importlib.import_module(f"{__name__}.{module.name}"), "SPEC", None)
        if isinstance(spec, LearnerSpec):
            found[spec.name] = spec
    return dict(sorted(found.items(), key=lambda item: (item[0] != DEFAULT_ALGO, item[0])))


def algos(where: Callable[[LearnerSpec], bool] | None = None) -> tuple[str, ...]:
    """The ``--algo`` names, the default first; with ``where``, of the learners whose spec it holds
    for (``algos(lambda spec: spec.replay)``: the off-policy learners)."""
    return tuple(name for name, spec in specs().items() if where is None or where(spec))


def learner_spec(algo: str) -> LearnerSpec:
    """The declaration of learner ``algo``."""
    found = specs()
    if algo not in found:
        raise ValueError(f"unknown learner {algo!r}; use one of {', '.join(found)}")
    return found[algo]
