"""Explore by perturbation (evo.core.explorers.perturb) over a search space of kinds: bounds always
hold, and the reachable set is what we say."""

import math

import numpy as np

from evo.core.explorers import Perturb, explore, make_explorer
from evo.core.kinds import Additive, Float, Horizon, LogFloat, sample_hparams

SPACE = {
    "learning_rate": LogFloat(1e-5, 1e-2),
    "ent_coef": Float(0.0, 0.02),
    "clip_range": Float(0.1, 0.4),
    "gamma": Horizon(0.9, 0.9999),
    "gae_lambda": Horizon(0.8, 0.99),
    "vf_coef": Float(0.25, 1.0),
}


def test_samples_lie_in_bounds_and_cover_the_range():
    rng = np.random.default_rng(0)
    draws = [sample_hparams(SPACE, rng) for _ in range(2000)]
    for name, param in SPACE.items():
        values = np.array([d[name] for d in draws])
        assert values.min() >= param.low and values.max() <= param.high
        assert values.max() - values.min() > 0.5 * (param.high - param.low)
    # log scale: about half the draws below the geometric mid-point
    lrs = np.array([d["learning_rate"] for d in draws])
    assert 0.4 < np.mean(lrs < math.sqrt(1e-5 * 1e-2)) < 0.6


def test_explore_stays_in_bounds_from_every_start():
    rng = np.random.default_rng(1)
    for _ in range(500):
        start = {name: float(rng.uniform(p.low, p.high)) for name, p in SPACE.items()}
        new, changes = explore(start, SPACE, rng, (0.8, 1.2), 0.25)
        assert len(changes) == len(SPACE)
        for name, param in SPACE.items():
            assert param.low <= new[name] <= param.high


def test_perturb_only_reaches_the_two_factors_clipped():
    start = {
        "learning_rate": 1e-3,
        "ent_coef": 0.019,
        "clip_range": 0.2,
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "vf_coef": 0.5,
    }
    reached = {name: set() for name in SPACE}
    rng = np.random.default_rng(2)
    for _ in range(200):
        new, _ = explore(start, SPACE, rng, (0.8, 1.2), resample_probability=0.0)
        for name in SPACE:
            reached[name].add(round(new[name], 12))
    assert reached["learning_rate"] == {round(8e-4, 12), round(1.2e-3, 12)}
    assert reached["ent_coef"] == {round(0.019 * 0.8, 12), 0.02}  # x1.2 clipped to the bound
    assert reached["clip_range"] == {0.16, 0.24}
    # horizon scale: 1/(1-gamma) = 100 becomes 80 or 120
    assert reached["gamma"] == {round(1 - 0.01 / 0.8, 12), round(1 - 0.01 / 1.2, 12)}


def test_resample_probability_one_ignores_the_start():
    start = {name: p.low for name, p in SPACE.items()}
    rng = np.random.default_rng(3)
    new, changes = explore(start, SPACE, rng, (0.8, 1.2), resample_probability=1.0)
    assert all(c.how == "resample" for c in changes)
    assert new != start


def test_resample_happens_at_the_requested_rate():
    rng = np.random.default_rng(4)
    start = {name: (p.low + p.high) / 2 for name, p in SPACE.items()}
    hows = [c.how for _ in range(400) for c in explore(start, SPACE, rng, (0.8, 1.2), 0.25)[1]]
    assert 0.2 < hows.count("resample") / len(hows) < 0.3


def test_explore_passes_other_keys_through_and_reads_like_ray_tune():
    rng = np.random.default_rng(5)
    start = {"learning_rate": 3e-4, "n_steps": 128}
    new, changes = explore(start, {"learning_rate": SPACE["learning_rate"]}, rng, (0.8,), 0.0)
    assert new["n_steps"] == 128
    assert str(changes[0]) == "learning_rate : 0.0003 --- (* 0.8) --> 0.00024"


def test_additive_scale_moves_zero_by_a_fraction_of_the_range():
    space = {"h": Additive(0.0, 2.0)}
    reached = set()
    rng = np.random.default_rng(3)
    for _ in range(100):
        new, changes = explore({"h": 0.0}, space, rng, (0.9, 1.1), resample_probability=0.0)
        reached.add(round(new["h"], 12))
        assert changes[0].how in ("-10% of range", "+10% of range")
    assert reached == {0.0, 0.2}  # -10 % of the range clips at 0, +10 % of 2.0 is 0.2
    assert Additive(0.0, 2.0).perturb(1.9, 1.1, rng) == (2.0, "+10% of range")


def test_the_perturb_explorer_explores_each_start_as_explore_does():
    starts = [{"learning_rate": 1e-3, "ent_coef": 0.01}, {"learning_rate": 2e-3, "ent_coef": 0.0}]
    space = {name: SPACE[name] for name in ("learning_rate", "ent_coef")}
    explorer = make_explorer("perturb", space, (0.8, 1.2), 0.25)
    assert isinstance(explorer, Perturb) and explorer.state() is None
    rng, again = np.random.default_rng(6), np.random.default_rng(6)
    explored = explorer.explore(1, starts, rng)
    assert explored == [explore(start, space, again, (0.8, 1.2), 0.25) for start in starts]
