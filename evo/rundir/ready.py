"""An asynchronous run's checkpoints: one per member per ready point, crash-safe, with the records
of that ready point, so that ``--resume`` loses no (member, interval) and writes none twice.

Layout::

    run_dir/checkpoints/members/member_3/
        interval_000007.pt      the member after its 7th ready point's decision (``torch.save`` of
                                plain data and tensors, as a generation checkpoint's member file)
        interval_000007.json    written last: the .pt's size and SHA-256, the run id, and the ready
                                point's records (its population.csv row and lineage lines)
    run_dir/checkpoints/members/explorer.json   the explorer's state (PB2's history), rewritten by
                                rank 0 at each ready point
    run_dir/checkpoints/best/
        best.json               the best ready point of the run so far: its member file's name,
                                size and SHA-256, member, generation (its interval), score, env steps
        member_3_interval_000007.pt   that member file (``load_payload``), key ``best`` as in a
                                generation checkpoint's best.pt

A member's checkpoint is written by the rank that settled its ready point, before rank 0 writes the
row: a kill between the two leaves a checkpoint whose row the CSV lacks, never the reverse. The
.json files stay (a few hundred bytes each) when older .pt files are pruned, so on ``--resume`` the
records are rebuilt from them: each member's rows and lineage lines up to the interval its newest
complete checkpoint holds. When a member copied at its ready point, its file also holds the
weights that earned its score (``ready_state``), which is what a recipient copies from it until it
reaches its next ready point.

The best is kept as a synchronous run keeps it (evo.runner.best.KeptBest), at ready points: the coordinator
names a ready point whose score beats the best so far, the worker writes the member as it was
scored (before it copies a donor) under a name of its own (two ranks may each hold a new best at
once), and rank 0 points ``best.json`` at it once the ready point is settled, if no better one was
settled first, then removes the file it replaced. Files ``best.json`` does not name are left-overs
of a crash, removed on ``--resume``; a resumed run compares with ``best.json``'s score. A kept best that
is lost (``best.json`` unreadable, its file missing, damaged or not loading) loses nothing else: the
members resume from their own checkpoints and the run keeps no best until a member is scored
(:attr:`ReadyCheckpoints.best_lost` says which file and why).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evo.rundir.checkpoint import (
    BEST_VALUES,
    CheckpointError,
    atomic_write,
    check_file,
    checkpoints_dir,
    entry_problem,
    file_sha256,
    load_payload,
    named_file,
    sha256,
)
from evo.rundir.jsontext import dumps

logger = logging.getLogger(__name__)

FORMAT = 1
EXPLORER = "explorer.json"
BEST_RECORD = "best.json"
_INTERVAL = re.compile(r"interval_(\d{6,})\.json")


def members_dir(run_dir: Path) -> Path:
    return checkpoints_dir(run_dir) / "members"


def member_dir(run_dir: Path, member: int) -> Path:
    return members_dir(run_dir) / f"member_{member}"


def interval_stem(interval: int) -> str:
    return f"interval_{interval:06d}"


def write_ready_checkpoint(
    run_dir: Path, run_id: str, member: int, interval: int, data: bytes, record: Mapping[str, Any], keep: int
) -> Path:
    """Member ``member``'s checkpoint of its ready point ``interval`` (``data``: its member file),
    its record written last; then only the ``keep`` newest member files stay."""
    directory = member_dir(run_dir, member)
    directory.mkdir(parents=True, exist_ok=True)
    stem = interval_stem(interval)
    path = directory / f"{stem}.pt"
    atomic_write(path, data)
    entry = {
        "format": FORMAT,
        "run_id": run_id,
        "member": member,
        "interval": interval,
        "file": path.name,
        "bytes": len(data),
        "sha256": sha256(data),
        "record": dict(record),
    }
    atomic_write(directory / f"{stem}.json", (dumps(entry) + "\n").encode())
    for old in sorted(directory.glob("interval_*.pt"))[:-keep]:
        old.unlink(missing_ok=True)
    return path


def best_dir(run_dir: Path) -> Path:
    return checkpoints_dir(run_dir) / "best"


def write_best_file(run_dir: Path, member: int, interval: int, data: bytes) -> dict[str, Any]:
    """Write the member file of a best ready point (a name per point: another rank may write the next
    best at the same time); returns its entry (``file``, ``bytes``, ``sha256``)."""
    directory = best_dir(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    name = f"member_{member}_{interval_stem(interval)}.pt"
    atomic_write(directory / name, data)
    return {"file": name, "bytes": len(data), "sha256": sha256(data)}


def write_best_record(run_dir: Path, entry: Mapping[str, Any], previous: Mapping[str, Any] | None) -> None:
    """Rank 0: ``best.json`` names ``entry`` (its file and what it scored); the file of ``previous``
    (the entry it replaces) is removed after."""
    atomic_write(best_dir(run_dir) / BEST_RECORD, (dumps(dict(entry)) + "\n").encode())
    if previous is not None and previous["file"] != entry["file"]:
        (best_dir(run_dir) / previous["file"]).unlink(missing_ok=True)


def read_best(run_dir: Path, run_id: str | None = None) -> dict[str, Any] | None:
    """``best.json``'s entry with its file verified (size, SHA-256, and, given ``run_id``, the run it
    belongs to), or None if the run kept none; raises CheckpointError naming the file and why for one
    that is lost (``best.json`` unreadable, its file missing, damaged or not loading)."""
    path = best_dir(run_dir) / BEST_RECORD
    if not path.exists():
        return None
    entry = _read(path)
    problem = entry_problem(entry, BEST_VALUES)
    if problem is not None:
        raise CheckpointError(f"{path}: unreadable ({problem}; damaged or edited)")
    file = named_file(path, entry)
    check_file(file, entry, path.name)
    if run_id is not None and load_payload(file).get("run_id") != run_id:
        raise CheckpointError(f"{file}: belongs to another run")
    return entry


def best_path(run_dir: Path) -> Path | None:
    """The kept best's member file of an asynchronous run (as ``best.json`` names it), or None."""
    entry = read_best(run_dir)
    return best_dir(run_dir) / entry["file"] if entry is not None else None


def remove_stray_best_files(run_dir: Path, entry: Mapping[str, Any] | None) -> None:
    """Rank 0, on resume: the best files ``best.json`` does not name (a crash before it was updated)."""
    for path in best_dir(run_dir).glob("member_*_interval_*.pt"):
        if entry is None or path.name != entry["file"]:
            path.unlink(missing_ok=True)


def write_explorer_state(run_dir: Path, name: str, state: Any) -> None:
    atomic_write(members_dir(run_dir) / EXPLORER, (dumps({"name": name, "state": state}) + "\n").encode())


@dataclass(frozen=True)
class MemberCheckpoint:
    """A member's newest complete checkpoint: its ready point ``interval`` and its file."""

    member: int
    interval: int
    path: Path


@dataclass(frozen=True)
class ReadyCheckpoints:
    """What an asynchronous run resumes from: each member's newest complete checkpoint (a member
    without one starts afresh), the records of every ready point they cover in the order they
    happened, and the explorer's state."""

    directory: Path
    members: dict[int, MemberCheckpoint]
    records: list[dict] = field(default_factory=list)
    explorer: dict | None = None
    best: dict | None = None
    """``best.json``'s entry (the best ready point so far and its file), or None."""
    best_lost: str | None = None
    """Why the kept best ``best.json`` names cannot be used (naming the file), or None."""

    @property
    def intervals(self) -> dict[int, int]:
        """{member: its intervals done} (members with a checkpoint)."""
        return {m: c.interval for m, c in self.members.items()}

    def last_record(self, member: int) -> dict | None:
        """The record of ``member``'s newest checkpointed ready point."""
        found = [r for r in self.records if r["member"] == member]
        return found[-1] if found else None


def _entries(directory: Path) -> list[tuple[int, Path]]:
    found = [(int(m.group(1)), p) for p in directory.glob("interval_*.json") if (m := _INTERVAL.fullmatch(p.name))]
    return sorted(found, reverse=True)


def _read(path: Path) -> dict:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{path}: unreadable ({error})") from error
    if not isinstance(found, dict):
        raise CheckpointError(f"{path}: unreadable (a {type(found).__name__}, not a record; damaged or edited)")
    return found


def _verify(entry_path: Path, entry: dict, run_id: str, member: int, interval: int) -> Path:
    if entry.get("format") != FORMAT or entry.get("member") != member or entry.get("interval") != interval:
        raise CheckpointError(f"{entry_path}: not the checkpoint of member {member}'s ready point {interval}")
    if entry.get("run_id") != run_id:
        raise CheckpointError(
            f"{entry_path}: belongs to run {entry.get('run_id')!r}, not to this run ({run_id!r}); "
            "it was copied from another run directory"
        )
    path = named_file(entry_path, entry)
    if not path.exists():
        raise CheckpointError(f"{path}: missing (pruned or never written)")
    if path.stat().st_size != entry["bytes"] or file_sha256(path) != entry["sha256"]:
        raise CheckpointError(f"{path}: size or SHA-256 does not match {entry_path.name} (truncated or damaged)")
    payload = load_payload(path)
    if payload.get("run_id") != run_id or payload.get("generation") != interval:
        raise CheckpointError(f"{path}: does not belong to {entry_path.name}")
    return path


def latest_ready(run_dir: Path, run_id: str, num_agents: int) -> tuple[ReadyCheckpoints, list[str]]:
    """Each member's newest complete checkpoint, the records up to it, and why newer ones were
    passed over."""
    skipped: list[str] = []
    members: dict[int, MemberCheckpoint] = {}
    records: list[dict] = []
    for member in range(num_agents):
        entries = _entries(member_dir(run_dir, member))
        for interval, entry_path in entries:
            try:
                path = _verify(entry_path, _read(entry_path), run_id, member, interval)
            except CheckpointError as error:
                skipped.append(str(error))
                continue
            members[member] = MemberCheckpoint(member, interval, path)
            break
        done = members[member].interval if member in members else 0
        for interval, entry_path in entries:
            if interval <= done:
                records.append(_read(entry_path)["record"])
    records.sort(key=lambda r: (float(r["wall_s"]), r["member"], r["interval"]))
    explorer_path = members_dir(run_dir) / EXPLORER
    explorer = _read(explorer_path) if explorer_path.exists() else None
    best, best_lost = None, None
    try:
        best = read_best(run_dir, run_id)
    except CheckpointError as error:
        best_lost = str(error)
        logger.warning(
            "the kept best is lost: %s; every member resumes from its own checkpoint, and the run keeps no best "
            "until a member is scored",
            best_lost,
        )
    return ReadyCheckpoints(members_dir(run_dir), members, records, explorer, best, best_lost), skipped
