"""One generation's decision: selection, then explore for every recipient (pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evo.core.explorers.base import Explorer
from evo.core.kinds import SearchSpace
from evo.core.objective import DEFAULT, Objective
from evo.core.result import MemberResult, by_member, finite_or_none
from evo.core.selection import TIE_RULES, keep_tied, leaders, select, tied_ids
from evo.core.streams import SELECTION_STREAM
from evo.core.welch import WelchTest, welch


@dataclass(frozen=True)
class Exploit:
    """One recipient copying one donor at the end of a generation."""

    generation: int
    recipient: int
    donor: int
    recipient_score: float
    donor_score: float
    old_hparams: dict[str, Any]
    new_hparams: dict[str, Any]
    changes: tuple[str, ...] = ()
    recipient_objectives: dict[str, float] = field(default_factory=dict)
    """With ``--objective`` other than the return: the recipient's objectives by name, as measured."""
    donor_objectives: dict[str, float] = field(default_factory=dict)
    front: tuple[int, ...] = ()
    """With several objectives: the members of the first Pareto front when it was decided (the donors
    winner-takes-all draws from), by id."""
    tie: tuple[int, ...] = ()
    """The members whose score ties the recipient's or the donor's, by id (empty: no tie): where they
    stand among each other, and so this exploit, was decided by the run's tie draw
    (evo.core.streams.tie_priorities), not by their ids."""
    test: WelchTest | None = None
    """With ``--exploit-test welch``: the test of the donor selection drew (``test.donor``) against the
    recipient; where it did not show the donor better, ``donor`` is the recipient (it explores without a
    copy)."""

    def to_json(self, space: SearchSpace | None = None) -> dict[str, Any]:
        """The lineage's JSON line; each hyperparameter as its kind writes it (``space``; a number
        as a float without one); the objectives when the run has its own (``--objective``)."""
        line = {
            "generation": self.generation,
            "recipient": self.recipient,
            "donor": self.donor,
            "recipient_score": finite_or_none(self.recipient_score),
            "donor_score": finite_or_none(self.donor_score),
            "old_hparams": json_hparams(self.old_hparams, space),
            "new_hparams": json_hparams(self.new_hparams, space),
            "changes": list(self.changes),
        }
        if self.recipient_objectives or self.donor_objectives:
            line["recipient_objectives"] = {k: finite_or_none(v) for k, v in self.recipient_objectives.items()}
            line["donor_objectives"] = {k: finite_or_none(v) for k, v in self.donor_objectives.items()}
        if self.front:
            line["front"] = list(self.front)
        if self.tie:
            line["tie"] = list(self.tie)
        if self.test is not None:
            line["welch"] = self.test.to_json()
        return line


def named_objectives(objective: Objective, result: MemberResult) -> dict[str, float]:
    """``result``'s objectives by name (the lineage's), empty for the default objective."""
    if objective.default or not result.objectives:
        return {}
    return dict(zip(objective.names, result.objectives, strict=True))


def gate(
    donors: Mapping[int, int], results: Mapping[int, MemberResult], alpha: float | None
) -> tuple[dict[int, int], dict[int, WelchTest]]:
    """``donors`` (``{recipient: donor}`` by member id) with each recipient whose donor Welch's t-test at
    ``alpha`` does not show better (evo.core.welch, on the members' ``outcomes``) mapped to itself, and each
    test by recipient; ``alpha`` None (``--exploit-test none``): ``donors`` as they are, no test."""
    if alpha is None:
        return dict(donors), {}
    tests = {
        recipient: welch(donor, results[donor].outcomes, results[recipient].outcomes, alpha)
        for recipient, donor in donors.items()
        if donor != recipient
    }
    return {r: d if r not in tests or tests[r].copies else r for r, d in donors.items()}, tests


def weight_moves(exploits: Sequence[Exploit]) -> dict[int, int]:
    """The donor map ``{recipient: donor}`` of the exploits that copy another member."""
    return {e.recipient: e.donor for e in exploits if e.recipient != e.donor}


def json_hparams(hparams: dict[str, Any], space: SearchSpace | None) -> dict[str, Any]:
    """Hyperparameters as standard JSON, each as its kind writes it (an "off" value is null)."""
    return {
        name: space[name].json(value) if space is not None and name in space else _plain(value)
        for name, value in hparams.items()
    }


def _plain(value: Any) -> Any:
    return None if isinstance(value, float) and math.isinf(value) else value


def generation_rng(seed: int, generation: int) -> np.random.Generator:
    """The generator rank 0 uses for generation ``generation``'s selection and explore."""
    return np.random.default_rng([seed, generation, SELECTION_STREAM])


def ties_of(scores: Sequence[float], ids: Sequence[int], recipient: int, donor: int) -> tuple[int, ...]:
    """The ids tied with the member at position ``recipient`` or ``donor`` (a tie of two or more; empty
    when neither ties anyone), sorted: an exploit that rests on a tie says so."""
    return tied_ids(scores, ids, (recipient, donor))


def plan_generation(
    generation: int,
    population: Sequence[MemberResult],
    strategy: str,
    explorer: Explorer,
    rng: np.random.Generator,
    truncation_fraction: float = 0.25,
    exploit: bool = True,
    explore_hparams: bool = True,
    ties: str = "explore",
    objective: Objective = DEFAULT,
    tiebreak: Mapping[int, int] | None = None,
    welch_alpha: float | None = None,
) -> list[Exploit]:
    """Decide who copies whom and each recipient's new hyperparameters.

    ``population`` holds one :class:`MemberResult` per member, in any order: members are
    known by their ids, and ranked by score, equal scores by ``tiebreak`` (each id's priority,
    lower first: evo.core.streams.tie_priorities; None: the lower id first). An exploit whose
    recipient or donor ties another member names them (:attr:`Exploit.tie`). A recipient
    takes its donor's hyperparameters and ``explorer`` (evo.core.explorers) explores from
    them; the explorer sees the generation's results and donor map first (PB2 learns from them).

    The ablations of the PBT paper: with ``exploit=False`` nobody copies and every member
    explores from its own hyperparameters (an :class:`Exploit` whose donor is the member
    itself: no weights move); with ``explore_hparams=False`` recipients keep their donor's
    hyperparameters unchanged. With neither, the plan is empty (independent training).

    ``ties`` decides for a recipient whose score equals its donor's: ``"explore"`` (the
    default) keeps its own weights and explores its own hyperparameters, ``"copy"`` copies
    the donor like any other recipient (the rule before there was a choice).

    ``objective`` says what members are ranked by (evo.core.objective): their scores, or with several
    objectives their Pareto fronts.

    ``welch_alpha`` (``--exploit-test welch``): a recipient copies the donor selection drew only if Welch's
    t-test at that level shows the donor's outcomes better than its own (:func:`gate`); otherwise it keeps its
    weights and explores its own hyperparameters, and its :attr:`Exploit.test` says why.
    """
    ordered = by_member(population)
    results = {result.member: result for result in ordered}
    front = ()
    if objective.several:
        front = tuple(sorted(ordered[i].member for i in leaders(objective.selection_keys(ordered))))
    if exploit:
        ids = [result.member for result in ordered]  # selection ranks positions; map them back to ids
        scores = objective.selection_keys(ordered)
        priorities = None if tiebreak is None else [tiebreak[member] for member in ids]
        chosen = select(strategy, scores, truncation_fraction, rng, priorities)
        if not objective.several:
            tied_ids = {ids[recipient]: ties_of(scores, ids, recipient, donor) for recipient, donor in chosen.items()}
        if ties == "explore":
            chosen = keep_tied(chosen, scores)
        elif ties != "copy":
            raise ValueError(f"unknown tie rule {ties!r}; use one of {TIE_RULES}")
        donors, tests = gate({ids[recipient]: ids[donor] for recipient, donor in chosen.items()}, results, welch_alpha)
    elif explore_hparams:
        donors = {member: member for member in results}
    else:
        donors = {}
    if not exploit or objective.several:
        tied_ids = {}
    if not exploit:
        tests = {}
    recipients = sorted(donors)
    explorer.observe(generation, ordered, donors)
    starts = [results[donors[r]].hparams for r in recipients]
    if explore_hparams:
        explored = explorer.explore(generation, starts, rng)
    else:
        explored = [(dict(h), []) for h in starts]
    return [
        Exploit(
            generation=generation,
            recipient=recipient,
            donor=donors[recipient],
            recipient_score=float(results[recipient].score),
            donor_score=float(results[donors[recipient]].score),
            old_hparams=dict(results[recipient].hparams),
            new_hparams=new,
            changes=tuple(str(c) for c in changes),
            recipient_objectives=named_objectives(objective, results[recipient]),
            donor_objectives=named_objectives(objective, results[donors[recipient]]),
            front=front,
            tie=tied_ids.get(recipient, ()),
            test=tests.get(recipient),
        )
        for recipient, (new, changes) in zip(recipients, explored, strict=True)
    ]
