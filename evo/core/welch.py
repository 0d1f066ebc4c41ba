"""Welch's t-test between a donor's and a recipient's scored episodes (pure): the PBT paper's gate on an
exploit (Jaderberg et al. 2017, its RL experiments: a member copies the member it drew only if that member's
recent episodes are better by Welch's t-test).

``--exploit-test welch`` tests, for each exploit that selection decides, whether the donor's mean outcome is
larger than the recipient's: one-sided, at ``--exploit-alpha``. The outcomes are the values behind each
member's score (evo.core.result.Scores.outcomes): each scored episode's return, or with ``--objective`` the
first term's value, larger better. A recipient whose drawn donor is not better by the test keeps its weights
and explores its own hyperparameters (as a recipient tied with its donor does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evo.core.result import finite_or_none

EXPLOIT_TESTS = ("none", "welch")
"""``--exploit-test``'s choices: ``none`` copies whatever selection decides (PBT's truncation and
winner-takes-all on the mean), ``welch`` only where the test says the donor is better."""


@dataclass(frozen=True)
class WelchTest:
    """One test of a drawn donor against its recipient at level ``alpha``: Welch's t statistic, its degrees
    of freedom (Welch–Satterthwaite) and the one-sided p-value of "the donor's mean is larger"; ``n_donor``
    and ``n_recipient``: how many outcomes each had. With fewer than two outcomes on either side the test
    cannot be made (t, df and p NaN), and the donor is not shown better."""

    donor: int
    t: float
    df: float
    p: float
    n_donor: int
    n_recipient: int
    alpha: float

    @property
    def copies(self) -> bool:
        """Whether the donor is better at level ``alpha`` (a NaN p never is): the recipient copies it."""
        return self.p < self.alpha

    def to_json(self) -> dict[str, Any]:
        """The lineage's record of the test: the donor it drew, the statistic, p, the counts, and whether the
        recipient copied (JSON has no NaN or infinity: those as null)."""
        return {
            "donor": self.donor,
            "t": finite_or_none(self.t),
            "df": finite_or_none(self.df),
            "p": finite_or_none(self.p),
            "n_donor": self.n_donor,
            "n_recipient": self.n_recipient,
            "alpha": self.alpha,
            "copied": self.copies,
        }


def _mean_and_variance(values: Sequence[float]) -> tuple[float, float]:
    mean = math.fsum(values) / len(values)
    return mean, math.fsum((value - mean) ** 2 for value in values) / (len(values) - 1)


def welch(donor: int, donor_outcomes: Sequence[float], recipient_outcomes: Sequence[float], alpha: float) -> WelchTest:
    """Welch's one-sided t-test at level ``alpha`` that the member ``donor``'s outcomes have a larger mean
    than its recipient's (the p-value of scipy.stats.ttest_ind(donor_outcomes, recipient_outcomes,
    equal_var=False, alternative="greater")). Where neither side has any spread the means decide outright:
    p is 0 when the donor's is larger, 1 otherwise."""
    n_d, n_r = len(donor_outcomes), len(recipient_outcomes)
    if n_d < 2 or n_r < 2:
        return WelchTest(donor, math.nan, math.nan, math.nan, n_d, n_r, alpha)
    mean_d, var_d = _mean_and_variance(donor_outcomes)
    mean_r, var_r = _mean_and_variance(recipient_outcomes)
    se_d, se_r = var_d / n_d, var_r / n_r
    if se_d + se_r == 0.0:
        larger = mean_d > mean_r
        return WelchTest(donor, math.inf if larger else -math.inf, math.nan, 0.0 if larger else 1.0, n_d, n_r, alpha)
    t = (mean_d - mean_r) / math.sqrt(se_d + se_r)
    df = (se_d + se_r) ** 2 / (se_d**2 / (n_d - 1) + se_r**2 / (n_r - 1))
    from scipy.special import stdtr  # Student's t distribution function; imported when a test is made

    return WelchTest(donor, t, df, float(stdtr(df, -t)), n_d, n_r, alpha)
