"""The PBT paper's toy on evo's own selection, explore and exchange code: the pure worker and
the ablation switches of the plan (the toy run whole in one process: tests/unit/test_toy_runs.py; pbt_toy.py
under mpiexec on 4 ranks: tests/e2e/test_toy_runs.py)."""

import numpy as np
import pytest

from evo.core.explorers import make_explorer
from evo.core.kinds import Additive
from evo.core.plan import generation_rng, plan_generation, weight_moves
from evo.core.result import MemberResult
from evo.learners.interface import Exchangeable, layout_of
from evo.toy import PERTURB_FACTORS, TOY_SPACE, ToyWorker, best_curve, true_objective


def test_worker_follows_the_surrogate_gradient_only_along_h():
    worker = ToyWorker(0, lr=0.05)  # h = [1, 0]
    worker.train(1)
    assert worker.theta == pytest.approx([0.9 * (1 - 2 * 0.05), 0.9])
    worker.train(200)
    assert worker.theta[1] == 0.9  # h1 = 0: θ1 never moves
    assert worker.score() == pytest.approx(1.2 - 0.81, abs=1e-9)
    assert ToyWorker(1).hparams == {"h0": 0.0, "h1": 1.0}


def test_load_copies_theta_and_h_and_marks_the_jump():
    a, b = ToyWorker(0), ToyWorker(1)
    assert isinstance(a, Exchangeable)
    a.train(4)
    state = a.exploit_state()
    assert list(state) == ["theta"] and state["theta"] is a.theta  # θ is sent from its own memory
    received = b.receive_buffers(layout_of(state))
    assert received["theta"] is b.theta  # and received straight into the recipient's
    b.load({"theta": state["theta"].copy()}, {"h0": 0.3, "h1": 0.6})
    assert np.array_equal(b.theta, a.theta) and b.theta is not a.theta
    assert b.hparams == {"h0": 0.3, "h1": 0.6}
    assert b.trajectory[-1][1:3] == (a.theta[0], a.theta[1])
    assert true_objective(np.zeros(2)) == 1.2


POPULATION = [
    MemberResult(0, 0, 4, 0.5, hparams={"h0": 1.0, "h1": 0.0}),
    MemberResult(1, 0, 4, 0.4, hparams={"h0": 0.0, "h1": 1.0}),
]


@pytest.mark.parametrize(
    "exploit, explore, moves, explorers",
    [(True, True, {1: 0}, [1]), (True, False, {1: 0}, [1]), (False, True, {}, [0, 1]), (False, False, {}, [])],
)
def test_plan_ablations(exploit, explore, moves, explorers):
    plan = plan_generation(
        1,
        POPULATION,
        "truncation",
        make_explorer("perturb", TOY_SPACE, PERTURB_FACTORS, 0.0),
        generation_rng(0, 1),
        0.25,
        exploit=exploit,
        explore_hparams=explore,
    )
    assert weight_moves(plan) == moves
    assert sorted(e.recipient for e in plan) == explorers
    for e in plan:
        source = POPULATION[e.donor].hparams
        if explore:  # every h moved by ±10 % of [0, 1] (clipped at the bounds)
            assert all(abs(e.new_hparams[k] - source[k]) in (0.0, pytest.approx(0.1)) for k in source)
            assert len(e.changes) == 2
        else:
            assert e.new_hparams == source and e.changes == ()


def test_toy_space_shifts_h_by_a_share_of_its_range():
    assert TOY_SPACE == {"h0": Additive(0.0, 1.0), "h1": Additive(0.0, 1.0)}


def test_best_curve_takes_the_value_after_an_exploit():
    trajectories = {0: [(0, 0, 0, -0.4), (1, 0, 0, 0.1)], 1: [(0, 0, 0, -0.4), (1, 0, 0, -0.2), (1, 0, 0, 0.1)]}
    assert best_curve(trajectories) == ([0, 1], [-0.4, 0.1])
