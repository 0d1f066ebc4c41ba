"""The modules evo imports because a name says so, and the ones it refuses to: the ``module`` of an env id
``module:EnvId`` (its import registers the env) and of a learner of your own, ``--algo package.module:Class``.

Whether a name may be imported is decided before anything of it runs, from where the import system would
load the module (:func:`module_files` finds it as an import would, without running its code):

- a module of Python's standard library is refused (:func:`stdlib_problem`): it registers no env and holds
  no learner, and some run code of their own when imported (``this`` prints a poem, ``antigravity`` opens
  a web browser);
- a name read back from a run directory (``--resume``, and evo's tools, which open a run as a resume does)
  is the run directory's word, not the command's: a module that would be loaded from inside that directory
  is refused (:func:`shipped_module_problems`). ``python -m`` puts the folder it starts in first on
  ``sys.path``, so ``python -m evo.tools.export .`` started inside a run directory would otherwise import a
  ``module.py`` shipped in it, and a run directory may come from anyone. A module of your own in your
  project folder (run from there, or on ``PYTHONPATH``) is outside the run directory and imported as before.

Pure: no MPI, no torch; it imports nothing it names.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import site
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def named_module(name: str) -> str | None:
    """The module of ``module:Name`` (an env id or an ``--algo``), or None for a name that names none (a
    registered env id, a built-in learner, a Procgen game as ``procgen:game``)."""
    module, colon, _ = str(name).partition(":")
    return module if colon and module != "procgen" else None


def module_files(module: str) -> list[Path] | None:
    """Where importing ``module`` would load code from: the file or package folder of it and of each package
    above it, found as the import system finds them but without running any of their code (a package not
    imported yet is not imported to look inside it: its submodules are looked for in its folders, where its
    import would look). None where it cannot be found (its import would fail, running nothing)."""
    files: list[Path] = []
    search: list[str] | None = None
    parts = module.split(".")
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        loaded = sys.modules.get(name)
        try:
            if loaded is not None:
                spec = getattr(loaded, "__spec__", None)
            elif search is None:
                spec = importlib.util.find_spec(name)  # a top-level name: the finders look, nothing runs
            else:
                spec = importlib.machinery.PathFinder.find_spec(name, search)
        except (ImportError, ValueError):
            return None
        if spec is None:
            return None
        if spec.origin and spec.has_location:
            files.append(Path(spec.origin))
        locations = list(getattr(loaded, "__path__", None) or spec.submodule_search_locations or [])
        files += [Path(location) for location in locations]
        if depth < len(parts) and not locations:
            return None  # not a package: nothing below it can be imported
        search = locations
    return files


def _forms(path: Path) -> set[Path]:
    """``path`` absolute as written and with its links resolved."""
    return {Path(os.path.abspath(path)), Path(path).resolve()}


def _within(path: Path, folders: set[Path]) -> bool:
    return any(form == folder or folder in form.parents for form in _forms(path) for folder in folders)


def _stdlib_folders() -> tuple[set[Path], set[Path]]:
    """The standard library's folders, and the folders of installed packages (some of which lie inside
    them, as ``lib/python3.X/site-packages`` does)."""
    paths = sysconfig.get_paths()
    library = set().union(*(_forms(Path(paths[key])) for key in ("stdlib", "platstdlib") if key in paths))
    installed = [paths.get("purelib"), paths.get("platlib"), *site.getsitepackages(), site.getusersitepackages()]
    return library, set().union(*(_forms(Path(folder)) for folder in installed if folder))


def stdlib_problem(flag: str, name: str) -> str | None:
    """Why ``name`` (given as ``flag``) may not have its module imported: a module name that is no dotted
    Python name, or a module of Python's standard library (as found here: a file of yours of the same name,
    ahead of it on ``sys.path``, is yours). None where nothing is wrong with it before its import."""
    module = named_module(name)
    if module is None:
        return None
    if not _dotted(module):
        return (
            f"{flag} {name!r}: {module!r} is not a module name (Python names joined by dots, as in "
            "my_package.my_envs:MyEnv-v0); name the module whose import registers it"
        )
    if module.split(".")[0] not in sys.stdlib_module_names:
        return None
    files = module_files(module)
    library, installed = _stdlib_folders()
    if files is None or any(not _within(path, library) or _within(path, installed) for path in files):
        return None  # not found (its import says so), or a module of yours that takes the name
    return (
        f"{flag} {name}: {module} is a module of Python's standard library, which registers no env and holds no "
        "learner, so it is not imported; name the module of yours whose import registers it"
    )


def shipped_module_problems(saved: Mapping[str, Any], given: Mapping[str, str], run_dir: Path) -> list[str]:
    """The modules named by a run directory's ``config.yaml`` (``saved``: its env id and learner, at the top,
    under ``cli`` and under ``agent``, and zoo's ``env_wrapper`` under ``agent``) or by the command (``given``:
    {flag: name}) that would be imported from inside ``run_dir``: each refused, naming the module, the file and
    the fix; none of them is imported."""
    cli = saved.get("cli") if isinstance(saved.get("cli"), Mapping) else {}
    agent = saved.get("agent") if isinstance(saved.get("agent"), Mapping) else {}
    wrappers = agent.get("env_wrapper") if isinstance(agent.get("env_wrapper"), list) else []
    names = {
        "--env-id": [given.get("--env-id"), saved.get("env_id"), cli.get("env_id")],
        "--algo": [given.get("--algo"), saved.get("algo"), cli.get("algo"), agent.get("algo")],
        "env_wrapper": [  # zoo's class paths (package.module.Class), as module:Class
            ":".join(str(path).rsplit(".", 1)) for entry in wrappers if isinstance(entry, Mapping) for path in entry
        ],
    }
    folders = _forms(Path(run_dir))
    problems = []
    for flag, found in names.items():
        for name in dict.fromkeys(name for name in found if isinstance(name, str)):
            module = named_module(name)
            files = module_files(module) if module is not None and _dotted(module) else None
            inside = next((path for path in files or () if _within(path, folders)), None)
            if inside is not None:
                problems.append(
                    f"{flag} {name}: its module {module} would be imported from {inside}, inside the run directory "
                    f"{run_dir} being read; evo never imports a module that a run directory holds (a run directory "
                    f"may come from anyone). If {module} is yours, move it out of the run directory (to the folder "
                    "you run from, or a package you install) and run again"
                )
    return problems


def _dotted(module: str) -> bool:
    return all(part.isidentifier() for part in module.split("."))
