"""The tools' former names (evo/__init__.py's MOVED): ``import evo.plot`` is the module ``evo.tools.plot``
itself, and ``python -m evo.plot ARGS`` runs it as the new name does, so users' scripts and batch jobs
keep working after the move into evo/tools/."""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys

import pytest

import evo
from evo import MOVED
from tests.support import ROOT


def python(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_table_names_every_tool_and_no_old_name_has_a_file_left():
    tools = {f"evo.tools.{path.stem}" for path in (ROOT / "evo" / "tools").glob("*.py") if path.stem != "__init__"}
    newer = {"evo.tools.importance", "evo.tools.source"}  # written after the move (issue 56): never had an old name
    assert sorted(MOVED.values()) == sorted(tools - newer)
    assert all(old.removeprefix("evo.") == new.removeprefix("evo.tools.") for old, new in MOVED.items())
    assert not [old for old in MOVED if (ROOT / "evo" / f"{old.removeprefix('evo.')}.py").exists()]


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_name_imports_as_the_very_module_of_the_new_one(old):
    new = MOVED[old]
    module = importlib.import_module(old)
    assert module is importlib.import_module(new) is sys.modules[old] is sys.modules[new]
    assert getattr(evo, old.removeprefix("evo.")) is module  # `from evo import plot` too
    assert module.__name__ == module.__spec__.name == new
    assert module.__file__ == str(ROOT / "evo" / "tools" / f"{new.rpartition('.')[2]}.py")


OLD_FIRST = """
import importlib, json, sys
from evo import MOVED
result = {}
for old, new in MOVED.items():
    module = importlib.import_module(old)  # the old name first, before anything imported the new one
    result[old] = [module is sys.modules[new], module.__name__, module.__spec__.name, type(module.__loader__).__name__]
print(json.dumps(result))
"""


def test_an_old_name_imported_first_keeps_the_new_modules_identity_and_prints_nothing():
    """Imported first under its old name, the module is still the new one, with its own spec and
    loader (the import system hands it the alias's spec, which the loader gives back), and nothing
    is printed."""
    result = python("-c", OLD_FIRST)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    seen = json.loads(result.stdout)
    assert seen == {old: [True, new, new, "SourceFileLoader"] for old, new in MOVED.items()}


def test_a_name_not_in_the_table_is_still_not_found():
    assert importlib.util.find_spec("evo.nothing_here") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("evo.tools_old")


@pytest.mark.parametrize("tool", ["plot", "replay"])
def test_python_m_the_old_name_runs_the_tool(tool, tmp_path):
    """``python -m evo.<tool>``: the tool's help and exit status, its error for a missing run with
    its exit status 2, exactly as ``python -m evo.tools.<tool>``; one line on stderr names the new form."""
    new, old = python("-m", f"evo.tools.{tool}", "--help"), python("-m", f"evo.{tool}", "--help")
    assert new.returncode == old.returncode == 0, old.stderr
    assert old.stdout == new.stdout and "run_dir" in old.stdout and f"usage: python -m evo.tools.{tool}" in old.stdout
    notice = f"python -m evo.{tool}: now python -m evo.tools.{tool} (the old name keeps working)\n"
    assert new.stderr == "" and old.stderr == notice

    missing = str(tmp_path / "nope")
    new, old = python("-m", f"evo.tools.{tool}", missing), python("-m", f"evo.{tool}", missing)
    assert new.returncode == old.returncode == 2
    notice, _, rest = old.stderr.partition("\n")
    assert f"evo.tools.{tool}" in notice and rest == new.stderr and "population.csv not found" in rest


def test_every_console_script_names_a_function_that_exists():
    """pyproject.toml's [project.scripts] (evo-export, evo-evaluate in evo.tools): each target imports."""
    tomllib = pytest.importorskip("tomllib")
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["evo-export"] == "evo.tools.export:main" and scripts["evo-evaluate"] == "evo.tools.evaluate:main"
    for name, target in scripts.items():
        module, _, function = target.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), name
