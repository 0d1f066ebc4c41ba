"""Installs anywhere: the wheel holds what a run needs, and runs from a fresh virtualenv elsewhere.

The wheel is built from the repository as a user would (``pip wheel``, the build backend in an
isolated environment from PyPI) and installed non-editable into a new virtualenv. The heavy
dependencies (torch, SB3, mpi4py, Open MPI) are not installed again: a ``.pth`` file in the
new virtualenv lists the project virtualenv's site-packages. A plain path line in a ``.pth``
adds that directory to ``sys.path`` but does not run the ``.pth`` files inside it, so the
project's editable evo (its own ``.pth``) stays invisible, and ``import evo`` can only find
the wheel's copy. Every command runs from ``tmp_path``, outside the repository.
"""

from __future__ import annotations

import configparser
import csv
import math
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.support import ROOT, mpi_env, mpiexec_path

BUILTIN_YAML = "evo/hyperparams/ppo.yml"
BUILTIN_YAMLS = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "evo" / "hyperparams").glob("*.yml"))
"""Every learner's built-in hyperparameters (PPO's and SAC's)."""
CONSOLE_SCRIPTS = (
    "evo-truct",
    "evo-wta",
    "evo-truct-collective",
    "evo-launch",
    "evo-export",
    "evo-evaluate",
    "evo-study",
)


def run(command: list, cwd: Path, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    completed = subprocess.run(
        [str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=timeout, **kwargs
    )
    assert completed.returncode == 0, f"{command} exited {completed.returncode}:\n{completed.stderr[-4000:]}"
    return completed


def package_files() -> set[str]:
    """What an install must hold: every module of every evo sub-package, and every learner's built-in YAML."""
    modules = {
        path.relative_to(ROOT).as_posix() for path in (ROOT / "evo").rglob("*.py") if "__pycache__" not in path.parts
    }
    return modules | {BUILTIN_YAML, *BUILTIN_YAMLS}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", out, ROOT], cwd=out)
    (built,) = out.glob("evo-*.whl")
    return built


def test_wheel_holds_every_module_the_builtin_yaml_and_the_console_scripts(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert package_files() - names == set(), "missing from the wheel"
        for yaml_file in BUILTIN_YAMLS:
            assert archive.read(yaml_file) == (ROOT / yaml_file).read_bytes(), yaml_file
        (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
        parser = configparser.ConfigParser()
        parser.read_string(archive.read(entry_points).decode())
    scripts = dict(parser["console_scripts"])
    assert set(CONSOLE_SCRIPTS) <= set(scripts), scripts
    for name in CONSOLE_SCRIPTS:
        module = scripts[name].partition(":")[0]
        assert module.replace(".", "/") + ".py" in names, f"{name} = {scripts[name]}: module not in the wheel"
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]


def test_sdist_holds_every_module_and_the_builtin_yaml(tmp_path):
    tomllib = pytest.importorskip("tomllib")
    build_system = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]
    backend = tmp_path / "backend"
    run([sys.executable, "-m", "pip", "install", "--quiet", "--target", backend, *build_system["requires"]], tmp_path)
    out = tmp_path / "sdist"
    out.mkdir()
    module, _, attribute = build_system["build-backend"].partition(":")
    build = (
        f"import importlib, sys; backend = importlib.import_module({module!r}); "
        + (f"backend = backend.{attribute}; " if attribute else "")
        + f"print(backend.build_sdist({str(out)!r}))"
    )
    run([sys.executable, "-c", build], ROOT, env={**mpi_env(), "PYTHONPATH": str(backend)})
    (sdist,) = out.glob("evo-*.tar.gz")
    with tarfile.open(sdist) as archive:
        members = {name.partition("/")[2]: name for name in archive.getnames()}  # without "evo-<version>/"
        assert package_files() - set(members) == set(), "missing from the sdist"
        for yaml_file in BUILTIN_YAMLS:
            assert archive.extractfile(members[yaml_file]).read() == (ROOT / yaml_file).read_bytes(), yaml_file


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh virtualenv with the wheel installed and the project's heavy dependencies visible."""
    venv = tmp_path_factory.mktemp("install") / "venv"
    outside = venv.parent
    run([sys.executable, "-m", "venv", venv], outside)
    python = venv / "bin" / "python"
    # Before the .pth: pip must see no other evo (it would try to replace the project's).
    run([python, "-m", "pip", "install", "--quiet", "--no-deps", wheel], outside)
    site_packages = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], outside)
    project = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site_packages.stdout.strip(), "project-dependencies.pth").write_text("\n".join(sorted(project)) + "\n")
    return venv


def test_the_installed_evo_is_the_wheels_with_its_yaml(venv, tmp_path):
    probe = (
        "import importlib.resources, evo, mpi4py, stable_baselines3, torch; "
        "print(evo.__file__); print(importlib.resources.files('evo').joinpath('hyperparams/ppo.yml').is_file()); "
        "print(importlib.resources.files('evo').joinpath('hyperparams/sac.yml').is_file())"
    )
    lines = run([venv / "bin" / "python", "-c", probe], tmp_path).stdout.split()
    assert Path(lines[0]).is_relative_to(venv), f"evo imported from {lines[0]}, not from the wheel in {venv}"
    assert lines[1:] == ["True", "True"]
    for name in CONSOLE_SCRIPTS:
        assert (venv / "bin" / name).is_file(), name
    for plot in ("evo.tools.plot", "evo.plot"):  # the tool's former name too (evo/__init__.py's MOVED)
        assert "run_dir" in run([venv / "bin" / "python", "-m", plot, "--help"], tmp_path).stdout
    for tool in ("evo-export", "evo-evaluate"):
        assert "RUN" in run([venv / "bin" / tool, "--help"], tmp_path).stdout


def test_evo_truct_runs_from_the_installed_wheel(venv, tmp_path):
    """Two ranks, two generations, from outside the repository, with only the packaged YAML (a user's
    --hyperparams file is read by the same code wherever evo is installed: tests/e2e/test_scripts.py)."""
    run_dir = tmp_path / "run"
    command = [mpiexec_path(), "-n", "2", "--oversubscribe", venv / "bin" / "evo-truct", "--env-id", "CartPole-v1"]
    command += ["--num-agents", "2", "--total-generations", "2", "--agent-training-steps", "256"]
    command += ["--run-dir", run_dir, "--tb-writer", "False"]
    block = yaml.safe_load((ROOT / BUILTIN_YAML).read_text())["CartPole-v1"]
    run(command, tmp_path, env=mpi_env())
    with (run_dir / "population.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert sorted((int(row["generation"]), int(row["member"])) for row in rows) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    # 256 steps rounded up to whole rollouts of the YAML's n_envs x n_steps: the packaged YAML was read
    rollout = block["n_envs"] * block["n_steps"]
    assert {int(row["env_steps"]) for row in rows if row["generation"] == "1"} == {math.ceil(256 / rollout) * rollout}
