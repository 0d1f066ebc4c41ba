"""The run's kept best (evo.runner.best.KeptBest) through real checkpoints on MPI.COMM_SELF: captured when
named, written into the next checkpoint, carried forward unchanged, and restored on resume."""

import logging

import numpy as np
import torch
from mpi4py import MPI

from evo.core.result import MemberResult
from evo.rundir import checkpoint as ckpt
from evo.runner.best import KeptBest


class FakeLearner:
    """A member whose whole state is a small tensor."""

    def __init__(self, member_id: int):
        self.member_id = member_id
        self.weights = torch.zeros(4)
        self.env_steps = 0

    def member_state(self, replay: bool = True) -> dict:
        assert not replay  # the kept best leaves replay buffers out
        return {"algo": "fake", "member": self.member_id, "state": self.weights.clone()}


def files(members: dict, generation: int) -> dict[int, bytes]:
    return {
        m: ckpt.dump_payload({"format": ckpt.MEMBER_FORMAT, "generation": generation, **member.member_state(False)})
        for m, member in members.items()
    }


def result(member: int, score: float, env_steps: int = 100) -> MemberResult:
    return MemberResult(member, 0, env_steps, score)


def test_the_best_is_written_as_captured_carried_forward_and_restored_on_resume(tmp_path):
    target = ckpt.Target(tmp_path, "run-a", "Fake-v0", 2, 1, keep=2)
    members = {m: FakeLearner(m) for m in (0, 1)}
    kept = KeptBest("run-a")
    members[1].weights += 3.0
    named = kept.beats(1, [result(0, 1.0), result(1, 2.0, 256)])
    assert named.member == 1
    kept.keep(1, named, members[1])
    members[1].weights += 100.0  # trains on (or copies a donor) before the checkpoint is written
    ckpt.write_checkpoint(MPI.COMM_SELF, target, 1, files(members, 1), {}, best=kept)

    first = ckpt.latest(tmp_path, "run-a")[0]
    record = {"member": 1, "generation": 1, "score": 2.0, "env_steps": 256}
    assert {key: first.best[key] for key in ckpt.BEST_KEYS} == record
    payload = ckpt.load_payload(first.best_path())
    assert payload["best"] == record and payload["run_id"] == "run-a" and payload["generation"] == 1
    assert torch.equal(payload["state"], torch.full((4,), 3.0))  # as named, not as at the checkpoint
    assert not torch.equal(payload["state"], ckpt.load_payload(first.member_path(1))["state"])

    assert kept.beats(2, [result(0, 2.0), result(1, 1.0)]) is None  # equal to the best: not better
    for generation in (2, 3):  # gen_000001 is pruned after the third
        ckpt.write_checkpoint(MPI.COMM_SELF, target, generation, files(members, generation), {}, best=kept)
    third = ckpt.latest(tmp_path, "run-a")[0]
    assert [p.name for p in ckpt.candidates(tmp_path)] == ["gen_000003", "gen_000002"]
    assert third.best == first.best  # the same bytes, carried over two checkpoints and a prune
    assert ckpt.load_payload(third.best_path())["best"] == record

    resumed = KeptBest.of_checkpoint("run-a", third)
    assert resumed.score == 2.0 and resumed.beats(4, [result(0, 2.0), result(1, 1.5)]) is None
    ckpt.write_checkpoint(MPI.COMM_SELF, target, 4, files(members, 4), {}, best=resumed)
    assert ckpt.latest(tmp_path, "run-a")[0].best == third.best
    members[0].weights += 7.0
    better = resumed.beats(5, [result(0, 9.0, 512), result(1, 1.5)])
    resumed.keep(5, better, members[0])
    ckpt.write_checkpoint(MPI.COMM_SELF, target, 5, files(members, 5), {}, best=resumed)
    fifth = ckpt.latest(tmp_path, "run-a")[0]
    assert (fifth.best["member"], fifth.best["generation"], fifth.best["score"]) == (0, 5, 9.0)
    assert np.array_equal(ckpt.load_payload(fifth.best_path())["state"].numpy(), np.full(4, 7.0))


def test_a_checkpoint_before_any_score_and_an_old_checkpoint_have_no_best(tmp_path):
    target = ckpt.Target(tmp_path, "run-a", "Fake-v0", 1, 1)
    members = {0: FakeLearner(0)}
    kept = KeptBest("run-a")
    ckpt.write_checkpoint(MPI.COMM_SELF, target, 0, files(members, 0), {}, best=kept)
    initial = ckpt.latest(tmp_path, "run-a")[0]
    assert "best" not in initial.manifest and initial.best is None and initial.best_path() is None
    assert KeptBest.of_checkpoint("run-a", initial).score is None


def test_a_kept_best_resting_on_a_tie_is_named_by_the_draw_and_said(caplog):
    kept = KeptBest("run-a")
    population = [result(0, 2.0), result(1, 4.0), result(2, 4.0)]
    with caplog.at_level(logging.INFO, logger="evo"):
        named = kept.beats(3, population, {0: 5, 1: 9, 2: 1})  # member 2 first in the draw
    assert named.member == 2
    assert "member 2 is the best so far (4), tied with member(s) 1: the tie was broken by the run's draw" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="evo"):
        assert kept.beats(3, [result(0, 2.0), result(1, 4.0)], {0: 5, 1: 9}).member == 1
    assert "tied" not in caplog.text
