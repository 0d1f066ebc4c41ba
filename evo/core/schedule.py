"""The hyperparameter schedule format (``python -m evo.replay`` writes it, ``--schedule`` reads it). Pure.

A schedule is a list of ``(env_steps, hparams)`` entries sorted by ``env_steps``, the first
at 0: an agent trained on it uses each entry's hyperparameters from the first PPO rollout
at or after its ``env_steps``.
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from evo.core.space import EXPLORED, EXTRA, hparam_names, typed

SCHEDULE_FORMAT = 1


def load_schedule(path: str | Path) -> tuple[list[tuple[int, dict[str, float]]], str | None]:
    """Read a schedule file: ``[(env_steps, hparams), ...]`` sorted by env_steps, and its env id.

    Raises ValueError naming the file and what is wrong with it."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--schedule {path}: no such file (write one with python -m evo.replay RUN_DIR)")
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ValueError(f"--schedule {path} is not valid YAML: {error}") from None
    entries = document.get("schedule") if isinstance(document, dict) else document
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"--schedule {path}: expected a 'schedule:' list of {{env_steps, hparams}} entries")
    schedule = []
    for index, entry in enumerate(entries):
        where = f"--schedule {path}, entry {index}"
        if not isinstance(entry, dict) or "env_steps" not in entry or not isinstance(entry.get("hparams"), dict):
            raise ValueError(f"{where}: each entry needs env_steps and an hparams mapping")
        missing = [name for name in EXPLORED if name not in entry["hparams"]]
        unknown = sorted(set(entry["hparams"]) - set(EXPLORED + EXTRA))
        if missing or unknown:
            raise ValueError(
                f"{where}: hparams must give {', '.join(EXPLORED)}, and may add {', '.join(EXTRA)}"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unknown {', '.join(unknown)}" if unknown else "")
            )
        names = hparam_names(entry["hparams"])
        if schedule and names != tuple(schedule[0][1]):
            raise ValueError(f"{where}: gives {', '.join(names)}; every entry must give the same hyperparameters")
        try:
            steps = int(entry["env_steps"])
            given = entry["hparams"]
            hparams = {name: typed(name, math.inf if given[name] is None else given[name]) for name in names}
        except (TypeError, ValueError):
            raise ValueError(f"{where}: env_steps and the hyperparameters must be numbers") from None
        finite = all(math.isfinite(v) or (name == "target_kl" and v == math.inf) for name, v in hparams.items())
        if steps < 0 or not finite:
            raise ValueError(
                f"{where}: env_steps must be >= 0 and every value finite (target_kl may be null: no early stop)"
            )
        schedule.append((steps, hparams))
    schedule.sort(key=lambda item: item[0])
    if schedule[0][0] != 0:
        raise ValueError(f"--schedule {path}: the first entry must start at env_steps 0, got {schedule[0][0]}")
    env_id = document.get("env_id") if isinstance(document, dict) else None
    return schedule, env_id


def hparams_at(schedule: list[tuple[int, dict[str, float]]], env_steps: int) -> dict[str, float]:
    """The schedule's hyperparameters in effect at ``env_steps`` (the last entry starting at or before it)."""
    current = schedule[0][1]
    for start, hparams in schedule:
        if start > env_steps:
            break
        current = hparams
    return current
