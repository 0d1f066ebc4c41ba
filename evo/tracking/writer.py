"""This rank's writer to the tracker (``--tracker``; evo/tracking/__init__.py says what is tracked, where)."""

from __future__ import annotations

import importlib
import logging
import math
import os
import queue
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from evo.core.kinds import SearchSpace
from evo.core.result import MemberResult
from evo.tracking import TRACKERS

logger = logging.getLogger("evo")

FINISH_TIMEOUT_S = 300.0
"""How long a rank waits at the end of the run for its tracker's last calls before it leaves them behind."""
POPULATION = "population"
"""The key of the population's tracked run (rank 0's: the lineage table and the exported agent)."""


def writable_folder(folder: Path) -> None:
    """``folder`` made (with its parents) and written to, or the OSError that says why not (a backend's check
    before its tracker writes there: W&B would otherwise write to a temporary folder, and say little)."""
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / f".evo-probe-{os.getpid()}-{threading.get_ident()}"
    probe.write_bytes(b"")
    probe.unlink()


def member_key(member: int) -> str:
    return f"member-{member}"


@dataclass(frozen=True)
class Population:
    """What names a run's tracked runs and what each shows: ``tracker`` ('wandb' or 'mlflow'), evo's
    ``run_id``, the ``run_dir`` and the run's ``settings`` (W&B's config, MLflow's params)."""

    tracker: str
    run_id: str
    run_dir: Path
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def group(self) -> str:
        """The population's name in the tracker: the run directory's name and the start of its run id."""
        return f"{self.run_dir.name}-{self.run_id[:8]}"


@dataclass
class Opened:
    """A tracked run open in this process: the backend's ``handle`` and the steps the tracked run holds (those
    logged before a resume; an asynchronous run's member: also those its other ranks logged)."""

    handle: Any
    held: set[int] = field(default_factory=set)

    @property
    def last(self) -> int:
        """The last step the tracked run holds (0: none)."""
        return max(self.held, default=0)


class Backend(Protocol):
    """A tracker's calls (evo/tracking/wandb_runs.py, mlflow_runs.py). ``key``: ``member-<i>`` or
    ``population``."""

    def open(self, key: str, name: str, settings: Mapping[str, Any]) -> Opened:
        """The tracked run ``key``: continued if the tracker holds it, else created."""
        ...

    def log(self, opened: Opened, step: int, metrics: Mapping[str, float]) -> None: ...

    def table(self, opened: Opened, step: int, name: str, columns: Sequence[str], rows: Sequence[list]) -> None: ...

    def artifact(self, opened: Opened, folder: Path, name: str) -> None: ...

    def close(self, opened: Opened, complete: bool | None) -> None:
        """``complete``: the run's end (True) or a stop (False); None: the member moved to another rank."""
        ...

    def end_stopped(self) -> None:
        """At the run's end (rank 0, after a complete run): the tracked runs a stop left ended as stopped and no
        later job opened again (a member with nothing left to train after the resume) ended as finished."""
        ...

    def where(self) -> str:
        """Where its records are, and how to look at them or upload them (rank 0's last line)."""
        ...


def generation_metrics(
    result: MemberResult, generation: int, donor: int | None, space: SearchSpace, objectives: Sequence[str] = ()
) -> dict[str, float]:
    """A member's tracked row of ``generation`` (an asynchronous run's: its interval): its scores (those
    measured: NaN and ±inf left out), env steps, whether it copied ``donor`` (and which: ``exploit/donor``),
    and the hyperparameters it trained with, as numbers (a named choice by its index, as TensorBoard's)."""
    metrics: dict[str, float] = {
        "generation": generation,
        "env_steps": result.env_steps,
        "rank": result.rank,
        "exploited": int(donor is not None),
    }
    if donor is not None:
        metrics["exploit/donor"] = donor
    for key in ("score", "score_train", "score_test"):
        metrics[key] = getattr(result, key)
    for name, value in zip(objectives, result.objectives, strict=False):
        metrics[f"objective/{name}"] = value
    for name, value in result.hparams.items():
        number = space[name].number(value) if name in space else value
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            metrics[f"hparams/{name}"] = number
    return {key: float(value) for key, value in metrics.items() if math.isfinite(float(value))}


LINEAGE_COLUMNS = ("event", "generation", "recipient", "donor", "recipient_score", "donor_score", "changes", "line")
"""The lineage table's columns: an exploit's or restart's who and what, and its whole lineage.jsonl line."""


def lineage_rows(lineage: Sequence[Mapping[str, Any]]) -> list[list]:
    """lineage.jsonl's lines as the lineage table's rows (:data:`LINEAGE_COLUMNS`)."""
    from evo.rundir.jsontext import dumps

    return [
        [
            entry.get("event", "exploit"),
            entry.get("generation"),
            entry.get("recipient", entry.get("member")),
            entry.get("donor"),
            entry.get("recipient_score"),
            entry.get("donor_score"),
            "; ".join(entry.get("changes", ())),
            dumps(entry),
        ]
        for entry in lineage
    ]


def load_backend(population: Population) -> Backend:
    """The backend ``population.tracker`` names (its package imported now)."""
    return importlib.import_module(TRACKERS[population.tracker]).backend(population)


class Tracking:
    """This rank's writer to the tracker: what the run hands it goes into a queue, and a thread of its own
    opens the tracked runs (lazily, each member's on its first generation here), logs, and closes them.
    ``backend``: how it reaches the tracker (tests give their own); ``export(run_dir, into)``: how rank 0 exports
    the run's pick into the folder ``into`` after a complete run (evo.tools.export.export_pick; None: no agent)."""

    def __init__(
        self,
        population: Population,
        space: SearchSpace,
        objectives: Sequence[str] = (),
        backend: Callable[[Population], Backend] = load_backend,
        export: Callable[[Path, Path], Path] | None = None,
    ):
        self.population = population
        self.space = space
        self.objectives = tuple(objectives)
        self._backend_of = backend
        self._export = export
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._opened: dict[str, Opened] = {}
        self._warned: set[str] = set()
        self.missed: dict[str, list[int]] = {}
        """Per tracked run, the steps the tracker failed to take (said at the end)."""
        self.skipped: dict[str, list[int]] = {}
        """Per tracked run, the generations it held already (logged before a resume): not logged again."""
        self._backend: Backend | None = None
        self._broken = False
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name=f"evo-{population.tracker}", daemon=True)
        self._thread.start()

    # --- what the run calls (never waits on the tracker, but at the end) -------------------------

    def generation(self, result: MemberResult, generation: int, donor: int | None) -> None:
        """Member ``result.member``'s ``generation`` (an asynchronous run's: its interval) and, when it copied
        one, its ``donor``."""
        metrics = generation_metrics(result, generation, donor, self.space, self.objectives)
        key = member_key(result.member)
        self._tasks.put((key, generation, lambda backend: self._log(backend, key, f"member {result.member}",
                                                                    generation, metrics)))  # fmt: skip

    def release(self, member: int) -> None:
        """Member ``member`` leaves this rank (an asynchronous run moved it): its tracked run is closed here,
        to be continued by the rank that takes it."""
        key = member_key(member)
        self._tasks.put((key, None, lambda backend: self._close(backend, key, None)))

    def finish(self, complete: bool, lineage: Sequence[Mapping[str, Any]] | None = None) -> None:
        """The end of the run on this rank (``complete``: not stopped): with ``lineage`` (rank 0: the run's
        lineage.jsonl lines), the population's tracked run gets the lineage table and, after a complete run,
        the exported agent; every tracked run open here is closed; then waits for the thread (at most
        :data:`FINISH_TIMEOUT_S`) and says what the tracker missed."""
        if self._closed:
            return
        if lineage is not None:
            rows = lineage_rows(lineage)
            self._tasks.put((POPULATION, None, lambda backend: self._population_end(backend, complete, rows)))
        self._tasks.put((None, None, lambda backend: self._close_all(backend, complete)))
        if not self._end(FINISH_TIMEOUT_S):
            return
        for key, steps in sorted(self.missed.items()):
            logger.warning(
                "tracker %s: %s's tracked run misses step(s) %s (the tracker failed: see the warning above); the "
                "run's own records (population.csv, lineage.jsonl) hold them",
                self.population.tracker,
                key.replace("-", " "),
                ", ".join(map(str, steps)),
            )
        if lineage is not None and self._backend is not None:
            logger.info("tracker %s: %s", self.population.tracker, self._backend.where())

    def close(self) -> None:
        """The thread told to stop without the run's end (a test's or an error's end); not waited for."""
        if not self._closed:
            self._end(0.0)

    # --- the thread --------------------------------------------------------------------------

    def _end(self, timeout: float) -> bool:
        """The thread told to stop once its queue is done, and waited for ``timeout`` seconds (0: not at all);
        whether it ended."""
        self._closed = True
        self._tasks.put(None)
        if timeout <= 0:
            return False
        self._thread.join(timeout)
        if self._thread.is_alive():
            logger.warning(
                "tracker %s: still writing %.0f s after the run's end; left behind (its last records may be missing)",
                self.population.tracker,
                timeout,
            )
            return False
        return True

    def _serve(self) -> None:
        while (task := self._tasks.get()) is not None:
            key, step, call = task
            backend = self._started()
            if backend is None:
                continue
            try:
                call(backend)
            except Exception as error:  # the tracker's failure is a warning, never the run's
                if step is not None:
                    self.missed.setdefault(key, []).append(step)
                self._warn(key, error)

    def _started(self) -> Backend | None:
        """The backend, made on the first task (its package imported here); None once that failed."""
        if self._backend is None and not self._broken:
            try:
                self._backend = self._backend_of(self.population)
            except Exception as error:
                self._broken = True
                logger.warning(
                    "tracker %s cannot start (%s: %s); this rank's members are not tracked, the run goes on",
                    self.population.tracker,
                    type(error).__name__,
                    error,
                )
        return self._backend

    def _warn(self, key: str | None, error: Exception) -> None:
        name = key.replace("-", " ") if key is not None else "this rank"
        if name in self._warned:
            return
        self._warned.add(name)
        logger.warning(
            "tracker %s failed for %s (%s: %s); the run goes on (said once per tracked run)",
            self.population.tracker,
            name,
            type(error).__name__,
            error,
        )

    def _opened_run(self, backend: Backend, key: str, name: str) -> Opened:
        if key not in self._opened:
            settings = dict(self.population.settings)
            if key != POPULATION:
                settings["member"] = int(key.split("-")[1])
            self._opened[key] = backend.open(key, name, settings)
        return self._opened[key]

    def _log(self, backend: Backend, key: str, name: str, step: int, metrics: Mapping[str, float]) -> None:
        opened = self._opened_run(backend, key, name)
        if step in opened.held:  # only a step it holds: a moved member's former rank may log an earlier one late
            if key not in self.skipped:
                logger.warning(
                    "tracker %s: %s's tracked run holds generation %d already (logged before the run was resumed "
                    "from an earlier checkpoint): the generations trained again are not logged twice; "
                    "population.csv holds their new rows",
                    self.population.tracker,
                    name,
                    step,
                )
            self.skipped.setdefault(key, []).append(step)
            return
        backend.log(opened, step, metrics)
        opened.held.add(step)

    def _close(self, backend: Backend, key: str, complete: bool | None) -> None:
        opened = self._opened.pop(key, None)
        if opened is not None:
            backend.close(opened, complete)

    def _close_all(self, backend: Backend, complete: bool) -> None:
        for key in list(self._opened):
            try:
                self._close(backend, key, complete)
            except Exception as error:
                self._warn(key, error)

    def _population_end(self, backend: Backend, complete: bool, rows: list[list]) -> None:
        opened = self._opened_run(backend, POPULATION, "population")
        step = opened.last + 1
        backend.table(opened, step, "lineage", LINEAGE_COLUMNS, rows)
        opened.held.add(step)
        if not complete:
            return
        backend.end_stopped()
        if self._export is None:
            return
        folder = Path(tempfile.mkdtemp(prefix="evo-export-"))  # never in the run directory, as evo-export
        try:
            experiment = self._export(self.population.run_dir, folder)
            backend.artifact(opened, experiment, "agent")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
