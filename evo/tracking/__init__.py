"""``--tracker wandb|mlflow``: each member's generations in W&B or MLflow, written from the member's own rank.

One tracked run per member (``member <i>``) and one for the population (``population``), grouped as one
population (W&B: a group; MLflow: an experiment), named from the run directory and evo's run id so that
``--resume`` continues the same tracked runs. Each rank has one writer (evo/tracking/writer.py's ``Tracking``,
built by the entry point, evo.main.tracking, and held by the session): the run's steps hand it
what they log (a member's generation, with its donor when it copied one; a member that moves to another
rank; the end of the run) and go on at once; a thread of the rank's own makes the tracker's calls, in order,
so no rank waits on the tracker. A tracker's failure (no package, a folder it cannot write, a server that
refuses) is a warning, once per tracked run, and the run goes on; at the end each rank says which of its
members' generations the tracker missed.

A generation already in a tracked run is not logged again (the tracked run's own last step, or W&B's offline
ledger, see evo/tracking/wandb_runs.py): after a kill between a generation's tracked row and its checkpoint,
the resumed run trains that generation again and population.csv holds the new row, the tracker the first.

This module names the trackers for the options (pure: nothing imported). The writer imports neither W&B nor
MLflow either: the backends (evo/tracking/wandb_runs.py, mlflow_runs.py) are imported by its thread, only
with ``--tracker``. BG-PBT's students (``--max-distillations``) are not tracked: their rows are in
population.csv, and a member's tracked run has no row for a stage's rungs.
"""

from __future__ import annotations

import importlib.util

TRACKERS = {"wandb": "evo.tracking.wandb_runs", "mlflow": "evo.tracking.mlflow_runs"}
"""``--tracker``'s values, each with its backend's module (imported by the writer's thread)."""
OFF = "off"


def tracker_problem(flag: str, value: str | None) -> str | None:
    """``--tracker NAME`` without NAME's package installed (found without importing it)."""
    if value is None or value == OFF or importlib.util.find_spec(value) is not None:
        return None
    return f"{flag} {value}: the {value} package is not installed; install evo's extra: pip install 'evo[{value}]'"
