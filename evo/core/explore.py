"""Explore: perturb or resample a recipient's hyperparameters (pure, numpy only)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evo.core.space import SearchSpace

# How recipients change their hyperparameters: random perturbation/resampling, or PB2's GP bandit.
EXPLORERS = ("perturb", "pb2")


@dataclass(frozen=True)
class Change:
    """How one hyperparameter changed during explore, for the log and the lineage."""

    name: str
    old: float
    new: float
    how: str  # "* 0.8", "* 1.2", "+10% of range" (additive scale) or "resample"

    def __str__(self) -> str:
        return f"{self.name} : {self.old:.4g} --- ({self.how}) --> {self.new:.4g}"


def explore(
    hparams: Mapping[str, float],
    space: SearchSpace,
    rng: np.random.Generator,
    perturb_factors: Sequence[float] = (0.8, 1.2),
    resample_probability: float = 0.25,
) -> tuple[dict[str, float], list[Change]]:
    """Return new hyperparameters and how each one changed.

    Each explored hyperparameter is, independently, resampled from ``space`` with
    probability ``resample_probability`` or multiplied by one of ``perturb_factors``
    chosen uniformly (on the scale of ``space``). Every result lies within its bounds.
    Hyperparameters that are not in ``space`` are passed through unchanged.
    """
    new = dict(hparams)
    changes = []
    for name, param in space.items():
        old = float(hparams[name])
        if rng.random() < resample_probability:
            value, how = param.sample(rng), "resample"
        else:
            factor = float(perturb_factors[rng.integers(len(perturb_factors))])
            value = param.perturb(old, factor)
            how = f"{factor - 1:+.0%} of range" if param.scale == "additive" else f"* {factor:g}"
        new[name] = value
        changes.append(Change(name, old, value, how))
    return new, changes
