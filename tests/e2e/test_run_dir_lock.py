"""The run directory's lock with real runs under mpiexec: a --resume of a run that is still training is
refused (exit 2, the holder named, its records untouched) and works once it stopped; two new runs started
at the same instant on one --run-dir end with one run and one clean refusal."""

import signal
import socket
import subprocess
import sys

from tests.e2e.runs import common, running, wait_for
from tests.gated_env import gate_flags, held
from tests.support import ROOT, TINY_DEFAULT, budget, mpi_env, mpiexec, mpiexec_path, write_hyperparams

RECORDS = ("population.csv", "lineage.jsonl", "generations.csv", "command.txt")


def test_a_resume_of_a_running_run_is_refused_naming_it_and_its_records_stay(tmp_path):
    gate = tmp_path / "gate"
    gate.mkdir()
    run_dir = tmp_path / "run"
    hyperparams = write_hyperparams(tmp_path, TINY_DEFAULT)
    # 2 envs x 64 steps a generation per member: the gate (env step 100) holds generation 2, after the
    # checkpoint and the records of generation 1
    flags = [*gate_flags("CartPole-v1", 100, gate), *budget(2, 3, 128), *common(run_dir, hyperparams)]
    with running(2, ["pbt_rl_truct.py", *flags]) as job:
        wait_for(lambda: set(held(gate, range(2))) == {0, 1}, 300, "both ranks at the gate in generation 2")
        before = {name: (run_dir / name).read_bytes() for name in RECORDS}
        holder = (gate / "held-0").read_text()  # rank 0's PID: the lock's holder
        resumed = mpiexec(2, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume"], timeout=120)
        assert resumed.returncode == 2, resumed.stderr[-3000:]
        said = f"is in use by the run of process {holder} on {socket.gethostname()}"
        assert said in resumed.stderr and resumed.stderr.count(said) == 1  # once: rank 0's
        assert "Traceback" not in resumed.stderr
        assert {name: (run_dir / name).read_bytes() for name in RECORDS} == before
        job.send_signal(signal.SIGUSR1)
        job.communicate(timeout=300)
        assert job.returncode == 75
    for rank in range(2):  # the resumed run's envs pass the gate
        (gate / f"released-{rank}").touch()
    resumed = mpiexec(2, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume"], timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not (run_dir / "lock.json").exists()


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
        for reason in ("already exists; evo will not overwrite a run", "created by another run", "is in use by")
    ), refused[-2000:]
    assert len((run_dir / "population.csv").read_text().splitlines()) == 1 + 2  # one run's rows, once
