"""Selection rules: who copies whom after a generation (pure, numpy only).

A rule maps the population's scores to a donor map ``{recipient: donor}``; members that
are not keys keep their weights. NaN scores (a member that finished no episode) rank
below every real score. Ties are broken by member index, lowest first, so the result is a
function of the scores alone plus the generator passed in. :func:`keep_tied` turns a
recipient whose score equals its donor's into one that keeps its weights (the plan's
default tie rule).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

NO_PBT = "none"
STRATEGIES = ("wta", "truncation", NO_PBT)
# What a recipient does when its score equals its donor's (both NaN count as equal):
# "explore" keeps its own weights and explores its own hyperparameters, "copy" copies as usual.
TIE_RULES = ("explore", "copy")


def ranking(scores: Sequence[float]) -> np.ndarray:
    """Member indices from best to worst (NaN last, ties by lower index first)."""
    keyed = np.asarray(scores, dtype=float)
    keyed = np.where(np.isnan(keyed), -np.inf, keyed)
    return np.argsort(-keyed, kind="stable")


def truncation_count(population: int, fraction: float) -> int:
    """How many members are replaced: ceil(N * fraction), capped at floor(N / 2)."""
    return min(math.ceil(population * fraction - 1e-12), population // 2)


def truncation(scores: Sequence[float], fraction: float, rng: np.random.Generator) -> dict[int, int]:
    """The bottom ``fraction`` each copy a member drawn uniformly from the top ``fraction``."""
    order = ranking(scores)
    count = truncation_count(len(order), fraction)
    if count == 0:
        return {}
    top, bottom = order[:count], order[len(order) - count :]
    donors = rng.choice(top, size=count, replace=True)
    return {int(recipient): int(donor) for recipient, donor in zip(bottom, donors, strict=True)}


def winner_takes_all(scores: Sequence[float]) -> dict[int, int]:
    """Every member except the best copies the best."""
    order = ranking(scores)
    best = int(order[0])
    return {int(member): best for member in order[1:]}


def tied(score: float, other: float) -> bool:
    """Equal scores, NaN equal to NaN: a tie gives no evidence that one member is better."""
    return score == other or (math.isnan(score) and math.isnan(other))


def keep_tied(donors: dict[int, int], scores: Sequence[float]) -> dict[int, int]:
    """The donor map with every recipient whose score ties its donor's mapped to itself
    (explore only, no copy): when a whole population fails alike, winner-takes-all would
    otherwise copy one failing member, chosen by index, into every other."""
    return {
        recipient: recipient if tied(scores[recipient], scores[donor]) else donor for recipient, donor in donors.items()
    }


def select(strategy: str, scores: Sequence[float], fraction: float, rng: np.random.Generator) -> dict[int, int]:
    """Apply the named rule (``wta``, ``truncation``, or ``none``: nobody copies)."""
    if strategy == NO_PBT:
        return {}
    if strategy == "wta":
        return winner_takes_all(scores)
    if strategy == "truncation":
        return truncation(scores, fraction, rng)
    raise ValueError(f"unknown selection strategy {strategy!r}; use one of {STRATEGIES}")
