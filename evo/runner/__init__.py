"""The run engine: a session built once, and the drivers over it.

- ``session.py``: the session, built once on every rank from the accepted configuration (the one
  place of the run wing that reads the config): process set-up, stop requests, the records, the PBT
  rules and explorer, the member factory, progress, the end of the run.
- ``members.py``: members built, restored, rebuilt and moved, for every mode; ``best.py``: the kept
  best, for every mode.
- ``loop.py``: the generation loop (one generation step, whoever drives it); ``generation.py``: the
  hooks a synchronous run plugs into it; ``stages.py``: BG-PBT's stages, whose rungs are generations
  of the same loop with hooks of their own.
- The drivers, one module each, none importing another: ``synchronous.py`` (generations shared by
  the population) and ``asynchronous.py`` (ready points, over evo.mpi.asynchronous's workers).
- ``stopping.py``: stop requests from signals.

:data:`DRIVERS` names the drivers. The entry point (evo.main) picks one with :func:`driver_for`
once the input is accepted; until then nothing here imports torch, SB3 or a learner: the
checkpoint a ``--resume`` continues from is found by the driver's ``find`` (no torch), its module
imported by :meth:`Driver.load` only when the run starts.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from evo.config import ConfigError
from evo.rundir.checkpoint import Checkpoint, checkpoints_dir, latest
from evo.rundir.ready import ReadyCheckpoints, latest_ready
from evo.rundir.records import Continuation

logger = logging.getLogger("evo")


def find_generation_checkpoint(run_dir: Path, run_id: str, num_agents: int) -> Checkpoint:
    """The checkpoint a synchronous run's --resume continues from (ConfigError if there is none)."""
    checkpoint, skipped = latest(run_dir, run_id)
    for reason in skipped:
        logger.warning("skipping checkpoint: %s", reason)
    if checkpoint is None:
        detail = ("; " + "; ".join(skipped)) if skipped else ""
        raise ConfigError(
            [
                f"--resume: no complete checkpoint in {checkpoints_dir(run_dir)}{detail}. "
                "Start a new run with another --run-dir instead, or with this one and without --resume where the "
                "run failed before its first checkpoint (the new run takes its directory over)."
            ]
        )
    return checkpoint


def find_ready_checkpoints(run_dir: Path, run_id: str, num_agents: int) -> ReadyCheckpoints:
    """What an asynchronous run's --resume continues from: each member's own last checkpoint (a
    member that reached no ready point starts afresh)."""
    checkpoints, skipped = latest_ready(run_dir, run_id, num_agents)
    for reason in skipped:
        logger.warning("skipping checkpoint: %s", reason)
    return checkpoints


def generations_done(checkpoint: Checkpoint | None, total: int, num_agents: int) -> str | None:
    """Why a synchronous run has nothing left to do (it holds every generation), or None."""
    start = checkpoint.generation if checkpoint is not None else 0
    if start < total:
        return None
    return f"the run already has {start} of {total} generations; pass --total-generations N > {start} to extend it"


def intervals_done(checkpoint: ReadyCheckpoints | None, total: int, num_agents: int) -> str | None:
    """Why an asynchronous run has nothing left to do (every member has its intervals), or None."""
    done = checkpoint.intervals if checkpoint is not None else {}
    if not all(done.get(member, 0) >= total for member in range(num_agents)):
        return None
    return f"every member already has {total} intervals; pass --total-generations N > {total} to extend the run"


def generation_continuation(checkpoint: Checkpoint | None) -> Continuation | None:
    """Where a synchronous run's records continue: its checkpoint's generation, lineage and step."""
    if checkpoint is None:
        return None
    manifest = checkpoint.manifest
    return Continuation(checkpoint.generation, manifest.get("lineage"), manifest.get("population_step"))


def ready_continuation(checkpoint: ReadyCheckpoints | None) -> Continuation | None:
    """Where an asynchronous run's records continue: the records of its members' checkpoints."""
    if checkpoint is None:
        return None
    return Continuation(max(checkpoint.intervals.values(), default=0), ready_records=checkpoint.records)


@dataclass(frozen=True)
class Driver:
    """One way to run a population: its module (with ``run(session, checkpoint) -> exit status``), how
    a --resume finds its checkpoint (``find(run_dir, run_id, num_agents)``), whether that checkpoint
    leaves nothing to do (``done(checkpoint, total, num_agents)``: the reason, or None), and where the
    records continue from it (``continuation``)."""

    name: str
    module: str
    find: Callable[[Path, str, int], Any]
    done: Callable[[Any, int, int], str | None]
    continuation: Callable[[Any], Continuation | None]

    def load(self) -> ModuleType:
        """The driver's module (torch, SB3 and the learners come with it)."""
        return importlib.import_module(self.module)


DRIVERS = {
    False: Driver(
        "synchronous", "evo.runner.synchronous", find_generation_checkpoint, generations_done, generation_continuation
    ),
    True: Driver("asynchronous", "evo.runner.asynchronous", find_ready_checkpoints, intervals_done, ready_continuation),
}
"""The drivers by ``--asynchronous``."""


def driver_for(asynchronous: bool) -> Driver:
    """The driver of a run (``--asynchronous`` or not)."""
    return DRIVERS[asynchronous]
