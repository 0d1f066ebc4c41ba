"""Explore: perturb or resample a recipient's hyperparameters (pure, numpy only)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evo.core.space import ParamSpace, SearchSpace

# How recipients change their hyperparameters: random perturbation/resampling, or PB2's GP bandit.
EXPLORERS = ("perturb", "pb2")


@dataclass(frozen=True)
class Change:
    """How one hyperparameter changed during explore, for the log and the lineage."""

    name: str
    old: float
    new: float
    how: str  # "* 0.8", "* 1.2", "+10% of range" (additive scale), "index +1" (choices) or "resample"

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
    chosen uniformly (on the scale of ``space``). An integer is multiplied, rounded and moved
    at least one step; a choice moves to its neighbour (down for a factor below 1, up above).
    Every result lies within its bounds; ``how`` says when a bound kept a value where it was.
    Hyperparameters that are not in ``space`` are passed through unchanged.
    """
    new = dict(hparams)
    changes = []
    for name, param in space.items():
        old = hparams[name] if param.discrete else float(hparams[name])
        if rng.random() < resample_probability:
            value, how = param.sample(rng), "resample"
        else:
            factor = float(perturb_factors[rng.integers(len(perturb_factors))])
            value = param.perturb(old, factor)
            how = _how(param, factor, kept=value == old)
        new[name] = value
        changes.append(Change(name, old, value, how))
    return new, changes


def _how(param: ParamSpace, factor: float, kept: bool) -> str:
    """How a perturbation by ``factor`` moved a value of ``param``, for the lineage."""
    if param.kind == "choice":
        return f"index {1 if factor > 1 else -1:+d}" + (" (at the end of the choices: kept)" if kept else "")
    if param.kind == "int":
        return f"* {factor:g}, rounded" + (" (at the bound: kept)" if kept else "")
    return f"{factor - 1:+.0%} of range" if param.scale == "additive" else f"* {factor:g}"
