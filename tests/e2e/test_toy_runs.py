"""The PBT paper's toy run for real: pbt_toy.py under mpiexec on 4 ranks, with collectives and
winner-takes-all. (The toy whole in one process, both explorers and truncation, and its refusal of bad
input: tests/unit/test_toy_runs.py.)"""

import json

import pytest

from tests.support import mpiexec


def test_toy_runs_on_four_ranks_with_collectives_and_wta(tmp_path):
    out = tmp_path / "toy.png"
    args = ["--transport", "collective", "--strategy", "wta", "--out", str(out), "--json", str(tmp_path / "toy.json")]
    result = mpiexec(4, ["pbt_toy.py", *args], timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads((tmp_path / "toy.json").read_text())
    assert data["workers"] == 4
    assert data["final_q"]["PBT"][0] >= 1.15
    assert data["final_q"]["grid search"][0] == pytest.approx(0.39, abs=1e-3)
    assert out.exists()
