"""The SLURM batch script run locally, for real, with no SLURM (mpiexec as its launcher):
USR1 -> checkpoint -> exit 75 -> the next part resumes. Its dry runs are in
tests/unit/slurm/test_scripts.py."""

import os
import signal
import subprocess

from tests.e2e.runs import wait_for
from tests.gated_env import gate_flags, held
from tests.support import ROOT, TINY_DEFAULT, mpi_env, write_hyperparams


def test_preemption_signal_checkpoints_exits_75_and_the_next_part_resumes(tmp_path):
    """The ranks are held inside generation 2 (tests/gated_env.py: env step 100, 2 envs x 64 steps a
    generation per member) until the script's USR1 reaches them; the next part goes through the gate."""
    run_dir, gate = tmp_path / "run", tmp_path / "gate"
    gate.mkdir()
    hyperparams = write_hyperparams(tmp_path, TINY_DEFAULT)
    env = {
        **mpi_env(),
        "SLURM_NTASKS": "2",
        "SLURM_JOB_NAME": "local",
        "LAUNCHER": "mpiexec",  # no SLURM here to run srun
        "EVO_HOME": str(ROOT),
        "RUN_DIR": str(run_dir),
        "EVO_EXTRA_ARGS": " ".join(
            [*gate_flags("CartPole-v1", 100, gate), "--hyperparams", str(hyperparams)]
            + ["--total-generations", "3", "--agent-training-steps", "128"]
        ),
    }
    env.pop("SLURM_JOB_ID", None)
    script = str(ROOT / "slurm" / "single_node.sbatch")
    job = subprocess.Popen(["bash", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: len(held(gate, [0, 1])) == 2 or job.poll() is not None, 240, "the gate in generation 2")
        assert job.poll() is None, job.communicate()[0][-3000:]
        os.kill(job.pid, signal.SIGUSR1)  # what SLURM's --signal=B:USR1 does
        output, _ = job.communicate(timeout=90)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 75, output[-3000:]
    assert "pre-emption signal" in output and "checkpoint of generation 1" in output

    second = subprocess.run(["bash", script], env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "--resume" in second.stdout
    generations = [line.split(",")[0] for line in (run_dir / "population.csv").read_text().splitlines()[1:]]
    assert generations == ["1", "1", "2", "2", "3", "3"]
