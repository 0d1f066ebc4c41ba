"""Stop signals in other processes: a late repeat after a stop in a fresh Python, and every rank
of a real run under mpiexec signalled twice (as SLURM and mpiexec both forward a signal)."""

import os
import signal
import subprocess
import sys
import textwrap
import time

from evo.rundir import checkpoint as ckpt
from tests.e2e.runs import common, rank_pids, running, wait_for_rows
from tests.support import ROOT, budget, generations_recorded


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


def test_every_rank_signalled_twice_still_stops_with_a_checkpoint(tmp_path, tiny_hyperparams):
    """What `scancel --signal=USR1 --full` does to a job started by mpiexec: SLURM signals
    every rank and mpiexec, which forwards the signal to every rank again."""
    run_dir = tmp_path / "run"
    with running(2, ["pbt_rl_truct.py", *budget(2, 3, 20000), *common(run_dir, tiny_hyperparams)]) as job:
        wait_for_rows(run_dir, 2, "generation 1")
        time.sleep(1.0)  # inside generation 2
        ranks = rank_pids(run_dir)
        assert len(ranks) == 2
        for pid in ranks:
            os.kill(pid, signal.SIGUSR1)
        os.kill(job.pid, signal.SIGUSR1)
        stdout, stderr = job.communicate(timeout=90)
    assert job.returncode == 75, stderr[-3000:]
    assert "KeyboardInterrupt" not in stderr and "aborting" not in stderr
    assert "checkpoint of generation 1" in stdout + stderr
    assert generations_recorded(run_dir) == {1: [0, 1]}
    assert ckpt.latest(run_dir)[0].generation == 1
