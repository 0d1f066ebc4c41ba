"""Selection rules: who copies whom after a generation (pure, numpy only).

A rule maps the population's scores to a donor map ``{recipient: donor}``; members that
are not keys keep their weights. NaN scores (a member that finished no episode) rank
below every real score. Equal scores are ordered by ``tiebreak``, a priority per member drawn
from the run's tie stream (evo.core.streams.tie_priorities: lower first), so the member id
decides nothing; without one (a caller with no run seed) by index, lowest first. The draw is a
generator of its own: a decision without a tie is the same with or without it. :func:`keep_tied` turns a
recipient whose score equals its donor's into one that keeps its weights (the plan's
default tie rule).

With several objectives (``--objective return,info:energy:min``) each member's score is a row of
them, larger better in each (evo.core.objective orients them), and the population is ranked by
MO-PBT's rule (evo.core.pareto: Pareto fronts, an ε-net within a front): truncation's top and
bottom groups are taken from that order, and winner-takes-all's winners are the whole first front,
each other member copying one drawn uniformly from it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from evo.core.pareto import front_of, pareto_ranking

NO_PBT = "none"
STRATEGIES = ("wta", "truncation", NO_PBT)
# What a recipient does when its score equals its donor's (both NaN count as equal):
# "explore" keeps its own weights and explores its own hyperparameters, "copy" copies as usual.
TIE_RULES = ("explore", "copy")


def ranking(scores: Sequence[float] | Sequence[Sequence[float]], tiebreak: Sequence[int] | None = None) -> np.ndarray:
    """Member indices from best to worst (NaN and ±inf last: no score); equal scores by ``tiebreak``
    (each index's priority, lower first: evo.core.streams.tie_priorities), by lower index without one.
    With several objectives (a row of scores per member), by Pareto fronts and the ε-net within each
    (evo.core.pareto.pareto_ranking; ``tiebreak`` unused)."""
    keyed = np.asarray(scores, dtype=float)
    if keyed.ndim == 2:
        return pareto_ranking(keyed)
    keyed = np.where(np.isfinite(keyed), keyed, -np.inf)
    if tiebreak is None:
        return np.argsort(-keyed, kind="stable")
    return np.lexsort((np.asarray(tiebreak, dtype=np.uint64), -keyed))


def tie_group(scores: Sequence[float] | Sequence[Sequence[float]], index: int) -> list[int]:
    """The indices whose score ties ``index``'s (:func:`tied`; ``index`` among them), in index order."""
    return [i for i in range(len(scores)) if tied(scores[i], scores[index])]


def tied_ids(
    scores: Sequence[float] | Sequence[Sequence[float]], ids: Sequence[int], positions: Sequence[int]
) -> tuple[int, ...]:
    """The ids (``ids[i]`` is the member at ``scores[i]``) tied with the member at any of ``positions`` (a tie
    of two or more; empty when none ties anyone), sorted: a decision that rests on a tie says so."""
    groups = [tie_group(scores, index) for index in positions]
    return tuple(sorted({ids[i] for group in groups if len(group) > 1 for i in group}))


def truncation_count(population: int, fraction: float) -> int:
    """How many members are replaced: ceil(N * fraction), capped at floor(N / 2)."""
    return min(math.ceil(population * fraction - 1e-12), population // 2)


def truncation(
    scores: Sequence[float], fraction: float, rng: np.random.Generator, tiebreak: Sequence[int] | None = None
) -> dict[int, int]:
    """The bottom ``fraction`` each copy a member drawn uniformly from the top ``fraction``."""
    order = ranking(scores, tiebreak)
    count = truncation_count(len(order), fraction)
    if count == 0:
        return {}
    top, bottom = order[:count], order[len(order) - count :]
    donors = rng.choice(top, size=count, replace=True)
    return {int(recipient): int(donor) for recipient, donor in zip(bottom, donors, strict=True)}


def leaders(scores: Sequence[float] | Sequence[Sequence[float]], tiebreak: Sequence[int] | None = None) -> list[int]:
    """The members winner-takes-all copies: the best (a tie by ``tiebreak``: :func:`ranking`); with
    several objectives every member of the first Pareto front, in ranking order (the best by index
    when no member has every objective)."""
    order = ranking(scores, tiebreak)
    keyed = np.asarray(scores, dtype=float)
    if keyed.ndim == 2:
        front = front_of(keyed)
        first = [int(member) for member in order if front[member] == 0]
        if first:
            return first
    return [int(order[0])]


def winner_takes_all(
    scores: Sequence[float] | Sequence[Sequence[float]],
    rng: np.random.Generator | None = None,
    tiebreak: Sequence[int] | None = None,
) -> dict[int, int]:
    """Every member except the best copies the best. With several objectives every member outside
    the first front copies a member of it drawn uniformly (``rng``; no draw when the front has one
    member), in member order; the first front keeps its weights."""
    order = ranking(scores, tiebreak)
    winners = leaders(scores, tiebreak)
    if len(winners) == 1:
        best = winners[0]
        return {int(member): best for member in order if member != best}
    if rng is None:
        raise ValueError("winner-takes-all over a first front of several members draws donors: give rng")
    return {
        member: winners[int(rng.integers(len(winners)))] for member in sorted(map(int, order)) if member not in winners
    }


def tied(score: float | Sequence[float], other: float | Sequence[float]) -> bool:
    """Equal scores, NaN equal to NaN: a tie gives no evidence that one member is better. Several
    objectives tie when every one does."""
    if isinstance(score, (tuple, list, np.ndarray)):
        return len(score) == len(other) and all(tied(a, b) for a, b in zip(score, other, strict=True))
    return score == other or (math.isnan(score) and math.isnan(other))


def keep_tied(donors: dict[int, int], scores: Sequence[float]) -> dict[int, int]:
    """The donor map with every recipient whose score ties its donor's mapped to itself
    (explore only, no copy): when a whole population fails alike, winner-takes-all would
    otherwise copy one failing member, chosen by index, into every other."""
    return {
        recipient: recipient if tied(scores[recipient], scores[donor]) else donor for recipient, donor in donors.items()
    }


def select(
    strategy: str,
    scores: Sequence[float],
    fraction: float,
    rng: np.random.Generator,
    tiebreak: Sequence[int] | None = None,
) -> dict[int, int]:
    """Apply the named rule (``wta``, ``truncation``, or ``none``: nobody copies); equal scores ordered
    by ``tiebreak`` (:func:`ranking`)."""
    if strategy == NO_PBT:
        return {}
    if strategy == "wta":
        return winner_takes_all(scores, rng, tiebreak)
    if strategy == "truncation":
        return truncation(scores, fraction, rng, tiebreak)
    raise ValueError(f"unknown selection strategy {strategy!r}; use one of {STRATEGIES}")
