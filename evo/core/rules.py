"""A run's PBT rules, in one object for every mode: :class:`PBTRules`. Pure.

Ray Tune's ``PopulationBasedTraining`` is one scheduler split at one flag (synchronous or not),
sharing its exploit, quantiles and perturbation; this is ours: who copies whom and with which new
values, decided for a whole generation (:meth:`PBTRules.plan`) or at one member's ready point
(:meth:`PBTRules.at_ready`), and where a failed member starts again (:meth:`PBTRules.restarts`,
:meth:`PBTRules.ready_restart`), each decision from its own random stream (evo/core/streams.py), with
the run's explorer (:meth:`PBTRules.explorer`). The drivers (evo/runner) decide nothing themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from evo.core.asynchronous import Latest, ReadyExploit, decide_at_ready, ready_rng, ready_tiebreak
from evo.core.explorers import Explorer, make_explorer
from evo.core.kinds import SearchSpace
from evo.core.objective import DEFAULT, Objective
from evo.core.plan import Exploit, generation_rng, plan_generation
from evo.core.restart import Failure, Restart, plan_restarts, ready_restart_rng, restart_rng
from evo.core.result import MemberResult
from evo.core.streams import tie_priorities


@dataclass(frozen=True)
class PBTRules:
    """The selection rule (``strategy``: truncation, winner-takes-all or none), its fraction and tie
    rule, the explorer (``explore`` over ``space``, the explored hyperparameters) and the failure limit,
    for a run of ``rounds`` generations of ``population`` members from ``seed``; ``objective``: what
    members are ranked by (``--objective``)."""

    strategy: str
    explore: str
    space: SearchSpace
    seed: int
    rounds: int
    population: int
    truncation_fraction: float = 0.25
    ties: str = "explore"
    perturb_factors: tuple[float, ...] = (0.8, 1.2)
    resample_probability: float = 0.25
    max_member_failures: int = 0
    objective: Objective = DEFAULT
    welch_alpha: float | None = None
    """With ``--exploit-test welch``: ``--exploit-alpha``, the level at which a recipient's drawn donor must be
    better by Welch's t-test for it to copy (evo.core.welch); None: no test."""

    def explorer(self, state: Mapping[str, Any] | None = None) -> Explorer:
        """The run's explorer, continuing from a checkpoint's ``state`` if given (a new stage's starts
        afresh: BG-PBT resets its GP's data)."""
        return make_explorer(
            self.explore,
            self.space,
            self.perturb_factors,
            self.resample_probability,
            state,
            rounds=self.rounds,
            population=self.population,
        )

    def plan(self, generation: int, population: list[MemberResult], explorer: Explorer) -> list[Exploit]:
        """A generation's exploits (rank 0), from its generator."""
        return plan_generation(
            generation,
            population,
            self.strategy,
            explorer,
            generation_rng(self.seed, generation),
            self.truncation_fraction,
            ties=self.ties,
            objective=self.objective,
            tiebreak=self.tiebreak(generation, population),
            welch_alpha=self.welch_alpha,
        )

    def tiebreak(self, generation: int, population: Sequence[MemberResult]) -> dict[int, int]:
        """Each member's priority in a tie at ``generation`` (lower first): the run's tie draw
        (evo.core.streams.tie_priorities), one for the generation's selection and its kept best."""
        return tie_priorities((self.seed, generation), [result.member for result in population])

    def restarts(
        self,
        generation: int,
        failed: Sequence[Failure],
        scored: Sequence[MemberResult],
        failures: MutableMapping[int, int],
        recipients: frozenset[int],
        round_: int,
    ) -> list[Restart]:
        """Where the generation's failed members start again (``failures``: each member's count so far,
        updated; ``round_``: 0 for the generation's failures, 1 for its restarted members' second try,
        ...); raises past the limit."""
        planned = plan_restarts(
            generation,
            failed,
            scored,
            failures,
            self.max_member_failures,
            self.space,
            restart_rng(self.seed, generation, round_),
            self.strategy,
            self.truncation_fraction,
            recipients,
            self.objective,
            self.tiebreak(generation, scored),
        )
        failures.update({restart.member: restart.failures for restart in planned})
        return planned

    def at_ready(self, member: int, latest: Mapping[int, Latest], explorer: Explorer) -> ReadyExploit | None:
        """``member``'s exploit at the ready point ``latest[member]`` holds (asynchronous runs)."""
        rng = ready_rng(self.seed, member, latest[member].interval)
        tiebreak = ready_tiebreak(self.seed, member, latest[member].interval, latest)
        return decide_at_ready(
            member,
            latest,
            self.strategy,
            explorer,
            rng,
            self.truncation_fraction,
            self.ties,
            self.objective,
            tiebreak,
            self.welch_alpha,
        )

    def ready_restart(
        self, interval: int, failure: Failure, latest: Mapping[int, Latest], failures: MutableMapping[int, int]
    ) -> Restart:
        """Where a member that failed in its ``interval`` starts again, against every other member's
        latest ready point (asynchronous runs; ``failures`` updated)."""
        others = [point.result for member, point in sorted(latest.items()) if member != failure.member]
        count = failures.get(failure.member, 0)
        [planned] = plan_restarts(
            interval,
            [failure],
            others,
            failures,
            self.max_member_failures,
            self.space,
            ready_restart_rng(self.seed, failure.member, interval, count),
            self.strategy,
            self.truncation_fraction,
            objective=self.objective,
            tiebreak=ready_tiebreak(self.seed, failure.member, interval, [result.member for result in others]),
        )
        failures[failure.member] = planned.failures
        return planned
