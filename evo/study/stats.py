"""The study's statistics over seeds (pure, numpy only).

With a handful of seeds nothing here is a strong test, and the functions say so rather
than hide it: the sign-flip test over 5 paired seeds cannot give a two-sided p below
2/32 = 0.0625, whatever the numbers.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

BOOTSTRAP_SAMPLES = 10_000
CONFIDENCE = 0.95


def area_under_curve(curve: Sequence[tuple[float, float]]) -> float:
    """The best-score curve's mean height over its env steps: the trapezoid area from the
    first point to the last divided by the steps it spans (one point: that point's score).
    Runs with the same budget per member compare directly, whatever their population."""
    if not curve:
        return math.nan
    if len(curve) == 1:
        return float(curve[0][1])
    steps = np.array([x for x, _ in curve], dtype=float)
    scores = np.array([y for _, y in curve], dtype=float)
    area = float(np.sum((scores[1:] + scores[:-1]) / 2 * np.diff(steps)))
    return area / float(steps[-1] - steps[0])


def bootstrap_mean_ci(
    values: Sequence[float], rng: np.random.Generator, samples: int = BOOTSTRAP_SAMPLES
) -> tuple[float, float, float]:
    """The mean and a percentile bootstrap confidence interval (resampling the seeds);
    with one value the interval is that value."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return math.nan, math.nan, math.nan
    means = data[rng.integers(0, data.size, size=(samples, data.size))].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(data.mean()), float(low), float(high)


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """The mean and Student's t interval over seeds, 95 % unless ``confidence`` says otherwise (one
    value: that value, no interval). Percentile bootstraps over 3-5 seeds cover the mean far less often
    than they claim; the t-interval assumes roughly normal seed means, and says so by its width."""
    from scipy.stats import t

    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(data.mean())
    if data.size == 1:
        return mean, mean, mean
    half = float(t.ppf((1 + confidence) / 2, data.size - 1) * data.std(ddof=1) / math.sqrt(data.size))
    return mean, mean - half, mean + half


def bonferroni(comparisons: int, confidence: float = CONFIDENCE) -> float:
    """The confidence each of ``comparisons`` intervals needs for all of them together to keep
    ``confidence`` (Bonferroni: 97.5 % each for two at 95 %)."""
    return 1 - (1 - confidence) / max(comparisons, 1)


def sign_flip_p(differences: Sequence[float]) -> float:
    """Two-sided exact p-value of the paired sign-flip (permutation) test of a zero mean
    difference: the share of the 2^n sign patterns whose |mean| is at least the observed."""
    data = np.asarray(differences, dtype=float)
    if data.size == 0:
        return math.nan
    observed = abs(data.mean())
    flips = np.array(list(itertools.product((1.0, -1.0), repeat=data.size)))
    means = np.abs((flips * data).mean(axis=1))
    return float(np.mean(means >= observed - 1e-12))


def smallest_p(seeds: int) -> float:
    """The smallest two-sided p the sign-flip test can give with ``seeds`` pairs."""
    return 2.0 / 2**seeds if seeds else math.nan


def standard_error(values: Sequence[float]) -> float:
    """The standard error of the mean of ``values`` (NaN with fewer than 2)."""
    data = np.asarray(values, dtype=float)
    if data.size < 2:
        return math.nan
    return float(data.std(ddof=1) / math.sqrt(data.size))


@dataclass(frozen=True)
class Paired:
    """``a`` minus ``b`` over the seeds both have: the differences by seed, their mean and 95 %
    t-interval, the seeds where ``a`` is higher and lower, and the sign-flip test's p."""

    seeds: tuple[int, ...]
    differences: tuple[float, ...]
    mean: float
    low: float
    high: float
    p: float

    @property
    def n(self) -> int:
        return len(self.differences)

    @property
    def wins(self) -> int:
        return sum(d > 0 for d in self.differences)

    @property
    def losses(self) -> int:
        return sum(d < 0 for d in self.differences)


def paired(a: Mapping[int, float], b: Mapping[int, float]) -> Paired:
    """``a[seed] - b[seed]`` over the seeds both measured (NaNs left out), in seed order."""
    seeds = tuple(s for s in sorted(set(a) & set(b)) if not (math.isnan(a[s]) or math.isnan(b[s])))
    differences = tuple(float(a[s] - b[s]) for s in seeds)
    mean, low, high = t_interval(differences)
    return Paired(seeds, differences, mean, low, high, sign_flip_p(differences))
