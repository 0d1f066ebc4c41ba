"""PB2-Rand, PB2-Mult and PB2-Mix (evo.core.explorers.mixed) and the mixture kernel, pure."""

import json

import numpy as np
import pytest

from evo.core.explorers import PB2, PB2Mix, PB2Mult, PB2Rand, make_explorer
from evo.core.explorers.exp3 import TVExp3M
from evo.core.explorers.kernels import mixture_kernel
from evo.core.kinds import Categorical, Choice, Float, LogFloat
from evo.core.result import MemberResult

AUGMENTATIONS = ("crop", "random-conv", "grayscale", "flip", "rotate", "cutout", "cutout-color", "color-jitter")
SPACE = {
    "learning_rate": LogFloat(1e-5, 1e-3),
    "clip_range": Float(0.01, 0.5),
    "aug_type": Categorical(AUGMENTATIONS),
}
CLIP, AUG = 1, 2
DONOR = {"learning_rate": 1e-4, "clip_range": 0.2, "aug_type": "flip"}


def unit_of(augmentation):
    return AUGMENTATIONS.index(augmentation) / 7


def conditioned_history(seed=5, generations=6, per_generation=12):
    """The best clip range depends on the augmentation: 0.15 of the range with crop, 0.85 with cutout."""
    rng = np.random.default_rng(seed)
    observations = []
    for generation in range(1, generations + 1):
        for _ in range(per_generation):
            augmentation = "crop" if rng.random() < 0.5 else "cutout"
            clip = float(rng.uniform())
            target = 0.15 if augmentation == "crop" else 0.85
            observations.append((generation, [0.5, clip, unit_of(augmentation)], -4 * (clip - target) ** 2))
    return observations


def test_the_mixture_kernel_is_positive_semi_definite_with_unit_diagonal_and_right_gradients():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(size=(30, 2)), rng.integers(0, 4, size=(30, 2)) / 3, rng.integers(1, 9, 30)])
    for mix in (0.001, 0.3, 0.5, 1.0):
        kernel = mixture_kernel([2, 3], mix=mix, length_scale=0.4, epsilon=0.2)
        K, grad = kernel(X, eval_gradient=True)
        assert np.allclose(np.diag(K), 1.0) and np.allclose(K, K.T)
        assert np.linalg.eigvalsh(K).min() > -1e-10
        theta, step = kernel.theta, 1e-6
        for i in range(len(theta)):
            shifted = theta.copy()
            shifted[i] -= step  # mix = 1 is its upper bound: step down
            numeric = (K - kernel.clone_with_theta(shifted)(X)) / step
            assert np.allclose(grad[:, :, i], numeric, atol=1e-4), kernel.hyperparameters[i].name
    # equal categories, same time, far continuous values: only the categorical half is left
    kernel = mixture_kernel([1], mix=0.0, length_scale=0.01)
    pair = kernel(np.array([[0.0, 0.5, 1.0], [1.0, 0.5, 1.0], [1.0, 1.0, 1.0]]))
    assert pair[0, 1] == pytest.approx(0.5) and pair[1, 2] == pytest.approx(0.5) and pair[0, 2] < 1e-6


def test_a_recipients_category_is_the_bandits_draw():
    for name in ("pb2-mult", "pb2-mix"):
        explorer = make_explorer(name, SPACE, rounds=50, population=4)
        explorer.observations = conditioned_history()
        expected = explorer.bandit(AUG).draw(2, np.random.default_rng(7))
        explored = explorer.explore(7, [DONOR, DONOR], np.random.default_rng(7))
        assert [new["aug_type"] for new, _ in explored] == [AUGMENTATIONS[arm] for arm in expected]
        assert all(f"aug_type : flip --- ({name} bandit)" in str(c) for _, changes in explored for c in changes[2:])


def test_the_bandit_has_the_runs_population_and_horizon():
    explorer = make_explorer("pb2-mix", SPACE, rounds=30, population=4)
    explorer.observations = conditioned_history()
    bandit = explorer.bandit(AUG)
    assert (bandit.arms, bandit.batch, bandit.rounds) == (8, 4, 30)
    rewards = [(dy + 4) / 4 for _, _, dy in explorer.observations]  # min-max: best -0.0, worst about -4
    assert len(rewards) == 72
    unknown = make_explorer("pb2-mix", SPACE)  # without the run's numbers: from the data
    unknown.observations = conditioned_history()
    assert (unknown.bandit(AUG).batch, unknown.bandit(AUG).rounds) == (12, 6)


def force_category(monkeypatch, augmentation):
    monkeypatch.setattr(TVExp3M, "draw", lambda self, count, rng: [AUGMENTATIONS.index(augmentation)] * count)


@pytest.mark.parametrize("cls", [PB2Mix, PB2Mult])
def test_the_continuous_values_come_from_the_gp_given_the_bandits_category(cls, monkeypatch):
    explorer = cls(SPACE, rounds=50, population=4, observations=conditioned_history())
    donor = dict(DONOR, aug_type="cutout")  # the donor's category is the other one: the pick must not use it
    force_category(monkeypatch, "crop")
    ((new, _),) = explorer.explore(7, [donor], np.random.default_rng(1))
    assert new["aug_type"] == "crop" and SPACE["clip_range"].to_unit(new["clip_range"]) < 0.35
    force_category(monkeypatch, "cutout")
    ((new, _),) = explorer.explore(7, [dict(DONOR, aug_type="crop")], np.random.default_rng(1))
    assert new["aug_type"] == "cutout" and SPACE["clip_range"].to_unit(new["clip_range"]) > 0.65


def test_pb2_mult_fits_a_category_on_its_own_rows_and_keeps_the_donors_values_without_any(monkeypatch):
    explorer = PB2Mult(SPACE, rounds=50, population=4, observations=conditioned_history())
    crop_rows = explorer.rows({AUG: unit_of("crop")})
    assert crop_rows and all(explorer.observations[i][1][AUG] == unit_of("crop") for i in crop_rows)
    assert explorer.model(7, {AUG: unit_of("crop")}, np.random.default_rng(0)).X.shape[0] == len(crop_rows)
    force_category(monkeypatch, "rotate")  # never tried: no rows to fit
    ((new, changes),) = explorer.explore(7, [DONOR], np.random.default_rng(0))
    assert new == dict(DONOR, aug_type="rotate")
    assert "learning_rate : 0.0001 --- (pb2-mult: no data with these categories, kept) --> 0.0001" in map(str, changes)


def test_pb2_mix_fits_one_gp_over_every_column_with_the_mixture_kernel():
    explorer = PB2Mix(SPACE, rounds=50, population=4, observations=conditioned_history())
    model = explorer.model(7, {AUG: unit_of("crop")}, np.random.default_rng(0))
    assert model.columns == [0, 1, 2] and model.X.shape == (72, 4)
    fitted = model.latent.kernel.k2
    assert type(fitted).__name__ == "TimeVaryingMixture" and fitted.categorical == (2,)
    assert 0.0 < fitted.mix <= 1.0  # the mixing weight and both decays are fitted
    assert fitted.get_params()["epsilon_continuous"] != 0.1 or fitted.get_params()["epsilon_categorical"] != 0.1


def test_pb2_rand_keeps_or_redraws_each_category_half_the_time():
    explorer = PB2Rand(SPACE, observations=conditioned_history())
    rng = np.random.default_rng(3)
    chosen = [c[AUG] for c in explorer.pick_categories(7, [explorer.unit(DONOR)] * 400, rng)]
    kept = [unit for unit, how in chosen if how == "pb2-rand kept"]
    assert abs(len(kept) / 400 - 0.5) < 4 * np.sqrt(0.25 / 400)  # 4 standard errors
    assert set(kept) == {unit_of("flip")}
    assert {unit for unit, how in chosen if how == "pb2-rand resample"} == {unit_of(a) for a in AUGMENTATIONS}
    ((new, changes),) = explorer.explore(7, [DONOR], rng)
    assert changes[AUG].how in ("pb2-rand kept", "pb2-rand resample") and changes[CLIP].how == "pb2"
    assert explorer.model(7, {}, np.random.default_rng(0)).columns == [0, 1]  # the GP over continuous only


def test_ordered_choices_are_categories_for_the_papers_explorers_and_gp_inputs_for_pb2():
    space = {"learning_rate": LogFloat(1e-5, 1e-3), "n_epochs": Choice((1, 2, 3, 4))}
    observations = [
        (t, [float(u), e / 3], float(-((u - 0.5) ** 2))) for t in (1, 2) for u in (0.1, 0.9) for e in (0, 3)
    ]
    assert PB2Mix(space).categories == {1: "n_epochs"} and PB2(space).categories == {}
    ((new, changes),) = PB2(space, observations=observations).explore(
        3, [{"learning_rate": 1e-4, "n_epochs": 2}], np.random.default_rng(0)
    )
    assert new["n_epochs"] in (1, 2, 3, 4) and [c.how for c in changes] == ["pb2", "pb2"]
    ((new, changes),) = PB2Mix(space, observations=observations).explore(
        3, [{"learning_rate": 1e-4, "n_epochs": 2}], np.random.default_rng(0)
    )
    assert new["n_epochs"] in (1, 2, 3, 4) and [c.how for c in changes] == ["pb2", "pb2-mix bandit"]


@pytest.mark.parametrize("name", ["pb2-rand", "pb2-mult", "pb2-mix"])
def test_state_round_trips_and_continues_the_same_way(name):
    explorer = make_explorer(name, SPACE, rounds=50, population=4)
    explorer.observations = conditioned_history(generations=3)
    explorer.baselines = {0: 1.0, 1: 2.0}
    resumed = make_explorer(name, SPACE, state=json.loads(json.dumps(explorer.state())), rounds=50, population=4)
    before = explorer.explore(4, [DONOR] * 2, np.random.default_rng(9))
    after = resumed.explore(4, [DONOR] * 2, np.random.default_rng(9))
    assert [new for new, _ in before] == [new for new, _ in after]


@pytest.mark.parametrize("name", ["pb2-rand", "pb2-mult", "pb2-mix"])
def test_the_first_generation_warms_up_and_asynchronous_ready_points_feed_the_history(name):
    explorer = make_explorer(name, SPACE, rounds=10, population=4)
    ((new, changes),) = explorer.explore(1, [DONOR], np.random.default_rng(0))
    assert all(c.how.startswith(f"{name} warm-up: ") for c in changes)
    for interval, score in ((1, 1.0), (2, 3.0), (3, 2.0)):
        result = MemberResult(0, interval, 0, score, hparams=DONOR)
        explorer.observe_ready(interval, result, result)
    assert [dy for _, _, dy in explorer.observations] == [2.0, -1.0]
    ((new, changes),) = explorer.explore(4, [DONOR], np.random.default_rng(0))
    assert not any("warm-up" in c.how for c in changes) and new["aug_type"] in AUGMENTATIONS
