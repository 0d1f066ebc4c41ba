"""The SLURM batch scripts, dry runs: valid bash, a command our parser accepts, resume when a
checkpoint exists. Run locally for real (USR1 -> checkpoint -> exit 75 -> resume):
tests/e2e/test_slurm_local.py."""

import os
import shlex
import subprocess

import pytest

from evo.config import build_parser
from tests.support import ROOT

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


def test_there_are_single_and_multi_node_and_gpu_scripts():
    assert {s.name for s in SCRIPTS} == {"single_node.sbatch", "multi_node.sbatch", "gpu.sbatch"}


def test_the_gpu_script_asks_for_gpus_and_runs_the_members_on_them(tmp_path):
    text = (ROOT / "slurm" / "gpu.sbatch").read_text()
    assert "#SBATCH --gpus-per-node=" in text
    for launcher in ("srun", "mpiexec"):
        command = dry_run(ROOT / "slurm" / "gpu.sbatch", tmp_path / "run", LAUNCHER=launcher)
        flags = command[command.index("python") + 2 :]
        assert build_parser().parse_known_args(flags)[0].device == "cuda"


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
    # an asynchronous run's member checkpoints (their folder exists from its start)
    (tmp_path / "async" / "checkpoints" / "members").mkdir(parents=True)
    assert (
        build_parser().parse_known_args(dry_run(script, tmp_path / "async", LAUNCHER=launcher)[python + 2 :])[0].resume
    )


def test_run_dir_defaults_to_the_job_name():
    command = subprocess.run(
        ["bash", str(ROOT / "slurm" / "single_node.sbatch")],
        env={**os.environ, "EVO_DRY_RUN": "1", "SLURM_JOB_NAME": "my-job", "EVO_HOME": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    assert command[command.index("--run-dir") + 1] == str(ROOT / "runs" / "my-job")
