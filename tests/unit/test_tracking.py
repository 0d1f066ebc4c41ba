"""``--tracker``'s writer (evo/tracking/writer.py) with a backend of the test's own: what the run hands it never
waits on the tracker, a failure is one warning per tracked run and the rest goes on, a generation the tracked
run holds already is not logged twice, and the rows and the lineage table hold what the records hold. The real
W&B and MLflow: tests/unit/runner/test_tracked_runs.py."""

import logging
import os
import threading
from pathlib import Path

import pytest

from evo.config import ConfigError, parse_config
from evo.core.kinds import Categorical, LogFloat
from evo.core.result import MemberResult
from evo.tracking import writer
from evo.tracking.writer import LINEAGE_COLUMNS, Opened, Population, Tracking, generation_metrics, lineage_rows

SPACE = {"learning_rate": LogFloat(1e-5, 1e-2), "activation": Categorical(("tanh", "relu"))}


def result(member: int, score: float = 1.0, lr: float = 1e-3) -> MemberResult:
    return MemberResult(member, 0, 100, score, score, float("nan"), {"learning_rate": lr, "activation": "relu"})


class Recorder:
    """A backend that keeps every call; ``hold``: its log waits until the event is set; ``fail``: the keys
    whose open raises; ``held``: the steps each tracked run holds already."""

    def __init__(self, hold: threading.Event | None = None, fail=(), held=None):
        self.calls = []
        self.hold = hold
        self.logging = threading.Event()
        self.fail = set(fail)
        self.held = dict(held or {})

    def __call__(self, population):
        return self

    def open(self, key, name, settings):
        if key in self.fail:
            raise OSError(f"cannot open {key}")
        self.calls.append(("open", key, settings.get("member")))
        return Opened(key, set(self.held.get(key, ())))

    def log(self, opened, step, metrics):
        self.logging.set()
        if self.hold is not None:
            assert self.hold.wait(60)
        self.calls.append(("log", opened.handle, step, metrics["score"]))

    def table(self, opened, step, name, columns, rows):
        self.calls.append(("table", opened.handle, step, name, len(rows)))

    def artifact(self, opened, folder, name):
        self.calls.append(("artifact", opened.handle, Path(folder).name, name))

    def close(self, opened, complete):
        self.calls.append(("close", opened.handle, complete))

    def end_stopped(self):
        self.calls.append(("end_stopped",))

    def where(self):
        return "in the test"


def exported(run_dir, into):
    folder = Path(into) / "ppo" / "CartPole-v1_1"
    folder.mkdir(parents=True)
    return folder


def tracking(backend, tmp_path) -> Tracking:
    return Tracking(Population("wandb", "abcdef0123456789", tmp_path / "run"), SPACE, (), backend, exported)


def test_the_run_hands_over_and_goes_on_while_the_tracker_is_busy(tmp_path):
    """The tracker's log is held (a slow server, a full disk): the run's steps return at once, every row is
    taken in order once it goes on, and the end closes each tracked run (rank 0: the lineage table and the
    exported agent in the population's)."""
    hold = threading.Event()
    backend = Recorder(hold)
    track = tracking(backend, tmp_path)
    track.generation(result(0, 1.0), 1, None)
    assert backend.logging.wait(60)  # the thread is in the tracker's call, held there
    track.generation(result(1, 2.0), 1, 0)
    track.generation(result(0, 3.0), 2, None)  # handed over while the tracker still holds the first
    assert [call for call in backend.calls if call[0] == "log"] == []
    hold.set()
    track.finish(True, [{"generation": 1, "recipient": 1, "donor": 0, "changes": ["lr"]}])
    assert backend.calls == [
        ("open", "member-0", 0),
        ("log", "member-0", 1, 1.0),
        ("open", "member-1", 1),
        ("log", "member-1", 1, 2.0),
        ("log", "member-0", 2, 3.0),
        ("open", "population", None),
        ("table", "population", 1, "lineage", 1),
        ("end_stopped",),
        ("artifact", "population", "CartPole-v1_1", "agent"),
        ("close", "member-0", True),
        ("close", "member-1", True),
        ("close", "population", True),
    ]


def test_a_stopped_run_has_its_lineage_table_and_no_agent_and_a_moved_member_is_closed_for_its_new_rank(tmp_path):
    backend = Recorder()
    track = tracking(backend, tmp_path)
    track.generation(result(0), 1, None)
    track.release(0)
    track.generation(result(2), 1, None)
    track.finish(False, [])
    assert [call for call in backend.calls if call[0] in ("close", "table", "artifact")] == [
        ("close", "member-0", None),
        ("table", "population", 1, "lineage", 0),
        ("close", "member-2", False),
        ("close", "population", False),
    ]


def test_a_failure_is_one_warning_per_tracked_run_and_the_others_go_on(tmp_path, caplog):
    """Member 1's tracked run cannot be opened (its folder unwritable, say): one warning for it, not one per
    generation; member 0's rows all go in; at the end a warning names the steps member 1's tracked run misses."""
    backend = Recorder(fail={"member-1"})
    track = tracking(backend, tmp_path)
    with caplog.at_level(logging.WARNING, logger="evo"):
        for generation in (1, 2, 3):
            track.generation(result(0), generation, None)
            track.generation(result(1), generation, None)
        track.finish(True)
    assert [call[2] for call in backend.calls if call[0] == "log"] == [1, 2, 3]
    failed = [r.getMessage() for r in caplog.records if "failed for member 1" in r.getMessage()]
    assert len(failed) == 1 and "OSError: cannot open member-1" in failed[0] and "the run goes on" in failed[0]
    assert [r.getMessage() for r in caplog.records if "misses" in r.getMessage()] == [
        "tracker wandb: member 1's tracked run misses step(s) 1, 2, 3 (the tracker failed: see the warning above); "
        "the run's own records (population.csv, lineage.jsonl) hold them"
    ]


def test_a_tracker_that_cannot_start_is_one_warning_and_the_run_goes_on(tmp_path, caplog):
    def missing(population):
        raise ModuleNotFoundError("No module named 'wandb'")

    track = tracking(missing, tmp_path)
    with caplog.at_level(logging.WARNING, logger="evo"):
        for generation in (1, 2):
            track.generation(result(0), generation, None)
        track.finish(True, [])
    assert [r.getMessage() for r in caplog.records] == [
        "tracker wandb cannot start (ModuleNotFoundError: No module named 'wandb'); this rank's members are not "
        "tracked, the run goes on"
    ]


def test_generations_the_tracked_run_holds_already_are_not_logged_again(tmp_path, caplog):
    """A resume after a kill between a generation's tracked row and its checkpoint trains generations 2 and 3
    again: the tracked run, which holds them, gets neither twice (one warning says so), then goes on at 4."""
    backend = Recorder(held={"member-0": {1, 2, 3}})
    track = tracking(backend, tmp_path)
    with caplog.at_level(logging.WARNING, logger="evo"):
        for generation in (2, 3, 4):
            track.generation(result(0), generation, None)
        track.finish(True)
    assert [call[2] for call in backend.calls if call[0] == "log"] == [4]
    assert track.skipped == {"member-0": [2, 3]}
    (said,) = [r.getMessage() for r in caplog.records]
    assert "member 0's tracked run holds generation 2 already" in said and "not logged twice" in said


@pytest.mark.parametrize("tracker", ["mlflow", "wandb"])
def test_a_moved_members_late_row_from_its_former_rank_is_logged_not_skipped(tmp_path, monkeypatch, tracker):
    """An asynchronous run's member moved from rank A to rank B, A's thread busy: B logs interval 2 before A's
    thread logs interval 1. The tracked run holds 2 when A opens it, and 1 is logged all the same (a rule that
    skipped every step below the last held lost it: the e2e run under load did once). The real backends, two
    writers in one process as the two ranks."""
    from tests.support import need_mlflow, need_wandb

    need_mlflow() if tracker == "mlflow" else need_wandb()
    for key in [key for key in os.environ if key.startswith(("WANDB_", "MLFLOW_"))]:
        monkeypatch.delenv(key)
    population = Population(tracker, "abcdef0123456789", tmp_path / "run")
    (tmp_path / "run").mkdir()
    for rank, interval in (("B", 2), ("A", 1)):
        track = Tracking(population, SPACE)
        track.generation(result(0, score=float(interval)), interval, None)
        track.finish(False)
        assert not track.skipped and not track.missed, rank
    backend = writer.load_backend(population)
    opened = backend.open("member-0", "member 0", {})
    assert opened.held == {1, 2}
    backend.close(opened, False)


def test_a_rank_behind_does_not_reopen_a_run_another_rank_finished(tmp_path, monkeypatch):
    """An asynchronous run's member moved from rank A to rank B; B's run ends and finishes the member's MLflow run;
    A's tracker thread, behind, then opens it for a late row and leaves it to B. The run stays FINISHED (it was
    left RUNNING: the e2e run under load found one so, 2026-12-07); a stopped run's (KILLED) is opened again."""
    from tests.support import mlflow_client, need_mlflow

    need_mlflow()
    for key in [key for key in os.environ if key.startswith(("WANDB_", "MLFLOW_"))]:
        monkeypatch.delenv(key)
    (tmp_path / "run").mkdir()
    backend = writer.load_backend(Population("mlflow", "abcdef0123456789", tmp_path / "run"))
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # for the test's own client
    client = mlflow_client(tmp_path / "run")
    stopped = backend.open("member-1", "member 1", {})
    backend.close(stopped, False)
    assert client.get_run(backend.open("member-1", "member 1", {}).handle).info.status == "RUNNING"
    ended = backend.open("member-0", "member 0", {})
    backend.close(ended, True)  # rank B: the run's end
    late = backend.open("member-0", "member 0", {})  # rank A's thread, behind
    backend.log(late, 1, {"score": 1.0})
    backend.close(late, None)  # moved: A leaves it to B
    assert client.get_run(ended.handle).info.status == "FINISHED"
    assert [m.value for m in client.get_metric_history(ended.handle, "score")] == [1.0]


def test_a_member_a_stop_left_ended_and_the_resume_never_opened_is_finished_at_the_runs_end(tmp_path, monkeypatch):
    """A member that finished its training before the stop is closed as stopped (KILLED) and, with nothing left to
    train, never opened by the resumed job: its MLflow run stayed KILLED after the run's complete end (the e2e run
    under load found member 2 so, 2026-12-07). Rank 0 ends such runs as finished at the run's end."""
    from tests.support import mlflow_client, need_mlflow

    need_mlflow()
    for key in [key for key in os.environ if key.startswith(("WANDB_", "MLFLOW_"))]:
        monkeypatch.delenv(key)
    (tmp_path / "run").mkdir()
    population = Population("mlflow", "abcdef0123456789", tmp_path / "run")
    stopped = Tracking(population, SPACE)
    for member in (0, 1):
        stopped.generation(result(member), 1, None)
    stopped.finish(False)
    resumed = Tracking(population, SPACE)
    resumed.generation(result(0), 2, None)  # member 1 has nothing left to train
    resumed.finish(True, [])
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # for the test's own client
    client = mlflow_client(tmp_path / "run")
    (experiment,) = client.search_experiments()
    statuses = {r.data.tags["evo.key"]: r.info.status for r in client.search_runs([experiment.experiment_id])}
    assert statuses == {"member-0": "FINISHED", "member-1": "FINISHED", "population": "FINISHED"}


def test_a_row_holds_the_measured_scores_the_donor_and_the_hyperparameters_as_numbers():
    row = generation_metrics(result(3, 5.0, 2e-3), 7, 1, SPACE)
    assert row == {
        "generation": 7.0,
        "env_steps": 100.0,
        "rank": 0.0,
        "exploited": 1.0,
        "exploit/donor": 1.0,
        "score": 5.0,
        "score_train": 5.0,
        "hparams/learning_rate": 2e-3,
        "hparams/activation": 1.0,  # a named choice by its index, as TensorBoard's
    }  # score_test NaN: not measured, left out
    assert "exploit/donor" not in generation_metrics(result(3), 7, None, SPACE)


def test_the_lineage_table_has_a_row_per_line_with_the_whole_line():
    lines = [
        {
            "generation": 2,
            "recipient": 1,
            "donor": 0,
            "recipient_score": 1.0,
            "donor_score": 2.0,
            "changes": ["a", "b"],
        },
        {"event": "restart", "generation": 3, "member": 2, "donor": None, "changes": []},
    ]
    rows = lineage_rows(lines)
    assert [dict(zip(LINEAGE_COLUMNS[:-1], row[:-1], strict=True)) for row in rows] == [
        {"event": "exploit", "generation": 2, "recipient": 1, "donor": 0, "recipient_score": 1.0,
         "donor_score": 2.0, "changes": "a; b"},
        {"event": "restart", "generation": 3, "recipient": 2, "donor": None, "recipient_score": None,
         "donor_score": None, "changes": ""},
    ]  # fmt: skip
    assert '"member":2' in rows[1][-1].replace(" ", "")


def test_a_tracker_whose_package_is_missing_is_refused_at_start_up_with_the_extra_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *args: None)
    with pytest.raises(ConfigError) as refused:
        parse_config(["--tracker", "mlflow", "--run-dir", str(tmp_path / "run")], world_size=1)
    assert (
        "--tracker mlflow: the mlflow package is not installed; install evo's extra: pip install 'evo[mlflow]'"
        in str(refused.value)
    )
    assert parse_config(["--run-dir", str(tmp_path / "run")], world_size=1).tracker == "off"


def test_a_tracker_still_busy_at_the_end_is_left_behind_with_a_warning(tmp_path, monkeypatch, caplog):
    """The end waits for the rank's own thread a bounded time (a hung server must not keep the job): the
    tracker held past it is left, said once, and nothing is listed from its books while it still writes."""
    monkeypatch.setattr(writer, "FINISH_TIMEOUT_S", 0.01)
    hold = threading.Event()
    backend = Recorder(hold)
    track = tracking(backend, tmp_path)
    track.generation(result(0), 1, None)
    with caplog.at_level(logging.WARNING, logger="evo"):
        track.finish(True)
    hold.set()
    assert [r.getMessage() for r in caplog.records] == [
        "tracker wandb: still writing 0 s after the run's end; left behind (its last records may be missing)"
    ]
    track._thread.join(60)
    assert ("log", "member-0", 1, 1.0) in backend.calls  # the thread goes on once the tracker answers


def test_a_w_and_b_start_never_shares_an_earlier_starts_folder(tmp_path):
    """W&B names a start's folder by its second: a stop and a resume within one second shared one, and the resume
    overwrote the stop's records. A start returns from the wait only once no earlier start holds its second."""
    import time

    from tests.support import need_wandb

    need_wandb()
    from evo.tracking.wandb_runs import after_last_start

    held = time.strftime("%Y%m%d_%H%M%S")
    (tmp_path / f"offline-run-{held}-abc-population").mkdir()
    after_last_start(tmp_path, "abc-population")
    assert time.strftime("%Y%m%d_%H%M%S") != held
    after_last_start(tmp_path, "abc-member-0")  # another tracked run's start: no wait needed
