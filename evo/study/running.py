"""The study's runs under mpiexec: the unfinished ones, as many at a time as the cores allow; an
interrupted run resumes from its checkpoint, one stopped before its first checkpoint starts again.
Ctrl-C or SIGTERM stops the runs in progress (each keeps its last checkpoint) and the study exits
130; run the same command again to continue. A study killed outright (SIGKILL, the OOM killer) leaves
no run training on as an orphan: on Linux each run gets SIGTERM when the study process dies. Every
launch is one line of ``<out>/launches.jsonl`` (job, start, seconds, exit status), and a finished
run's ``wall_s`` is the sum of its launches.
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
from evo.study.jobs import CHECKOUT, WALL, Job, is_finished, python_command

LAUNCHES = "launches.jsonl"
PARTIAL = "wall_s.partial"
"""Seconds of a run's earlier launches that did not finish it (added into ``wall_s`` at the end)."""


@dataclass
class Running:
    process: subprocess.Popen
    log: IO[str]
    started: float
    wall_started: float


def job_environment(cwd: Path) -> dict[str, str]:
    """The runs' environment: unbuffered output, and the study's folder on PYTHONPATH (a ``module:Env``
    id's module there imports on every rank)."""
    path = os.pathsep.join(p for p in (str(cwd), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=path)


def start(job: Job, mpiexec: str, logs: Path, cwd: Path) -> Running:
    """Launch one run (resumed if a checkpoint of it exists, else from scratch)."""
    command = python_command(job, CHECKOUT)
    if job.mpi and job.run_dir.exists():
        if any((job.run_dir / "checkpoints").glob("gen_*/manifest.json")):
            command.append("--resume")
        else:
            shutil.rmtree(job.run_dir)  # stopped before its first checkpoint: nothing to keep
    logs.mkdir(parents=True, exist_ok=True)
    log = (logs / job.log_name).open("a")
    argv = [mpiexec, "-n", str(job.ranks), "--oversubscribe", *command] if job.mpi else command
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
                running[job] = start(job, mpiexec, out / "logs", cwd)
                pending.remove(job)
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
    with (out / LAUNCHES).open("a") as handle:
        handle.write(json.dumps(entry) + "\n")
    if not job.run_dir.is_dir():
        return seconds
    partial = job.run_dir / PARTIAL
    before = float(partial.read_text()) if partial.is_file() else 0.0
    if status == 0:
        (job.run_dir / WALL).write_text(f"{before + seconds:.1f}\n")
        partial.unlink(missing_ok=True)
    else:
        partial.write_text(f"{before + seconds:.1f}\n")
    return before + seconds


def read_launches(out: Path) -> list[dict]:
    path = Path(out) / LAUNCHES
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
