"""One generation's decision: selection, then explore for every recipient (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evo.core.explore import explore
from evo.core.pb2 import PB2
from evo.core.result import MemberResult, by_member
from evo.core.selection import TIE_RULES, keep_tied, select
from evo.core.space import SearchSpace

SELECTION_STREAM = 0x5E1EC7


@dataclass(frozen=True)
class Exploit:
    """One recipient copying one donor at the end of a generation."""

    generation: int
    recipient: int
    donor: int
    recipient_score: float
    donor_score: float
    old_hparams: dict[str, float]
    new_hparams: dict[str, float]
    changes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "recipient": self.recipient,
            "donor": self.donor,
            "recipient_score": _finite_or_none(self.recipient_score),
            "donor_score": _finite_or_none(self.donor_score),
            "old_hparams": _json_hparams(self.old_hparams),
            "new_hparams": _json_hparams(self.new_hparams),
            "changes": list(self.changes),
        }


def weight_moves(exploits: Sequence[Exploit]) -> dict[int, int]:
    """The donor map ``{recipient: donor}`` of the exploits that copy another member."""
    return {e.recipient: e.donor for e in exploits if e.recipient != e.donor}


def _json_hparams(hparams: dict[str, float]) -> dict[str, float | None]:
    """Hyperparameters as standard JSON: target_kl's inf (no early stop) is written null."""
    return {name: None if value in (math.inf, -math.inf) else value for name, value in hparams.items()}


def _finite_or_none(value: float) -> float | None:
    return None if value != value else float(value)


def generation_rng(seed: int, generation: int) -> np.random.Generator:
    """The generator rank 0 uses for generation ``generation``'s selection and explore."""
    return np.random.default_rng([seed, generation, SELECTION_STREAM])


def plan_generation(
    generation: int,
    population: Sequence[MemberResult],
    strategy: str,
    space: SearchSpace,
    rng: np.random.Generator,
    truncation_fraction: float = 0.25,
    perturb_factors: Sequence[float] = (0.8, 1.2),
    resample_probability: float = 0.25,
    exploit: bool = True,
    explore_hparams: bool = True,
    pb2: PB2 | None = None,
    ties: str = "explore",
) -> list[Exploit]:
    """Decide who copies whom and each recipient's new hyperparameters.

    ``population`` holds one :class:`MemberResult` per member, in any order: members are
    known by their ids, and ranked by score with ties going to the lower id. A recipient
    takes its donor's hyperparameters and explores from them.

    The ablations of the PBT paper: with ``exploit=False`` nobody copies and every member
    explores from its own hyperparameters (an :class:`Exploit` whose donor is the member
    itself: no weights move); with ``explore_hparams=False`` recipients keep their donor's
    hyperparameters unchanged. With neither, the plan is empty (independent training).

    ``ties`` decides for a recipient whose score equals its donor's: ``"explore"`` (the
    default) keeps its own weights and explores its own hyperparameters, ``"copy"`` copies
    the donor like any other recipient (the rule before there was a choice).

    With ``pb2`` (an :class:`evo.core.pb2.PB2` kept across generations), recipients explore by
    PB2's GP bandit instead of random perturbation; the generation's results go into its
    history first, and its baselines follow the weights that move.
    """
    ordered = by_member(population)
    results = {result.member: result for result in ordered}
    if exploit:
        ids = [result.member for result in ordered]  # selection ranks positions; map them back to ids
        scores = [result.score for result in ordered]
        chosen = select(strategy, scores, truncation_fraction, rng)
        if ties == "explore":
            chosen = keep_tied(chosen, scores)
        elif ties != "copy":
            raise ValueError(f"unknown tie rule {ties!r}; use one of {TIE_RULES}")
        donors = {ids[recipient]: ids[donor] for recipient, donor in chosen.items()}
    elif explore_hparams:
        donors = {member: member for member in results}
    else:
        donors = {}
    recipients = sorted(donors)
    if pb2 is not None:
        pb2.observe(generation, ordered)
        pb2.rebase(ordered, donors)
    starts = [results[donors[r]].hparams for r in recipients]
    if explore_hparams and pb2 is not None:
        explored = pb2.explore(generation, starts, rng, perturb_factors, resample_probability)
    elif explore_hparams:
        explored = [explore(h, space, rng, perturb_factors, resample_probability) for h in starts]
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
        )
        for recipient, (new, changes) in zip(recipients, explored, strict=True)
    ]
