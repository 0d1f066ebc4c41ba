"""``--tracker mlflow`` under mpiexec: an asynchronous run of 4 members on 2 ranks, each rank's thread writing its
members' tracked runs into one MLflow file store (found or made under the run directory's lock, so that the
ranks starting together make one experiment and one run per member), stopped by SIGUSR1 on rank 0
(tests/hanging_env.py ``then:stop``) and resumed in a new job: every member's intervals are in MLflow once each,
queried through MLflow's own client, with the rows population.csv holds, written from both ranks. The same runs
with W&B, synchronous, and a kill, in process: tests/unit/runner/test_tracked_runs.py."""

import os

from tests.support import TINY_DEFAULT, budget, mpiexec, need_mlflow, read_population, write_hyperparams
from tests.tracked import assert_tracked_once, tracked_rows

MEMBERS, INTERVALS = 4, 3


def test_members_on_two_ranks_are_tracked_once_each_in_one_mlflow_store_through_a_stop(tmp_path, monkeypatch):
    need_mlflow()
    for key in [key for key in os.environ if key.startswith(("WANDB_", "MLFLOW_"))]:
        monkeypatch.delenv(key)  # MLflow's default store, which evo opens itself (MLFLOW_ALLOW_FILE_STORE unset)
    hyperparams = write_hyperparams(tmp_path, TINY_DEFAULT)
    run_dir = tmp_path / "run"
    stopping = ["hang_rank:0", "hang_evaluation:3", "then:stop", f"hang_dir:{tmp_path}"]
    args = [*budget(MEMBERS, INTERVALS, 128), "--asynchronous", "--tracker", "mlflow", "--seed", "5"]
    args += ["--hyperparams", str(hyperparams), "--tb-writer", "False", "--eval-episodes", "2", "--select-on", "test"]
    args += ["--env-id", "tests.hanging_env:HangingCartPole-v0", "--env-kwargs", *stopping, "--run-dir", str(run_dir)]
    stopped = mpiexec(2, ["pbt_rl_truct.py", *args], timeout=240)
    assert stopped.returncode == 75, stopped.stderr[-3000:]
    assert len(read_population(run_dir)) < MEMBERS * INTERVALS
    resumed = mpiexec(2, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume"], timeout=240)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "tracker mlflow failed" not in resumed.stderr + stopped.stderr
    population = read_population(run_dir)
    assert len(population) == MEMBERS * INTERVALS
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # for the test's own client
    assert_tracked_once(run_dir, "mlflow", population)
    rows, _, _ = tracked_rows(run_dir, "mlflow", MEMBERS)
    assert {row["rank"] for member in rows.values() for row in member} == {0, 1}
