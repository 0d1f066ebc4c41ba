"""A run directory's lock: one process holds it for the life of a run, new or resumed.

Two jobs writing one run directory lose work without a word: a ``--resume`` of a run that is still
training truncates its records to its checkpoint under it (a requeued SLURM job whose old step still
runs does exactly this), and two new runs started at the same instant race for the directory. So the
entry point's rank 0 takes the lock before any record is touched (:meth:`RunLock.acquire`) and holds it
until the run ends; a second run or resume on a locked directory is refused (:class:`RunDirLocked`,
exit 2) with the holder's host and PID.

The lock is ``run_dir/lock.json``, created with ``O_EXCL`` (atomic, on a shared file system too): the
holder's host, PID, its process's start time and when it took the lock. While the run goes, a
daemon thread touches it every :data:`HEARTBEAT_S` seconds. A lock left by a dead process is taken over
with a warning: on this host, when its PID is gone (or now names another process: the start time
differs; or is a zombie nobody reaped), after a few seconds' wait when its job has ended but the
process has not exited yet (its launcher gone: a rank that mpiexec is tearing down after another
rank was killed); from another host, whose processes this one cannot see, when its heartbeat is older than
:data:`STALE_S` (a job killed with its node). A take-over renames the stale file first, which only one
of several racing takers can do, so no two runs take one lock. A new run's directory that a run left
before its first checkpoint (it failed while starting) is taken over the same way, under its lock, and
cleared (:mod:`evo.rundir.unstarted`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from evo.rundir.unstarted import LOCK, clear, unstarted

logger = logging.getLogger(__name__)

HEARTBEAT_S = 30.0
"""How often the holder touches its lock."""
STALE_S = 180.0
"""Another host's lock whose heartbeat is older than this is a dead job's: 6 missed heartbeats."""
LINGER_S = 30.0
"""How long a holder whose job has ended (its launcher gone) may take to exit before it counts as alive."""
WRITE_S = 10.0
"""A lock file that names no holder (empty, or not the holder's JSON) and has not changed for this long is no
live run's: a taker writes its JSON at once after creating the file, so only a write that failed (a full
disk, a killed process) leaves one. Younger, it may be a taker's that is being written."""


@dataclass(frozen=True)
class Holder:
    """Who holds a run directory's lock."""

    host: str
    pid: int
    process_start: str
    """The process's start time as its host's kernel counts it (``/proc/<pid>/stat`` field 22): with the
    PID, it names one process even after the PID is reused."""
    since: str
    """When it took the lock (local time of its host)."""
    parent: int = 0
    """Its parent when it took the lock (mpiexec's, srun's daemon): a holder whose parent changed was left
    behind by a job that ended (a rank orphaned while the launcher tears the job down)."""

    @classmethod
    def this_process(cls) -> Holder:
        pid = os.getpid()
        return cls(socket.gethostname(), pid, process_start(pid), time.strftime("%Y-%m-%d %H:%M:%S"), os.getppid())

    def describe(self) -> str:
        if self.pid < 0:  # read_holder's placeholder for a file that names no holder
            return "no process (the file names none)"
        return f"process {self.pid} on {self.host} (since {self.since})"


class RunDirError(RuntimeError):
    """The run directory cannot be taken: the message says why and what to do."""


class RunDirLocked(RunDirError):
    """Another live process holds the lock; the message names it and what to do."""


def _stat(pid: int) -> list[str]:
    """Process ``pid``'s /proc/<pid>/stat fields after its command (field 3 first), or [] if unknown."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return []


def process_start(pid: int) -> str:
    """Process ``pid``'s start time on this host ('' if unknown: no /proc, or no such process)."""
    fields = _stat(pid)
    return fields[19] if fields else ""  # field 22


def parent_of(pid: int) -> int:
    """Process ``pid``'s parent on this host (0 if unknown)."""
    fields = _stat(pid)
    return int(fields[1]) if fields else 0  # field 4


def alive(holder: Holder) -> bool:
    """Whether ``holder``, a process of this host, still runs (its PID with the same start time, not a zombie:
    a process that ended but that nobody reaped, as in a container whose first process reaps none)."""
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    fields = _stat(holder.pid)
    if fields and fields[0] in ("Z", "X"):
        return False
    start = fields[19] if fields else ""
    return not (start and holder.process_start and start != holder.process_start)


class RunLock:
    """The lock of one run directory, held by this process (see the module docstring)."""

    def __init__(self, path: Path, holder: Holder):
        self.path = path
        self.holder = holder
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def acquire(cls, run_dir: Path, create: bool, heartbeat_s: float = HEARTBEAT_S) -> RunLock:
        """Take ``run_dir``'s lock, creating the directory for a new run (``create``), and start the
        heartbeat. Raises :class:`RunDirLocked` if a live process holds it, or if a new run's directory
        was created by another run at the same moment."""
        run_dir = Path(run_dir)
        if create:
            try:
                run_dir.mkdir(parents=True, exist_ok=False)
            except FileExistsError:
                return cls._take_over_unstarted(run_dir, heartbeat_s)
            except OSError as error:
                raise RunDirError(
                    f"--run-dir {run_dir}: cannot create it ({error.strerror}); give a --run-dir in a folder you may "
                    "write"
                ) from None
        holder = Holder.this_process()
        path = run_dir / LOCK
        for _ in range(3):  # a take-over that lost a race tries again
            try:
                created = _create(path, holder)
            except OSError as error:
                raise RunDirError(
                    f"--run-dir {run_dir}: cannot write its lock {path} ({error.strerror}); a run needs a directory it "
                    "may write"
                ) from None
            if created:
                lock = cls(path, holder)
                lock._start(heartbeat_s)
                return lock
            found = read_holder(path)
            if found is None:  # gone between our try and our read: its holder released it
                continue
            reason = stale(found, path)
            if reason is None and found.pid < 0:
                raise RunDirLocked(
                    f"--run-dir {run_dir}: its lock {path} names no holder yet: another run is taking it at this "
                    f"moment, or a lock write failed a moment ago. Try again in {WRITE_S:.0f} s: a lock file that "
                    "names no holder for that long is taken over."
                )
            if reason is None:
                raise RunDirLocked(
                    f"--run-dir {run_dir} is in use by the run of {found.describe()}: a second run or "
                    f"--resume on it would overwrite its records. Wait for it to end, or stop it (kill -USR1 "
                    f"{found.pid} on {found.host} checkpoints and exits 75), then resume. If that job is gone with "
                    f"its host, the lock is taken over once its heartbeat ({path}) is older than {STALE_S:.0f} s."
                )
            taken = path.with_name(f"{LOCK}.stale-{holder.host}-{holder.pid}")
            try:
                os.rename(path, taken)
            except FileNotFoundError:  # another taker renamed it first
                continue
            if read_holder(taken) != found:  # another taker replaced it in between: it is theirs
                os.rename(taken, path)
                continue
            taken.unlink(missing_ok=True)
            logger.warning("--run-dir %s: taking over the lock of %s: %s", run_dir, found.describe(), reason)
        raise RunDirLocked(f"--run-dir {run_dir}: its lock changed hands while this run tried to take it; try again")

    @classmethod
    def _take_over_unstarted(cls, run_dir: Path, heartbeat_s: float) -> RunLock:
        """A new run's directory that exists: taken over if a run left it before its first checkpoint and no
        live process holds it (evo.rundir.unstarted; checked again under its lock, then cleared, with a
        warning); else refused, as a run started at the same moment."""
        refusal = RunDirLocked(
            f"--run-dir {run_dir} was created by another run starting at the same moment{held_by(run_dir / LOCK)}; "
            "evo will not overwrite a run. Pick another --run-dir or --exp-name."
        )
        if unstarted(run_dir) is None:
            raise refusal
        try:
            lock = cls.acquire(run_dir, create=False, heartbeat_s=heartbeat_s)
        except RunDirLocked:  # a live run holds it: one starting at this moment
            raise refusal from None
        left = unstarted(run_dir)
        if left is None:  # another run wrote it in between
            lock.release()
            raise refusal
        clear(run_dir)
        removed = [name for name in left if name != LOCK]
        if removed:
            logger.warning(
                "--run-dir %s: a run left it before its first checkpoint (it failed while starting): its files (%s) "
                "are removed and this run starts afresh in it",
                run_dir,
                ", ".join(removed),
            )
        return lock

    def _start(self, heartbeat_s: float) -> None:
        self._thread = threading.Thread(target=self._beat, args=(heartbeat_s,), name="run-dir lock", daemon=True)
        self._thread.start()

    def _beat(self, heartbeat_s: float) -> None:
        while not self._stop.wait(heartbeat_s):
            try:
                os.utime(self.path)
            except OSError as error:  # the directory was removed under the run: say it once
                logger.warning("the run directory's lock %s: %s", self.path, error)
                return

    def release(self) -> None:
        """Stop the heartbeat and remove the lock (if it is still this process's)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if read_holder(self.path) == self.holder:
            self.path.unlink(missing_ok=True)


def _create(path: Path, holder: Holder) -> bool:
    """Create the lock file holding ``holder``, if there is none (atomically)."""
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    try:
        with os.fdopen(descriptor, "w") as handle:
            handle.write(json.dumps(asdict(holder)) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:  # a full disk, say: no empty lock file is left to block the next taker
        path.unlink(missing_ok=True)
        raise
    return True


def read_holder(path: Path) -> Holder | None:
    """The holder a lock file names, or None if there is none. A file being written (empty, or half a
    line) names a holder that has just taken it: a holder of unknown PID on an unknown host, live."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        return Holder(**json.loads(text))  # a lock from before ``parent`` was kept reads as 0: never orphaned
    except (ValueError, TypeError):
        return Holder("?", -1, "", "just now")


def orphaned(holder: Holder) -> bool:
    """Whether ``holder``, a live process of this host, was left by its launcher: its job has ended."""
    return bool(holder.parent) and parent_of(holder.pid) not in (0, holder.parent)


def stale(holder: Holder, path: Path, now: float | None = None, linger_s: float = LINGER_S) -> str | None:
    """Why ``holder``'s lock (the file ``path``) is a dead process's, or None if it may be alive. A holder of
    this host whose job has ended (its launcher gone) is given ``linger_s`` seconds to exit."""
    if holder.pid < 0:  # being written, or a write that failed: decided by the file's age
        try:
            age = (time.time() if now is None else now) - path.stat().st_mtime
        except FileNotFoundError:
            return "it was removed"
        return (
            f"it names no holder and has not changed for {age:.0f} s (a lock write that failed)"
            if age > WRITE_S
            else None
        )
    if holder.host == socket.gethostname():
        if alive(holder) and orphaned(holder):
            deadline = time.monotonic() + linger_s
            while alive(holder) and time.monotonic() < deadline:  # the job's tear-down ends it
                time.sleep(0.05)
        return None if alive(holder) else f"its process {holder.pid} is gone"
    try:
        age = (time.time() if now is None else now) - path.stat().st_mtime
    except FileNotFoundError:
        return "it was removed"
    return f"its last heartbeat is {age:.0f} s old (more than {STALE_S:.0f} s)" if age > STALE_S else None


def held_by(path: Path) -> str:
    """`` (process P on HOST ...)`` for a message, or '' when the lock names nobody yet."""
    holder = read_holder(path)
    return f" ({holder.describe()})" if holder is not None and holder.pid >= 0 else ""
