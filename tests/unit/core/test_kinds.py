"""The hyperparameter kinds (evo.core.kinds): integer ranges and ordered choices under explore
(sampling, perturb, resample, bounds), the continuous kinds, "off"-or-value choices, unordered
names, the YAML entries they come from, their config.yaml form and the problems of bad ones."""

import json
import math

import numpy as np
import pytest
import yaml

from evo.core.explorers import explore
from evo.core.kinds import (
    Additive,
    Categorical,
    Choice,
    Float,
    Horizon,
    Integer,
    LogFloat,
    OffOr,
    kind_from_entry,
    kind_from_spec,
)

EPOCHS = Choice((3, 5, 10, 20))
STEPS = Integer(1, 20)
LOG_STEPS = Integer(1, 64, log=True)


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
    ("kind", "words"),
    [
        (Choice(()), "empty"),
        (Choice((5, 3, 10)), "increasing order"),
        (Choice((3, 3)), "without repeats"),
        (Choice((3, "five")), "must all be numbers"),
        (Integer(1.5, 20), "whole-number bounds"),
        # an integer range on a scale integers do not have: the YAML entry {low, high, type: int, scale: horizon}
        pytest.param(
            kind_from_entry({"low": 1, "high": 20, "type": "int", "scale": "horizon"}),
            "linear or log",
            id="int-on-horizon-scale",
        ),
        # a type that does not exist: the YAML entry {low, high, type: integer}
        pytest.param(kind_from_entry({"low": 1, "high": 20, "type": "integer"}), "use float or int", id="type-integer"),
    ],
)
def test_bad_discrete_spaces_are_refused_with_the_reason(kind, words):
    problems = kind.problems("n_epochs")
    assert problems and any(words in p for p in problems), problems


@pytest.mark.parametrize(
    "kind, message",
    [
        (Float(0.3, 0.1), "reversed"),
        (Float(0.1, 0.1), "empty"),
        (LogFloat(0.0, 0.1), "needs low > 0"),
        (Horizon(0.9, 1.0), "0 <= low < high < 1"),
        (kind_from_entry({"low": 0.1, "high": 0.2, "scale": "cubic"}), "use one of linear, log, additive, horizon"),
    ],
)
def test_space_problems_name_the_fix(kind, message):
    problems = kind.problems("x")
    assert problems and message in " ".join(problems)


# --- the continuous kinds -------------------------------------------------------------------

CONTINUOUS = [Float(0.1, 0.4), LogFloat(1e-5, 1e-2), Additive(0.0, 2.0), Horizon(0.9, 0.9999)]


@pytest.mark.parametrize("kind", CONTINUOUS, ids=repr)
def test_continuous_kinds_round_trip_through_unit_coordinates(kind):
    assert kind.problems("x") == []
    assert kind.to_unit(kind.low) == 0.0 and kind.to_unit(kind.high) == pytest.approx(1.0)
    for unit in np.linspace(0, 1, 21):
        value = kind.from_unit(unit)
        assert kind.low <= value <= kind.high
        assert kind.to_unit(value) == pytest.approx(unit, abs=1e-9)
    rng = np.random.default_rng(0)
    for _ in range(200):
        value = kind.sample(rng)
        assert kind.low <= value <= kind.high
        assert kind.from_unit(kind.to_unit(value)) == pytest.approx(value, rel=1e-9, abs=1e-12)
    assert kind.from_unit(-0.5) == kind.low and kind.from_unit(7) == kind.high


@pytest.mark.parametrize("kind", CONTINUOUS, ids=repr)
def test_continuous_perturb_stays_within_the_bounds(kind):
    rng = np.random.default_rng(1)
    starts = [kind.low, kind.high, *(kind.sample(rng) for _ in range(200))]
    for start in starts:
        for factor in (0.5, 0.8, 0.9, 1.1, 1.2, 2.0):
            moved, how = kind.perturb(start, factor, rng)
            assert isinstance(moved, float) and kind.low <= moved <= kind.high, (start, factor, moved)
            assert how
    # inside the range, each kind moves as it says
    assert Float(0.1, 0.4).perturb(0.2, 1.2, rng)[0] == pytest.approx(0.24)
    assert LogFloat(1e-5, 1e-2).perturb(1e-3, 0.8, rng)[0] == pytest.approx(8e-4)
    assert Additive(0.0, 2.0).perturb(1.0, 1.1, rng) == (pytest.approx(1.2), "+10% of range")
    assert Horizon(0.9, 0.9999).perturb(0.99, 1.2, rng)[0] == pytest.approx(1 - 0.01 / 1.2)


# --- OffOr: an ordered choice whose loosest option is "off" (None) --------------------------

KL = OffOr([0.01, 0.05, None])


def test_off_or_perturb_moves_to_a_neighbour_with_off_as_the_top_end():
    assert perturbed(KL, 0.01)[0] == {0.01, 0.05}
    assert perturbed(KL, 0.05)[0] == {0.01, None}
    reached, hows = perturbed(KL, None)
    assert reached == {0.05, None}
    assert "index +1 (at the end of the choices: kept)" in hows and "index -1" in hows
    rng = np.random.default_rng(0)
    assert KL.perturb(0.05, 1.2, rng) == (None, "index +1")
    assert KL.perturb(None, 0.8, rng) == (0.05, "index -1")
    assert KL.perturb(0.01, 0.8, rng) == (0.01, "index -1 (at the end of the choices: kept)")


def test_off_or_writes_off_as_inf_in_csv_null_in_json_and_inf_as_a_number():
    assert KL.text(None) == "inf" and KL.parse("inf") is None
    assert KL.json(None) is None and json.dumps(KL.json(None)) == "null"
    assert KL.number(None) == math.inf
    for value in KL.choices:
        assert KL.parse(KL.text(value)) == value
        assert json.loads(json.dumps(KL.json(value))) == value
    assert KL.text(0.05) == "0.05" and KL.json(0.05) == 0.05 and KL.number(0.01) == 0.01
    assert KL.coerce(math.inf) is None  # the old form of "off" reads as off
    assert KL.describe(None) == "off"
    assert KL.problems("target_kl") == []


def test_off_or_contains_its_choices_and_off_only():
    assert KL.contains(None) and KL.contains(0.01) and KL.contains(0.05)
    assert not KL.contains(0.02) and not KL.contains(math.inf) and not KL.contains(True)
    assert OffOr([None, 0.01]).problems("target_kl")  # off must be the last, loosest option


# --- Categorical: unordered names ----------------------------------------------------------

AUGMENT = Categorical(["crop", "flip", "cutout", "none"])


def test_categorical_perturb_always_switches_to_another_choice_drawn_uniformly():
    rng = np.random.default_rng(0)
    draws = 3000
    for start in AUGMENT.choices:
        moved = []
        for i in range(draws):
            value, how = AUGMENT.perturb(start, 0.8 if i % 2 else 1.2, rng)
            assert how == "switch"
            moved.append(value)
        others = set(AUGMENT.choices) - {start}
        assert set(moved) == others  # never the same value, every other one reached
        for other in others:
            assert abs(moved.count(other) / draws - 1 / 3) < 0.04
    assert Categorical(["crop"]).perturb("crop", 1.2, rng) == ("crop", "switch (the only choice: kept)")


def test_categorical_perturb_draws_with_the_given_generator_only():
    np.random.seed(1)
    first = [AUGMENT.perturb("crop", 1.2, np.random.default_rng(7))[0] for _ in range(5)]
    np.random.seed(2)  # the global generator plays no part
    again = [AUGMENT.perturb("crop", 1.2, np.random.default_rng(7))[0] for _ in range(5)]
    assert first == again
    a, b = np.random.default_rng(3), np.random.default_rng(3)
    assert [AUGMENT.perturb("flip", 0.8, a)[0] for _ in range(50)] == [
        AUGMENT.perturb("flip", 0.8, b)[0] for _ in range(50)
    ]


def test_categorical_samples_each_name_uniformly():
    rng = np.random.default_rng(4)
    draws = [AUGMENT.sample(rng) for _ in range(4000)]
    assert set(draws) == set(AUGMENT.choices)
    counts = np.array([draws.count(c) for c in AUGMENT.choices])
    assert np.all(np.abs(counts / 4000 - 0.25) < 0.03)


def test_categorical_text_parse_round_trip_and_membership():
    for value in AUGMENT.choices:
        assert AUGMENT.parse(AUGMENT.text(value)) == value
        assert AUGMENT.json(value) == value and AUGMENT.contains(value)
    assert AUGMENT.number("flip") == 1.0
    assert not AUGMENT.contains("rotate")
    with pytest.raises(ValueError, match="'rotate' is not one of"):
        AUGMENT.parse("rotate")
    assert AUGMENT.problems("augment") == []


@pytest.mark.parametrize(
    "choices, words",
    [([], "empty"), (["crop", "flip", "crop"], "repeat"), (["crop", 3], "mixes names and numbers")],
)
def test_bad_categoricals_are_refused_with_the_reason(choices, words):
    problems = Categorical(choices).problems("augment")
    assert problems and any(words in p for p in problems), problems


# --- YAML entries and config.yaml's form ---------------------------------------------------


@pytest.mark.parametrize(
    "entry, whole, expected",
    [
        ({"low": 0.1, "high": 0.4}, False, Float(0.1, 0.4)),
        ({"low": 0.1, "high": 0.4, "scale": "linear"}, False, Float(0.1, 0.4)),
        ({"low": 1e-5, "high": 1e-2, "scale": "log"}, False, LogFloat(1e-5, 1e-2)),
        ({"low": 0.0, "high": 1.0, "scale": "additive"}, False, Additive(0.0, 1.0)),
        ({"low": 0.9, "high": 0.999, "scale": "horizon"}, False, Horizon(0.9, 0.999)),
        ({"low": 1, "high": 20, "type": "int"}, False, Integer(1, 20)),
        ({"low": 1, "high": 20, "scale": "int"}, False, Integer(1, 20)),
        ({"low": 16, "high": 256, "type": "int", "scale": "log"}, False, Integer(16, 256, log=True)),
        ({"low": 1.0, "high": 20.0}, True, Integer(1, 20)),
        ({"choices": [3, 5, 10]}, False, Choice([3, 5, 10])),
        ({"choices": [0.01, 0.05, None]}, False, OffOr([0.01, 0.05, None])),
        ({"choices": ["crop", "flip"]}, False, Categorical(["crop", "flip"])),
    ],
)
def test_kind_from_entry_builds_the_kind_the_yaml_describes(entry, whole, expected):
    kind = kind_from_entry(entry, whole)
    assert type(kind) is type(expected) and kind == expected
    assert kind.problems("x") == []


def test_kind_from_entry_reports_a_bad_scale_through_problems():
    kind = kind_from_entry({"low": 0.1, "high": 0.2, "scale": "cubic"})
    assert kind.problems("clip_range") == [
        "search_space.clip_range.scale is 'cubic'; use one of linear, log, additive, horizon"
    ]
    assert kind_from_entry({"choices": ["crop", 3]}).problems("augment")  # neither numbers nor names


EVERY_KIND = [
    *CONTINUOUS,
    Integer(1, 20),
    Integer(16, 256, log=True),
    Choice([3, 5, 10, 20]),
    Choice([0.5, 1.0]),
    KL,
    AUGMENT,
]


@pytest.mark.parametrize("kind", EVERY_KIND, ids=repr)
def test_kind_from_spec_gives_back_an_equal_kind(kind):
    again = kind_from_spec(kind.spec())
    assert type(again) is type(kind) and again == kind
    # as config.yaml holds it (OffOr's off is written .inf there)
    from_yaml = kind_from_spec(yaml.safe_load(yaml.safe_dump(kind.spec(), sort_keys=False)))
    assert type(from_yaml) is type(kind) and from_yaml == kind
