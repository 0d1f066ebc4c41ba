"""Integer ranges and ordered choices in the search space: sampling, perturb, resample, bounds."""

import numpy as np
import pytest

from evo.core.explore import explore
from evo.core.space import ParamSpace

EPOCHS = ParamSpace.categorical((3, 5, 10, 20))
STEPS = ParamSpace(1, 20, kind="int")
LOG_STEPS = ParamSpace(1, 64, "log", kind="int")


def perturbed(space, start, factors=(0.8, 1.2), draws=300):
    rng = np.random.default_rng(0)
    reached, hows = set(), set()
    for _ in range(draws):
        new, changes = explore({"x": start}, {"x": space}, rng, factors, resample_probability=0.0)
        reached.add(new["x"])
        hows.add(changes[0].how)
    return reached, hows


def test_choice_perturb_moves_to_a_neighbour_and_stays_at_the_ends():
    assert perturbed(EPOCHS, 5)[0] == {3, 10}
    assert perturbed(EPOCHS, 10)[0] == {5, 20}
    reached, hows = perturbed(EPOCHS, 20)
    assert reached == {10, 20}
    assert "index +1 (at the end of the choices: kept)" in hows and "index -1" in hows
    assert perturbed(EPOCHS, 3)[0] == {3, 5}


def test_choice_resample_draws_each_choice_uniformly():
    rng = np.random.default_rng(1)
    draws = [explore({"x": 3}, {"x": EPOCHS}, rng, resample_probability=1.0)[0]["x"] for _ in range(4000)]
    counts = np.array([draws.count(c) for c in EPOCHS.choices])
    assert set(draws) == set(EPOCHS.choices)
    assert np.all(np.abs(counts / 4000 - 0.25) < 0.03)


def test_integer_perturb_rounds_moves_at_least_one_step_and_keeps_the_bounds():
    assert perturbed(STEPS, 10)[0] == {8, 12}
    assert perturbed(STEPS, 2)[0] == {1, 3}  # 1.6 -> 2 and 2.4 -> 2 would not move: one step instead
    reached, hows = perturbed(STEPS, 20)
    assert reached == {16, 20} and "* 1.2, rounded (at the bound: kept)" in hows
    reached, hows = perturbed(STEPS, 1)
    assert reached == {1, 2} and "* 0.8, rounded (at the bound: kept)" in hows
    for value in range(1, 21):
        for reached_value in perturbed(STEPS, value, draws=20)[0]:
            assert isinstance(reached_value, int) and 1 <= reached_value <= 20


def test_integer_samples_cover_every_whole_number_in_bounds():
    rng = np.random.default_rng(2)
    draws = [STEPS.sample(rng) for _ in range(3000)]
    assert set(draws) == set(range(1, 21)) and all(isinstance(d, int) for d in draws)
    log_draws = [LOG_STEPS.sample(rng) for _ in range(3000)]
    assert min(log_draws) == 1 and max(log_draws) == 64
    assert 0.4 < np.mean(np.array(log_draws) <= 8) < 0.6  # log-uniform: half below the geometric middle


def test_unit_coordinates_round_trip_for_discrete_kinds():
    for value in EPOCHS.choices:
        assert EPOCHS.from_unit(EPOCHS.to_unit(value)) == value
    assert [EPOCHS.to_unit(v) for v in EPOCHS.choices] == pytest.approx([0, 1 / 3, 2 / 3, 1])
    for value in range(1, 21):
        assert STEPS.from_unit(STEPS.to_unit(value)) == value
    assert STEPS.from_unit(0.52) in (10, 11)


@pytest.mark.parametrize(
    ("space", "words"),
    [
        (ParamSpace.categorical(()), "empty"),
        (ParamSpace.categorical((5, 3, 10)), "increasing order"),
        (ParamSpace.categorical((3, 3)), "without repeats"),
        (ParamSpace.categorical((3, "five")), "must all be numbers"),
        (ParamSpace(1.5, 20, kind="int"), "whole-number bounds"),
        (ParamSpace(1, 20, "horizon", kind="int"), "linear or log"),
        (ParamSpace(1, 20, kind="integer"), "use float or int"),
    ],
)
def test_bad_discrete_spaces_are_refused_with_the_reason(space, words):
    problems = space.problems("n_epochs")
    assert problems and any(words in p for p in problems), problems
