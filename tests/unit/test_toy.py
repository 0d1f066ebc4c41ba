"""The PBT paper's toy on evo's own selection, explore and exchange code: the pure worker,
the ablation switches of the plan, and real MPI runs of pbt_toy.py."""

import json

import numpy as np
import pytest

from evo.core.plan import generation_rng, plan_generation, weight_moves
from evo.core.result import MemberResult
from evo.toy import PERTURB_FACTORS, TOY_SPACE, ToyWorker, best_curve, true_objective

from .conftest import mpiexec


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
    a.train(4)
    b.load(a.pack().copy(), {"h0": 0.3, "h1": 0.6})
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
        TOY_SPACE,
        generation_rng(0, 1),
        0.25,
        PERTURB_FACTORS,
        0.0,
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


def test_best_curve_takes_the_value_after_an_exploit():
    trajectories = {0: [(0, 0, 0, -0.4), (1, 0, 0, 0.1)], 1: [(0, 0, 0, -0.4), (1, 0, 0, -0.2), (1, 0, 0, 0.1)]}
    assert best_curve(trajectories) == ([0, 1], [-0.4, 0.1])


def run_toy(tmp_path, ranks, *args):
    out = tmp_path / "toy.png"
    result = mpiexec(ranks, ["pbt_toy.py", "--out", str(out), "--json", str(tmp_path / "toy.json"), *args], timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result, out, json.loads((tmp_path / "toy.json").read_text())


@pytest.mark.mpi
def test_only_pbt_reliably_reaches_the_optimum(tmp_path):
    seeds = ["0", "1", "2", "3", "4", "5"]
    result, figure, data = run_toy(tmp_path, 2, "--seeds", *seeds)
    final = data["final_q"]
    assert all(len(values) == len(seeds) for values in final.values())
    assert min(final["PBT"]) >= 1.15  # every seed
    assert np.mean(final["PBT"]) > np.mean(final["explore only"]) > 0.5
    for stalled in ("exploit only", "grid search"):  # one coordinate each: 1.2 - 0.9² = 0.39
        assert final[stalled] == pytest.approx([0.39] * len(seeds), abs=1e-3)
    assert "| PBT |" in result.stdout and "| grid search |" in result.stdout
    assert 50_000 < figure.stat().st_size < 2_000_000


@pytest.mark.mpi
def test_toy_runs_on_four_ranks_with_collectives_and_wta(tmp_path):
    _, figure, data = run_toy(tmp_path, 4, "--transport", "collective", "--strategy", "wta")
    assert data["workers"] == 4
    assert data["final_q"]["PBT"][0] >= 1.15
    assert data["final_q"]["grid search"][0] == pytest.approx(0.39, abs=1e-3)
    assert figure.exists()


@pytest.mark.mpi
def test_toy_refuses_bad_input_once(tmp_path):
    result = mpiexec(2, ["pbt_toy.py", "--workers", "3", "--out", str(tmp_path / "t.png")], timeout=60)
    assert result.returncode == 2
    assert result.stderr.count("--workers 3 does not divide among 2 ranks") == 1
    assert not (tmp_path / "t.png").exists()


@pytest.mark.mpi
def test_pb2_explore_reaches_the_optimum_on_the_toy(tmp_path):
    result, _, data = run_toy(tmp_path, 2, "--explore", "pb2", "--seeds", "0", "1")
    assert "pb2 explore" in result.stdout
    assert min(data["final_q"]["PBT"]) >= 1.15  # 2 workers, every seed
    assert data["final_q"]["exploit only"] == pytest.approx([0.39, 0.39], abs=1e-3)  # PB2 changes only explore
