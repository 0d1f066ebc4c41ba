"""The SLURM batch scripts: valid bash, a command our parser accepts, resume when a
checkpoint exists, and (run locally, for real) USR1 -> checkpoint -> exit 75 -> resume."""

import os
import shlex
import signal
import subprocess
import time

import pytest

from evo.config import build_parser
from tests.conftest import ROOT, mpi_env

SCRIPTS = sorted((ROOT / "slurm").glob("*.sbatch"))


def dry_run(script, run_dir, **env):
    result = subprocess.run(
        ["bash", str(script)],
        env={
            **os.environ,
            "EVO_DRY_RUN": "1",
            "SLURM_JOB_NAME": "demo",
            "EVO_HOME": str(ROOT),
            "RUN_DIR": str(run_dir),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return [shlex.split(line)[0] for line in result.stdout.splitlines()]


def test_there_are_single_and_multi_node_scripts():
    assert {s.name for s in SCRIPTS} == {"single_node.sbatch", "multi_node.sbatch"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: s.name)
def test_script_is_valid_bash_with_resources_and_preemption(script):
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    text = script.read_text()
    for directive in ("--ntasks", "--cpus-per-task", "--mem", "--time", "--signal=B:USR1@", "--requeue"):
        assert f"#SBATCH {directive}" in text
    header = text.split("set -uo pipefail")[0]
    assert all(line.startswith("#") or not line.strip() for line in header.splitlines())


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: s.name)
@pytest.mark.parametrize("launcher", ["srun", "mpiexec"])
def test_command_matches_the_launchers_flags(script, launcher, tmp_path):
    command = dry_run(script, tmp_path / "run", LAUNCHER=launcher)
    python = command.index("python")
    assert command[0] in ("srun", "mpiexec")
    script_path, flags = command[python + 1], command[python + 2 :]
    assert script_path.endswith((".py",)) and (ROOT / os.path.basename(script_path)).exists()
    args, unknown = build_parser().parse_known_args(flags)
    assert unknown == []
    assert str(args.run_dir) == str(tmp_path / "run") and not args.resume
    # with a complete checkpoint in the run directory, the next part of the job resumes
    checkpoint = tmp_path / "run" / "checkpoints" / "gen_000003"
    checkpoint.mkdir(parents=True)
    (checkpoint / "manifest.json").write_text("{}")
    assert build_parser().parse_known_args(dry_run(script, tmp_path / "run", LAUNCHER=launcher)[python + 2 :])[0].resume


def test_run_dir_defaults_to_the_job_name():
    command = subprocess.run(
        ["bash", str(ROOT / "slurm" / "single_node.sbatch")],
        env={**os.environ, "EVO_DRY_RUN": "1", "SLURM_JOB_NAME": "my-job", "EVO_HOME": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    assert command[command.index("--run-dir") + 1] == str(ROOT / "runs" / "my-job")


@pytest.mark.e2e
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
