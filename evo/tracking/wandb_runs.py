"""``--tracker wandb``: W&B's calls (imported by a rank's tracking thread, evo/tracking/writer.py).

Offline unless ``WANDB_MODE`` says otherwise: each tracked run writes its own folder
``<dir>/wandb/offline-run-<time>-<id>`` (``<dir>``: ``WANDB_DIR``, else the run directory), which
``wandb sync`` uploads later; each start of the run (a resume, a member moved to another rank) writes
another folder of the same W&B run id, and ``wandb sync`` puts them together in the same run. The ids are
evo's run id and the tracked run's key (``<run_id>-member-3``, ``<run_id>-population``), so a resume
continues the same W&B runs; the group is the population's (:attr:`evo.tracking.Population.group`), the
project ``WANDB_PROJECT``'s, else ``evo``.

An offline W&B run cannot be asked which steps it holds, so evo keeps a ledger beside the run's records,
``<run_dir>/tracking/wandb/<key>/<step>``: an empty file for each step a tracked run took, made by the rank that
logged it, after W&B took the row (a file each: ranks that log one member's steps, as an asynchronous run's
member moves, never rewrite each other's). W&B orders a run's steps: an asynchronous run's member whose former
rank logs an earlier interval after its new rank logged a later one (a busy rank's thread) has that interval
in its offline folder, and W&B may drop it from the run at ``wandb sync`` as a step below the run's last.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import wandb

from evo.tracking.writer import POPULATION, Opened, Population, writable_folder


def after_last_start(folder: Path, run_id: str) -> None:
    """W&B names a start's folder by its second (``offline-run-YYYYmmdd_HHMMSS-ID``; ``run-…`` online): a start in
    the second of an earlier start of the same run would share its folder and overwrite its records (a stop and a
    resume within one second: make test's in-process W&B run lost its last start's records so, 2026-12-07).
    Returns once no start of ``run_id`` holds this second (at most about a second later)."""
    while any(folder.glob(f"*run-{time.strftime('%Y%m%d_%H%M%S')}-{run_id}")):
        time.sleep(0.05)


class WandbRuns:
    """The W&B runs of one population, from one process."""

    def __init__(self, population: Population):
        self.population = population
        self.folder = Path(os.environ.get("WANDB_DIR") or population.run_dir)
        self.ledger = population.run_dir / "tracking" / "wandb"
        writable_folder(self.folder / "wandb")  # else W&B would write to a temporary folder, and say little
        writable_folder(self.ledger)
        self.project = os.environ.get("WANDB_PROJECT") or "evo"
        if "WANDB_SILENT" not in os.environ:  # W&B's lines on every rank (its artifact's too), unless asked for
            wandb.setup(settings=wandb.Settings(silent=True))

    def run_id(self, key: str) -> str:
        return f"{self.population.run_id}-{key}"

    def _ledger(self, key: str) -> Path:
        return self.ledger / key

    def open(self, key: str, name: str, settings: Mapping[str, Any]) -> Opened:
        ledger = self._ledger(key)
        held = {int(path.name) for path in ledger.iterdir() if path.name.isdigit()} if ledger.is_dir() else set()
        options: dict[str, Any] = {"console": "off", "x_disable_stats": True, "disable_git": True, "save_code": False}
        after_last_start(self.folder / "wandb", self.run_id(key))
        run = wandb.init(
            project=self.project,
            group=self.population.group,
            job_type="population" if key == POPULATION else "member",
            name=f"{self.population.group} {name}",
            id=self.run_id(key),
            dir=str(self.folder),
            mode=None if "WANDB_MODE" in os.environ else "offline",
            resume="allow",
            reinit="create_new",
            config=dict(settings),
            settings=wandb.Settings(**options),  # no console capture, no system metrics, no git, no code
        )
        return Opened(run, held)

    def _took(self, key: str, step: int) -> None:
        """The ledger's file of ``key``'s ``step``."""
        ledger = self._ledger(key)
        ledger.mkdir(exist_ok=True)
        (ledger / str(step)).touch()

    def key_of(self, opened: Opened) -> str:
        return opened.handle.id[len(self.population.run_id) + 1 :]

    def log(self, opened: Opened, step: int, metrics: Mapping[str, float]) -> None:
        opened.handle.log(dict(metrics), step=step)
        self._took(self.key_of(opened), step)

    def table(self, opened: Opened, step: int, name: str, columns: Sequence[str], rows: Sequence[list]) -> None:
        opened.handle.log({name: wandb.Table(columns=list(columns), data=[list(row) for row in rows])}, step=step)
        self._took(self.key_of(opened), step)

    def artifact(self, opened: Opened, folder: Path, name: str) -> None:
        artifact = wandb.Artifact(re.sub(r"[^\w.-]", "_", f"{self.population.group}-{name}"), type="model")
        artifact.add_dir(str(folder))  # copied into W&B's staging folder now: ``folder`` may go
        opened.handle.log_artifact(artifact)

    def close(self, opened: Opened, complete: bool | None) -> None:
        if complete is False:
            opened.handle.mark_preempting()  # stopped, to be resumed
        opened.handle.finish()

    def end_stopped(self) -> None:
        """Nothing: each start of a W&B run is its own (an offline run per start), ended by that start."""

    def where(self) -> str:
        offline = self.folder / "wandb"
        if os.environ.get("WANDB_MODE", "offline") != "offline":
            return f"W&B runs in project {self.project}, group {self.population.group}"
        return (
            f"W&B offline runs in {offline} (group {self.population.group}); upload them with: "
            f"wandb sync {offline}/offline-run-*"
        )


def backend(population: Population) -> WandbRuns:
    return WandbRuns(population)
