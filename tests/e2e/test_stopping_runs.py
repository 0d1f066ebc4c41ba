"""Stop signals in other processes: a late repeat after a stop in a fresh Python; and one real run under
mpiexec held inside generation 2 (tests/gated_env.py), which serves three tests: a --resume started while it
trains is refused by the run directory's lock (exit 2, the holder named, its records untouched), every rank
and mpiexec signalled (as SLURM and mpiexec both forward a signal) stop it with generation 1's checkpoint,
and a resume in a new job, once it stopped, completes it and leaves no lock. (Two runs started at once on
one directory: tests/e2e/test_run_dir_lock.py.)"""

import os
import signal
import socket
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from evo.rundir import checkpoint as ckpt
from tests.e2e.runs import common, running, wait_for
from tests.gated_env import gate_flags, held
from tests.support import ROOT, TINY_DEFAULT, budget, generations_recorded, mpiexec, write_hyperparams

RECORDS = ("population.csv", "lineage.jsonl", "generations.csv", "command.txt")


def test_a_late_repeat_after_the_stop_does_not_change_the_exit_status():
    """srun forwards USR1 to the ranks after SLURM's own copy stopped them: the repeat can
    arrive after the run returned, while the process exits with status 75."""
    script = textwrap.dedent(
        """
        import os, signal, sys, time
        from evo.runner.stopping import EXIT_STOPPED, StopRequest
        request = StopRequest().install()
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.01)
        request.uninstall()
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)
        sys.exit(EXIT_STOPPED)
        """
    )
    stopped = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, timeout=60)
    assert stopped.returncode == 75, stopped.stderr


@pytest.fixture(scope="module")
def held_run(tmp_path_factory):
    """A run of 2 members on 2 ranks, both ranks held at env step 100 (2 envs x 64 steps a generation per
    member: inside generation 2, after generation 1's checkpoint and records). While it is held, a --resume
    of its directory is tried and its records read before and after; then what `scancel --signal=USR1 --full`
    does to a job started by mpiexec: SLURM signals every rank and mpiexec, which forwards the signal to every
    rank again. Once it stopped, the gates are opened and it is resumed in a new job."""
    base = tmp_path_factory.mktemp("held")
    gate, run_dir = base / "gate", base / "run"
    gate.mkdir()
    hyperparams = write_hyperparams(base, TINY_DEFAULT)
    flags = [*gate_flags("CartPole-v1", 100, gate), *budget(2, 3, 128), *common(run_dir, hyperparams)]
    with running(2, ["pbt_rl_truct.py", *flags]) as job:
        wait_for(lambda: set(held(gate, range(2))) == {0, 1}, 300, "both ranks at the gate in generation 2")
        records = {name: (run_dir / name).read_bytes() for name in RECORDS}
        holder = (gate / "held-0").read_text()  # rank 0's PID: the lock's holder
        refused = mpiexec(2, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume"], timeout=120)
        records_after = {name: (run_dir / name).read_bytes() for name in RECORDS}
        for pid in held(gate, [0, 1]).values():
            os.kill(pid, signal.SIGUSR1)
        os.kill(job.pid, signal.SIGUSR1)
        stdout, stderr = job.communicate(timeout=300)
    stopped = SimpleNamespace(returncode=job.returncode, stdout=stdout, stderr=stderr)
    generations_at_stop = generations_recorded(run_dir)
    latest_at_stop = ckpt.latest(run_dir)[0].generation
    for rank in range(2):  # the resumed run's envs pass the gate
        (gate / f"released-{rank}").touch()
    resumed = mpiexec(2, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume"], timeout=300)
    return SimpleNamespace(
        run_dir=run_dir,
        holder=holder,
        refused=refused,
        records=records,
        records_after=records_after,
        stopped=stopped,
        generations_at_stop=generations_at_stop,
        latest_at_stop=latest_at_stop,
        resumed=resumed,
    )


def test_a_resume_of_a_running_run_is_refused_naming_it_and_its_records_stay(held_run):
    refused = held_run.refused
    assert refused.returncode == 2, refused.stderr[-3000:]
    said = f"is in use by the run of process {held_run.holder} on {socket.gethostname()}"
    assert said in refused.stderr and refused.stderr.count(said) == 1  # once: rank 0's
    assert "Traceback" not in refused.stderr
    assert held_run.records_after == held_run.records


def test_every_rank_signalled_twice_still_stops_with_a_checkpoint(held_run):
    stopped = held_run.stopped
    assert stopped.returncode == 75, stopped.stderr[-3000:]
    assert "KeyboardInterrupt" not in stopped.stderr and "aborting" not in stopped.stderr
    assert "checkpoint of generation 1" in stopped.stdout + stopped.stderr
    assert held_run.generations_at_stop == {1: [0, 1]}
    assert held_run.latest_at_stop == 1


def test_a_stopped_run_resumes_in_a_new_job_once_its_lock_is_free(held_run):
    resumed = held_run.resumed
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert generations_recorded(held_run.run_dir) == {1: [0, 1], 2: [0, 1], 3: [0, 1]}
    assert not (held_run.run_dir / "lock.json").exists()
