"""Explore by random perturbation or resampling (the PBT paper's, Ray Tune's default); pure, numpy only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evo.core.explorers.base import Change, Explored, Explorer
from evo.core.kinds import SearchSpace


def explore(
    hparams: Mapping[str, Any],
    space: SearchSpace,
    rng: np.random.Generator,
    perturb_factors: Sequence[float] = (0.8, 1.2),
    resample_probability: float = 0.25,
) -> tuple[dict[str, Any], list[Change]]:
    """Return new hyperparameters and how each one changed.

    Each explored hyperparameter is, independently, resampled from ``space`` with
    probability ``resample_probability`` or moved by one of ``perturb_factors`` chosen
    uniformly, as its kind moves a value (evo.core.kinds: multiplied on its scale, an integer
    rounded and moved at least one step, a choice to its neighbour, a name to another).
    Every result lies within its bounds; ``how`` says when a bound kept a value where it was.
    Hyperparameters that are not in ``space`` are passed through unchanged.
    """
    new = dict(hparams)
    changes = []
    for name, kind in space.items():
        old = kind.coerce(hparams[name])
        if rng.random() < resample_probability:
            value, how = kind.sample(rng), "resample"
        else:
            factor = float(perturb_factors[rng.integers(len(perturb_factors))])
            value, how = kind.perturb(old, factor, rng)
        new[name] = value
        changes.append(Change(name, old, value, how))
    return new, changes


class Perturb(Explorer):
    """Each recipient perturbs or resamples its donor's hyperparameters (:func:`explore`)."""

    name = "perturb"
    summary = "multiply by one of --perturb-factors, or resample (the PBT paper, Jaderberg et al. 2017)"
    asynchronous = True

    def explore(self, generation: int, starts: Sequence[Mapping[str, Any]], rng: np.random.Generator) -> list[Explored]:
        return [explore(h, self.space, rng, self.perturb_factors, self.resample_probability) for h in starts]
