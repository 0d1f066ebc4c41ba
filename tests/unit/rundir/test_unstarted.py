"""A run directory that a run left before its first checkpoint (evo/rundir/unstarted.py): the next new run on
its --run-dir takes it over under its lock, with a warning naming what it removed; a directory that holds
more than such a run leaves (a checkpoint, a row, a file of the user's) or that a live run holds is refused as
before. In process, on MPI.COMM_SELF."""

import logging

import pytest
from mpi4py import MPI

from evo.config import ConfigError, parse_config
from evo.main import startup
from evo.rundir.lock import LOCK, RunDirLocked, RunLock
from evo.rundir.unstarted import unstarted
from evo.runner.session import open_records
from tests.support import budget, run_in_process, write_hyperparams

HEADS = ["command.txt", "config.yaml", "lineage.jsonl", "population.csv", "versions.json"]


def flags(tmp_path, run_dir):
    return ["--hyperparams", str(write_hyperparams(tmp_path)), "--tb-writer", "False", "--run-dir", str(run_dir)]


def left_by_a_failed_start(tmp_path, name="run"):
    """What a run that failed while building its members leaves: its records' heads, no checkpoint."""
    run_dir = tmp_path / name
    open_records(parse_config([*flags(tmp_path, run_dir), *budget(1, 1, 64)]))
    assert sorted(p.name for p in run_dir.iterdir()) == HEADS
    return run_dir


def test_a_learner_whose_constructor_raises_leaves_a_run_dir_that_the_next_run_takes_over(
    tmp_path, monkeypatch, caplog
):
    """Issue 54 N11: the run directory of a run whose learner could not be built blocked its --run-dir from
    then on ('already exists; evo will not overwrite a run'). The next run's start-up takes it over with a
    warning, and the run trains in it."""
    from evo.sb3.ppo import PPOLearner

    run_dir = tmp_path / "run"
    argv = [*flags(tmp_path, run_dir), *budget(2, 1, 64)]

    def cannot_be_built(self, setup, hparams):
        raise RuntimeError("the learner cannot be built here")

    with monkeypatch.context() as patched:
        patched.setattr(PPOLearner, "__init__", cannot_be_built)
        with pytest.raises(RuntimeError, match="cannot be built"):
            run_in_process(argv)
    assert sorted(p.name for p in run_dir.iterdir()) == HEADS and unstarted(run_dir) == HEADS

    with caplog.at_level(logging.WARNING, logger="evo.rundir.lock"):
        config, _, checkpoint, lock = startup(MPI.COMM_SELF, argv, "truncation", "p2p", "pbt_rl_truct.py")
    try:
        assert config.run_dir == run_dir and checkpoint is None
        assert sorted(p.name for p in run_dir.iterdir()) == [LOCK]
        assert (
            f"--run-dir {run_dir}: a run left it before its first checkpoint (it failed while starting): its files "
            f"({', '.join(HEADS)}) are removed and this run starts afresh in it" in caplog.text
        )
        assert run_in_process(argv) == 0
    finally:
        lock.release()
    assert (run_dir / "checkpoints" / "gen_000001" / "manifest.json").is_file()
    with pytest.raises(ConfigError, match="already exists; evo will not overwrite a run"):
        parse_config(argv)  # a run now: never taken over


@pytest.mark.parametrize(
    "more",
    [
        "a checkpoint",
        "a population row",
        "a lineage line",
        "a file of the user's",
        "another config",
        "no config",
        "another population.csv",
    ],
)
def test_a_directory_holding_more_than_a_failed_start_is_not_taken_over(tmp_path, more):
    run_dir = left_by_a_failed_start(tmp_path)
    if more == "a checkpoint":
        (run_dir / "checkpoints" / "gen_000000").mkdir(parents=True)
        (run_dir / "checkpoints" / "gen_000000" / "manifest.json").write_text("{}")
    elif more == "a population row":
        with (run_dir / "population.csv").open("a") as handle:
            handle.write("1,0,0,64,9.0\n")
    elif more == "a lineage line":
        (run_dir / "lineage.jsonl").write_text('{"generation": 1}\n')
    elif more == "a file of the user's":
        (run_dir / "notes.txt").write_text("mine")
    elif more == "another config":
        (run_dir / "config.yaml").write_text("name: not evo's\n")
    elif more == "no config":  # a run writes it first
        (run_dir / "config.yaml").unlink()
    else:
        (run_dir / "population.csv").write_text("precious\n")
    before = {p.name: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    assert unstarted(run_dir) is None
    with pytest.raises(ConfigError, match="already exists; evo will not overwrite a run"):
        parse_config([*flags(tmp_path, run_dir), *budget(1, 1, 64)])
    with pytest.raises(RunDirLocked, match="evo will not overwrite a run"):
        RunLock.acquire(run_dir, create=True)
    assert {p.name: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before  # nothing lost


def test_a_failed_starts_directory_that_a_live_run_holds_is_not_taken_over(tmp_path):
    """Held (here by this process, alive), it is a run starting this moment: refused, and left as it is."""
    run_dir = left_by_a_failed_start(tmp_path)
    held = RunLock.acquire(run_dir, create=False)
    try:
        with pytest.raises(RunDirLocked, match="was created by another run starting at the same moment"):
            RunLock.acquire(run_dir, create=True)
        assert sorted(p.name for p in run_dir.iterdir()) == sorted([*HEADS, LOCK])
    finally:
        held.release()
    RunLock.acquire(run_dir, create=True).release()  # free: taken over
    assert list(run_dir.iterdir()) == []


def test_an_incomplete_checkpoint_and_temporaries_are_a_failed_starts(tmp_path):
    """A generation-0 checkpoint without its manifest (written last) and a write's temporary hold nothing a
    resume could use; an empty folder, or one holding only a dead run's lock, is taken too."""
    run_dir = left_by_a_failed_start(tmp_path)
    (run_dir / "checkpoints" / "gen_000000").mkdir(parents=True)
    (run_dir / "checkpoints" / "gen_000000" / "member_0.pt").write_bytes(b"half")
    (run_dir / ".population.csv.tmp-host-1-abc").write_text("")
    assert unstarted(run_dir) == sorted([*HEADS, ".population.csv.tmp-host-1-abc", "checkpoints"])
    (tmp_path / "empty").mkdir()
    assert unstarted(tmp_path / "empty") == []
    parse_config([*flags(tmp_path, tmp_path / "empty"), *budget(1, 1, 64)])
    (tmp_path / "empty" / LOCK).write_text("")
    assert unstarted(tmp_path / "empty") == [LOCK]
