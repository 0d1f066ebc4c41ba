"""Selection rules: who copies whom after a generation (pure, numpy only).

A rule maps the population's scores to a donor map ``{recipient: donor}``; members that
are not keys keep their weights. NaN scores (a member that finished no episode) rank
below every real score. Ties are broken by member index, lowest first, so the result is a
function of the scores alone plus the generator passed in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

NO_PBT = "none"
STRATEGIES = ("wta", "truncation", NO_PBT)


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


def select(strategy: str, scores: Sequence[float], fraction: float, rng: np.random.Generator) -> dict[int, int]:
    """Apply the named rule (``wta``, ``truncation``, or ``none``: nobody copies)."""
    if strategy == NO_PBT:
        return {}
    if strategy == "wta":
        return winner_takes_all(scores)
    if strategy == "truncation":
        return truncation(scores, fraction, rng)
    raise ValueError(f"unknown selection strategy {strategy!r}; use one of {STRATEGIES}")
