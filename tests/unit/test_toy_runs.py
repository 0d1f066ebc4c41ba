"""The PBT paper's toy run whole in one process (evo.toy.main, as pbt_toy.py runs it, on a world of one rank
with two workers): only PBT reliably reaches the optimum, PB2's explore reaches it too, and a bad command
line is refused by rank 0 once while every rank exits 2. Moved down from the e2e tier, where each ran
``mpiexec -n 2 python pbt_toy.py``: what they check is the toy's, the selection's and the explorers', not
MPI's. (pbt_toy.py itself, on 4 ranks with collectives and winner-takes-all: tests/e2e/test_toy_runs.py; the
toy's pure worker and the plan's switches: tests/unit/test_toy.py.)"""

import json

import numpy as np
import pytest

import evo.toy
from evo.mpi import exchange


def run_toy(tmp_path, capsys, *args):
    out = tmp_path / "toy.png"
    assert evo.toy.main(["--workers", "2", "--out", str(out), "--json", str(tmp_path / "toy.json"), *args]) == 0
    return capsys.readouterr().out, out, json.loads((tmp_path / "toy.json").read_text())


def test_only_pbt_reliably_reaches_the_optimum(tmp_path, capsys):
    seeds = ["0", "1", "2", "3", "4", "5"]
    stdout, figure, data = run_toy(tmp_path, capsys, "--seeds", *seeds)
    final = data["final_q"]
    assert all(len(values) == len(seeds) for values in final.values())
    assert min(final["PBT"]) >= 1.15  # every seed
    assert np.mean(final["PBT"]) > np.mean(final["explore only"]) > 0.5
    for stalled in ("exploit only", "grid search"):  # one coordinate each: 1.2 - 0.9² = 0.39
        assert final[stalled] == pytest.approx([0.39] * len(seeds), abs=1e-3)
    assert "| PBT |" in stdout and "| grid search |" in stdout
    assert 50_000 < figure.stat().st_size < 2_000_000


def test_pb2_explore_reaches_the_optimum_on_the_toy(tmp_path, capsys):
    """In half the toy's default steps (40; 10 explores a variant): PB2's GP fits are its time, on one BLAS
    thread (a pool of them contends for the 2 cores with nothing to gain on these small matrices)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        stdout, _, data = run_toy(tmp_path, capsys, "--explore", "pb2", "--steps", "40", "--seeds", "0", "1")
    assert "pb2 explore" in stdout
    assert min(data["final_q"]["PBT"]) >= 1.15  # 2 workers, every seed
    assert data["final_q"]["exploit only"] == pytest.approx([0.39, 0.39], abs=1e-3)  # PB2 changes only explore


class TwoRanks:
    """Rank ``rank`` of a world of two, as the toy's start-up uses it: rank 1 takes rank 0's broadcast."""

    def __init__(self, rank: int, sent: list):
        self.rank, self.sent = rank, sent

    def Get_rank(self) -> int:  # noqa: N802 (mpi4py's names)
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return 2

    def bcast(self, value, root: int = 0):
        if self.rank == root:
            self.sent.append(value)
            return value
        return self.sent.pop(0)


def test_toy_refuses_bad_input_once(tmp_path, capsys, monkeypatch):
    """Rank 0 parses and refuses; rank 1 learns of it from rank 0's broadcast: both exit 2, one message."""
    sent = []
    statuses = []
    for rank in (0, 1):
        monkeypatch.setattr(exchange, "world", lambda rank=rank: TwoRanks(rank, sent))
        statuses.append(evo.toy.main(["--workers", "3", "--out", str(tmp_path / "t.png")]))
    assert statuses == [2, 2]
    assert capsys.readouterr().err.count("--workers 3 does not divide among 2 ranks") == 1
    assert not (tmp_path / "t.png").exists()
