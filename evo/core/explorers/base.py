"""The explorer interface: how a recipient's hyperparameters change at an exploit (pure).

An explorer is the smallest extension point (Ray Tune's ``PB2`` is its ``PopulationBasedTraining``
with two methods overridden): :meth:`Explorer.explore` gives each recipient of a generation new
hyperparameters from its donor's; :meth:`Explorer.observe` sees every generation's results first
(PB2 learns from them); :meth:`Explorer.state` is what it keeps across generations, saved in every
checkpoint under one key and given back to :meth:`Explorer.restore` on ``--resume``. A new
explorer is one module here and one line in ``evo/core/explorers/__init__.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from evo.core.kinds import SearchSpace
from evo.core.result import MemberResult


def shown(value: Any) -> str:
    """A hyperparameter's value in a log line: numbers to 4 significant digits, None as off."""
    if value is None:
        return "off"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


@dataclass(frozen=True)
class Change:
    """How one hyperparameter changed during explore, for the log and the lineage."""

    name: str
    old: Any
    new: Any
    how: str  # "* 0.8", "* 1.2", "+10% of range" (additive scale), "index +1" (choices), "resample", "pb2" ...

    def __str__(self) -> str:
        return f"{self.name} : {shown(self.old)} --- ({self.how}) --> {shown(self.new)}"


Explored = tuple[dict[str, Any], list[Change]]
"""A recipient's new hyperparameters, and how each changed."""


class Explorer:
    """Random perturbation's interface and its defaults: no memory, no state (see the module docstring)."""

    name: ClassVar[str] = ""

    def __init__(
        self,
        space: SearchSpace,
        perturb_factors: Sequence[float] = (0.8, 1.2),
        resample_probability: float = 0.25,
        rounds: int = 0,
        population: int = 0,
    ):
        self.space = space
        self.perturb_factors = tuple(perturb_factors)
        self.resample_probability = resample_probability
        self.rounds = rounds
        """The run's generations (0: unknown), for explorers whose schedule depends on the horizon."""
        self.population = population
        """The number of members (0: unknown)."""

    def observe(self, generation: int, population: Sequence[MemberResult], donors: Mapping[int, int]) -> None:
        """The generation's results (sorted by member id) and its donor map ``{member: donor}``
        (a member that keeps its weights maps to itself or is absent), before :meth:`explore`."""

    def observe_ready(self, interval: int, result: MemberResult, start: MemberResult) -> None:
        """Asynchronous mode (evo.core.asynchronous): one member's result at its ready point
        ``interval``, and the result whose weights it holds next (its donor's, or its own)."""

    def explore(self, generation: int, starts: Sequence[Mapping[str, Any]], rng: np.random.Generator) -> list[Explored]:
        """New hyperparameters for each recipient, from its donor's (``starts``, in recipient order)."""
        raise NotImplementedError

    def state(self) -> dict[str, Any] | None:
        """What it keeps across generations, as plain data (None: nothing)."""
        return None

    def restore(self, state: Mapping[str, Any] | None) -> None:
        """Continue from :meth:`state` of a checkpoint."""
