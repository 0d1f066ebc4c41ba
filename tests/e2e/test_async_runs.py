"""Asynchronous PBT (``--asynchronous``) across the process boundary: real PPO members on 2 ranks under
mpiexec, a rank held while the other trains every other interval, stopped by SIGTERM to that rank or
killed by SIGKILL, each member's last ready point on disk, and a resume in a new job recording every
(member, interval) once; a member failing past --max-member-failures, or any failure on rank 0 without
restarts, ending the whole job. Driven by events (the gate's file, the rows written), never by sleeps.
An asynchronous run's records, explorers, tools and a restarted member in one process:
tests/unit/runner/test_async_runs.py."""

import os
import signal

import pytest
import torch

from evo.rundir.checkpoint import load_payload
from evo.rundir.ready import best_dir, latest_ready, member_dir, read_best
from tests.e2e.runs import common, running, wait_for
from tests.gated_env import gate_flags, held
from tests.support import (
    TINY_DEFAULT,
    assert_each_member_has,
    budget,
    mpiexec,
    read_lineage,
    read_population,
    recorded_intervals,
    write_hyperparams,
)

STEPS = 128  # per interval: 2 envs x 64 steps, a rollout; each env's interval k is its steps 64(k-1)+1 .. 64k


def _run_id(run_dir) -> str:
    import yaml

    return yaml.safe_load((run_dir / "config.yaml").read_text())["run_id"]


def assert_best_kept(run_dir) -> dict:
    """checkpoints/best/best.json names the ready point with the highest score of population.csv, its
    file (the only one left) holds that member as scored: the weights of its checkpoint at that
    interval (those that earned the score, ``ready_state``, if it copied a donor there)."""
    entry = read_best(run_dir, _run_id(run_dir))
    rows = recorded_intervals(run_dir)
    top = max(float(row["score"]) for row in rows.values() if row["score"] != "nan")
    member, interval = entry["member"], entry["generation"]
    assert entry["score"] == top == float(rows[(member, interval)]["score"])
    assert entry["env_steps"] == int(rows[(member, interval)]["env_steps"])
    assert sorted(p.name for p in best_dir(run_dir).iterdir()) == sorted(["best.json", entry["file"]])
    best = load_payload(best_dir(run_dir) / entry["file"])
    assert best["best"] == {key: entry[key] for key in ("member", "generation", "score", "env_steps")}
    at_interval = member_dir(run_dir, member) / f"interval_{interval:06d}.pt"
    if at_interval.exists():
        saved = load_payload(at_interval)
        weights = saved["ready_state"]["weights"] if "ready_state" in saved else saved["state"]
        assert torch.equal(best["state"], weights)
    return entry


@pytest.mark.parametrize("how", ["SIGTERM to rank 1", "SIGKILL to rank 1"])
def test_a_stop_leaves_each_members_last_ready_point_and_a_resume_records_the_rest_once(tmp_path, how):
    """Rank 1 is held inside the first interval 2 it trains (a member's env step 94) while rank 0
    trains every other member interval, those of rank 1's members too (they move): a rank that is
    free trains more. A stop signal to rank 1 (rank 0 learns of it from the coordinator) stops both
    ranks with exit 75, every member's rows 1..k and its checkpoint at k; SIGKILL ends the job through
    MPI with the same on disk. --resume trains the rest, and every (member, interval) is recorded once.
    (A stop signal to mpiexec, which forwards it to every rank: tests/e2e/test_hung_env.py in both modes,
    tests/e2e/test_stopping_runs.py and test_offpolicy_resume.py for synchronous runs,
    tests/slurm/test_cluster.py's pre-empted asynchronous run.)"""
    run_dir, gate = tmp_path / "run", tmp_path / "gate"
    gate.mkdir()
    args = [
        "pbt_rl_truct.py",
        "--asynchronous",
        *budget(4, 3, STEPS),
        *gate_flags("CartPole-v1", 64 + 30, gate, [1]),
        *common(run_dir, write_hyperparams(tmp_path, TINY_DEFAULT)),
    ]
    with running(2, args) as job:
        wait_for(lambda: 1 in held(gate, [1]), 240, "rank 1 at its gate")
        # everything but the held member's intervals 2 and 3: rank 0 trains it all while rank 1 is held
        wait_for(lambda: len(read_population(run_dir)) == 10, 240, "rank 0 to train every free interval")
        signum = signal.SIGKILL if "SIGKILL" in how else signal.SIGTERM
        os.kill(held(gate, [1])[1], signum)
        stdout, stderr = job.communicate(timeout=120)
    if signum == signal.SIGKILL:
        assert job.returncode != 0
    else:
        assert job.returncode == 75, stderr[-3000:]
        assert f"stopped by {signum.name}" in stdout + stderr and "Traceback" not in stderr
    rows = recorded_intervals(run_dir)
    done = {m: max(i for member, i in rows if member == m) for m in range(4)}
    assert sorted(done.values()) == [1, 3, 3, 3]
    assert_each_member_has(rows, done, STEPS)
    by_rank = [sum(1 for row in rows.values() if row["rank"] == str(r)) for r in (0, 1)]
    # rank 1: its own two members' first intervals, or (if rank 0 took one first) one of them
    assert by_rank in ([8, 2], [9, 1])
    assert any(row["rank"] == "0" for (member, _), row in rows.items() if member in (2, 3))  # moved to rank 0
    found, skipped = latest_ready(run_dir, _run_id(run_dir), 4)
    assert not skipped and found.intervals == done
    before = assert_best_kept(run_dir)
    assert found.best == before

    (gate / "released-1").write_text(how)  # a killed rank never said its gate opened: the next part passes it
    resumed = mpiexec(2, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout + resumed.stderr
    rows = recorded_intervals(run_dir)
    assert_each_member_has(rows, {m: 3 for m in range(4)}, STEPS)
    ready_points = [(e["recipient"], e["generation"]) for e in read_lineage(run_dir) if "recipient" in e]
    assert len(ready_points) == len(set(ready_points))  # no exploit recorded twice
    after = assert_best_kept(run_dir)  # the resumed run went on from the best before it
    if after["score"] <= before["score"]:
        assert after == before


FAULTY = ["--env-id", "tests.faulty_env:FaultyCartPole-v0"]


def test_a_member_failing_past_the_limit_ends_the_job_and_the_checkpoints_load(tmp_path):
    run_dir = tmp_path / "run"
    args = [*FAULTY, "--env-kwargs", "fail_rank:1", "fail_after:50", "--asynchronous", "--max-member-failures", "1"]
    result = mpiexec(
        2, ["pbt_rl_truct.py", *args, *budget(4, 2, STEPS), *common(run_dir, write_hyperparams(tmp_path, TINY_DEFAULT))]
    )
    assert result.returncode != 0
    log = result.stdout + result.stderr
    assert "member 2 (2 failures, the last: RuntimeError: injected fault on rank 1)" in log
    assert "more than --max-member-failures 1 allows" in log and "ending the job" in log
    found, skipped = latest_ready(run_dir, _run_id(run_dir), 4)
    assert not skipped and 2 not in found.intervals


def test_without_restarts_a_failure_on_rank_0_ends_the_job_at_once(tmp_path):
    """--max-member-failures 0: rank 0's member raises (rank 0 also runs the coordinator thread,
    which would wait for ranks that never ask again): its traceback, and the job ends."""
    run_dir = tmp_path / "run"
    args = [*FAULTY, "--env-kwargs", "fail_rank:0", "fail_after:50", "--asynchronous", "--max-member-failures", "0"]
    result = mpiexec(
        2,
        ["pbt_rl_truct.py", *args, *budget(4, 2, STEPS), *common(run_dir, write_hyperparams(tmp_path, TINY_DEFAULT))],
        timeout=120,
    )
    assert result.returncode != 0
    assert "RuntimeError: injected fault on rank 0" in result.stderr
    assert "Traceback" in result.stderr and "unrecoverable error on rank 0" in result.stderr
