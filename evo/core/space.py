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

Besides these continuous ranges, a hyperparameter may take whole numbers or a few listed values:

- ``kind="int"`` (``{low: 1, high: 20, type: int}`` or ``scale: int``): whole numbers in
  ``[low, high]`` on a ``linear`` or ``log`` scale. Sampling draws each whole number (uniformly
  for linear, by its share of the log range for log); a perturbation multiplies and rounds, and
  moves at least one step in the factor's direction unless the value sits at that bound.
- ``kind="choice"`` (``{choices: [3, 5, 10, 20]}``): an ordered categorical. Sampling draws a
  choice uniformly; a perturbation moves to the neighbouring choice (index -1 for a factor
  below 1, +1 above), kept at the ends (Ray Tune's rule for categorical values).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

SCALES = ("linear", "log", "additive", "horizon")
KINDS = ("float", "int", "choice")
INT_SCALES = ("linear", "log")

# The hyperparameters PBT always explores; their order is the column order of every record.
EXPLORED = ("learning_rate", "ent_coef", "clip_range", "gamma", "gae_lambda", "vf_coef")
# Those a search space may add, in the order their columns follow EXPLORED's. target_kl = inf
# stands for "no KL early stop" (SB3's None), so that every value is a number.
EXTRA = ("n_epochs", "batch_size", "n_minibatches", "max_grad_norm", "target_kl")
INTEGER_NAMES = ("n_epochs", "batch_size", "n_minibatches")


def hparam_names(names) -> tuple[str, ...]:
    """The explored names among ``names`` (plus the six always explored), in record order."""
    given = set(names)
    return EXPLORED + tuple(name for name in EXTRA if name in given)


def typed(name: str, value: float) -> float | int:
    """``value`` as the type ``name`` takes: int for the counts, float for the rest."""
    return int(round(float(value))) if name in INTEGER_NAMES else float(value)


@dataclass(frozen=True)
class ParamSpace:
    """Bounds and scale of one explored hyperparameter; for ``kind="int"`` whole numbers only,
    for ``kind="choice"`` one of ``choices`` (``low``/``high`` are the first and last)."""

    low: float
    high: float
    scale: str = "linear"
    kind: str = "float"
    choices: tuple[float, ...] = ()

    @classmethod
    def categorical(cls, choices) -> ParamSpace:
        """An ordered categorical over ``choices`` (numbers in increasing order)."""
        values = tuple(choices)
        return cls(values[0] if values else 0.0, values[-1] if values else 0.0, "linear", "choice", values)

    @property
    def discrete(self) -> bool:
        return self.kind != "float"

    def problems(self, name: str) -> list[str]:
        """Every reason this range is unusable, phrased for the user."""
        if self.kind == "choice":
            return self._choice_problems(name)
        found = []
        if self.kind not in KINDS:
            found.append(f"search_space.{name}.type is {self.kind!r}; use float or int (or give choices)")
        if self.kind == "int":
            if self.scale not in INT_SCALES:
                found.append(
                    f"search_space.{name} is an integer range; its scale must be linear or log, not {self.scale!r}"
                )
            if any(math.isfinite(b) and b != int(b) for b in (self.low, self.high)):
                found.append(
                    f"search_space.{name} is an integer range; give whole-number bounds, got [{self.low}, {self.high}]"
                )
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

    def _choice_problems(self, name: str) -> list[str]:
        values = self.choices
        if not values:
            return [f"search_space.{name}.choices is empty; list the values to choose from, e.g. [3, 5, 10]"]
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) for v in values):
            return [f"search_space.{name}.choices must all be numbers, got {list(values)}"]
        if any(b <= a for a, b in zip(values, values[1:], strict=False)):
            return [
                f"search_space.{name}.choices must be in increasing order without repeats (an ordered categorical: "
                f"perturb moves to a neighbour), got {list(values)}"
            ]
        return []

    def index(self, value: float) -> int:
        """The index of the choice nearest ``value``."""
        if value in self.choices:
            return self.choices.index(value)
        gaps = [abs(c - value) if math.isfinite(c) else math.inf for c in self.choices]
        return int(np.argmin(gaps))

    def clip(self, value: float) -> float:
        if self.kind == "choice":
            return self.choices[self.index(value)]
        if self.kind == "int":
            return int(min(max(round(value), self.low), self.high))
        return float(min(max(value, self.low), self.high))

    def sample(self, rng: np.random.Generator) -> float:
        """Uniform on this scale: log-uniform for 'log', log-uniform in the horizon 1 / (1 - x)
        for 'horizon'; each whole number of an integer range (log: by its share of the log
        range); each choice with the same probability."""
        if self.kind == "choice":
            return self.choices[int(rng.integers(len(self.choices)))]
        if self.kind == "int":
            if self.scale == "log":  # each whole number k owns [k - 1/2, k + 1/2] of the log range
                low, high = math.log(self.low - 0.5), math.log(self.high + 0.5)
                return self.clip(math.exp(rng.uniform(low, high)))
            return int(rng.integers(int(self.low), int(self.high) + 1))
        return self.from_unit(rng.uniform())

    def _warp(self, value: float) -> float:
        """The coordinate in which this scale is uniform (log for 'log', log-horizon for 'horizon')."""
        if self.scale == "log":
            return math.log(value)
        if self.scale == "horizon":
            return -math.log(1.0 - value)  # log of the horizon 1 / (1 - x)
        return value

    def to_unit(self, value: float) -> float:
        """Map ``value`` to [0, 1], uniformly on this scale (0 = low, 1 = high); a choice to its
        index / (number of choices - 1)."""
        if self.kind == "choice":
            return self.index(value) / max(len(self.choices) - 1, 1)
        if self.kind == "int" and self.low == self.high:
            return 0.0
        low, high = self._warp(self.low), self._warp(self.high)
        return min(max((self._warp(self.clip(value)) - low) / (high - low), 0.0), 1.0)

    def from_unit(self, unit: float) -> float:
        """The inverse of :meth:`to_unit` (clipped to the bounds; rounded to a whole number or
        to the nearest choice)."""
        if self.kind == "choice":
            return self.choices[int(round(min(max(unit, 0.0), 1.0) * (len(self.choices) - 1)))]
        if self.kind == "int":
            return self.clip(self._continuous().from_unit(unit))
        if unit <= 0.0 or unit >= 1.0:
            return self.low if unit <= 0.0 else self.high
        low, high = self._warp(self.low), self._warp(self.high)
        warped = low + float(unit) * (high - low)
        if self.scale == "log":
            return self.clip(math.exp(warped))
        if self.scale == "horizon":
            return self.clip(1.0 - math.exp(-warped))
        return self.clip(warped)

    def _continuous(self) -> ParamSpace:
        return ParamSpace(self.low, self.high, self.scale)

    def perturb(self, value: float, factor: float) -> float:
        """``value`` moved by ``factor`` on this scale (see the module docstring), within bounds."""
        if self.kind == "choice":
            step = 1 if factor > 1 else -1
            return self.choices[min(max(self.index(value) + step, 0), len(self.choices) - 1)]
        if self.kind == "int":
            moved = self.clip(value * factor)
            if moved == value and factor != 1:  # too small to round away: one step in its direction
                moved = self.clip(value + (1 if factor > 1 else -1))
            return moved
        if self.scale == "horizon":
            return self.clip(1.0 - (1.0 - value) / factor)
        if self.scale == "additive":
            return self.clip(value + (factor - 1.0) * (self.high - self.low))
        return self.clip(value * factor)


SearchSpace = Mapping[str, ParamSpace]


def sample_hparams(space: SearchSpace, rng: np.random.Generator) -> dict[str, float | int]:
    """Draw one value per explored hyperparameter, in the order of ``space``."""
    return {name: param.sample(rng) for name, param in space.items()}
