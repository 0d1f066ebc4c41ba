"""Whole runs with ``--tracker wandb`` and ``--tracker mlflow`` in this process (tests/support.py:run_in_process),
offline as evo makes them by default, each stopped by a real signal and resumed, then resumed once more as after
a kill between a generation's tracked row and its checkpoint: every member's generations are in the tracker's
own records once each (W&B's offline run files read back, the MLflow store queried through MLflow's client),
with the scores, hyperparameters and donors population.csv holds, the lineage table is lineage.jsonl's and the
exported agent is the population's artifact. A tracker whose folder cannot be written is a warning and the run
completes; a run without ``--tracker`` imports neither package. Under mpiexec, with a writer on each rank:
tests/e2e/test_tracked_runs.py."""

import logging
import shutil
import signal
import sys
from pathlib import Path

import pytest

from evo.runner.stopping import EXIT_STOPPED, STOP_SIGNALS
from tests.support import (
    TINY_DEFAULT,
    budget,
    need_mlflow,
    need_wandb,
    read_population,
    run_in_process,
    tracked_in_process,
    write_hyperparams,
)
from tests.tracked import assert_tracked_once

MEMBERS, GENERATIONS = 2, 3


@pytest.fixture
def tracked_env(tmp_path, monkeypatch):
    tracked_in_process(tmp_path, monkeypatch)


def run_args(tmp_path: Path, tracker: str, mode: list[str]) -> list[str]:
    hyperparams = write_hyperparams(tmp_path, TINY_DEFAULT)
    args = [*budget(MEMBERS, GENERATIONS, 128), "--eval-episodes", "2", "--select-on", "test", "--seed", "5"]
    return [*args, "--tb-writer", "False", "--hyperparams", str(hyperparams), "--tracker", tracker, *mode]


def stopped_then_resumed(tmp_path: Path, args: list[str], monkeypatch) -> Path:
    """The run stopped by SIGUSR1 at the first step of this process's 3rd evaluation episodes (tests/hanging_env.py
    ``then:stop``; with 2 members, generation 2's, or an interval of it), then resumed to its end."""
    import tests.hanging_env as hanging_env

    monkeypatch.setattr(hanging_env, "_evaluations", [None, 0])
    monkeypatch.setattr(hanging_env, "stopping", [])
    run_dir = tmp_path / "run"
    stopping = ["--env-id", "tests.hanging_env:HangingCartPole-v0", "--env-kwargs", "hang_rank:0",
                "hang_evaluation:3", "then:stop", f"hang_dir:{tmp_path}"]  # fmt: skip
    handlers = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    try:
        assert run_in_process([*args, *stopping, "--run-dir", str(run_dir)]) == EXIT_STOPPED
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    assert len(read_population(run_dir)) < MEMBERS * GENERATIONS
    assert run_in_process(["--run-dir", str(run_dir), "--resume"]) == 0
    return run_dir


def killed_after_its_last_rows(run_dir: Path, asynchronous: bool) -> None:
    """The run as a kill would leave it after the tracker took generation 3's rows and before their checkpoint:
    the last checkpoint gone (asynchronous: member 0's last ready point), so that --resume trains it again."""
    if asynchronous:
        for path in (run_dir / "checkpoints" / "members" / "member_0").glob(f"interval_{GENERATIONS:06d}.*"):
            path.unlink()
    else:
        shutil.rmtree(run_dir / "checkpoints" / f"gen_{GENERATIONS:06d}")


@pytest.mark.parametrize(
    ("tracker", "mode"),
    [("wandb", []), ("mlflow", ["--asynchronous"]), ("wandb", ["--asynchronous"]), ("mlflow", [])],
    ids=["wandb-synchronous", "mlflow-asynchronous", "wandb-asynchronous", "mlflow-synchronous"],
)
def test_every_member_s_generations_are_tracked_once_through_a_stop_and_a_kill(
    tmp_path, monkeypatch, tracked_env, caplog, tracker, mode
):
    {"wandb": need_wandb, "mlflow": need_mlflow}[tracker]()
    run_dir = stopped_then_resumed(tmp_path, run_args(tmp_path, tracker, mode), monkeypatch)
    tracked = read_population(run_dir)
    assert_tracked_once(run_dir, tracker, tracked)
    killed_after_its_last_rows(run_dir, bool(mode))
    with caplog.at_level(logging.WARNING, logger="evo"):
        assert run_in_process(["--run-dir", str(run_dir), "--resume"]) == 0
    assert len(read_population(run_dir)) == MEMBERS * GENERATIONS
    # the tracker keeps the rows it took first (an asynchronous run's interval trained again may score otherwise)
    assert_tracked_once(run_dir, tracker, tracked)
    said = [r.getMessage() for r in caplog.records if "not logged twice" in r.getMessage()]
    assert len(said) == (1 if mode else MEMBERS), said  # once per member that trained a generation again


@pytest.mark.parametrize("tracker", ["wandb", "mlflow"])
def test_a_tracker_folder_that_cannot_be_written_is_a_warning_and_the_run_completes(
    tmp_path, monkeypatch, tracked_env, caplog, tracker
):
    """The tracker's folder (``WANDB_DIR``, ``MLFLOW_TRACKING_URI``) is inside a file (root, who ignores
    permission bits, cannot write there either): the tracker cannot start, which is one warning, and every
    generation is recorded."""
    {"wandb": need_wandb, "mlflow": need_mlflow}[tracker]()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    if tracker == "wandb":
        monkeypatch.setenv("WANDB_DIR", str(blocker / "wandb"))
    else:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", (blocker / "mlruns").as_uri())
    run_dir = tmp_path / "run"
    with caplog.at_level(logging.WARNING, logger="evo"):
        assert (
            run_in_process([*run_args(tmp_path, tracker, []), "--total-generations", "2", "--run-dir", str(run_dir)])
            == 0
        )
    assert len(read_population(run_dir)) == MEMBERS * 2
    (said,) = [r.getMessage() for r in caplog.records if r.name == "evo"]
    assert said.startswith(f"tracker {tracker} cannot start (") and "the run goes on" in said


def test_a_run_without_a_tracker_imports_neither_package(tmp_path, monkeypatch):
    """Any import of wandb or mlflow during the run goes through a finder that notes it (their modules are
    taken out of sys.modules for the test, so that an import already made would be made again)."""
    for name in [name for name in sys.modules if name.split(".")[0] in ("wandb", "mlflow")]:
        monkeypatch.delitem(sys.modules, name)
    imported = []

    class Noting:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("wandb", "mlflow"):
                imported.append(name)
            return None

    monkeypatch.setattr(sys, "meta_path", [Noting(), *sys.meta_path])
    hyperparams = write_hyperparams(tmp_path, TINY_DEFAULT)
    args = [*budget(2, 1, 64), "--tb-writer", "False", "--hyperparams", str(hyperparams)]
    assert run_in_process([*args, "--run-dir", str(tmp_path / "run")]) == 0
    assert imported == []
    assert not (tmp_path / "run" / "tracking").exists()
