"""The run directory's lock with real runs under mpiexec: two new runs started at the same instant on one
--run-dir end with one run and one clean refusal. (A --resume of a run that is still training, refused with
the holder named and its records untouched, then working once it stopped: tests/e2e/test_stopping_runs.py;
the lock itself: tests/unit/rundir/test_lock.py.)"""

import subprocess
import sys

from tests.e2e.runs import common
from tests.support import ROOT, TINY_DEFAULT, budget, mpi_env, mpiexec_path, write_hyperparams


def test_two_new_runs_started_at_once_on_one_directory_end_with_one_run_and_one_refusal(tmp_path):
    run_dir = tmp_path / "run"
    argv = ["pbt_rl_truct.py", *budget(2, 1, 64), *common(run_dir, write_hyperparams(tmp_path, TINY_DEFAULT))]
    command = [mpiexec_path(), "-n", "1", sys.executable, *argv]
    jobs = [
        subprocess.Popen(command, cwd=ROOT, env=mpi_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [job.communicate(timeout=300) for job in jobs]
    codes = sorted(job.returncode for job in jobs)
    assert codes == [0, 2], [out[1][-2000:] for out in outputs]
    (refused,) = [err for job, (_, err) in zip(jobs, outputs, strict=True) if job.returncode == 2]
    assert "Traceback" not in refused
    assert any(
        reason in refused
        for reason in (
            "already exists; evo will not overwrite a run",
            "created by another run",
            "is in use by",
            "names no holder yet",
        )
    ), refused[-2000:]
    assert len((run_dir / "population.csv").read_text().splitlines()) == 1 + 2  # one run's rows, once
