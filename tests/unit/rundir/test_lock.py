"""The run directory's lock (evo/rundir/lock.py) without MPI: taken, refused to a second taker with the
holder named, released, and a dead holder's taken over (this host's by its PID, another host's by its
heartbeat's age)."""

import json
import logging
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict

import pytest

from evo.rundir.lock import (
    LOCK,
    STALE_S,
    WRITE_S,
    Holder,
    RunDirError,
    RunDirLocked,
    RunLock,
    process_start,
    read_holder,
)


def test_a_new_runs_lock_creates_its_directory_and_a_second_taker_is_refused_with_the_holder(tmp_path):
    run_dir = tmp_path / "runs" / "new"
    lock = RunLock.acquire(run_dir, create=True)
    try:
        holder = read_holder(run_dir / LOCK)
        assert (holder.host, holder.pid) == (socket.gethostname(), os.getpid())
        assert holder.process_start == process_start(os.getpid()) != ""
        with pytest.raises(RunDirLocked, match=f"in use by the run of process {os.getpid()} on {socket.gethostname()}"):
            RunLock.acquire(run_dir, create=False)  # a --resume while it runs
        with pytest.raises(RunDirLocked, match="was created by another run starting at the same moment"):
            RunLock.acquire(run_dir, create=True)  # the start race: the loser finds the directory made
    finally:
        lock.release()
    assert not (run_dir / LOCK).exists()
    RunLock.acquire(run_dir, create=False).release()  # free again


def write_lock(run_dir, holder: Holder, age_s: float = 0.0) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK
    path.write_text(json.dumps(asdict(holder)) + "\n")
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))


def test_a_lock_of_a_dead_process_of_this_host_is_taken_over_with_a_warning(tmp_path, caplog):
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(finished.stdout)  # a PID that no longer runs
    write_lock(tmp_path, Holder(socket.gethostname(), dead, "123", "yesterday"))
    with caplog.at_level(logging.WARNING, logger="evo.rundir.lock"):
        lock = RunLock.acquire(tmp_path, create=False)
    assert f"taking over the lock of process {dead} on {socket.gethostname()}" in caplog.text
    assert f"its process {dead} is gone" in caplog.text
    assert read_holder(tmp_path / LOCK).pid == os.getpid()
    lock.release()


def test_a_reused_pid_is_not_the_holder(tmp_path):
    """The PID runs, but it is another process (its start time differs): the lock is a dead one's."""
    write_lock(tmp_path, Holder(socket.gethostname(), os.getpid(), "1", "long ago"))
    lock = RunLock.acquire(tmp_path, create=False)
    assert read_holder(tmp_path / LOCK).process_start == process_start(os.getpid())
    lock.release()


def test_another_hosts_lock_is_refused_while_its_heartbeat_is_fresh_and_taken_over_after(tmp_path, caplog):
    other = Holder("node-17", 4242, "99", "this morning")
    write_lock(tmp_path, other, age_s=STALE_S / 2)
    with pytest.raises(RunDirLocked, match="in use by the run of process 4242 on node-17") as refused:
        RunLock.acquire(tmp_path, create=False)
    assert "kill -USR1 4242 on node-17" in str(refused.value)
    assert read_holder(tmp_path / LOCK) == other  # untouched
    write_lock(tmp_path, other, age_s=STALE_S + 60)
    with caplog.at_level(logging.WARNING, logger="evo.rundir.lock"):
        lock = RunLock.acquire(tmp_path, create=False)
    assert "taking over the lock of process 4242 on node-17" in caplog.text and "its last heartbeat is" in caplog.text
    lock.release()


def test_the_heartbeat_touches_the_lock_while_it_is_held(tmp_path):
    lock = RunLock.acquire(tmp_path, create=False, heartbeat_s=0.01)
    path = tmp_path / LOCK
    os.utime(path, (0, 0))
    deadline = time.monotonic() + 60
    while path.stat().st_mtime == 0 and time.monotonic() < deadline:  # the heartbeat thread's event
        time.sleep(0.01)
    assert path.stat().st_mtime > 0
    lock.release()


def test_a_lock_that_names_no_holder_is_refused_while_fresh_and_taken_over_once_it_is_old(tmp_path, caplog):
    """Issue 54 N1: an empty (or unreadable) lock.json, as a lock write that failed on a full disk leaves it,
    blocked --resume for ever and advised `kill -USR1 -1` (every process of the user). While it is younger than
    WRITE_S it may be a taker's being written: refused, saying to try again, advising no signal; older, no live
    run can have left it: taken over with a warning that says why."""
    path = tmp_path / LOCK
    path.write_text("")
    with pytest.raises(RunDirLocked, match="names no holder yet") as refused:
        RunLock.acquire(tmp_path, create=False)
    assert "kill" not in str(refused.value) and f"{WRITE_S:.0f} s" in str(refused.value)
    assert path.read_text() == ""  # untouched
    stamp = time.time() - WRITE_S - 5
    os.utime(path, (stamp, stamp))
    with caplog.at_level(logging.WARNING, logger="evo.rundir.lock"):
        lock = RunLock.acquire(tmp_path, create=False)
    assert "taking over the lock of no process (the file names none): it names no holder" in caplog.text
    assert read_holder(path).pid == os.getpid()
    lock.release()
    path.write_text('{"host": "half a li')  # unreadable JSON: the same
    os.utime(path, (stamp, stamp))
    RunLock.acquire(tmp_path, create=False).release()


def test_a_lock_write_that_fails_leaves_no_file(tmp_path, monkeypatch):
    """A full disk while the lock is written: the error is a refusal naming the lock, and no empty lock.json is
    left behind to block the next run."""
    import errno

    def full(descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(RunDirError, match=r"cannot write its lock .*\(No space left on device\)"):
        RunLock.acquire(tmp_path, create=False)
    assert not (tmp_path / LOCK).exists()


def test_a_released_lock_of_another_holder_is_not_removed(tmp_path):
    lock = RunLock.acquire(tmp_path, create=False)
    write_lock(tmp_path, Holder("node-2", 7, "", "now"))  # taken over while this one was stalled
    lock.release()
    assert read_holder(tmp_path / LOCK).host == "node-2"


def test_a_run_dir_in_a_folder_this_user_may_not_enter_is_refused_with_the_reason(tmp_path):
    """A new user's --run-dir under a folder they may not read: a problem of the config (exit 2), and the
    lock refuses a folder it cannot create, never a traceback."""
    from evo.config.checks import run_dir_problems
    from evo.rundir.lock import RunDirError
    from tests.support import unprivileged

    closed = tmp_path / "closed"
    (closed / "inner").mkdir(parents=True)
    closed.chmod(0o000)  # no one but root may enter, its owner included: the same case for root and a normal user
    try:
        with unprivileged():
            (problem,) = run_dir_problems(closed / "inner" / "run")
            with pytest.raises(RunDirError, match="cannot create it"):
                RunLock.acquire(closed / "inner" / "run", create=True)
    finally:
        closed.chmod(0o755)
    assert "cannot look there (Permission denied" in problem and "folder you may read and write" in problem


def test_a_holder_left_behind_by_its_ended_job_is_waited_for_then_its_lock_taken(tmp_path):
    """A rank whose launcher is gone (mpiexec ended the job after another rank was killed) may take a moment
    to exit: the lock waits for it rather than refusing the resume that follows at once."""
    from evo.rundir.lock import orphaned, stale

    launcher = subprocess.Popen(  # a launcher that starts a rank and ends at once, leaving it behind
        [
            sys.executable,
            "-c",
            "import subprocess; p = subprocess.Popen(['sleep', '600'], stdout=subprocess.DEVNULL); print(p.pid)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    rank = int(launcher.communicate()[0])
    try:
        holder = Holder(socket.gethostname(), rank, process_start(rank), "now", launcher.pid)
        write_lock(tmp_path, holder)
        assert orphaned(holder)
        assert stale(holder, tmp_path / LOCK, linger_s=0) is None  # still alive: not taken yet
        mine = Holder(socket.gethostname(), os.getpid(), process_start(os.getpid()), "now", os.getppid())
        assert not orphaned(mine)
    finally:
        os.kill(rank, 9)
    lock = RunLock.acquire(tmp_path, create=False)  # it is gone (or a zombie nobody reaps): taken over
    assert read_holder(tmp_path / LOCK).pid == os.getpid()
    lock.release()
