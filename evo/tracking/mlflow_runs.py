"""``--tracker mlflow``: MLflow's calls (imported by a rank's tracking thread, evo/tracking/writer.py).

The store is ``MLFLOW_TRACKING_URI``'s, else MLflow's file store in ``<run_dir>/mlruns`` (which MLflow 3
keeps in maintenance mode and opens only with ``MLFLOW_ALLOW_FILE_STORE=true``: evo sets it for the store
it chose). The population is an experiment (``MLFLOW_EXPERIMENT_NAME``'s, else the population's name,
:attr:`evo.tracking.Population.group`); its tracked runs are tagged ``evo.run_id`` and ``evo.key``
(``member-3``, ``population``), by which a resume finds them again, and the generations a member's tracked
run holds are the steps of its ``generation`` metric. The experiment, and each tracked run, is found or made
under a lock file in the run directory (``tracking/mlflow.lock``): ranks that start together make one,
and an asynchronous run's member that moves to another rank keeps its tracked run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunStatus
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from evo.tracking.writer import Opened, Population, writable_folder

STEP_METRIC = "generation"
"""The metric whose last step is a member's last logged generation."""


class MlflowRuns:
    """The MLflow runs of one population, from one process."""

    def __init__(self, population: Population):
        self.population = population
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if uri is None:
            store = population.run_dir / "mlruns"
            writable_folder(store)
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            uri = store.as_uri()
        self.uri = uri
        self.lock_path = population.run_dir / "tracking" / "mlflow.lock"
        writable_folder(self.lock_path.parent)
        self.client = MlflowClient(tracking_uri=uri)
        self.experiment_name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or population.group
        with self.locked():
            found = self.client.get_experiment_by_name(self.experiment_name)
            self.experiment = found.experiment_id if found else self.client.create_experiment(self.experiment_name)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The run directory's lock of the store's find-or-make (every rank's, every host's that shares it)."""
        with self.lock_path.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def open(self, key: str, name: str, settings: Mapping[str, Any]) -> Opened:
        tags = {"evo.run_id": self.population.run_id, "evo.key": key}
        query = " and ".join(f"tags.`{tag}` = '{value}'" for tag, value in tags.items())
        with self.locked():
            found = self.client.search_runs([self.experiment], filter_string=query, max_results=1)
            if not found:
                tags["evo.group"] = self.population.group
                run = self.client.create_run(self.experiment, run_name=f"{self.population.group} {name}", tags=tags)
                params = [Param(str(k), str(v)) for k, v in settings.items()]
                self.client.log_batch(run.info.run_id, params=params)
                return Opened(run.info.run_id)
        run_id = found[0].info.run_id
        if found[0].info.status != RunStatus.to_string(RunStatus.FINISHED):
            # a finished run stays so: a rank whose tracker thread is behind may open a moved member's run after the
            # member's new rank has ended it (a stopped run's, KILLED, is opened again by the job that resumes it)
            self.client.update_run(run_id, status=RunStatus.to_string(RunStatus.RUNNING))
        history = self.client.get_metric_history(run_id, STEP_METRIC)
        return Opened(run_id, {metric.step for metric in history})

    def log(self, opened: Opened, step: int, metrics: Mapping[str, float]) -> None:
        now = int(time.time() * 1000)
        self.client.log_batch(opened.handle, metrics=[Metric(k, v, now, step) for k, v in metrics.items()])

    def table(self, opened: Opened, step: int, name: str, columns: Sequence[str], rows: Sequence[list]) -> None:
        """``name``.json, in the layout of MLflow's own tables (``log_table``'s, without pandas)."""
        self.client.log_dict(opened.handle, {"columns": list(columns), "data": [list(row) for row in rows]},
                             f"{name}.json")  # fmt: skip

    def artifact(self, opened: Opened, folder: Path, name: str) -> None:
        self.client.log_artifacts(opened.handle, str(folder), artifact_path=name)

    def close(self, opened: Opened, complete: bool | None) -> None:
        if complete is None:  # moved to another rank, which continues it
            return
        self.client.set_terminated(opened.handle, "FINISHED" if complete else "KILLED")

    def end_stopped(self) -> None:
        query = f"tags.`evo.run_id` = '{self.population.run_id}' and attributes.status = 'KILLED'"
        for run in self.client.search_runs([self.experiment], filter_string=query):
            self.client.set_terminated(run.info.run_id, "FINISHED")

    def where(self) -> str:
        return f"MLflow runs in {self.uri}, experiment {self.experiment_name}"


def backend(population: Population) -> MlflowRuns:
    try:
        return MlflowRuns(population)
    except MlflowException as error:  # its message is long: the first line says it
        raise RuntimeError(str(error).splitlines()[0]) from error
