"""Stop signals in other processes: a late repeat after a stop in a fresh Python, and every rank
of a real run under mpiexec signalled twice (as SLURM and mpiexec both forward a signal)."""

import os
import signal
import subprocess
import sys
import textwrap

from evo.rundir import checkpoint as ckpt
from tests.e2e.runs import common, running, wait_for
from tests.gated_env import gate_flags, held
from tests.support import ROOT, TINY_DEFAULT, budget, generations_recorded, write_hyperparams


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


def test_every_rank_signalled_twice_still_stops_with_a_checkpoint(tmp_path):
    """What `scancel --signal=USR1 --full` does to a job started by mpiexec: SLURM signals
    every rank and mpiexec, which forwards the signal to every rank again. The ranks are held
    inside generation 2 (tests/gated_env.py) until the signals come."""
    run_dir, gate = tmp_path / "run", tmp_path / "gate"
    gate.mkdir()
    args = [*budget(2, 3, 2048), *gate_flags("CartPole-v1", 1024 + 100, gate)]
    with running(2, ["pbt_rl_truct.py", *args, *common(run_dir, write_hyperparams(tmp_path, TINY_DEFAULT))]) as job:
        wait_for(lambda: len(held(gate, [0, 1])) == 2, 240, "the gate in generation 2")
        for pid in held(gate, [0, 1]).values():
            os.kill(pid, signal.SIGUSR1)
        os.kill(job.pid, signal.SIGUSR1)
        stdout, stderr = job.communicate(timeout=90)
    assert job.returncode == 75, stderr[-3000:]
    assert "KeyboardInterrupt" not in stderr and "aborting" not in stderr
    assert "checkpoint of generation 1" in stdout + stderr
    assert generations_recorded(run_dir) == {1: [0, 1]}
    assert ckpt.latest(run_dir)[0].generation == 1
