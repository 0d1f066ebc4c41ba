"""The hyperparameter search space: bounds, scales and sampling.

Pure: numpy only. Every explored hyperparameter has a closed interval and a scale that
says how it is sampled and perturbed:

- ``linear``: uniform in ``[low, high]``; perturbation multiplies the value.
- ``log``: log-uniform in ``[low, high]``; perturbation multiplies the value.
- ``additive``: uniform in ``[low, high]``; a perturbation factor ``f`` adds
  ``(f - 1) * (high - low)``, so ``x1.2`` means "+20 % of the range". For values that can
  be 0 (a multiplied 0 stays 0), such as the PBT toy's surrogate weights.
- ``horizon``: for discount-like values in (0, 1) such as ``gamma`` and ``gae_lambda``.
  Sampling is log-uniform in the effective horizon ``1 / (1 - x)``, and a perturbation
  factor ``f`` multiplies that horizon (``1 - (1 - x) / f``), so ``x1.2`` lengthens the
  horizon by 20 % instead of pushing 0.99 to 1.19.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

SCALES = ("linear", "log", "additive", "horizon")

# The hyperparameters PBT explores; their order is the column order of every record.
EXPLORED = ("learning_rate", "ent_coef", "clip_range", "gamma", "gae_lambda", "vf_coef")


@dataclass(frozen=True)
class ParamSpace:
    """Bounds and scale of one explored hyperparameter."""

    low: float
    high: float
    scale: str = "linear"

    def problems(self, name: str) -> list[str]:
        """Every reason this range is unusable, phrased for the user."""
        found = []
        if self.scale not in SCALES:
            found.append(f"search_space.{name}.scale is {self.scale!r}; use one of {', '.join(SCALES)}")
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            found.append(f"search_space.{name} has a non-finite bound [{self.low}, {self.high}]")
        elif self.low >= self.high:
            found.append(
                f"search_space.{name} is [{self.low}, {self.high}]: the range is "
                + ("reversed" if self.low > self.high else "empty")
                + "; give low < high"
            )
        elif self.scale == "log" and self.low <= 0:
            found.append(f"search_space.{name} uses scale 'log' and needs low > 0, got {self.low}")
        elif self.scale == "horizon" and not (0 <= self.low and self.high < 1):
            found.append(
                f"search_space.{name} uses scale 'horizon' and needs 0 <= low < high < 1, got [{self.low}, {self.high}]"
            )
        return found

    def clip(self, value: float) -> float:
        return float(min(max(value, self.low), self.high))

    def sample(self, rng: np.random.Generator) -> float:
        """Uniform on this scale: log-uniform for 'log', log-uniform in the horizon 1 / (1 - x)
        for 'horizon'."""
        return self.from_unit(rng.uniform())

    def _warp(self, value: float) -> float:
        """The coordinate in which this scale is uniform (log for 'log', log-horizon for 'horizon')."""
        if self.scale == "log":
            return math.log(value)
        if self.scale == "horizon":
            return -math.log(1.0 - value)  # log of the horizon 1 / (1 - x)
        return value

    def to_unit(self, value: float) -> float:
        """Map ``value`` to [0, 1], uniformly on this scale (0 = low, 1 = high)."""
        low, high = self._warp(self.low), self._warp(self.high)
        return min(max((self._warp(self.clip(value)) - low) / (high - low), 0.0), 1.0)

    def from_unit(self, unit: float) -> float:
        """The inverse of :meth:`to_unit` (clipped to the bounds)."""
        if unit <= 0.0 or unit >= 1.0:
            return self.low if unit <= 0.0 else self.high
        low, high = self._warp(self.low), self._warp(self.high)
        warped = low + float(unit) * (high - low)
        if self.scale == "log":
            return self.clip(math.exp(warped))
        if self.scale == "horizon":
            return self.clip(1.0 - math.exp(-warped))
        return self.clip(warped)

    def perturb(self, value: float, factor: float) -> float:
        if self.scale == "horizon":
            return self.clip(1.0 - (1.0 - value) / factor)
        if self.scale == "additive":
            return self.clip(value + (factor - 1.0) * (self.high - self.low))
        return self.clip(value * factor)


SearchSpace = Mapping[str, ParamSpace]


def sample_hparams(space: SearchSpace, rng: np.random.Generator) -> dict[str, float]:
    """Draw one value per explored hyperparameter, in the order of ``space``."""
    return {name: param.sample(rng) for name, param in space.items()}
