"""Population checkpoints: crash-safe on disk, loaded without executing code.

Layout, one directory per generation boundary::

    run_dir/checkpoints/gen_000007/
        member_0.pt ... member_{N-1}.pt   one per member, written by the rank that holds it
        best.pt                           the best evaluated member so far (once a member is scored)
        manifest.json                     written last, by rank 0

A member file is a ``torch.save`` of plain data and tensors (loaded back with
``weights_only=True``): the whole member as its learner gives it (``member_state``: the flat
state of its networks and optimizers, the observation/reward normalisation statistics, float64
or None, hyperparameters, counters, recent episode returns, score history, the carried training
score, the training envs as plain data, ``evo.sb3.envstate``, None for envs that are not, and an
off-policy learner's replay buffer as arrays unless left out) and the rank's RNG states. Every file is written to a
temporary name, fsynced and renamed. The manifest lists every file with its size and
SHA-256, the generation, the run id, the lineage so far and the explorer's state; a checkpoint is
complete only when its manifest exists and every file matches it, so a crash at any instant
leaves the previous complete checkpoint loadable.

``best.pt`` is a member file too (``load_payload`` reads it): the member whose selection score was
the highest of the run up to this checkpoint, as it was when scored (before that generation's
exploit), with an extra key ``best`` ({member, generation, score, env_steps}) that the manifest's
``best`` entry repeats beside the file's size and SHA-256. A checkpoint whose best did not change
since the previous one holds the same bytes (a hard link to the previous file where the file
system allows). Checkpoints from before it have no ``best`` (``Checkpoint.best`` is None).

The kept best is not part of what makes a checkpoint complete: shared by every checkpoint since it
was scored, one damaged ``best.pt`` would otherwise void them all, though every member file is
intact. A checkpoint whose kept best is missing, damaged or does not load is complete and keeps no
best (``Checkpoint.best`` None, ``Checkpoint.best_lost`` saying which file and why).

A write that does not finish leaves its temporary (``.<name>.tmp-<host>-<pid>-<token>``): removed at
once when the write fails (a full disk), and by :func:`remove_stray_temporaries` at the next start
when the process was killed. A temporary's name ends in 64 random bits and it is created with
``O_EXCL | O_NOFOLLOW``: whoever else may write the run directory cannot plant a file or a symbolic
link where a write will go (a link at a known name once made a run overwrite the file it pointed to).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import secrets
import shutil
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np

from evo.rundir.jsontext import dumps

logger = logging.getLogger(__name__)

FORMAT = 1
"""The manifest's format."""
MEMBER_FORMAT = 2
"""A member file's format: 2 since the learners (it names its learner; format 1 held a PPO member
under the same keys, and still loads)."""
MEMBER_FORMATS = (1, 2)
MANIFEST = "manifest.json"
BEST = "best.pt"
"""The kept best member's file in a checkpoint directory."""
BEST_KEYS = ("member", "generation", "score", "env_steps")
"""What the ``best`` key of ``best.pt`` and the manifest's ``best`` entry say of the kept best."""
FILE_VALUES: dict[str, tuple[type | tuple[type, ...], str]] = {
    "bytes": (int, "a whole number"),
    "sha256": (str, "a SHA-256 in hex"),
}
"""What each value of a record's entry of a file must be, as evo writes it (the file's name: :func:`named_file`)."""
BEST_VALUES: dict[str, tuple[type | tuple[type, ...], str]] = {
    **FILE_VALUES,
    "member": (int, "a member id"),
    "generation": (int, "a generation (an interval)"),
    "score": ((int, float, type(None)), "a number"),
    "env_steps": (int, "a whole number"),
}
"""The same of the kept best's entry (a manifest's ``best``, an asynchronous run's ``best.json``)."""


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used; the message names the file and why."""


def checkpoints_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def generation_dir(run_dir: Path, generation: int) -> Path:
    return checkpoints_dir(run_dir) / f"gen_{generation:06d}"


def member_filename(member: int) -> str:
    return f"member_{member}.pt"


def fsync_dir(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _host() -> str:
    """This host's name as a temporary's name holds it."""
    return re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "host"


def temporary_path(path: Path) -> Path:
    """A fresh name to build ``path`` under before renaming it: ``.<name>.tmp-<host>-<pid>-<token>`` beside
    it, the host and process that write it (see :func:`remove_stray_temporaries`) and 64 random bits (16
    hex digits), so that nobody can know the name before the writer creates it."""
    return path.with_name(f".{path.name}.tmp-{_host()}-{os.getpid()}-{secrets.token_hex(8)}")


NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
"""How evo creates a file: only if nothing, not even a symbolic link, is at its name."""


@contextmanager
def atomic_file(path: Path) -> Iterator[IO[bytes]]:
    """A binary file that becomes ``path`` when the block ends: written under :func:`temporary_path`
    (created with ``O_EXCL | O_NOFOLLOW``, so a file or link placed there by someone else is never
    written through), fsynced and renamed over ``path`` (which replaces a link at ``path``, never
    follows it). ``path`` holds either its old content or all of the new; an exception in the block or
    a failed write (a full disk) removes the temporary and raises. Every file evo writes whole goes
    through here."""
    path = Path(path)
    temporary = temporary_path(path)
    descriptor = os.open(temporary, NEW_FILE, 0o666)  # the mode open() gives, less the umask
    try:
        with os.fdopen(descriptor, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` so that ``path`` holds either its old content or all of ``data``
    (:func:`atomic_file`)."""
    with atomic_file(path) as handle:
        handle.write(data)


def open_appending(path: Path, **text: Any) -> IO[str]:
    """``path`` opened to append text (created if missing; ``text``: open()'s ``newline`` and the like),
    refused with ``OSError`` (ELOOP) where ``path`` is a symbolic link: records are never appended to a
    file that someone linked in their place."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    return os.fdopen(descriptor, "a", **text)


_TEMPORARY = re.compile(r"\.(?P<name>.+)\.tmp-(?P<host>[A-Za-z0-9._-]+)-(?P<pid>\d+)-[0-9a-f]{16}")
"""A temporary's name: ``.<name>.tmp-<host>-<pid>-<token>``."""
_FORMER_TEMPORARY = re.compile(r"\.(?P<name>.+)\.tmp-(?:(?P<host>[A-Za-z0-9._-]+)-)?(?P<pid>\d+)")
"""A temporary's name as evo wrote it before the token (``.<name>.tmp-<host>-<pid>``) and before it
named the host (``.<name>.tmp-<pid>``)."""


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (another user's counts)."""
    if pid <= 0:
        return True  # not a process id: never taken for a dead one
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stray_temporaries(run_dir: Path) -> list[Path]:
    """Remove the temporaries that writes killed mid-way left anywhere under ``run_dir`` (the run
    directory, its checkpoints, the members' and best's folders); returns the paths removed.

    Only files named as :func:`temporary_path` names them (or as evo named them before) are candidates,
    and of those only the ones
    written on this host by a process that no longer runs: a running job's temporaries are never
    touched, and neither are another host's (this host cannot see its processes; call this on one rank
    per host to clear each host's). A temporary in the former form, without a host, counts as this
    host's. Safe to call on several ranks at once; does nothing where ``run_dir`` does not exist.
    Call it at start-up, before the run writes."""
    host = _host()
    removed = []
    for folder, _, names in os.walk(run_dir):
        for name in names:
            match = _TEMPORARY.fullmatch(name) or _FORMER_TEMPORARY.fullmatch(name)
            if match is None or match["host"] not in (None, host) or _running(int(match["pid"])):
                continue
            path = Path(folder) / name
            try:
                path.unlink()
            except FileNotFoundError:
                continue  # another rank of this host removed it first
            except OSError as error:
                logger.warning("%s: a left-over temporary that cannot be removed (%s)", path, error.strerror)
                continue
            removed.append(path)
    if removed:
        shown = ", ".join(str(path.relative_to(run_dir)) for path in removed[:5])
        more = f" and {len(removed) - 5} more" if len(removed) > 5 else ""
        logger.warning(
            "removed %d left-over temporary file(s) of writes that did not finish (a process killed mid-write): %s%s",
            len(removed),
            shown,
            more,
        )
    return removed


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------
# Serialising one member (torch only: no SB3 import here)


def dump_payload(payload: dict[str, Any]) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return buffer.getvalue()


def as_tensors(arrays: dict[str, Any]) -> dict[str, Any]:
    """Arrays as tensors (a member file holds tensors, not arrays: they load with ``weights_only``)."""
    import torch

    return {name: torch.from_numpy(np.array(array)) for name, array in arrays.items()}


def as_arrays(tensors: dict[str, Any]) -> dict[str, Any]:
    """The arrays :func:`as_tensors` stored, as writable copies."""
    return {name: tensor.numpy().copy() for name, tensor in tensors.items()}


def member_payload(member: Any, run_id: str, generation: int, rng: dict, replay: bool = True) -> dict:
    """A member's file: the whole member (its ``member_state``; its replay buffer left out unless
    ``replay``) under the run's id and the generation (an asynchronous run's: the member's interval),
    with the rank's RNG states ``rng``."""
    return {
        "format": MEMBER_FORMAT,
        "run_id": run_id,
        "generation": generation,
        "rng": rng,
        **member.member_state(replay=replay),
    }


def load_payload(path: Path) -> dict[str, Any]:
    """Load a member file without executing code from it (``weights_only=True``)."""
    import torch

    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many types for a damaged file
        raise CheckpointError(f"{path}: cannot be loaded ({type(error).__name__}: {error})") from error
    if not isinstance(payload, dict) or payload.get("format") not in MEMBER_FORMATS:
        raise CheckpointError(f"{path}: not an evo member checkpoint of format {' or '.join(map(str, MEMBER_FORMATS))}")
    return payload


def member_digest(path: Path) -> str | None:
    """The sha256 of a member file's flat state (every network, every optimizer's state and the algorithm's
    own tensors) and its normalisation statistics: equal digests are the same weights (a study tells the
    same member from two that only scored alike by them). None: a file without a flat state (a learner of
    one's own may keep its state otherwise)."""
    import torch

    payload = load_payload(Path(path))
    if not isinstance(payload.get("state"), torch.Tensor):
        return None
    digest = hashlib.sha256()
    for name in ("state", "normalization"):
        value = payload.get(name)
        if isinstance(value, torch.Tensor):
            flat = value.detach().cpu().contiguous().reshape(-1)
            digest.update(f"{name} {flat.dtype} {flat.numel()}\n".encode())
            digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------
# Manifests and finding the latest complete checkpoint


@dataclass(frozen=True)
class Target:
    """Where a run's checkpoints go and what their manifests say of the run."""

    run_dir: Path
    run_id: str
    env_id: str
    num_agents: int
    world_size: int
    keep: int = 2
    """Complete checkpoints to keep."""


@dataclass(frozen=True)
class Checkpoint:
    """A complete, verified checkpoint."""

    directory: Path
    manifest: dict[str, Any]
    best_lost: str | None = None
    """Why the kept best the manifest lists cannot be used (its file missing, damaged or not loading;
    the message names the file), or None. The checkpoint is complete all the same and keeps no best."""

    @property
    def generation(self) -> int:
        return int(self.manifest["generation"])

    def member_path(self, member: int) -> Path:
        return self.directory / self.manifest["members"][str(member)]["file"]

    @property
    def best(self) -> dict[str, Any] | None:
        """The manifest's entry of the kept best (``file``, ``bytes``, ``sha256``, ``member``,
        ``generation``, ``score``, ``env_steps``), or None (no member scored yet, a checkpoint from
        before the best was kept, or a kept best that is lost: :attr:`best_lost`)."""
        return self.manifest.get("best") if self.best_lost is None else None

    def best_path(self) -> Path | None:
        """The kept best's member file (``best.pt``), or None."""
        entry = self.best
        return self.directory / entry["file"] if entry is not None else None


def write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    atomic_write(directory / MANIFEST, (dumps(manifest, indent=1, sort_keys=True) + "\n").encode())


def shown(value: Any, most: int = 60) -> str:
    """A value of a record as a message shows it: its repr, cut at ``most`` characters."""
    text = repr(value)
    return text if len(text) <= most else f"{text[: most - 3]}..."


def entry_problem(entry: Any, values: Mapping[str, tuple[type | tuple[type, ...], str]]) -> str | None:
    """What is wrong with a record's entry (not a mapping, a key missing, a value of another kind), or None."""
    if not isinstance(entry, dict):
        return f"an entry is {shown(entry)}, not a mapping"
    missing = [key for key in ("file", *values) if key not in entry]
    if missing:
        return f"no {', '.join(missing)}"
    for key, (kinds, what) in values.items():
        if not isinstance(entry[key], kinds) or isinstance(entry[key], bool):
            return f"{key} is {shown(entry[key])}, not {what}"
    return None


def named_file(record: Path, entry: Mapping[str, Any]) -> Path:
    """The file a record (a manifest, ``best.json``, ``interval_*.json``) names: a file name beside the
    record. A path (``/etc/passwd``, ``../x``, ``/dev/zero``) or anything but a name is a damaged or edited
    record, never followed. Raises CheckpointError."""
    name = entry.get("file")
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise CheckpointError(
            f"{record}: unreadable (file is {shown(name)}, not the name of a file beside it; damaged or edited)"
        )
    return record.with_name(name)


def check_file(path: Path, entry: Mapping[str, Any], named_by: str) -> None:
    """A file a record names (``entry``: its ``bytes`` and ``sha256``; ``named_by``: the record, for the
    message): present, with that size and SHA-256. Raises CheckpointError saying what is wrong."""
    try:
        if not path.exists():
            raise CheckpointError(f"{path}: missing (named by {named_by})")
        size = path.stat().st_size
        if size != entry["bytes"]:
            raise CheckpointError(f"{path}: {size} bytes, {named_by} says {entry['bytes']} (truncated or damaged)")
        if file_sha256(path) != entry["sha256"]:
            raise CheckpointError(f"{path}: SHA-256 does not match {named_by} (damaged)")
    except OSError as error:
        raise CheckpointError(f"{path}: cannot be read ({error.strerror or error})") from error


def verify(directory: Path, run_id: str | None = None) -> Checkpoint:
    """Check a checkpoint directory: manifest readable, every member file present with the
    recorded size and SHA-256, and (if given) the run id matching. Raises CheckpointError. The kept
    best is checked too, but a lost one leaves the checkpoint complete (:attr:`Checkpoint.best_lost`)."""
    manifest_path = directory / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{directory}: incomplete (no {MANIFEST}; it is written last)") from None
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{manifest_path}: unreadable ({error})") from error
    if not isinstance(manifest, dict):
        raise CheckpointError(f"{manifest_path}: unreadable (a {type(manifest).__name__}, not a manifest; damaged)")
    if manifest.get("format") != FORMAT:
        raise CheckpointError(f"{manifest_path}: unknown checkpoint format {shown(manifest.get('format'))}")
    if run_id is not None and manifest.get("run_id") != run_id:
        raise CheckpointError(
            f"{manifest_path}: belongs to run {shown(manifest.get('run_id'))}, not to this run ({run_id!r}); "
            "it was copied from another run directory"
        )
    members = manifest.get("members")
    problem = _manifest_problem(manifest.get("generation"), members)
    if problem is not None:
        raise CheckpointError(f"{manifest_path}: unreadable ({problem}; damaged or edited)")
    for _, entry in sorted(members.items(), key=lambda item: int(item[0])):
        check_file(named_file(manifest_path, entry), entry, "the manifest")
    best_lost = None
    if manifest.get("best") is not None:
        try:
            if (problem := entry_problem(manifest["best"], BEST_VALUES)) is not None:
                raise CheckpointError(f"{manifest_path}: its kept best is unreadable ({problem}; damaged or edited)")
            check_file(named_file(manifest_path, manifest["best"]), manifest["best"], "the manifest")
        except CheckpointError as error:
            best_lost = str(error)
    return Checkpoint(directory, manifest, best_lost)


def _manifest_problem(generation: Any, members: Any) -> str | None:
    """What is wrong with a manifest's generation and members as evo writes them, or None."""
    if not isinstance(generation, int) or isinstance(generation, bool):
        return f"generation is {shown(generation)}, not a whole number"
    if not isinstance(members, dict) or not members:
        return f"members is {shown(members)}, not a mapping of member ids to files"
    for key, entry in members.items():
        if not key.isdigit():
            return f"member {shown(key)} is not a member id"
        if (problem := entry_problem(entry, FILE_VALUES)) is not None:
            return f"member {key}: {problem}"
    return None


def file_entry(name: str, data: bytes) -> dict[str, Any]:
    """A manifest's entry of a file holding ``data``: its name, size and SHA-256."""
    return {"file": name, "bytes": len(data), "sha256": sha256(data)}


def write_best(directory: Path, data: bytes) -> dict[str, Any]:
    """Write the kept best's member file into a checkpoint directory; returns its entry."""
    atomic_write(Path(directory) / BEST, data)
    return file_entry(BEST, data)


def carry_best(source: Path, directory: Path) -> None:
    """The previous checkpoint's ``best.pt`` (``source``, unchanged since) into ``directory``: a
    hard link where the file system allows (no bytes copied; pruning the old directory leaves it),
    else a copy; atomic as :func:`atomic_write`. A ``source`` that is gone (removed from outside the
    run) is not the end of the run: nothing is written, a warning says so, and the checkpoint's kept
    best is lost (:attr:`Checkpoint.best_lost`) while its members are complete."""
    if not Path(source).exists():
        logger.warning(
            "the kept best %s is gone (removed from outside the run): %s holds no kept best, its members are complete",
            source,
            directory,
        )
        return
    path = Path(directory) / BEST
    temporary = temporary_path(path)
    try:
        os.link(source, temporary)  # a new name, as O_EXCL makes one: whatever is at it fails the link
    except OSError:  # no hard links on this file system: a copy
        with open(source, "rb") as original, atomic_file(path) as copy:
            shutil.copyfileobj(original, copy)
        return
    try:
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def candidates(run_dir: Path) -> list[Path]:
    """Checkpoint directories, newest first."""
    root = checkpoints_dir(run_dir)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and p.name.startswith("gen_") and p.name[4:].isdigit()]
    return sorted(found, key=lambda p: int(p.name[4:]), reverse=True)


def latest(run_dir: Path, run_id: str | None = None) -> tuple[Checkpoint | None, list[str]]:
    """The newest complete checkpoint, and why each newer one was passed over. A kept best that is
    lost does not pass a checkpoint over: it is used without it, with a warning naming the file."""
    skipped = []
    for directory in candidates(run_dir):
        try:
            checkpoint = verify(directory, run_id)
            for member in checkpoint.manifest["members"]:
                load_payload(checkpoint.member_path(int(member)))
        except CheckpointError as error:
            skipped.append(str(error))
            continue
        if checkpoint.best is not None:
            try:
                load_payload(checkpoint.best_path())
            except CheckpointError as error:
                checkpoint = Checkpoint(checkpoint.directory, checkpoint.manifest, str(error))
        if checkpoint.best_lost is not None:
            logger.warning(
                "the kept best is lost: %s; the checkpoint of generation %d is used without its kept best "
                "(every member file is intact), and a resumed run keeps as its best the best member scored "
                "from then on",
                checkpoint.best_lost,
                checkpoint.generation,
            )
        return checkpoint, skipped
    return None, skipped


def prune(run_dir: Path, keep: int, newest: int) -> None:
    """Keep the ``keep`` newest complete checkpoints up to ``newest``; remove older ones and
    incomplete ones older than ``newest``."""
    complete = 0
    for directory in candidates(run_dir):
        generation = int(directory.name[4:])
        if generation > newest:
            continue
        if (directory / MANIFEST).exists() and complete < keep:
            complete += 1
            continue
        shutil.rmtree(directory, ignore_errors=True)


# ---------------------------------------------------------------------------------------
# Writing a checkpoint of the population (collective)


class KeptFile(Protocol):
    """What :func:`write_checkpoint` asks of the run's kept best (evo.runner.best.KeptBest)."""

    def save(self, directory: Path) -> dict | None:
        """This rank's part: writes ``best.pt`` if it holds a capture not yet written; its entry."""
        ...

    def saved(self, directory: Path, written: dict | None) -> dict | None:
        """Rank 0, once every rank wrote its files: the manifest's ``best`` entry, or None."""
        ...

    def done(self) -> None:
        """Every rank, after the checkpoint: its capture is on disk."""
        ...


def write_checkpoint(
    comm,
    target: Target,
    generation: int,
    payloads: dict[int, bytes],
    run_state: dict | None,
    best: KeptFile | None = None,
) -> None:
    """Collective: every rank writes its members' files (``payloads``: member -> its file's bytes; and,
    the rank that captured a new best, ``best.pt``), then rank 0 writes the manifest (last) and prunes
    old checkpoints. ``run_state`` (rank 0 only: the lineage, the explorer's state ...) goes into the
    manifest."""
    from evo.mpi import exchange

    directory = generation_dir(target.run_dir, generation)
    if comm.Get_rank() == 0:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / MANIFEST).unlink(missing_ok=True)
    exchange.barrier(comm)
    entries = []
    for member, data in payloads.items():
        atomic_write(directory / member_filename(member), data)
        entries.append((member, file_entry(member_filename(member), data)))
    best_file = best.save(directory) if best is not None else None
    gathered = exchange.gather_to_root(comm, [(entries, best_file)])
    if comm.Get_rank() == 0:
        manifest = {
            "format": FORMAT,
            "run_id": target.run_id,
            "generation": generation,
            "env_id": target.env_id,
            "num_agents": target.num_agents,
            "world_size": target.world_size,
            "members": {str(member): entry for member, entry in sorted(e for part, _ in gathered for e in part)},
            **(run_state or {}),
        }
        if best is not None:
            kept = best.saved(directory, next((file for _, file in gathered if file is not None), None))
            if kept is not None:
                manifest["best"] = kept
        write_manifest(directory, manifest)
        prune(target.run_dir, target.keep, generation)
        logger.debug("checkpoint of generation %d written to %s", generation, directory)
    if best is not None:
        best.done()
    exchange.barrier(comm)
