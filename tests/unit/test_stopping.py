"""Stop signals, sent for real to this process: repeats of a scheduler's signal never
abort a graceful stop; a second Ctrl-C (SIGINT) does."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from evo.stopping import StopRequest
from tests.conftest import ROOT


@pytest.fixture
def stop_request():
    request = StopRequest().install()
    yield request
    request.uninstall()


def send(signum):
    os.kill(os.getpid(), signum)
    time.sleep(0.01)  # Python runs the handler at the next bytecode boundary of the main thread


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGTERM])
def test_the_same_signal_again_does_not_abort(stop_request, signum):
    send(signum)  # from SLURM (scancel --full) ...
    send(signum)  # ... forwarded again by mpiexec ...
    send(signum)  # ... and by the batch script
    assert stop_request.requested and stop_request.signal_name == signum.name
    assert stop_request.repeats == 2


def test_usr1_then_term_keeps_the_first_signal(stop_request):
    send(signal.SIGUSR1)
    send(signal.SIGTERM)
    assert stop_request.signal_name == "SIGUSR1" and stop_request.repeats == 1


@pytest.mark.parametrize("first", [signal.SIGINT, signal.SIGUSR1, signal.SIGTERM])
def test_sigint_while_stopping_aborts(stop_request, first):
    send(first)
    with pytest.raises(KeyboardInterrupt, match="SIGINT while stopping"):
        send(signal.SIGINT)


def test_one_signal_only_records(stop_request):
    assert not stop_request.requested
    send(signal.SIGINT)
    assert stop_request.requested and stop_request.signal_name == "SIGINT" and stop_request.repeats == 0


def test_uninstall_restores_the_previous_handlers():
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}
    StopRequest().install().uninstall()
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_late_repeat_after_the_stop_does_not_change_the_exit_status():
    """srun forwards USR1 to the ranks after SLURM's own copy stopped them: the repeat can
    arrive after the run returned, while the process exits with status 75."""
    script = textwrap.dedent(
        """
        import os, signal, sys, time
        from evo.stopping import EXIT_STOPPED, StopRequest
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


@pytest.mark.e2e
def test_every_rank_signalled_twice_still_stops_with_a_checkpoint(tmp_path, tiny_hyperparams):
    """What `scancel --signal=USR1 --full` does to a job started by mpiexec: SLURM signals
    every rank and mpiexec, which forwards the signal to every rank again."""
    from evo.rundir import checkpoint as ckpt
    from tests.test_resilience import common, generations_recorded, rank_pids, rows, start, wait_for

    run_dir = tmp_path / "run"
    args = ["pbt_rl_truct.py", "--num-agents", "2", "--total-generations", "3", "--agent-training-steps", "20000"]
    job = start(2, [*args, *common(run_dir, tiny_hyperparams)])
    try:
        wait_for(lambda: (run_dir / "population.csv").exists() and len(rows(run_dir)) >= 2, 240, "generation 1")
        time.sleep(1.0)  # inside generation 2
        ranks = rank_pids(run_dir)
        assert len(ranks) == 2
        for pid in ranks:
            os.kill(pid, signal.SIGUSR1)
        os.kill(job.pid, signal.SIGUSR1)
        stdout, stderr = job.communicate(timeout=90)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 75, stderr[-3000:]
    assert "KeyboardInterrupt" not in stderr and "aborting" not in stderr
    assert "checkpoint of generation 1" in stdout + stderr
    assert generations_recorded(run_dir) == {1: [0, 1]}
    assert ckpt.latest(run_dir)[0].generation == 1
