"""Asynchronous PBT (``--asynchronous``) as a user runs it: real PPO members on 2 ranks under
mpiexec, their records, checkpoints, a stop and a resume, a failing member. Driven by events (the
gate's file, the rows written), never by sleeps."""

import os
import signal

import pytest
import torch

from evo.core.schedule import load_schedule
from evo.rundir.checkpoint import load_payload
from evo.rundir.ready import best_dir, latest_ready, member_dir, read_best
from tests.e2e.runs import common, plots, python, running, scalar_tags, tunable, wait_for
from tests.gated_env import gate_flags, held
from tests.support import PPO_SIX, TINY_DEFAULT, budget, mpiexec, read_lineage, read_population, write_hyperparams

STEPS = 256  # per interval: 2 envs x 64 steps x 2 rollouts; each env's interval k is its steps 128(k-1)+1 .. 128k


def recorded(run_dir) -> dict[tuple[int, int], dict]:
    """{(member, interval): row}, failing on a (member, interval) recorded twice."""
    found = {}
    for row in read_population(run_dir):
        key = (int(row["member"]), int(row["generation"]))
        assert key not in found, f"member {key[0]} interval {key[1]} recorded twice"
        found[key] = row
    return found


def assert_each_member_has(rows, intervals: dict[int, int]) -> None:
    """Member m's rows are its intervals 1..intervals[m], each once, its env steps its own."""
    assert sorted(rows) == sorted((m, i) for m, n in intervals.items() for i in range(1, n + 1))
    assert all(int(row["env_steps"]) == STEPS * interval for (_, interval), row in rows.items())


@pytest.mark.parametrize(
    "script, explore", [("pbt_rl_truct.py", "perturb"), ("pbt_rl_wta.py", "perturb"), ("pbt_rl_truct.py", "pb2")]
)
def test_an_asynchronous_run_records_every_member_interval_once_and_copies_named_snapshots(tmp_path, script, explore):
    run_dir = tmp_path / "run"
    # a quarter of 4 is 1 recipient; half makes a copy at some ready point all but certain
    flags = ["--asynchronous", "--explore", explore, "--truncation-fraction", "0.5", *budget(4, 3, STEPS)]
    result = mpiexec(2, [script, *flags, *common(run_dir, write_hyperparams(tmp_path, TINY_DEFAULT))])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "asynchronous" in result.stdout + result.stderr and "done: best member" in result.stdout + result.stderr
    rows = recorded(run_dir)
    assert_each_member_has(rows, {m: 3 for m in range(4)})
    for member in range(4):  # a member's ready points in order in time, whichever rank trained them
        walls = [float(rows[(member, i)]["wall_s"]) for i in (1, 2, 3)]
        assert walls == sorted(walls)
    copies = [e for e in read_lineage(run_dir) if "recipient" in e and e["donor"] != e["recipient"]]
    assert copies, "the bottom member copies at some ready point"
    for copy in copies:
        row = rows[(copy["recipient"], copy["generation"])]
        assert (int(row["donor"]), int(row["donor_interval"])) == (copy["donor"], copy["donor_interval"])
        assert copy["donor_score"] > copy["recipient_score"]  # a tie explores without a copy
        donor_row = rows[(copy["donor"], copy["donor_interval"])]  # what was copied: the donor's ready point
        assert int(donor_row["env_steps"]) == copy["donor_env_steps"]
        if script == "pbt_rl_wta.py":
            assert copy["recipient"] != copy["donor"]
    found, skipped = latest_ready(run_dir, _run_id(run_dir), 4)
    assert not skipped and found.intervals == {m: 3 for m in range(4)}
    if explore == "pb2":  # one observation per ready point, kept for --resume, and PB2's picks
        assert len(found.explorer["state"]["observations"]) == 8  # a change in score: intervals 2 and 3
        # PB2 made every explore: its GP's picks ("pb2"), or its warm-up before 2 observations
        assert all("pb2" in change for copy in copies for change in copy["changes"])
        resumed = mpiexec(2, [script, "--run-dir", str(run_dir), "--resume", "--total-generations", "4"])
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert_each_member_has(recorded(run_dir), {m: 4 for m in range(4)})
        again, _ = latest_ready(run_dir, _run_id(run_dir), 4)
        assert len(again.explorer["state"]["observations"]) == 12  # the history went on, baselines too
    elif script == "pbt_rl_truct.py":  # TensorBoard per member, plots and replay read an asynchronous run
        for member in range(4):  # whichever ranks trained it, one pbt/score per interval (a member that
            # moved has an event file per rank, read in the order of their names)
            accumulator, tags = scalar_tags(run_dir / "tb" / f"member_{member}")
            steps = sorted(event.step for event in accumulator.Scalars("pbt/score"))
            assert steps == [STEPS * i for i in (1, 2, 3)]
        plots(run_dir, tmp_path / "plots")
        replayed = python("-m", "evo.tools.replay", str(run_dir), "--out", str(tmp_path / "schedule.yml"))
        assert replayed.returncode == 0, replayed.stderr
        entries, env_id, algo = load_schedule(tmp_path / "schedule.yml", tunable("ppo"), PPO_SIX)
        assert (env_id, algo, entries[0][0]) == ("CartPole-v1", "ppo", 0)  # what --schedule trains on


def _run_id(run_dir) -> str:
    import yaml

    return yaml.safe_load((run_dir / "config.yaml").read_text())["run_id"]


def assert_best_kept(run_dir) -> dict:
    """checkpoints/best/best.json names the ready point with the highest score of population.csv, its
    file (the only one left) holds that member as scored: the weights of its checkpoint at that
    interval (those that earned the score, ``ready_state``, if it copied a donor there)."""
    entry = read_best(run_dir, _run_id(run_dir))
    rows = recorded(run_dir)
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


@pytest.mark.parametrize("how", ["SIGTERM to rank 1", "SIGUSR1 to mpiexec", "SIGKILL to rank 1"])
def test_a_stop_leaves_each_members_last_ready_point_and_a_resume_records_the_rest_once(tmp_path, how):
    """Rank 1 is held inside the first interval 2 it trains (a member's env step 158) while rank 0
    trains every other member interval, those of rank 1's members too (they move): a rank that is
    free trains more. A stop signal to rank 1, or to mpiexec (which forwards it to both), stops both
    ranks with exit 75, every member's rows 1..k and its checkpoint at k; SIGKILL ends the job through
    MPI with the same on disk. --resume trains the rest, and every (member, interval) is recorded once."""
    run_dir, gate = tmp_path / "run", tmp_path / "gate"
    gate.mkdir()
    args = [
        "pbt_rl_truct.py",
        "--asynchronous",
        *budget(4, 3, STEPS),
        *gate_flags("CartPole-v1", 128 + 30, gate, [1]),
        *common(run_dir, write_hyperparams(tmp_path, TINY_DEFAULT)),
    ]
    with running(2, args) as job:
        wait_for(lambda: 1 in held(gate, [1]), 240, "rank 1 at its gate")
        # everything but the held member's intervals 2 and 3: rank 0 trains it all while rank 1 is held
        wait_for(lambda: len(read_population(run_dir)) == 10, 240, "rank 0 to train every free interval")
        signum = signal.SIGUSR1 if "SIGUSR1" in how else signal.SIGKILL if "SIGKILL" in how else signal.SIGTERM
        os.kill(job.pid if "mpiexec" in how else held(gate, [1])[1], signum)
        stdout, stderr = job.communicate(timeout=120)
    if signum == signal.SIGKILL:
        assert job.returncode != 0
    else:
        assert job.returncode == 75, stderr[-3000:]
        assert f"stopped by {signum.name}" in stdout + stderr and "Traceback" not in stderr
    rows = recorded(run_dir)
    done = {m: max(i for member, i in rows if member == m) for m in range(4)}
    assert sorted(done.values()) == [1, 3, 3, 3]
    assert_each_member_has(rows, done)
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
    rows = recorded(run_dir)
    assert_each_member_has(rows, {m: 3 for m in range(4)})
    ready_points = [(e["recipient"], e["generation"]) for e in read_lineage(run_dir) if "recipient" in e]
    assert len(ready_points) == len(set(ready_points))  # no exploit recorded twice
    after = assert_best_kept(run_dir)  # the resumed run went on from the best before it
    if after["score"] <= before["score"]:
        assert after == before


FAULTY = ["--env-id", "tests.faulty_env:FaultyCartPole-v0"]


def test_a_member_whose_env_raises_is_restarted_and_trains_its_interval_once_more(tmp_path):
    """Member 2 (rank 1's first) fails in its first interval (its env's step 101, on rank 1, once):
    restarted with a fresh draw, it trains interval 1 again, and every (member, interval) is
    recorded once."""
    run_dir = tmp_path / "run"
    args = [*FAULTY, "--env-kwargs", "fail_rank:1", "fail_after:100", "fail_times:1", "--asynchronous"]
    result = mpiexec(
        2, ["pbt_rl_truct.py", *args, *budget(4, 2, STEPS), *common(run_dir, write_hyperparams(tmp_path, TINY_DEFAULT))]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    log = result.stdout + result.stderr
    assert "member 2 failed in interval 1" in log and "Traceback" in log
    rows = recorded(run_dir)
    assert_each_member_has(rows, {m: 2 for m in range(4)})
    (restart,) = [e for e in read_lineage(run_dir) if e.get("event") == "restart"]
    assert (restart["generation"], restart["member"], restart["failures"]) == (1, 2, 1)
    assert restart["error"] == "RuntimeError: injected fault on rank 1"
    if restart["donor"] is not None:  # a member had reached its ready point: its snapshot was copied
        donor_row = rows[(restart["donor"], restart["donor_interval"])]
        assert int(donor_row["env_steps"]) == restart["donor_env_steps"]
    assert restart["new_hparams"] != restart["old_hparams"]
    assert "member 2 failed (RuntimeError: injected fault on rank 1; failure 1): restarted from" in log


def test_a_member_failing_past_the_limit_ends_the_job_and_the_checkpoints_load(tmp_path):
    run_dir = tmp_path / "run"
    args = [*FAULTY, "--env-kwargs", "fail_rank:1", "fail_after:100", "--asynchronous", "--max-member-failures", "1"]
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
    args = [*FAULTY, "--env-kwargs", "fail_rank:0", "fail_after:100", "--asynchronous", "--max-member-failures", "0"]
    result = mpiexec(
        2,
        ["pbt_rl_truct.py", *args, *budget(4, 2, STEPS), *common(run_dir, write_hyperparams(tmp_path, TINY_DEFAULT))],
        timeout=120,
    )
    assert result.returncode != 0
    assert "RuntimeError: injected fault on rank 0" in result.stderr
    assert "Traceback" in result.stderr and "unrecoverable error on rank 0" in result.stderr
