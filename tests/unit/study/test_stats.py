"""The study's statistics (evo/study/stats.py): pure, numpy only."""

import math

import numpy as np
import pytest

from evo.study.stats import area_under_curve, bootstrap_mean_ci, sign_flip_p, smallest_p, t_interval


def test_area_under_the_best_curve_is_its_mean_height_over_the_steps():
    assert area_under_curve([(100, 10.0), (200, 10.0), (400, 10.0)]) == 10.0
    assert area_under_curve([(0, 0.0), (100, 100.0)]) == 50.0
    # uneven steps weigh each piece by its length: (0+10)/2*100 + (10+10)/2*300 over 400
    assert area_under_curve([(0, 0.0), (100, 10.0), (400, 10.0)]) == pytest.approx((500 + 3000) / 400)
    assert area_under_curve([(5, -3.0)]) == -3.0 and math.isnan(area_under_curve([]))


def test_bootstrap_interval_holds_the_mean_and_shrinks_to_a_point_for_equal_seeds():
    rng = np.random.default_rng(0)
    mean, low, high = bootstrap_mean_ci([1.0, 2.0, 3.0, 10.0], rng)
    assert mean == 4.0 and 1.0 <= low < mean < high <= 10.0
    assert bootstrap_mean_ci([7.0, 7.0, 7.0], rng) == (7.0, 7.0, 7.0)
    assert all(math.isnan(v) for v in bootstrap_mean_ci([], rng))


def test_sign_flip_p_is_exact_and_its_floor_is_two_over_two_to_the_seeds():
    assert sign_flip_p([1.0, 2.0, 3.0, 4.0, 5.0]) == 2 / 32 == smallest_p(5)  # all the same sign
    assert sign_flip_p([0.0, 0.0, 0.0]) == 1.0
    # -50, -10, +20: |mean| 13.3; the patterns reach at least that in 6 of 8
    assert sign_flip_p([-50.0, -10.0, 20.0]) == 6 / 8
    assert smallest_p(3) == 0.25 and math.isnan(sign_flip_p([]))


def test_t_interval_is_students_and_a_point_for_one_seed():
    mean, low, high = t_interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and high - mean == pytest.approx(4.302653 * 1.0 / 3**0.5, rel=1e-6)  # t(0.975, 2)
    assert low == pytest.approx(2 * mean - high)
    assert t_interval([5.0]) == (5.0, 5.0, 5.0)
    assert all(math.isnan(v) for v in t_interval([]))
