"""A run directory that a run left before its first checkpoint: taken over by the next new run of it.

A run that fails while it starts (a learner whose constructor raises, an env that cannot be made on one
rank) has written its records' heads (config.yaml, command.txt, versions.json, population.csv's header,
an empty lineage.jsonl, TensorBoard's first event file) but no checkpoint: nothing that ``--resume`` could
continue or a tool could read. Refusing its ``--run-dir`` as "a run" from then on would leave the user to
delete it by hand; so a new run on it takes it over (:func:`unstarted`, then :func:`clear` under the
directory's lock, evo.rundir.lock) with a warning naming what was removed. Anything else in the directory
(a complete checkpoint, a population row, a lineage line, a file evo does not write there) keeps it a run
that is not overwritten.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import yaml

HEADS = frozenset({"config.yaml", "command.txt", "versions.json", "population.csv", "lineage.jsonl", "tb"})
"""What a run writes into its directory before its first checkpoint (besides ``checkpoints/`` and its lock)."""
LOCK = "lock.json"
"""The run directory's lock (evo.rundir.lock, which takes a directory over with these functions)."""
POPULATION_HEADER = "generation,member,rank,env_steps,score,donor"
"""How evo's population.csv begins (evo.rundir.records.population_fields)."""
CONFIG_MOST = 1_000_000
"""A config.yaml larger than this is not one evo wrote."""


def unstarted(run_dir: Path) -> list[str] | None:
    """The entries of ``run_dir`` if it is a run directory that never made a checkpoint (evo's config.yaml, no
    complete checkpoint, no record past the heads, nothing evo does not write there), or holds nothing but a
    lock (an empty folder too); else None."""
    try:
        names = sorted(os.listdir(run_dir))
        if any(not _a_lock(name) for name in names) and "config.yaml" not in names:
            return None  # a run writes its config.yaml first: files without it are not a run's
        for name in names:
            if not _a_lock(name) and not _a_head(Path(run_dir), name):
                return None
    except (OSError, ValueError, yaml.YAMLError):
        return None
    return names


def _a_lock(name: str) -> bool:
    """The lock, a taker's stale copy of it, or a write's temporary: no record."""
    return name == LOCK or name.startswith(f"{LOCK}.stale-") or (name.startswith(".") and ".tmp-" in name)


def _a_head(run_dir: Path, name: str) -> bool:
    """Whether entry ``name`` is one a run leaves before its first checkpoint, holding nothing more."""
    path = run_dir / name
    if name == "checkpoints":
        return path.is_dir() and not path.is_symlink() and not _complete_checkpoint(path)
    if name not in HEADS or path.is_symlink():
        return False
    if name == "tb":
        return path.is_dir()
    if not path.is_file() or path.stat().st_size > CONFIG_MOST:
        return False
    if name == "population.csv":  # evo's header only
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        return not lines or (len(lines) == 1 and lines[0].startswith(POPULATION_HEADER))
    if name == "lineage.jsonl":
        return not path.read_text().strip()
    if name == "config.yaml":
        saved = yaml.safe_load(path.read_text())
        return isinstance(saved, dict) and "run_id" in saved
    return True


def has_checkpoint(run_dir: Path) -> bool:
    """Whether the run in ``run_dir`` made a checkpoint that ``--resume`` continues (synchronous or
    asynchronous)."""
    return _complete_checkpoint(Path(run_dir) / "checkpoints")


def _complete_checkpoint(checkpoints: Path) -> bool:
    """Whether ``checkpoints`` holds what a resume or a tool could read: a generation's manifest, a member's
    ready point record or a kept best's record (each is written last)."""
    patterns = ("gen_*/manifest.json", "members/member_*/interval_*.json", "best/best.json")
    return any(next(checkpoints.glob(pattern), None) is not None for pattern in patterns)


def clear(run_dir: Path) -> None:
    """Remove every entry of ``run_dir`` but its lock (held by the caller), links as links."""
    for name in os.listdir(run_dir):
        if name == LOCK:
            continue
        path = Path(run_dir) / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
