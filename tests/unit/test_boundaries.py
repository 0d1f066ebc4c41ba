"""The architecture's boundaries, enforced: a pure core, one MPI layer, one SB3 layer, no cycles.

Every check reads the modules in ``evo/`` as they are on disk, so a new module is covered the
day it is added. The static checks parse each module with ``ast`` and see every import,
including the ones inside functions (evo imports torch and SB3 lazily in places).
"""

from __future__ import annotations

import ast
import functools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from evo.learners import algos
from tests.support import ROOT

PACKAGE = ROOT / "evo"
PURE = ("evo.core", "evo.config", "evo.learners")
"""The pure core: testable anywhere, with neither MPI nor torch nor SB3 installed (the learners'
declarations and the learner interface included)."""
HEAVY = ("mpi4py", "torch", "stable_baselines3")

# Which modules may import each heavy dependency, and why (a prefix ending in "." is a package).
ALLOWED = {
    "mpi4py": {
        "evo.mpi.": "the one layer that talks MPI (evo.mpi.exchange)",
    },
    "stable_baselines3": {
        "evo.sb3.": "the one adapter around SB3's internals",
    },
    "torch": {
        "evo.sb3.": "policies, the learners' networks, optimizers and flat state are torch objects",
        "evo.rundir.checkpoint": "checkpoints are torch.save / torch.load(weights_only=True) files",
        "evo.rundir.records": "TensorBoard files are written with torch.utils.tensorboard's SummaryWriter",
        "evo.runner.session": "the session sets torch's thread count for the process",
        "evo.runner.members": "a rank resumed on another number of ranks reseeds torch",
    },
    "wandb": {
        "evo.tracking.wandb_runs": "--tracker wandb's backend, imported by the tracking thread only with the flag",
    },
    "mlflow": {
        "evo.tracking.mlflow_runs": "--tracker mlflow's backend, imported by the tracking thread only with the flag",
    },
}
MAX_FUNCTION_LINES = 100


@dataclass(frozen=True)
class ImportLine:
    """One import statement of an evo module, resolved to absolute module names."""

    module: str
    lineno: int
    source: str
    targets: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.module} (line {self.lineno}): {self.source}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def evo_modules() -> dict[str, Path]:
    """Every module of the evo package, by dotted name."""
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _resolve(node: ast.ImportFrom, module: str, is_package: bool, modules: dict[str, Path]) -> list[str]:
    """``from X import a, b`` -> ``X.a`` where that is a module, else ``X``; relative ``X`` too."""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join(anchor + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    targets = []
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        targets.append(submodule if submodule in modules else base)
    return targets


def imports_in(source: str, module: str, is_package: bool, modules: dict[str, Path]) -> list[ImportLine]:
    """Every ``import`` / ``from ... import`` statement anywhere in one module's source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            targets = _resolve(node, module, is_package, modules)
        else:
            continue
        text = ast.get_source_segment(source, node) or ""
        found.append(ImportLine(module, node.lineno, " ".join(text.split()), tuple(targets)))
    return found


@functools.cache
def import_lines() -> tuple[ImportLine, ...]:
    """Every import statement of every evo module (read once per test session)."""
    modules = evo_modules()
    found = []
    for module, path in modules.items():
        found += imports_in(path.read_text(), module, path.name == "__init__.py", modules)
    return tuple(found)


def importers_of(top_level: str) -> dict[str, list[ImportLine]]:
    """The evo modules that import ``top_level`` or one of its submodules, with the lines."""
    by_module: dict[str, list[ImportLine]] = {}
    for line in import_lines():
        if any(target == top_level or target.startswith(top_level + ".") for target in line.targets):
            by_module.setdefault(line.module, []).append(line)
    return by_module


def in_pure_core(module: str) -> bool:
    return any(module == package or module.startswith(package + ".") for package in PURE)


def is_allowed(module: str, allowed: dict[str, str]) -> bool:
    return any(module.startswith(rule) if rule.endswith(".") else module == rule for rule in allowed)


def test_the_scan_resolves_relative_lazy_and_package_imports():
    source = (
        "from . import selection\n"
        "from .kinds import SearchSpace\n"
        "from .. import config\n"
        "from ..mpi.exchange import world\n"
        "import evo.sb3.learner\n"
        "def train():\n"
        "    import torch.nn as nn\n"
    )
    lines = imports_in(source, "evo.core.plan", False, evo_modules())
    assert [line.targets for line in lines] == [
        ("evo.core.selection",),
        ("evo.core.kinds",),
        ("evo.config",),
        ("evo.mpi.exchange",),
        ("evo.sb3.learner",),
        ("torch.nn",),
    ]
    assert str(lines[-1]) == "evo.core.plan (line 7): import torch.nn as nn"
    in_package = imports_in("from . import plan\nfrom .plan import Exploit\n", "evo.core", True, evo_modules())
    assert [line.targets for line in in_package] == [("evo.core.plan",), ("evo.core.plan",)]


def test_the_scan_sees_the_real_imports():
    lines = import_lines()
    by_module = {}
    for line in lines:
        by_module.setdefault(line.module, set()).update(line.targets)
    assert "mpi4py" in by_module["evo.mpi.exchange"] or "mpi4py.MPI" in by_module["evo.mpi.exchange"]
    assert "evo.core.selection" in by_module["evo.core.plan"]  # from evo.core.selection import select
    assert "torch" in by_module["evo.rundir.checkpoint"]  # `import torch` inside a function
    assert set(evo_modules()) >= {"evo", "evo.core", "evo.core.plan", "evo.sb3.learner", "evo.runner.session"}


def test_heavy_dependencies_are_imported_only_in_their_layers():
    offending = []
    for dependency, allowed in ALLOWED.items():
        for module, lines in sorted(importers_of(dependency).items()):
            if not is_allowed(module, allowed):
                offending += [f"{dependency} imported by {line}" for line in lines]
    assert not offending, (
        "imports outside their layer (mpi4py belongs in evo/mpi, stable_baselines3 in evo/sb3, torch in "
        "the modules listed in ALLOWED):\n  " + "\n  ".join(offending)
    )


def test_every_single_module_allowance_is_still_needed():
    """An allowance for one module that no longer imports the dependency is removed, not left to drift."""
    stale = [
        f"{dependency}: {rule}"
        for dependency, allowed in ALLOWED.items()
        for rule in allowed
        if not rule.endswith(".") and rule not in importers_of(dependency)
    ]
    assert not stale, "ALLOWED names modules that no longer import the dependency: " + ", ".join(stale)


def test_the_pure_core_has_no_heavy_import_even_lazily():
    offending = [
        f"{dependency} imported by {line}"
        for dependency in HEAVY
        for module, lines in sorted(importers_of(dependency).items())
        if in_pure_core(module)
        for line in lines
    ]
    assert not offending, "the pure core must not import mpi4py, torch or SB3:\n  " + "\n  ".join(offending)


# --- the pure core imports and runs with mpi4py, torch and SB3 blocked ----------------------------

BLOCKED_RUN = r"""
import importlib, json, sys, traceback

BLOCKED = {blocked!r}
attempts = []


class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            importer = next(
                (f"{{frame.f_code.co_filename}}:{{frame.f_lineno}}" for frame in _frames()
                 if "importlib" not in frame.f_code.co_filename and frame.f_code.co_filename != "<string>"),
                "?",
            )
            attempts.append(f"{{name}} (from {{importer}})")
            raise ImportError(f"{{name}} is blocked: the pure core must not need it")
        return None


def _frames():
    frame = sys._getframe(1)
    while frame is not None:
        yield frame
        frame = frame.f_back


sys.meta_path.insert(0, Blocker())
result = {{"attempts": attempts, "errors": []}}
for module in {modules!r}:
    try:
        importlib.import_module(module)
    except Exception:
        result["errors"].append(f"import {{module}}: {{traceback.format_exc()}}")
try:
    import evo
    result["evo_file"] = evo.__file__
    from tests.unit.test_boundaries import exercise_pure_core
    result["exercised"] = exercise_pure_core({run_dir!r})
except Exception:
    result["errors"].append(traceback.format_exc())
result["loaded"] = sorted(name for name in sys.modules if name.split(".")[0] in BLOCKED)
print(json.dumps(result))
"""


def exercise_pure_core(run_dir: str) -> dict:
    """Real work from the pure core: parse a config, plan a generation with selection and explore.

    The one place to adapt when the population rows change type.
    """
    import numpy as np

    from evo.config import parse_config
    from evo.core.explorers import make_explorer
    from evo.core.kinds import sample_hparams
    from evo.core.plan import plan_generation
    from evo.core.result import MemberResult
    from evo.learners import specs

    moves = {}
    for algo, spec in specs().items():
        env_id = "CartPole-v1" if "Discrete" in spec.action_spaces else "Pendulum-v1"
        argv = ["--algo", algo, "--env-id", env_id, "--run-dir", f"{run_dir}-{algo}", "--num-agents", "4"]
        config = parse_config(argv)
        space = config.agent.search_space
        rng = np.random.default_rng(0)
        population = [
            MemberResult(member, 0, 128, score, score, float("nan"), sample_hparams(space, rng))
            for member, score in enumerate((3.0, 1.0, 4.0, 2.0))
        ]
        explorer = make_explorer(config.explore, space)
        exploits = plan_generation(1, population, "truncation", explorer, rng, truncation_fraction=0.25)
        moves[algo] = [(e.recipient, e.donor) for e in exploits]
    return {"moves": moves}


def test_pure_core_imports_and_runs_with_mpi4py_torch_and_sb3_blocked(tmp_path):
    modules = sorted(name for name in evo_modules() if in_pure_core(name))
    assert "evo.core.plan" in modules and "evo.config" in modules
    script = BLOCKED_RUN.format(blocked=HEAVY, modules=modules, run_dir=str(tmp_path / "run"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    completed = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert Path(result["evo_file"]).is_relative_to(ROOT), result["evo_file"]
    assert not result["errors"], "\n".join(result["errors"])
    assert not result["attempts"], "the pure core tried to import: " + ", ".join(result["attempts"])
    assert not result["loaded"], result["loaded"]
    # the worst member (1, score 1.0) copies the best (2, score 4.0): selection really ran, for every learner
    assert result["exercised"] == {"moves": {algo: [[1, 2]] for algo in algos()}}


# --- no import cycles among evo's modules ------------------------------------------------------


def import_graph() -> dict[str, set[str]]:
    """Module -> the evo modules it imports (any import, anywhere in the module)."""
    modules = evo_modules()
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for line in import_lines():
        for target in line.targets:
            while target and target not in modules:  # `import evo.a.b.name` style: the nearest module
                target = target.rpartition(".")[0]
            if target.startswith("evo") and target != line.module:
                graph[line.module].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path ``[a, b, ..., a]``, or None (depth-first search, three colours)."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_find_cycle_finds_a_cycle_and_only_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycles_among_evo_modules():
    graph = import_graph()
    assert graph["evo.core.plan"] >= {"evo.core.selection", "evo.core.explorers.base"}, graph["evo.core.plan"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# --- nothing above the learner interface imports an algorithm --------------------------------------


def algorithm_modules() -> dict[str, str]:
    """Each learner's own modules (its declaration and its SB3 side) -> the learner."""
    return {f"evo.{layer}.{algo}": algo for algo in algos() for layer in ("learners", "sb3")}


def test_only_a_learners_own_modules_import_it():
    """The loop, the exchange, the checkpoints, the config and the run reach a learner through the
    registries (evo.learners.learner_spec, evo.sb3.learner.learner_class), never by importing it."""
    owners = algorithm_modules()
    assert set(owners) <= set(evo_modules()), sorted(set(owners) - set(evo_modules()))
    offending = [
        f"{target} imported by {line}"
        for line in import_lines()
        for target in line.targets
        if target in owners and line.module not in owners
    ]
    assert not offending, "modules that import a learner directly:\n  " + "\n  ".join(offending)


def test_the_scan_of_learner_imports_would_see_one():
    owners = algorithm_modules()
    lines = imports_in("from evo.sb3.sac import SACLearner\n", "evo.runner.session", False, evo_modules())
    assert [target for line in lines for target in line.targets if target in owners] == ["evo.sb3.sac"]


# --- short functions ----------------------------------------------------------------------------


def long_functions(limit: int = MAX_FUNCTION_LINES) -> list[str]:
    offenders = []
    for path in evo_modules().values():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines")
    return offenders


def test_no_function_longer_than_100_lines():
    offenders = long_functions()
    assert not offenders, f"functions over {MAX_FUNCTION_LINES} lines (split them):\n  " + "\n  ".join(offenders)


# --- the run engine: MPI calls only in evo/mpi, drivers apart, the config read in one place -----------

MPI_CALLS = {
    "Abort",
    "allgather",
    "Allgather",
    "allreduce",
    "Allreduce",
    "Barrier",
    "bcast",
    "Bcast",
    "Dup",
    "Free",
    "gather",
    "Gather",
    "Iprobe",
    "irecv",
    "Irecv",
    "isend",
    "Isend",
    "recv",
    "Recv",
    "reduce",
    "Reduce",
    "scatter",
    "Scatter",
    "send",
    "Send",
    "Split",
}
"""Methods of an MPI communicator that communicate (``Get_rank`` and ``Get_size`` only ask)."""


def mpi_calls(source: str) -> list[tuple[int, str]]:
    """``x.comm.Barrier()``, ``comm.bcast(...)``...: a call of a communicating method on anything whose
    name (the last part before the method) says it is a communicator."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MPI_CALLS:
            owner = node.func.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            if "comm" in name.lower() or name == "MPI":
                found.append((node.lineno, ast.unparse(node.func)))
    return found


def test_the_mpi_call_scan_sees_calls_on_any_communicator():
    source = "comm.Barrier()\nself.comm.bcast(x, root=0)\nMPI.COMM_WORLD.Abort(1)\ncomm.Get_rank()\nlist.send(x)\n"
    assert [call for _, call in mpi_calls(source)] == ["comm.Barrier", "self.comm.bcast", "MPI.COMM_WORLD.Abort"]


def test_every_mpi_call_is_in_evo_mpi():
    """evo/mpi is the one layer that talks MPI: everything else calls its functions (exchange.barrier,
    exchange.broadcast, exchange.abort ...), which take the communicator as an argument."""
    offending = [
        f"{path.relative_to(ROOT)}:{line} {call}"
        for module, path in evo_modules().items()
        if not module.startswith("evo.mpi.")
        for line, call in mpi_calls(path.read_text())
    ]
    assert not offending, "MPI calls outside evo/mpi (use evo.mpi.exchange's functions):\n  " + "\n  ".join(offending)


def driver_modules() -> list[str]:
    """The run engine's drivers, as evo.runner.DRIVERS names them."""
    from evo.runner import DRIVERS

    return sorted({driver.module for driver in DRIVERS.values()})


def test_no_driver_imports_another():
    drivers = driver_modules()
    assert drivers == ["evo.runner.asynchronous", "evo.runner.synchronous"], drivers
    graph = import_graph()
    crossing = [f"{a} imports {b}" for a in drivers for b in drivers if a != b and b in reachable(graph, a)]
    assert not crossing, "a driver imports another (share what they have in common through the session):\n  " + (
        "\n  ".join(crossing)
    )


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen, stack = set(), [start]
    while stack:
        for nxt in graph.get(stack.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


TAKES_CONFIG = ("evo.config", "evo.runner.session", "evo.main")
"""Where a function may take the whole Config: the configuration itself, the session that turns it into
plain values once, and the entry point."""


def config_takers(source: str) -> list[tuple[int, str]]:
    """Functions with a parameter annotated ``Config`` or named ``config``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            for argument in arguments:
                annotation = ast.unparse(argument.annotation) if argument.annotation is not None else ""
                if argument.arg == "config" or annotation.split("|")[0].strip().split(".")[-1] == "Config":
                    found.append((node.lineno, node.name))
                    break
    return found


def test_the_config_scan_sees_a_config_parameter():
    source = (
        "def a(config): ...\ndef b(x: Config | None): ...\ndef c(x: ConfigError): ...\n"
        "def d(cfg: evo.config.Config): ..."
    )
    assert config_takers(source) == [(1, "a"), (2, "b"), (4, "d")]


def test_no_function_takes_the_config_outside_the_config_the_session_and_the_entry_point():
    offending = [
        f"{path.relative_to(ROOT)}:{line} {name}"
        for module, path in evo_modules().items()
        if not any(module == allowed or module.startswith(allowed + ".") for allowed in TAKES_CONFIG)
        for line, name in config_takers(path.read_text())
    ]
    assert not offending, (
        "functions that take the whole Config (take the session, or the plain values they use):\n  "
        + "\n  ".join(offending)
    )
