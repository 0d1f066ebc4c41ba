"""The PBT paper's toy run for real: pbt_toy.py under mpiexec, on 2 and 4 ranks, with both
exchanges, both selections and both explorers."""

import json

import numpy as np
import pytest

from tests.support import mpiexec


def run_toy(tmp_path, ranks, *args):
    out = tmp_path / "toy.png"
    result = mpiexec(ranks, ["pbt_toy.py", "--out", str(out), "--json", str(tmp_path / "toy.json"), *args], timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result, out, json.loads((tmp_path / "toy.json").read_text())


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


def test_toy_runs_on_four_ranks_with_collectives_and_wta(tmp_path):
    _, figure, data = run_toy(tmp_path, 4, "--transport", "collective", "--strategy", "wta")
    assert data["workers"] == 4
    assert data["final_q"]["PBT"][0] >= 1.15
    assert data["final_q"]["grid search"][0] == pytest.approx(0.39, abs=1e-3)
    assert figure.exists()


def test_toy_refuses_bad_input_once(tmp_path):
    result = mpiexec(2, ["pbt_toy.py", "--workers", "3", "--out", str(tmp_path / "t.png")], timeout=60)
    assert result.returncode == 2
    assert result.stderr.count("--workers 3 does not divide among 2 ranks") == 1
    assert not (tmp_path / "t.png").exists()


def test_pb2_explore_reaches_the_optimum_on_the_toy(tmp_path):
    result, _, data = run_toy(tmp_path, 2, "--explore", "pb2", "--seeds", "0", "1")
    assert "pb2 explore" in result.stdout
    assert min(data["final_q"]["PBT"]) >= 1.15  # 2 workers, every seed
    assert data["final_q"]["exploit only"] == pytest.approx([0.39, 0.39], abs=1e-3)  # PB2 changes only explore
