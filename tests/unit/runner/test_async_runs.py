"""Asynchronous PBT (``--asynchronous``) in whole PPO runs in one process (tests/support.py:run_in_process,
the coordinator and service threads beside the worker): the rules of both point-to-point scripts and PB2
(every (member, interval) once, each copy naming the donor's ready point it took, PB2's history through
--resume), TensorBoard, plots and a replayed schedule of an asynchronous run; a member whose env raises,
restarted and recorded. Moved down from the e2e tier: what they check is the coordinator's, the driver's and
the records', not MPI's (members moving between ranks, a stop on one rank: tests/mpi/ranks/test_asynchronous.py
and test_migration.py; a run stopped by signals and killed under mpiexec: tests/e2e/test_async_runs.py)."""

import pytest
import yaml

import tests.faulty_env
from evo.core.schedule import load_schedule
from evo.rundir.ready import latest_ready
from tests.e2e.runs import tunable
from tests.in_process import logged, plots, scalar_tags
from tests.support import (
    PPO_SIX,
    TINY_DEFAULT,
    assert_each_member_has,
    budget,
    read_lineage,
    recorded_intervals,
    write_hyperparams,
)

STEPS = 256  # per interval: 2 envs x 64 steps x 2 rollouts
SCRIPTS = {"pbt_rl_truct.py": ("truncation", "p2p"), "pbt_rl_wta.py": ("wta", "collective")}


def flags(tmp_path, run_dir) -> list[str]:
    tiny = write_hyperparams(tmp_path, TINY_DEFAULT)
    return ["--hyperparams", str(tiny), "--run-dir", str(run_dir), "--seed", "5"]


def run_id(run_dir) -> str:
    return yaml.safe_load((run_dir / "config.yaml").read_text())["run_id"]


@pytest.mark.parametrize(
    "script, explore", [("pbt_rl_truct.py", "perturb"), ("pbt_rl_wta.py", "perturb"), ("pbt_rl_truct.py", "pb2")]
)
def test_an_asynchronous_run_records_every_member_interval_once_and_copies_named_snapshots(tmp_path, script, explore):
    run_dir = tmp_path / "run"
    # a quarter of 4 is 1 recipient; half makes a copy at some ready point all but certain
    argv = ["--asynchronous", "--explore", explore, "--truncation-fraction", "0.5", *budget(4, 3, STEPS)]
    tensorboard = ["--tb-writer", "True" if (script, explore) == ("pbt_rl_truct.py", "perturb") else "False"]
    status, log = logged([*argv, *tensorboard, *flags(tmp_path, run_dir)], *SCRIPTS[script])
    assert status == 0, log[-3000:]
    assert "asynchronous" in log and "done: best member" in log
    rows = recorded_intervals(run_dir)
    assert_each_member_has(rows, {m: 3 for m in range(4)}, STEPS)
    for member in range(4):  # a member's ready points in order in time
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
    found, skipped = latest_ready(run_dir, run_id(run_dir), 4)
    assert not skipped and found.intervals == {m: 3 for m in range(4)}
    if explore == "pb2":  # one observation per ready point, kept for --resume, and PB2's picks
        assert len(found.explorer["state"]["observations"]) == 8  # a change in score: intervals 2 and 3
        # PB2 made every explore: its GP's picks ("pb2"), or its warm-up before 2 observations
        assert all("pb2" in change for copy in copies for change in copy["changes"])
        status, log = logged(["--run-dir", str(run_dir), "--resume", "--total-generations", "4"], *SCRIPTS[script])
        assert status == 0, log[-3000:]
        assert_each_member_has(recorded_intervals(run_dir), {m: 4 for m in range(4)}, STEPS)
        again, _ = latest_ready(run_dir, run_id(run_dir), 4)
        assert len(again.explorer["state"]["observations"]) == 12  # the history went on, baselines too
    elif script == "pbt_rl_truct.py":  # TensorBoard per member, plots and replay read an asynchronous run
        for member in range(4):  # one pbt/score per interval
            accumulator, tags = scalar_tags(run_dir / "tb" / f"member_{member}")
            steps = sorted(event.step for event in accumulator.Scalars("pbt/score"))
            assert steps == [STEPS * i for i in (1, 2, 3)]
        plots(run_dir, tmp_path / "plots")
        from evo.tools import replay as replay_tool

        assert replay_tool.main([str(run_dir), "--out", str(tmp_path / "schedule.yml")]) == 0
        entries, env_id, algo = load_schedule(tmp_path / "schedule.yml", tunable("ppo"), PPO_SIX)
        assert (env_id, algo, entries[0][0]) == ("CartPole-v1", "ppo", 0)  # what --schedule trains on


def test_a_member_whose_env_raises_is_restarted_and_trains_its_interval_once_more(tmp_path, monkeypatch):
    """Member 0 (the first the coordinator gives out) fails in its first interval (its env's step 101,
    once): restarted with a fresh draw, it trains interval 1 again, and every (member, interval) is
    recorded once."""
    monkeypatch.setattr(tests.faulty_env, "_raised", [0])  # the faults this process raised: none yet
    run_dir = tmp_path / "run"
    argv = ["--env-id", "tests.faulty_env:FaultyCartPole-v0", "--env-kwargs", "fail_rank:0", "fail_after:100"]
    argv += ["fail_times:1", "--asynchronous", *budget(4, 2, STEPS), "--tb-writer", "False"]
    status, log = logged([*argv, *flags(tmp_path, run_dir)])
    assert status == 0, log[-3000:]
    (restart,) = [e for e in read_lineage(run_dir) if e.get("event") == "restart"]
    failed = restart["member"]
    assert f"member {failed} failed in interval 1" in log and "Traceback" in log
    rows = recorded_intervals(run_dir)
    assert_each_member_has(rows, {m: 2 for m in range(4)}, STEPS)
    assert (restart["generation"], restart["failures"]) == (1, 1)
    assert restart["error"] == "RuntimeError: injected fault on rank 0"
    if restart["donor"] is not None:  # a member had reached its ready point: its snapshot was copied
        donor_row = rows[(restart["donor"], restart["donor_interval"])]
        assert int(donor_row["env_steps"]) == restart["donor_env_steps"]
    assert restart["new_hparams"] != restart["old_hparams"]
    assert f"member {failed} failed (RuntimeError: injected fault on rank 0; failure 1): restarted from" in log
