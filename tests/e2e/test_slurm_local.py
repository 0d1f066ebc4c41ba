"""The SLURM batch script run locally, for real, with no SLURM (mpiexec as its launcher):
USR1 -> checkpoint -> exit 75 -> the next part resumes. Its dry runs are in
tests/unit/slurm/test_scripts.py."""

import os
import signal
import subprocess
import time

from tests.support import ROOT, mpi_env


def test_preemption_signal_checkpoints_exits_75_and_the_next_part_resumes(tmp_path, tiny_hyperparams):
    run_dir = tmp_path / "run"
    env = {
        **mpi_env(),
        "SLURM_NTASKS": "2",
        "SLURM_JOB_NAME": "local",
        "LAUNCHER": "mpiexec",  # no SLURM here to run srun
        "EVO_HOME": str(ROOT),
        "RUN_DIR": str(run_dir),
        "EVO_EXTRA_ARGS": f"--env-id CartPole-v1 --hyperparams {tiny_hyperparams} --total-generations 3 "
        "--agent-training-steps 20000",
    }
    env.pop("SLURM_JOB_ID", None)
    script = str(ROOT / "slurm" / "single_node.sbatch")
    job = subprocess.Popen(["bash", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while (
            not (run_dir / "population.csv").exists() or len((run_dir / "population.csv").read_text().splitlines()) < 3
        ):
            assert time.monotonic() < deadline and job.poll() is None, "generation 1 never finished"
            time.sleep(0.2)
        os.kill(job.pid, signal.SIGUSR1)  # what SLURM's --signal=B:USR1 does
        output, _ = job.communicate(timeout=90)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 75, output[-3000:]
    assert "pre-emption signal" in output

    env["EVO_EXTRA_ARGS"] = env["EVO_EXTRA_ARGS"].replace("20000", "512")
    second = subprocess.run(["bash", script], env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "--resume" in second.stdout
    generations = [line.split(",")[0] for line in (run_dir / "population.csv").read_text().splitlines()[1:]]
    assert generations == ["1", "1", "2", "2", "3", "3"]
