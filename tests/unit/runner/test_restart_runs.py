"""Failing and hung members in whole runs in one process (tests/support.py:run_in_process): a member whose env
raises restarted from a top member's weights with a fresh draw (both scripts' rules and transports), members
failing past --max-member-failures ending the run with its last checkpoint, a member hung past --step-timeout
restarted. Moved down from the e2e tier, where they ran under ``mpiexec -n 2`` with the fault on rank 1: what
they check is the loop's, the driver's and the records', not MPI's. Here every member is on rank 0, so the
fault (tests/faulty_env.py, tests/hanging_env.py) comes to the first member whose env passes its step.
(A restart's weights crossing ranks: tests/mpi/ranks/test_restarts.py; an exception ending a job of 4 ranks:
tests/e2e/test_resilience.py.)"""

import pytest

import tests.faulty_env
from evo.core.restart import TooManyFailures
from evo.rundir import checkpoint as ckpt
from tests.in_process import logged
from tests.support import (
    PPO_SIX,
    TINY_DEFAULT,
    budget,
    generations_recorded,
    read_lineage,
    read_population,
    run_in_process,
    write_hyperparams,
)

FAULTY = ["--env-id", "tests.faulty_env:FaultyCartPole-v0"]


def flags(tmp_path, run_dir) -> list[str]:
    hyperparams = write_hyperparams(tmp_path, TINY_DEFAULT)
    return ["--hyperparams", str(hyperparams), "--run-dir", str(run_dir), "--seed", "5", "--tb-writer", "False"]


@pytest.mark.parametrize("strategy, transport", [("truncation", "p2p"), ("wta", "collective")])  # both scripts
def test_a_member_whose_env_raises_is_restarted_and_the_run_completes(tmp_path, monkeypatch, strategy, transport):
    """Member 0 fails once in generation 3 (its env's step 151, at 64 steps a generation): logged with its
    traceback, restarted from a top member's weights with a fresh draw, it trains generation 3 again, and
    every (generation, member) is recorded once."""
    monkeypatch.setattr(tests.faulty_env, "_raised", [0])  # the faults this process raised: none yet
    run_dir = tmp_path / "run"
    fault = ["--env-kwargs", "fail_rank:0", "fail_after:150", "fail_times:1"]
    status, log = logged([*FAULTY, *fault, *budget(4, 4, 128), *flags(tmp_path, run_dir)], strategy, transport)
    assert status == 0, log[-4000:]
    assert "member 0 failed in generation 3 while training" in log and "Traceback" in log
    assert "RuntimeError: injected fault on rank 0" in log
    assert generations_recorded(run_dir) == {g: [0, 1, 2, 3] for g in (1, 2, 3, 4)}
    rows = {(int(r["generation"]), int(r["member"])): r for r in read_population(run_dir)}
    assert all(int(row["env_steps"]) == 128 * g for (g, _), row in rows.items())  # its own counter, kept
    lineage = read_lineage(run_dir)
    (restart,) = [entry for entry in lineage if entry.get("event") == "restart"]
    assert (restart["generation"], restart["member"], restart["failures"]) == (3, 0, 1)
    assert restart["error"] == "RuntimeError: injected fault on rank 0"
    # a donor among the best of generation 3's members that kept their weights (a quarter: the best)
    exploits = [e for e in lineage if "recipient" in e and e["generation"] == 3]
    copied = {e["recipient"] for e in exploits if e["donor"] != e["recipient"]}
    kept = {m: float(rows[(3, m)]["score"]) for m in (1, 2, 3) if m not in copied}
    assert restart["donor"] == max(kept, key=lambda m: (kept[m], -m))
    assert restart["donor_score"] == kept[restart["donor"]]
    assert restart["new_hparams"] != restart["old_hparams"]
    assert {name: float(rows[(3, 0)][name]) for name in PPO_SIX} == pytest.approx(restart["new_hparams"])
    said = "member 0 failed (RuntimeError: injected fault on rank 0; failure 1): restarted from member"
    assert f"{said} {restart['donor']}'s weights" in log


def test_members_failing_past_the_limit_end_the_run_with_its_checkpoint(tmp_path):
    """Both members fail in generation 3 (their envs' step 151) and restart with new envs, in which the
    fault comes back in generation 5: a second failure each, past --max-member-failures 1, both named.
    Generation 4's checkpoint stays. (The job a raise ends under mpiexec: tests/e2e/test_resilience.py.)"""
    run_dir = tmp_path / "run"
    fault = ["--env-kwargs", "fail_rank:0", "fail_after:150", "--max-member-failures", "1"]
    with pytest.raises(TooManyFailures) as raised:
        run_in_process([*FAULTY, *fault, *budget(2, 8, 128), *flags(tmp_path, run_dir)])
    for member in (0, 1):
        assert f"member {member} (2 failures, the last: RuntimeError: injected fault on rank 0)" in str(raised.value)
    assert "more than --max-member-failures 1 allows" in str(raised.value)
    found, skipped = ckpt.latest(run_dir)
    assert found is not None and found.generation == 4, skipped
    assert generations_recorded(run_dir) == {g: [0, 1] for g in (1, 2, 3, 4)}
    lineage = read_lineage(run_dir)
    assert [(e["generation"], e["member"]) for e in lineage if e.get("event") == "restart"] == [(3, 0), (3, 1)]


@pytest.mark.parametrize("where", ["training", "evaluation"])
def test_a_member_hung_past_the_step_timeout_is_restarted_and_the_run_completes(tmp_path, monkeypatch, where):
    """Training: the first env to pass its step 100 (member 0's, in generation 2) never returns
    (tests/hanging_env.py). Evaluation: member 0's env hangs at the first step of its evaluation episodes in
    generation 2 (the process's 5th evaluation: 4 members a generation); before, nothing watched them and the
    run hung for ever. After --step-timeout 2 the member fails, is restarted with new envs (which do not hang),
    and the run completes. (A stop honoured while an env hangs, under mpiexec: tests/e2e/test_hung_env.py.)"""
    import tests.hanging_env

    monkeypatch.setattr(tests.hanging_env, "_evaluations", [None, 0])  # the evaluations this process played
    run_dir = tmp_path / "run"
    hang = {"training": ["hang_after:100"], "evaluation": ["hang_evaluation:5"]}[where]
    hanging = ["--env-id", "tests.hanging_env:HangingCartPole-v0", "--step-timeout", "2"]
    hanging += ["--env-kwargs", "hang_rank:0", *hang, f"hang_dir:{tmp_path}"]
    hanging += ["--eval-episodes", "2"] if where == "evaluation" else []
    status, log = logged([*hanging, *budget(4, 3, 128), *flags(tmp_path, run_dir)])
    assert status == 0, log[-4000:]
    doing, what = {"training": ("training", ""), "evaluation": ("scoring", " in its evaluation episodes")}[where]
    assert f"member 0 failed in generation 2 while {doing}" in log
    (restart,) = [e for e in read_lineage(run_dir) if e.get("event") == "restart"]
    assert (restart["member"], restart["generation"]) == (0, 2)
    member = "member 0 (tests.hanging_env:HangingCartPole-v0)"
    assert restart["error"].startswith(f"MemberHung: {member}{what} made no env step")
    assert generations_recorded(run_dir) == {g: [0, 1, 2, 3] for g in (1, 2, 3)}
