"""The study's runs under mpiexec: the unfinished ones, as many at a time as the cores allow; an interrupted run
resumes from its checkpoint, one stopped before its first checkpoint starts again. Ctrl-C or SIGTERM stops the runs
in progress (each keeps its last checkpoint) and the study exits 130; run the same command again to continue. A
study that runs its runs holds ``<out>/lock.json`` (the run directory's lock, :mod:`evo.rundir.lock`) while it does,
so a second ``evo-study`` of the same study is refused; and no study starts, resumes or removes a run whose
directory a live process holds (a ``--job N`` of a SLURM array, or a run started by hand): that run is named as not
started. A study killed outright (SIGKILL, the OOM killer) leaves no run training on as an orphan: on Linux each run
gets SIGTERM when the study process dies. Every launch is one line of ``<out>/launches.jsonl`` (job, start, seconds,
exit status), and a finished run's ``wall_s`` is the sum of its launches.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from evo.launch import stops_with
from evo.rundir.checkpoint import atomic_write, open_appending
from evo.rundir.lock import LOCK, RunDirError, RunLock, read_holder, stale
from evo.rundir.unstarted import has_checkpoint
from evo.study.jobs import WALL, Job, is_finished, launch_argv, study_pythonpath

LAUNCHES = "launches.jsonl"
PARTIAL = "wall_s.partial"
"""Seconds of a run's earlier launches that did not finish it (added into ``wall_s`` at the end)."""


@dataclass
class Running:
    process: subprocess.Popen
    log: IO[str]
    started: float
    wall_started: float


class StudyBusy(RuntimeError):
    """The study, or one of its runs, is in use by a live process: the message says by whom and what to do."""


def live_holder(folder: Path) -> str | None:
    """Who holds ``folder``'s lock (``folder/lock.json``), if a live process does."""
    path = folder / LOCK
    holder = read_holder(path)
    if holder is None or stale(holder, path) is not None:
        return None
    return holder.describe()


def study_lock(out: Path) -> RunLock:
    """Take the study's lock (``out/lock.json``) for as long as it runs its runs; StudyBusy when another
    live ``evo-study`` holds it, or ``out`` cannot be written."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        return RunLock.acquire(out, create=False)
    except RunDirError:
        holder = live_holder(out)
        if holder is None:  # a lock being written this moment, or an unwritable folder
            raise StudyBusy(
                f"the study's folder {out} cannot be locked for this run (another evo-study is starting on it "
                "this moment, or it is not writable); try again, or give another --out"
            ) from None
        raise StudyBusy(
            f"the study's folder {out} is in use by the evo-study of {holder}: a second one would run, resume "
            "or remove the same runs under it. Wait for it to end, or stop it (Ctrl-C, or kill -TERM its "
            "process: its runs keep their checkpoints), then run this command again"
        ) from None
    except OSError as error:
        raise StudyBusy(
            f"the study's folder {out}: cannot create it ({error.strerror}); give an --out in a folder you may write"
        ) from None


def job_environment(cwd: Path) -> dict[str, str]:
    """The runs' environment: unbuffered output, and the study's folder on PYTHONPATH (a ``module:Env``
    id's module there imports on every rank)."""
    return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=study_pythonpath(cwd))


def start(job: Job, mpiexec: str, logs: Path, cwd: Path) -> Running:
    """Launch one run (resumed if a checkpoint of it exists, else from scratch). StudyBusy, and nothing
    started or removed, when a live process holds the run's directory."""
    holder = live_holder(job.run_dir)
    if holder is not None:
        raise StudyBusy(
            f"{job.name}: not started: its run directory {job.run_dir} is in use by the run of {holder}, a --job "
            "of this study or a run started by hand. It is left as it is; run the study again once that run ends"
        )
    argv = launch_argv(job, mpiexec)
    if job.mpi and job.run_dir.exists():
        if has_checkpoint(job.run_dir):  # a generation's manifest, or an asynchronous run's ready point
            argv.append("--resume")
        else:
            shutil.rmtree(job.run_dir)  # stopped before its first checkpoint: nothing to keep
    logs.mkdir(parents=True, exist_ok=True)
    log = open_appending(logs / job.log_name)
    process = subprocess.Popen(
        argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=job_environment(cwd),
        preexec_fn=stops_with(os.getpid()),
    )  # fmt: skip
    return Running(process, log, time.perf_counter(), time.time())


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def run_all(
    jobs: Sequence[Job], cores: int, mpiexec: str, out: Path, cwd: Path, done_line: Callable[[Job, float], str]
) -> list[str]:
    """Run the unfinished jobs, at most ``cores`` ranks at a time (a job wider than ``cores`` alone);
    returns the failures. ``done_line`` says what a finished run found. KeyboardInterrupt (Ctrl-C,
    SIGTERM) stops the runs in progress and is raised again."""
    pending = [job for job in jobs if not is_finished(job)]
    done = len(jobs) - len(pending)
    if done:
        print(f"{done} of {len(jobs)} runs already finished; running the other {len(pending)}", flush=True)
    running: dict[Job, Running] = {}
    failures: list[str] = []
    previous = signal.signal(signal.SIGTERM, _interrupt)  # like Ctrl-C: stop the runs, keep what is done
    try:
        _loop(pending, running, failures, done, len(jobs), cores, mpiexec, out, cwd, done_line)
    except KeyboardInterrupt:
        print("interrupted: stopping the runs in progress; run the same command again to continue", flush=True)
        raise
    finally:
        for job, run in running.items():  # no run outlives the study
            if run.process.poll() is None:
                run.process.terminate()
                run.process.wait()
            _ended(job, run, run.process.returncode, out)
        signal.signal(signal.SIGTERM, previous)
    return failures


def _loop(pending, running, failures, done, total, cores, mpiexec, out, cwd, done_line) -> None:
    while pending or running:
        busy = sum(job.ranks for job in running)
        for job in list(pending):  # in order, but a one-rank run may fill a free core
            if busy == 0 or busy + job.ranks <= cores:
                pending.remove(job)
                try:
                    running[job] = start(job, mpiexec, out / "logs", cwd)
                except StudyBusy as busy_run:
                    done += 1
                    failures.append(str(busy_run))
                    print(f"[{done}/{total}] {busy_run}", flush=True)
                    continue
                busy += job.ranks
        time.sleep(0.5)
        for job, run in list(running.items()):
            status = run.process.poll()
            if status is None:
                continue
            del running[job]
            done += 1
            wall = _ended(job, run, status, out)
            if status != 0:
                failures.append(f"{job.name}: exit status {status}, see {run.log.name}")
                print(f"[{done}/{total}] {job.name}: FAILED (exit {status}), log {run.log.name}", flush=True)
                continue
            print(f"[{done}/{total}] {job.name}: {done_line(job, wall)}", flush=True)


def _ended(job: Job, run: Running, status: int | None, out: Path) -> float:
    """Record a launch that ended: its line in launches.jsonl, and the run's time (``wall_s`` when it
    finished, else added to its partial time). Returns the run's whole wall time so far."""
    if run.log.closed:
        return 0.0
    run.log.close()
    seconds = time.perf_counter() - run.started
    entry = {"job": job.name, "run_dir": str(job.run_dir), "started": round(run.wall_started, 1),
             "seconds": round(seconds, 1), "status": status}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    with open_appending(out / LAUNCHES) as handle:
        handle.write(json.dumps(entry) + "\n")
    if not job.run_dir.is_dir():
        return seconds
    partial = job.run_dir / PARTIAL
    before = float(partial.read_text()) if partial.is_file() else 0.0
    if status == 0:
        atomic_write(job.run_dir / WALL, f"{before + seconds:.1f}\n".encode())
        partial.unlink(missing_ok=True)
    else:
        atomic_write(partial, f"{before + seconds:.1f}\n".encode())
    return before + seconds


def read_launches(out: Path) -> list[dict]:
    path = Path(out) / LAUNCHES
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
