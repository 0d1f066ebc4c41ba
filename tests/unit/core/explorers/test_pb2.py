"""PB2 explore (evo.core.explorers.pb2), pure: the kernel, the history, the picks and their place in the plan."""

import json
from dataclasses import replace

import numpy as np
import pytest

from evo.config import ConfigError, parse_config
from evo.core.explorers import PB2, make_explorer
from evo.core.explorers.kernels import time_varying_kernel
from evo.core.kinds import Additive, Float, Horizon, LogFloat
from evo.core.plan import generation_rng, plan_generation, weight_moves
from evo.core.result import MemberResult

CARTPOLE_LIKE = {
    "learning_rate": LogFloat(1e-5, 1e-2),
    "ent_coef": LogFloat(1e-4, 0.05),
    "clip_range": Float(0.1, 0.4),
    "gamma": Horizon(0.9, 0.9999),
    "gae_lambda": Float(0.8, 1.0),
    "vf_coef": Additive(0.1, 1.0),
}
UNIT3 = {f"p{i}": Float(0.0, 1.0) for i in range(3)}


@pytest.mark.parametrize("name", list(CARTPOLE_LIKE))
def test_unit_coordinates_round_trip_on_every_scale(name):
    kind = CARTPOLE_LIKE[name]
    assert kind.to_unit(kind.low) == 0.0 and kind.to_unit(kind.high) == pytest.approx(1.0)
    for unit in np.linspace(0, 1, 11):
        value = kind.from_unit(unit)
        assert kind.low <= value <= kind.high
        assert kind.to_unit(value) == pytest.approx(unit, abs=1e-9)
    assert kind.from_unit(-0.5) == kind.low and kind.from_unit(7) == kind.high


def test_time_varying_kernel_fades_with_time_and_its_gradient_is_right():
    kernel = time_varying_kernel(length_scale=0.5, epsilon=0.2)
    X = np.array([[0.1, 0.2, 1.0], [0.1, 0.2, 3.0], [0.7, 0.9, 3.0], [0.4, 0.4, 9.0]])
    K, grad = kernel(X, eval_gradient=True)
    assert np.allclose(np.diag(K), 1.0) and np.allclose(K, K.T)
    assert K[0, 1] == pytest.approx(0.8 ** (2 / 2))  # same x, two generations apart: (1 - ε)^(|Δt|/2)
    assert K[1, 2] == pytest.approx(np.exp(-0.5 * (0.36 + 0.49) / 0.25))  # same t: the squared exponential
    assert np.all(np.linalg.eigvalsh(K) > 0)
    # the gradient w.r.t. the log-hyperparameters matches finite differences
    theta, step = kernel.theta, 1e-6
    for i in range(len(theta)):
        shifted = theta.copy()
        shifted[i] += step
        numeric = (kernel.clone_with_theta(shifted)(X) - K) / step
        assert np.allclose(grad[:, :, i], numeric, atol=1e-4)


def surface_history(seed, target, generations=5, members=4, noise=0.01):
    rng = np.random.default_rng(seed)
    pb2 = PB2(UNIT3)
    for generation in range(1, generations + 1):
        for _ in range(members):
            x = rng.uniform(0, 1, 3)
            pb2.observations.append((generation, list(x), -np.sum((x - target) ** 2) + rng.normal(0, noise)))
    return pb2, rng


def test_the_gp_pick_beats_random_picks_on_a_known_surface():
    gains, wins = [], 0
    for seed in range(8):
        target = np.random.default_rng(100 + seed).uniform(0.2, 0.8, 3)
        pb2, rng = surface_history(seed, target)
        pick = pb2.suggest(6, 1, rng)[0].units
        picked = -np.sum((pick - target) ** 2)
        random_mean = np.mean([-np.sum((x - target) ** 2) for x in rng.uniform(0, 1, (200, 3))])
        gains.append(picked - random_mean)
        wins += picked > random_mean
    assert wins == 8
    assert np.mean(gains) > 0.2  # random points score about -0.3 on this surface; the picks about -0.01


def test_recent_data_outweighs_old_data():
    """The surface moved: its optimum was at 0.2 for generations 1-6 and is at 0.8 since."""
    rng = np.random.default_rng(0)
    pb2 = PB2({"p": Float(0.0, 1.0)})
    for generation in range(1, 11):
        optimum = 0.2 if generation <= 6 else 0.8
        for x in rng.uniform(0, 1, 4):
            pb2.observations.append((generation, [x], -((x - optimum) ** 2)))
    assert abs(pb2.suggest(11, 1, rng)[0].units[0] - 0.8) < 0.15


def test_batch_picks_spread_out_and_stay_inside_the_bounds():
    for seed in range(4):
        rng = np.random.default_rng(seed)
        pb2 = PB2(CARTPOLE_LIKE)
        for generation in range(1, 4):
            for _ in range(4):
                units = rng.uniform(0, 1, len(CARTPOLE_LIKE))
                pb2.observations.append((generation, list(units), float(rng.normal())))
        donors = [
            {name: p.from_unit(u) for (name, p), u in zip(CARTPOLE_LIKE.items(), rng.uniform(0, 1, 6), strict=True)}
        ] * 3
        explored = pb2.explore(4, [dict(d, n_epochs=10) for d in donors], rng)
        points = []
        for new, changes in explored:
            assert new["n_epochs"] == 10  # outside the search space: kept
            for name, kind in CARTPOLE_LIKE.items():
                assert kind.low <= new[name] <= kind.high
            assert [c.how for c in changes] == ["pb2"] * len(CARTPOLE_LIKE)
            points.append(pb2.unit(new))
        distances = [np.linalg.norm(np.subtract(a, b)) for i, a in enumerate(points) for b in points[i + 1 :]]
        assert min(distances) > 0.05  # GP-BUCB: later picks do not repeat the first


def test_suggestions_stay_inside_the_bounds_with_flat_or_tiny_data():
    rng = np.random.default_rng(3)
    flat = PB2(CARTPOLE_LIKE, observations=[(1, [0.5] * 6, 0.0), (1, [0.2] * 6, 0.0), (2, [0.9] * 6, 0.0)])
    for pick in flat.suggest(3, 4, rng):
        units = pick.units
        assert np.all((0 <= units) & (units <= 1))
    assert PB2(CARTPOLE_LIKE, observations=[(1, [0.5] * 6, 1.0)]).suggest(2, 1, rng) is None  # one point: no fit


POPULATION = [
    MemberResult(member, 0, 0, score, hparams={f"p{i}": unit for i in range(3)})
    for member, score, unit in [(0, 10.0, 0.1), (1, 30.0, 0.5), (2, 20.0, 0.9), (3, float("nan"), 0.3)]
]


def test_the_plan_feeds_pb2_and_its_baselines_follow_the_weights():
    pb2 = PB2(UNIT3)
    first = plan_generation(1, POPULATION, "truncation", pb2, generation_rng(0, 1))
    assert weight_moves(first) == {3: 1}  # the NaN member copies the best
    assert pb2.observations == []  # generation 1 has no starting scores
    assert all(c.startswith("p") and "(pb2 warm-up: " in c for c in first[0].changes)
    assert pb2.baselines == {0: 10.0, 1: 30.0, 2: 20.0, 3: 30.0}  # member 3 now starts from member 1's weights

    later = [replace(row, score=s) for row, s in zip(POPULATION, [12.0, 31.0, 26.0, 40.0], strict=True)]
    second = plan_generation(2, later, "truncation", pb2, generation_rng(0, 2))
    deltas = {round(x[0], 3): dy for _, x, dy in pb2.observations}
    assert deltas == {0.1: 2.0, 0.5: 1.0, 0.9: 6.0, 0.3: 10.0}  # member 3: 40 - member 1's 30
    assert weight_moves(second) == {0: 3}
    assert all("(pb2) " in c for c in second[0].changes)
    assert all(0.0 <= value <= 1.0 for value in second[0].new_hparams.values())


def test_state_survives_a_json_round_trip():
    pb2 = PB2(UNIT3, observations=[(2, [0.1, 0.2, 0.3], 1.5)], baselines={0: 3.0, 1: float("-inf")})
    again = PB2.from_state(UNIT3, json.loads(json.dumps(pb2.state())))
    assert again.observations == pb2.observations and again.baselines == pb2.baselines
    assert PB2.from_state(UNIT3, None).observations == []
    # as a run resumes it: the explorer registry with a checkpoint's state
    resumed = make_explorer("pb2", UNIT3, (0.8, 1.2), 0.25, json.loads(json.dumps(pb2.state())))
    assert isinstance(resumed, PB2)
    assert resumed.observations == pb2.observations and resumed.baselines == pb2.baselines


def test_config_takes_explore_and_refuses_it_with_the_control():
    config = parse_config(["--explore", "pb2"], world_size=2, check_run_dir=False)
    assert config.explore == "pb2"
    assert parse_config([], world_size=2, check_run_dir=False).explore == "perturb"
    with pytest.raises(ConfigError, match="--explore pb2 with --strategy none"):
        parse_config(["--explore", "pb2", "--strategy", "none"], world_size=2, check_run_dir=False)


def test_a_failed_fit_falls_back_to_perturb_and_says_so(caplog):
    class Broken(PB2):
        def fit(self, rng, rows=None, columns=None):
            raise np.linalg.LinAlgError("matrix is not positive definite")

    pb2 = Broken(UNIT3, (0.8, 1.2), 0.0, observations=[(1, [0.5] * 3, 1.0), (1, [0.2] * 3, 0.0)])
    donor = {"p0": 0.5, "p1": 0.5, "p2": 0.5}
    ((new, changes),) = pb2.explore(2, [donor], np.random.default_rng(0))
    assert all(c.how in ("pb2 fallback: * 0.8", "pb2 fallback: * 1.2") for c in changes)
    assert all(new[k] == pytest.approx(donor[k] * 0.8) or new[k] == pytest.approx(donor[k] * 1.2) for k in donor)
    assert "PB2 could not fit the history of generation 2" in caplog.text
