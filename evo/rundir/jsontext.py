"""JSON records that are JSON: NaN and ±inf, which JSON has no words for (Python's ``json`` writes the
non-standard ``NaN`` and ``Infinity``, which other readers refuse), are written as ``null`` (pure).
Every JSON record evo writes goes through :func:`dumps`; where a reader expects a number, it reads
``null`` back as NaN."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any


def finite(value: Any) -> Any:
    """``value`` with every float that is not finite (NaN, ±inf), in dicts, lists and tuples too, as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`finite` ``value``, refusing (``allow_nan=False``) anything that is still not JSON."""
    return json.dumps(finite(value), allow_nan=False, **kwargs)


def number(value: Any) -> float:
    """A number a JSON record holds, ``null`` (written for NaN or ±inf) read as NaN."""
    return math.nan if value is None else float(value)
