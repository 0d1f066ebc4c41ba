"""PB2-Mix (evo.core.explorers.pb2), pure: the time-varying bandit over choices, the GP conditioned on them,
picks inside the space, and the state in checkpoints."""

import json

import numpy as np
import pytest

import evo.core.explorers.pb2 as pb2_module
from evo.core.explorers import PB2
from evo.core.explorers.pb2 import DiscountedUCB
from evo.core.kinds import Choice, Float, Integer, LogFloat

EPOCHS = Choice((3, 5, 10, 20))
SPACE = {
    "learning_rate": LogFloat(1e-4, 1e-2),
    "clip_range": Float(0.1, 0.4),
    "n_epochs": EPOCHS,
    "batch_size": Integer(16, 256, log=True),
}
EPOCHS_COLUMN = 2


def history(gain_of_arm, generations, members=8, seed=0, start=1):
    """Observations where the change in score is a smooth function of the continuous values
    plus ``gain_of_arm(generation)[arm]``; every arm is tried each generation."""
    rng = np.random.default_rng(seed)
    observations = []
    for generation in range(start, start + generations):
        gains = gain_of_arm(generation)
        for member in range(members):
            arm = member % 4
            x = [float(rng.uniform()), float(rng.uniform()), arm / 3, float(rng.uniform())]
            dy = -((x[0] - 0.5) ** 2) + gains[arm] + rng.normal(0, 0.05)
            observations.append((generation, x, dy))
    return observations


def chosen_arms(pb2, generation, count=1):
    return [round(pick[EPOCHS_COLUMN] * 3) for pick in pb2.choose(generation, count)]


def test_the_bandit_prefers_the_choice_that_improves_the_score_most():
    pb2 = PB2(SPACE, observations=history(lambda g: [0.0, 0.1, 1.0, 0.2], generations=6))
    assert chosen_arms(pb2, 7) == [2]  # n_epochs = 10
    suggestion, changes = pb2.explore(
        7,
        [dict(learning_rate=1e-3, clip_range=0.2, n_epochs=3, batch_size=64)],
        np.random.default_rng(0),
    )[0]
    assert suggestion["n_epochs"] == 10
    assert any(c.startswith("n_epochs : 3 --- (pb2-mix bandit) --> 10") for c in map(str, changes))


def test_old_data_fades_so_a_change_of_best_choice_is_followed(monkeypatch):
    # generations 1-6: n_epochs 3 is best; generations 7-10: n_epochs 20 is
    def gains(generation):
        return [1.0, 0.0, 0.0, 0.0] if generation <= 6 else [0.0, 0.0, 0.0, 1.0]

    pb2 = PB2(SPACE, observations=history(gains, generations=10))
    assert chosen_arms(pb2, 11) == [3]
    monkeypatch.setattr(pb2_module, "BANDIT_DISCOUNT", 1.0)  # without fading, the old majority wins
    assert chosen_arms(pb2, 11) == [0]


def test_a_batch_tries_untried_choices_and_spreads_its_picks():
    pb2 = PB2(SPACE, observations=[(1, [0.5, 0.5, 1 / 3, 0.5], 1.0), (1, [0.2, 0.5, 1 / 3, 0.1], 0.5)])
    assert sorted(chosen_arms(pb2, 2, count=3)) == [0, 2, 3]  # the three arms never pulled come first
    # and the recipients train with the bandit's choices, not the GP's favourite (n_epochs 5, the only one seen)
    donors = [dict(learning_rate=1e-3, clip_range=0.2, n_epochs=5, batch_size=64)] * 3
    explored = pb2.explore(2, donors, np.random.default_rng(0))
    assert sorted(new["n_epochs"] for new, _ in explored) == [3, 10, 20]
    bandit = DiscountedUCB(np.array([5.0, 5.0]), np.array([1.0, 0.9]))
    first = bandit.best()
    for _ in range(20):
        bandit.pretend_pull(first)
    assert bandit.best() != first  # repeated picks of one arm shrink its bonus until the other leads


def test_picks_stay_inside_the_space_and_keep_their_types():
    pb2 = PB2(SPACE, observations=history(lambda g: [0.0, 0.3, 0.6, 0.9], generations=3))
    donors = [dict(learning_rate=1e-3, clip_range=0.2, n_epochs=5, batch_size=64)] * 5
    for new, _ in pb2.explore(4, donors, np.random.default_rng(3)):
        assert new["n_epochs"] in EPOCHS.choices and isinstance(new["n_epochs"], int)
        assert isinstance(new["batch_size"], int) and 16 <= new["batch_size"] <= 256
        assert 1e-4 <= new["learning_rate"] <= 1e-2 and 0.1 <= new["clip_range"] <= 0.4


def test_the_continuous_pick_is_conditioned_on_the_chosen_category():
    # the best clip_range depends on n_epochs: low with 3 epochs, high with 20 (columns: lr, clip, epochs, batch)
    rng = np.random.default_rng(5)
    observations = []
    for generation in range(1, 7):
        for _ in range(12):
            arm = int(rng.integers(0, 4, endpoint=False))
            arm = 0 if arm < 2 else 3
            clip = float(rng.uniform())
            target = 0.15 if arm == 0 else 0.85
            observations.append((generation, [0.5, clip, arm / 3, 0.5], -4 * (clip - target) ** 2))
    pb2 = PB2(SPACE, observations=observations)
    gp = pb2.fit(np.random.default_rng(0))
    X = gp.X_train_
    picks = {
        arm: pb2_module.maximise_ucb(gp, 7.0, 0.0, 4, np.random.default_rng(1), X[:, :-1], fixed={2: arm / 3})
        for arm in (0, 3)
    }
    assert picks[0][1] < 0.35 and picks[3][1] > 0.65
    assert picks[0][2] == 0.0 and picks[3][2] == 1.0


def test_state_round_trips_through_json_and_suggests_the_same():
    pb2 = PB2(SPACE, observations=history(lambda g: [0.0, 0.5, 0.2, 0.1], generations=3), baselines={0: 1.5, 1: -2.0})
    restored = PB2.from_state(SPACE, json.loads(json.dumps(pb2.state())))
    assert restored.observations == pb2.observations and restored.baselines == pb2.baselines
    donors = [dict(learning_rate=1e-3, clip_range=0.2, n_epochs=5, batch_size=64)] * 2
    before = pb2.explore(4, donors, np.random.default_rng(9))
    after = restored.explore(4, donors, np.random.default_rng(9))
    assert [new for new, _ in before] == [new for new, _ in after]


def test_without_choices_pb2_is_unchanged():
    space = {name: kind for name, kind in SPACE.items() if name != "n_epochs"}
    pb2 = PB2(space, observations=[(1, [0.5, 0.5, 0.5], 1.0)])
    assert pb2.categorical == {} and pb2.choose(2, 3) == [{}, {}, {}]
    assert pb2.kappa() == pytest.approx(np.sqrt(0.2 * 3 * np.log(2)))
