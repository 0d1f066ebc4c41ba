"""The explorer interface: how a recipient's hyperparameters change at an exploit (pure).

An explorer is the smallest extension point (Ray Tune's ``PB2`` is its ``PopulationBasedTraining``
with two methods overridden): :meth:`Explorer.explore` gives each recipient of a generation new
hyperparameters from its donor's; :meth:`Explorer.observe` sees every generation's results first
(PB2 learns from them); :meth:`Explorer.state` is what it keeps across generations, saved in every
checkpoint under one key and given back to :meth:`Explorer.restore` on ``--resume``. A new
explorer is one module here and one line in ``evo/core/explorers/__init__.py``.

An explorer also declares, as class attributes, what it can do; the config layer's checks and
``--explore``'s help read them (``evo/config/checks.py`` keeps no list of explorers):

- ``summary``: one line for ``--help``, what it does and where it comes from;
- ``asynchronous``: whether it can decide one member at a time, at that member's ready point
  (``--asynchronous``): its :meth:`~Explorer.explore` needs no other recipient of the same
  generation, and whatever it learns from results it also learns in
  :meth:`~Explorer.observe_ready`. False by default: an explorer that learns only in
  :meth:`~Explorer.observe` would learn nothing in an asynchronous run. ``why_synchronous``
  says why not, in the refusal of ``--asynchronous`` ("--explore NAME --asynchronous: NAME
  <why_synchronous>; ...");
- ``named_choices``: whether a search space may hold named (unordered) choices, such as DrAC's
  augmentation; PB2's GP reads every value on an axis with an order, so it cannot.
  ``why_ordered`` says why not, in the refusal of such a space;
- ``several_objectives``: whether it can serve a run ranked by several objectives (``--objective
  return,info:energy:min``, Pareto fronts); a model of one score's change over the hyperparameters
  (PB2's GP, and every explorer built on it) has no single score to model. ``why_one_objective`` says
  why not, in the refusal of such a run;
- ``category_rule``: how it chooses a category (the value of any ``choices`` hyperparameter) by a
  rule of its own, apart from the model of the other values: the Procgen AutoRL paper's
  explorers draw categories at random or from a bandit, then PB2's GP for the rest. An explorer
  with one is suggested where named choices are refused ('': none; casmo's categories are
  inputs of its one GP and trust region, and perturb's move like any value).
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
    """Its ``--explore`` name (the key of its line in ``EXPLORERS``)."""
    summary: ClassVar[str] = ""
    """One line for ``--explore``'s help: what it does, and where it comes from."""
    asynchronous: ClassVar[bool] = False
    """Whether it can decide one member at a time, at the member's ready point (``--asynchronous``)."""
    why_synchronous: ClassVar[str] = "decides a whole generation's recipients together"
    """Why it cannot (``asynchronous`` False), completing "NAME ..." in the refusal of ``--asynchronous``."""
    named_choices: ClassVar[bool] = True
    """Whether its search space may hold named (unordered) choices."""
    why_ordered: ClassVar[str] = ""
    """Why it cannot (``named_choices`` False), said in the refusal of a space with named choices."""
    several_objectives: ClassVar[bool] = True
    """Whether it can explore for a run ranked by several objectives (Pareto fronts)."""
    why_one_objective: ClassVar[str] = ""
    """Why it cannot (``several_objectives`` False), said in the refusal of several objectives."""
    category_rule: ClassVar[str] = ""
    """How it chooses categories by a rule of its own, completing "NAME ..." ("keeps or redraws each at
    random"); '': it has none."""

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
