"""Hyperparameter kinds: what one explored hyperparameter can be, each a class (pure, numpy only).

A kind owns everything that depends on what sort of value a hyperparameter takes, in one
place (Ray Tune's ``tune/search/sample.py``: ``Float``, ``Integer``, ``Categorical``):

- drawing a value (:meth:`Kind.sample`) and moving one by a perturbation factor
  (:meth:`Kind.perturb`, which also says how, for the lineage);
- keeping a value within bounds (:meth:`Kind.clip`) and telling whether a value is one of its
  own (:meth:`Kind.contains`);
- PB2's encoding, a coordinate in [0, 1] (:meth:`Kind.to_unit`, :meth:`Kind.from_unit`);
- how a value is written: in population.csv (:meth:`Kind.text`, read back by :meth:`Kind.parse`),
  in the lineage's JSON (:meth:`Kind.json`), and as a number for TensorBoard and the plots
  (:meth:`Kind.number`);
- its form in config.yaml (:meth:`Kind.spec`, read back by :func:`kind_from_spec`), and the
  problems of a badly written one (:meth:`Kind.problems`).

The kinds and their YAML forms:

- ``Float`` (``{low, high}`` or ``scale: linear``): uniform in [low, high]; a perturbation
  multiplies the value.
- ``LogFloat`` (``scale: log``): log-uniform; a perturbation multiplies the value.
- ``Additive`` (``scale: additive``): uniform; a factor ``f`` adds ``(f - 1) * (high - low)``,
  so ``x1.2`` means "+20 % of the range": for values that can be 0 (a multiplied 0 stays 0).
- ``Horizon`` (``scale: horizon``): for discounts in (0, 1). Sampling is log-uniform in the
  effective horizon ``1 / (1 - x)``, and a factor ``f`` multiplies that horizon
  (``1 - (1 - x) / f``), so ``x1.2`` lengthens the horizon by 20 % instead of pushing 0.99 to 1.19.
- ``Integer`` (``type: int``, with ``scale: log`` for log spacing): whole numbers; a
  perturbation multiplies and rounds, and moves at least one step in the factor's direction
  unless the value sits at that bound.
- ``Choice`` (``{choices: [3, 5, 10]}``, numbers in increasing order): an ordered categorical.
  A perturbation moves to the neighbouring choice (down for a factor below 1, up above), kept
  at the ends (Ray Tune's rule for categorical values).
- ``OffOr`` (``{choices: [0.01, 0.05, null]}``): an ordered choice whose loosest option is
  "off" (None, e.g. no KL early stop), last. Written ``inf`` in CSV and TensorBoard, null in JSON.
- ``Categorical`` (``{choices: [crop, flip, cutout]}``, names): unordered. A perturbation
  switches to one of the other choices, drawn uniformly.

Every kind samples with the ``np.random.Generator`` it is given, never a global one.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

SCALES = ("linear", "log", "additive", "horizon")
Value = Any
"""A hyperparameter's value: a float, an int, a name, or None ("off")."""


def _whole(bound: Any) -> Any:
    """A whole-number bound as an int (a YAML file gives 1.0 as often as 1); anything else as given."""
    if _number(bound) and math.isfinite(bound) and float(bound).is_integer():
        return int(bound)
    return bound


def _number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


class Kind(ABC):
    """One hyperparameter's kind (see the module docstring)."""

    discrete: ClassVar[bool] = False
    log_axis: ClassVar[bool] = False
    """Whether plots show it on a log axis."""

    @abstractmethod
    def sample(self, rng: np.random.Generator) -> Value:
        """A value drawn uniformly on this kind's scale."""

    @abstractmethod
    def perturb(self, value: Value, factor: float, rng: np.random.Generator) -> tuple[Value, str]:
        """``value`` moved by ``factor``, within bounds, and how (for the lineage)."""

    @abstractmethod
    def clip(self, value: Value) -> Value:
        """The nearest value of this kind."""

    @abstractmethod
    def to_unit(self, value: Value) -> float:
        """PB2's coordinate of ``value`` in [0, 1], uniform on this kind's scale."""

    @abstractmethod
    def from_unit(self, unit: float) -> Value:
        """The inverse of :meth:`to_unit` (rounded to a whole number or to the nearest choice)."""

    @abstractmethod
    def problems(self, name: str) -> list[str]:
        """Every reason this kind is unusable as written, phrased for the user."""

    @abstractmethod
    def spec(self) -> dict[str, Any]:
        """Its form in config.yaml (:func:`kind_from_spec` reads it back)."""

    def coerce(self, value: Value) -> Value:
        """``value`` as this kind's type (a float from a YAML file or a CSV cell, say)."""
        return float(value)

    def contains(self, value: Value) -> bool:
        """Whether ``value`` is one of this kind's values."""
        try:
            return self.clip(self.coerce(value)) == self.coerce(value)
        except (TypeError, ValueError):
            return False

    def text(self, value: Value) -> str:
        """Its population.csv cell."""
        return repr(self.coerce(value))

    def parse(self, text: str) -> Value:
        """The value a population.csv cell holds."""
        return self.coerce(float(text))

    def json(self, value: Value) -> Any:
        """Its lineage JSON value."""
        return self.coerce(value)

    def number(self, value: Value) -> float:
        """Its value as a number, for TensorBoard and the plots."""
        return float(value)

    def describe(self, value: Value) -> str:
        """Short, for log lines."""
        return f"{value:.4g}" if _number(value) else str(value)


class Continuous(Kind):
    """A real value in [low, high], uniform in a warped coordinate (:meth:`_warp`)."""

    scale: ClassVar[str] = "linear"

    def __init__(self, low: float, high: float):
        self.low, self.high = float(low), float(high)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.low!r}, {self.high!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.spec() == other.spec()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.low, self.high))

    def _warp(self, value: float) -> float:
        return value

    def _unwarp(self, warped: float) -> float:
        return warped

    def sample(self, rng: np.random.Generator) -> float:
        return self.from_unit(rng.uniform())

    def clip(self, value: Value) -> float:
        return float(min(max(float(value), self.low), self.high))

    def to_unit(self, value: Value) -> float:
        low, high = self._warp(self.low), self._warp(self.high)
        return min(max((self._warp(self.clip(value)) - low) / (high - low), 0.0), 1.0)

    def from_unit(self, unit: float) -> float:
        if unit <= 0.0 or unit >= 1.0:
            return self.low if unit <= 0.0 else self.high
        low, high = self._warp(self.low), self._warp(self.high)
        return self.clip(self._unwarp(low + float(unit) * (high - low)))

    def perturb(self, value: Value, factor: float, rng: np.random.Generator) -> tuple[float, str]:
        return self.clip(float(value) * factor), f"* {factor:g}"

    def problems(self, name: str) -> list[str]:
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return [f"search_space.{name} has a non-finite bound [{self.low}, {self.high}]"]
        if self.low >= self.high:
            kind = "reversed" if self.low > self.high else "empty"
            return [f"search_space.{name} is [{self.low}, {self.high}]: the range is {kind}; give low < high"]
        return []

    def spec(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "scale": self.scale, "kind": "float", "choices": []}


class Float(Continuous):
    """Uniform in [low, high]; a perturbation multiplies the value."""


class LogFloat(Continuous):
    """Log-uniform in [low, high]; a perturbation multiplies the value."""

    scale = "log"
    log_axis = True

    def _warp(self, value: float) -> float:
        return math.log(value)

    def _unwarp(self, warped: float) -> float:
        return math.exp(warped)

    def problems(self, name: str) -> list[str]:
        found = super().problems(name)
        if not found and self.low <= 0:
            found.append(f"search_space.{name} uses scale 'log' and needs low > 0, got {self.low}")
        return found


class Additive(Continuous):
    """Uniform in [low, high]; a factor f adds (f - 1) * (high - low)."""

    scale = "additive"

    def perturb(self, value: Value, factor: float, rng: np.random.Generator) -> tuple[float, str]:
        return self.clip(float(value) + (factor - 1.0) * (self.high - self.low)), f"{factor - 1:+.0%} of range"


class Horizon(Continuous):
    """A discount in (0, 1): log-uniform in the horizon 1 / (1 - x), which a factor multiplies."""

    scale = "horizon"

    def _warp(self, value: float) -> float:
        return -math.log(1.0 - value)  # log of the horizon 1 / (1 - x)

    def _unwarp(self, warped: float) -> float:
        return 1.0 - math.exp(-warped)

    def perturb(self, value: Value, factor: float, rng: np.random.Generator) -> tuple[float, str]:
        return self.clip(1.0 - (1.0 - float(value)) / factor), f"* {factor:g}"

    def problems(self, name: str) -> list[str]:
        found = super().problems(name)
        if not found and not (0 <= self.low and self.high < 1):
            found.append(
                f"search_space.{name} uses scale 'horizon' and needs 0 <= low < high < 1, got [{self.low}, {self.high}]"
            )
        return found


CONTINUOUS: dict[str, type[Continuous]] = {kind.scale: kind for kind in (Float, LogFloat, Additive, Horizon)}


class Integer(Kind):
    """Whole numbers in [low, high], uniform (``log``: each by its share of the log range)."""

    discrete = True

    def __init__(self, low: float, high: float, log: bool = False):
        self.low, self.high, self.log = _whole(low), _whole(high), bool(log)
        self.log_axis = self.log

    def __repr__(self) -> str:
        return f"Integer({self.low!r}, {self.high!r}, log={self.log})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Integer) and self.spec() == other.spec()

    def __hash__(self) -> int:
        return hash(("Integer", self.low, self.high, self.log))

    def _continuous(self) -> Continuous:
        return (LogFloat if self.log else Float)(self.low, self.high)

    def coerce(self, value: Value) -> int:
        return int(round(float(value)))

    def clip(self, value: Value) -> int:
        return int(min(max(round(float(value)), self.low), self.high))

    def sample(self, rng: np.random.Generator) -> int:
        if self.log:  # each whole number k owns [k - 1/2, k + 1/2] of the log range
            low, high = math.log(self.low - 0.5), math.log(self.high + 0.5)
            return self.clip(math.exp(rng.uniform(low, high)))
        return int(rng.integers(int(self.low), int(self.high) + 1))

    def perturb(self, value: Value, factor: float, rng: np.random.Generator) -> tuple[int, str]:
        moved = self.clip(float(value) * factor)
        if moved == value and factor != 1:  # too small to round away: one step in its direction
            moved = self.clip(value + (1 if factor > 1 else -1))
        return moved, f"* {factor:g}, rounded" + (" (at the bound: kept)" if moved == value else "")

    def to_unit(self, value: Value) -> float:
        return 0.0 if self.low == self.high else self._continuous().to_unit(value)

    def from_unit(self, unit: float) -> int:
        return self.clip(self._continuous().from_unit(unit))

    def parse(self, text: str) -> int:
        return self.coerce(float(text))

    def number(self, value: Value) -> float:
        return float(value)

    def problems(self, name: str) -> list[str]:
        found = []
        if any(not _number(b) or (math.isfinite(b) and b != int(b)) for b in (self.low, self.high)):
            found.append(
                f"search_space.{name} is an integer range; give whole-number bounds, got [{self.low}, {self.high}]"
            )
        elif not (math.isfinite(self.low) and math.isfinite(self.high)):
            found.append(f"search_space.{name} has a non-finite bound [{self.low}, {self.high}]")
        elif self.low >= self.high:
            kind = "reversed" if self.low > self.high else "empty"
            found.append(f"search_space.{name} is [{self.low}, {self.high}]: the range is {kind}; give low < high")
        elif self.log and self.low <= 0:
            found.append(f"search_space.{name} uses scale 'log' and needs low > 0, got {self.low}")
        return found

    def spec(self) -> dict[str, Any]:
        scale = "log" if self.log else "linear"
        return {"low": self.low, "high": self.high, "scale": scale, "kind": "int", "choices": []}


class Choice(Kind):
    """One of ``choices``, numbers in increasing order: an ordered categorical."""

    discrete = True

    def __init__(self, choices: Sequence[Value]):
        self.choices = tuple(choices)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.choices)!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.choices == other.choices

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.choices))

    @property
    def low(self) -> Value:
        return self.choices[0] if self.choices else None

    @property
    def high(self) -> Value:
        return self.choices[-1] if self.choices else None

    def coerce(self, value: Value) -> Value:
        """The choice ``value`` stands for: an int choice stays an int."""
        return self.choices[self.index(value)] if self.choices else value

    def index(self, value: Value) -> int:
        """The index of the choice nearest ``value``."""
        if value in self.choices:
            return self.choices.index(value)
        gaps = [abs(c - float(value)) if _number(c) and math.isfinite(c) else math.inf for c in self.choices]
        return int(np.argmin(gaps))

    def clip(self, value: Value) -> Value:
        return self.choices[self.index(value)]

    def contains(self, value: Value) -> bool:
        return any(value == c and type(value) is not bool for c in self.choices)

    def sample(self, rng: np.random.Generator) -> Value:
        return self.choices[int(rng.integers(len(self.choices)))]

    def perturb(self, value: Value, factor: float, rng: np.random.Generator) -> tuple[Value, str]:
        step = 1 if factor > 1 else -1
        moved = self.choices[min(max(self.index(value) + step, 0), len(self.choices) - 1)]
        return moved, f"index {step:+d}" + (" (at the end of the choices: kept)" if moved == value else "")

    def to_unit(self, value: Value) -> float:
        return self.index(value) / max(len(self.choices) - 1, 1)

    def from_unit(self, unit: float) -> Value:
        return self.choices[int(round(min(max(unit, 0.0), 1.0) * (len(self.choices) - 1)))]

    def parse(self, text: str) -> Value:
        return self.clip(float(text))

    def problems(self, name: str) -> list[str]:
        values = self.choices
        if not values:
            return [f"search_space.{name}.choices is empty; list the values to choose from, e.g. [3, 5, 10]"]
        if not all(_number(v) and not math.isnan(v) for v in values):
            return [f"search_space.{name}.choices must all be numbers, got {list(values)}"]
        if any(b <= a for a, b in zip(values, values[1:], strict=False)):
            return [
                f"search_space.{name}.choices must be in increasing order without repeats (an ordered categorical: "
                f"perturb moves to a neighbour), got {list(values)}"
            ]
        return []

    def spec(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "scale": "linear", "kind": "choice", "choices": list(self.choices)}


class OffOr(Choice):
    """An ordered choice whose last, loosest option is "off" (None): ``{choices: [0.01, 0.05, null]}``.
    Written ``inf`` in population.csv and TensorBoard, null in JSON."""

    OFF = None

    def index(self, value: Value) -> int:
        if value is None or (_number(value) and math.isinf(value)):
            return len(self.choices) - 1 if self.choices and self.choices[-1] is None else super().index(math.inf)
        return super().index(value)

    def contains(self, value: Value) -> bool:
        return value in self.choices and type(value) is not bool

    def coerce(self, value: Value) -> Value:
        return self.choices[self.index(value)]

    def text(self, value: Value) -> str:
        return "inf" if value is None else repr(float(value))

    def parse(self, text: str) -> Value:
        return self.coerce(None if text.strip().lower() in ("inf", "none", "null", "off", "") else float(text))

    def json(self, value: Value) -> Any:
        return None if value is None else float(value)

    def number(self, value: Value) -> float:
        return math.inf if value is None else float(value)

    def describe(self, value: Value) -> str:
        return "off" if value is None else f"{value:.4g}"

    def problems(self, name: str) -> list[str]:
        on = self.choices[:-1] if self.choices and self.choices[-1] is None else self.choices
        if None in on:
            return [
                f"search_space.{name}.choices: null (off) is the loosest option; put it last, got {list(self.choices)}"
            ]
        return Choice(on).problems(name) if on else []

    def spec(self) -> dict[str, Any]:
        on = [c for c in self.choices if c is not None]
        return {
            "low": on[0] if on else None,
            "high": math.inf,
            "scale": "linear",
            "kind": "choice",
            "choices": [math.inf if c is None else c for c in self.choices],
        }


class Categorical(Kind):
    """One of ``choices``, in no order (named choices such as DrAC's augmentations). A perturbation
    switches to another choice drawn uniformly; PB2 codes a choice by its index."""

    discrete = True

    def __init__(self, choices: Sequence[Value]):
        self.choices = tuple(choices)

    def __repr__(self) -> str:
        return f"Categorical({list(self.choices)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Categorical) and self.choices == other.choices

    def __hash__(self) -> int:
        return hash(("Categorical", self.choices))

    def coerce(self, value: Value) -> Value:
        return value

    def index(self, value: Value) -> int:
        """The position of ``value`` among the choices (0 if it is none of them)."""
        return self.choices.index(value) if value in self.choices else 0

    def clip(self, value: Value) -> Value:
        return value if value in self.choices else self.choices[0]

    def contains(self, value: Value) -> bool:
        return value in self.choices

    def sample(self, rng: np.random.Generator) -> Value:
        return self.choices[int(rng.integers(len(self.choices)))]

    def perturb(self, value: Value, factor: float, rng: np.random.Generator) -> tuple[Value, str]:
        others = [c for c in self.choices if c != value]
        if not others:
            return value, "switch (the only choice: kept)"
        return others[int(rng.integers(len(others)))], "switch"

    def to_unit(self, value: Value) -> float:
        return self.index(value) / max(len(self.choices) - 1, 1)

    def from_unit(self, unit: float) -> Value:
        return self.choices[int(round(min(max(unit, 0.0), 1.0) * (len(self.choices) - 1)))]

    def text(self, value: Value) -> str:
        return str(value)

    def parse(self, text: str) -> Value:
        for choice in self.choices:
            if str(choice) == text:
                return choice
        raise ValueError(f"{text!r} is not one of {list(self.choices)}")

    def json(self, value: Value) -> Any:
        return value

    def number(self, value: Value) -> float:
        """Its index among the choices (plots label the axis with the names)."""
        return float(self.choices.index(value)) if value in self.choices else math.nan

    def problems(self, name: str) -> list[str]:
        if not self.choices:
            return [f"search_space.{name}.choices is empty; list the values to choose from, e.g. [crop, flip]"]
        if len(set(map(str, self.choices))) != len(self.choices):
            return [f"search_space.{name}.choices repeat a value, got {list(self.choices)}"]
        if not all(isinstance(c, str) for c in self.choices):
            return [
                f"search_space.{name}.choices mixes names and numbers, got {list(self.choices)}: give numbers in "
                "increasing order (an ordered choice) or names (an unordered one)"
            ]
        return []

    def spec(self) -> dict[str, Any]:
        return {"low": None, "high": None, "scale": "linear", "kind": "categorical", "choices": list(self.choices)}


SearchSpace = Mapping[str, Kind]


def sample_hparams(space: SearchSpace, rng: np.random.Generator) -> dict[str, Value]:
    """Draw one value per explored hyperparameter, in the order of ``space``."""
    return {name: kind.sample(rng) for name, kind in space.items()}


def kind_from_entry(entry: Mapping[str, Any], whole: bool = False) -> Kind:
    """The kind a YAML search-space entry describes: ``{low, high, scale, type}`` or ``{choices}``
    (numbers: ordered, with null last: off-or; names: unordered). ``whole``: the setting takes
    whole numbers, so a range is an integer range. Check it with :meth:`Kind.problems`."""
    if "choices" in entry:
        choices = list(entry["choices"])
        if any(c is None for c in choices):
            return OffOr(choices)
        if choices and all(isinstance(c, str) for c in choices):
            return Categorical(choices)
        return Choice(choices)
    scale = entry.get("scale", "linear")
    if entry.get("type", "float") not in ("float", "int"):
        return _BadType(entry["low"], entry["high"], entry["type"])
    if whole or entry.get("type") == "int" or scale == "int":
        if scale not in ("linear", "log", "int"):
            return _BadIntegerScale(entry["low"], entry["high"], scale)
        return Integer(entry["low"], entry["high"], log=scale == "log")
    if scale not in CONTINUOUS:
        return _BadScale(entry["low"], entry["high"], scale)
    return CONTINUOUS[scale](entry["low"], entry["high"])


def kind_from_spec(spec: Mapping[str, Any]) -> Kind:
    """The kind :meth:`Kind.spec` wrote into config.yaml (runs that predate the kinds wrote
    ``{low, high, scale}`` only: a continuous range)."""
    kind = spec.get("kind", "float")
    if kind == "int":
        return Integer(spec["low"], spec["high"], log=spec.get("scale") == "log")
    if kind == "choice":
        choices = [None if isinstance(c, float) and math.isinf(c) else c for c in spec["choices"]]
        return OffOr(choices) if None in choices else Choice(choices)
    if kind == "categorical":
        return Categorical(spec["choices"])
    return CONTINUOUS.get(spec.get("scale", "linear"), Float)(spec["low"], spec["high"])


class _BadScale(Continuous):
    """A range with a scale that does not exist: reported by :meth:`problems`, never used."""

    def __init__(self, low: float, high: float, scale: str):
        super().__init__(low, high)
        self.scale = scale

    def problems(self, name: str) -> list[str]:
        return [f"search_space.{name}.scale is {self.scale!r}; use one of {', '.join(SCALES)}"]


class _BadType(_BadScale):
    """A range with a type that does not exist: reported by :meth:`problems`, never used."""

    def problems(self, name: str) -> list[str]:
        return [f"search_space.{name}.type is {self.scale!r}; use float or int (or give choices)"]


class _BadIntegerScale(Integer):
    """An integer range on a scale integers do not have: reported by :meth:`problems`, never used."""

    def __init__(self, low: float, high: float, scale: str):
        super().__init__(low, high)
        self.scale = scale

    def problems(self, name: str) -> list[str]:
        return [f"search_space.{name} is an integer range; its scale must be linear or log, not {self.scale!r}"]
