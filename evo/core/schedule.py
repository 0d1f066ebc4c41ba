"""The hyperparameter schedule format (``python -m evo.tools.replay`` writes it, ``--schedule`` reads it). Pure.

A schedule is a list of ``(env_steps, hparams)`` entries sorted by ``env_steps``, the first
at 0: an agent trained on it uses each entry's hyperparameters from the first update at or after
its ``env_steps``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from evo.core.textfiles import read_settings_file, yaml_problem

SCHEDULE_FORMAT = 1


def load_schedule(
    path: str | Path, tunable: Mapping[str, tuple[type, bool]], required: Sequence[str] = ()
) -> tuple[list[tuple[int, dict[str, Any]]], str | None, str | None]:
    """Read a schedule file: ``[(env_steps, hparams), ...]`` sorted by env_steps, its env id and
    its learner (None if the file does not say). ``tunable``: the learner's tunable settings, each
    with its type and whether it may be off (null); ``required``: the names every entry must give
    (the run's explored hyperparameters: its records have a column for each).

    Raises ValueError naming the file and what is wrong with it."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"--schedule {path}: no such file (write one with python -m evo.tools.replay RUN_DIR)")
    try:  # a device, a pipe, a huge or non-UTF-8 file refused before it is read; nothing of it quoted
        document = yaml.safe_load(read_settings_file(path, "a schedule file (python -m evo.tools.replay RUN_DIR)"))
    except ValueError as error:
        raise ValueError(f"--schedule {path}: {error}") from None
    except yaml.YAMLError as error:
        raise ValueError(f"--schedule {path} is not valid YAML: {yaml_problem(error)}") from None
    entries = document.get("schedule") if isinstance(document, dict) else document
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"--schedule {path}: expected a 'schedule:' list of {{env_steps, hparams}} entries")
    schedule = []
    for index, entry in enumerate(entries):
        where = f"--schedule {path}, entry {index}"
        if not isinstance(entry, dict) or "env_steps" not in entry or not isinstance(entry.get("hparams"), dict):
            raise ValueError(f"{where}: each entry needs env_steps and an hparams mapping")
        unknown = [name for name in entry["hparams"] if name not in tunable]
        if unknown:
            raise ValueError(
                f"{where}: hparams may give {', '.join(tunable)}; unknown {', '.join(sorted(map(str, unknown)))}"
            )
        missing = [name for name in required if name not in entry["hparams"]]
        if missing:
            raise ValueError(f"{where}: hparams must give {', '.join(required)}; missing {', '.join(missing)}")
        names = [name for name in tunable if name in entry["hparams"]]
        if schedule and names != list(schedule[0][1]):
            raise ValueError(f"{where}: gives {', '.join(names)}; every entry must give the same hyperparameters")
        try:
            steps = int(entry["env_steps"])
            hparams = {name: _value(entry["hparams"][name], *tunable[name]) for name in names}
        except (TypeError, ValueError):
            raise ValueError(f"{where}: env_steps and the hyperparameters must be numbers (or names)") from None
        if steps < 0:
            raise ValueError(f"{where}: env_steps must be >= 0 and every value finite (null: off, where allowed)")
        schedule.append((steps, hparams))
    schedule.sort(key=lambda item: item[0])
    if schedule[0][0] != 0:
        raise ValueError(f"--schedule {path}: the first entry must start at env_steps 0, got {schedule[0][0]}")
    env_id = document.get("env_id") if isinstance(document, dict) else None
    algo = document.get("algo") if isinstance(document, dict) else None
    return schedule, env_id, algo


def _value(value: Any, kind: type | tuple[type, ...], may_be_off: bool) -> Any:
    """A schedule's value as its setting's type; ``null`` (or a legacy ``.inf``) is "off" where allowed."""
    if may_be_off and (value is None or (isinstance(value, float) and math.isinf(value))):
        return None
    if kind is int:
        return int(round(float(value)))
    if kind is str or (isinstance(kind, tuple) and isinstance(value, str) and str in kind):
        return str(value)
    number = float(value)
    if not math.isfinite(number):
        raise ValueError("not finite")
    return number


def hparams_at(schedule: list[tuple[int, dict[str, Any]]], env_steps: int) -> dict[str, Any]:
    """The schedule's hyperparameters in effect at ``env_steps`` (the last entry starting at or before it)."""
    current = schedule[0][1]
    for start, hparams in schedule:
        if start > env_steps:
            break
        current = hparams
    return current
