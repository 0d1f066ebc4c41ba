"""The teacher's weight α over a distillation (evo/core/distill.py): BG-PBT's linear decay from 1
to 0.05 over the first 80 % of the distillation's env steps, 0.05 after."""

import numpy as np
import pytest

from evo.core.distill import distillation_weight


def test_its_endpoints_are_bg_pbts():
    assert distillation_weight(0, 1000) == 1.0
    assert distillation_weight(800, 1000) == 0.05
    assert distillation_weight(0, 1000, start=2.0, end=0.5, fraction=0.5) == 2.0
    assert distillation_weight(500, 1000, start=2.0, end=0.5, fraction=0.5) == 0.5


def test_it_is_linear_between_them():
    assert distillation_weight(400, 1000) == pytest.approx((1.0 + 0.05) / 2)
    assert distillation_weight(200, 1000) == pytest.approx(1.0 - 0.95 / 4)
    assert distillation_weight(250, 1000, start=2.0, end=0.5, fraction=0.5) == pytest.approx(1.25)


def test_it_falls_monotonically_and_stays_within_its_ends():
    weights = [distillation_weight(steps, 10_000) for steps in range(0, 12_001, 37)]
    assert all(later <= earlier for earlier, later in zip(weights, weights[1:], strict=False))
    assert min(weights) == 0.05 and max(weights) == 1.0
    assert np.all(np.diff(weights[: 8000 // 37]) < 0)  # strictly falling before 80 %


@pytest.mark.parametrize("steps", [801, 1000, 5000])
def test_after_80_percent_it_stays_at_the_end_value(steps):
    assert distillation_weight(steps, 1000) == 0.05


def test_steps_before_the_start_count_as_none():
    assert distillation_weight(-5, 1000) == 1.0


@pytest.mark.parametrize(
    "total, fraction, said",
    [
        (0, 0.8, "total_steps 0: a distillation lasts a positive number of env steps"),
        (-10, 0.8, "total_steps -10"),
        (1000, 0.0, r"fraction 0.0: .* in \(0, 1\]"),
        (1000, 1.5, "fraction 1.5"),
        (1000, -0.2, "fraction -0.2"),
    ],
)
def test_bad_input_is_refused_with_the_value(total, fraction, said):
    with pytest.raises(ValueError, match=said):
        distillation_weight(0, total, fraction=fraction)


def test_fraction_1_decays_over_the_whole_distillation():
    assert distillation_weight(500, 1000, fraction=1.0) == pytest.approx(0.525)
    assert distillation_weight(1000, 1000, fraction=1.0) == 0.05
