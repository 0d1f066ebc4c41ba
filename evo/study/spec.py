"""The study file (YAML), parsed and checked (pure: PyYAML and difflib).

A study compares methods on the same env-step budget *per member*, over several seeds::

    study: my-task                    # a name (default: the file's name)
    out: runs/my-task                 # runs/, logs/ and the report (relative to where evo-study runs)
    envs: [mypackage.envs:Walker-v0]  # gymnasium ids, a module:Env id, Procgen games
    seeds: [0, 1, 2, 3, 4]
    members: 4                        # of every population (default 4), on `ranks` MPI ranks (default 2)
    budget:                           # per env id, or a default block: generations x env steps per member
      default: {generations: 16, steps: 8192, eval_episodes: 5}
    space:                            # the populations' search space (evo's search_space), per env or default
      default: {learning_rate: {low: 1.0e-5, high: 1.0e-3, scale: log}}
    hyperparams: {}                   # evo settings given to every run, per env or default (policy: nature ...)
    flags: [--keep-checkpoints, "33"] # any other flags of every run
    methods:                          # name: how it runs (a preset's name needs nothing more)
      pbt: {}                         # truncation, perturb / resample
      pb2: {}                         # truncation, PB2's GP bandit
      random: {}                      # the same population and initial draws, never exploited
      zoo-total: {kind: single, total: true}   # one agent, the YAML's settings, a population's env steps
    fresh:                            # re-evaluate every selected member on fresh episodes
      episodes: 20
      at: [0.25, 0.5, 1.0]            # fractions of the budget (their checkpoints are kept)
    compare:
      reference: pbt
      primary: pbt - zoo-total at 1.0 # declared before the runs: the verdict's comparison
      secondary: [pbt - random at 1.0]

Method kinds: ``population`` (``selection: truncation | wta``, ``explore:`` any of evo's explorers),
``random`` (the population with ``--strategy none``: random search over the same space and the same
initial draws), ``single`` (one agent with the YAML's settings, ``--initial-hparams defaults``; given
settings through ``hyperparams:`` or ``flags:``; ``total: true`` trains a whole population's env steps)
and ``rl-zoo3`` (rl-baselines3-zoo's own ``train`` in the evo-less virtualenv, a cross-check). A
method's ``flags``, ``space`` (per env) and ``generations`` go to its runs only; ``envs`` limits it
to some envs.

Every key, and what "defaults" means for a ``single`` method on an env of your own: docs/studies.md (a
test keeps that page and the keys below equal). Every problem of a file is reported at once, each with its
fix (:class:`StudyError`).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

DEFAULT = "default"
"""The block of a per-env mapping that every env without its own block takes."""
KINDS = ("population", "random", "single", "rl-zoo3")
SCRIPTS = {"truncation": "pbt_rl_truct.py", "wta": "pbt_rl_wta.py"}
"""The entry script of each selection rule."""
ENTRIES = {"pbt_rl_truct.py": ("truncation", "p2p"), "pbt_rl_wta.py": ("wta", "collective")}
"""What each entry script gives evo.main (its strategy and transport)."""
ACTIONS = ("auto", "sampled", "deterministic")
"""How the fresh episodes pick actions: ``auto`` samples for Procgen (as DrAC's test.py does) and
takes the deterministic action (argmax, or the mean) elsewhere."""
PRESETS: dict[str, dict[str, Any]] = {
    "pbt": {"kind": "population"},
    "pbt-wta": {"kind": "population", "selection": "wta"},
    "pb2": {"kind": "population", "explore": "pb2"},
    "pb2-mix": {"kind": "population", "explore": "pb2-mix"},
    "pb2-rand": {"kind": "population", "explore": "pb2-rand"},
    "pb2-mult": {"kind": "population", "explore": "pb2-mult"},
    "casmo": {"kind": "population", "explore": "casmo"},
    "random": {"kind": "random"},
    "single": {"kind": "single"},
    "single-total": {"kind": "single", "total": True},
    "rl-zoo3": {"kind": "rl-zoo3"},
}
"""Method names that need no description: ``methods: {pbt: {}, random: {}}``."""
EXPLORE_NAMES = ("perturb", "pb2", "pb2-rand", "pb2-mult", "pb2-mix", "casmo")
"""evo's ``--explore`` names (``evo.core.explorers.EXPLORERS``; a test keeps the two equal)."""
TOP_KEYS = (
    "study", "out", "runs_in", "envs", "seeds", "members", "ranks", "budget", "space", "hyperparams", "flags",
    "thresholds", "methods", "fresh", "compare",
)  # fmt: skip
METHOD_KEYS = ("kind", "selection", "explore", "total", "flags", "hyperparams", "space", "envs", "generations")
BUDGET_KEYS = ("generations", "steps", "eval_episodes")
FRESH_KEYS = ("episodes", "at", "levels", "actions", "floors")
COMPARE_KEYS = ("reference", "primary", "secondary")
KEPT = ":kept"
"""A comparison's side ``METHOD:kept``: the method's kept best at the end of its budget (with ``--final-eval``, the
run's final pick; else the weights behind its highest selection score) instead of the member its last
selection score ranks first: ``pbt:kept - pbt at 1.0`` is the final pick against the selection pick, seed by
seed on the same runs."""
COMPARISON = re.compile(r"^\s*(?P<a>\S+)\s+-\s+(?P<b>\S+)(\s+at\s+(?P<at>[0-9.eE+-]+))?\s*$")


class StudyError(ValueError):
    """A study file or its overrides that cannot be run; ``problems`` lists each, with its fix."""

    def __init__(self, problems: Sequence[str], source: str = "the study"):
        self.problems, self.source = list(problems), source
        super().__init__(f"{source}: " + "; ".join(self.problems))

    def listed(self) -> str:
        """The problems one a line, under what they are problems of."""
        return f"{self.source}:\n  - " + "\n  - ".join(self.problems)


@dataclass(frozen=True)
class Budget:
    """Per member: ``generations`` x ``steps`` env steps, scored on ``eval_episodes`` episodes each
    generation (the scores that select)."""

    generations: int
    steps: int
    eval_episodes: int = 5


@dataclass(frozen=True)
class Method:
    """How one method runs."""

    name: str
    kind: str
    selection: str = "truncation"
    explore: str | None = None
    total: bool = False
    """A single agent given a whole population's env steps (``members`` times a member's)."""
    flags: tuple[str, ...] = ()
    hyperparams: Mapping[str, Any] = field(default_factory=dict)
    space: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Per env: the search space instead of the study's (BG-PBT's with the architecture)."""
    envs: tuple[str, ...] = ()
    """Only on these envs (empty: every env of the study)."""
    generations: int | None = None
    """Instead of the budget's (a run whose rung trains two generations' env steps in one)."""

    @property
    def single(self) -> bool:
        """One agent, no population: one rank."""
        return self.kind in ("single", "rl-zoo3")

    @property
    def mpi(self) -> bool:
        """An evo run under mpiexec (the rl_zoo3 cross-check is not)."""
        return self.kind != "rl-zoo3"

    @property
    def script(self) -> str:
        return SCRIPTS[self.selection]

    @property
    def own_flags(self) -> tuple[str, ...]:
        """The flags that make the method what it is, after the study's."""
        kind = {"random": ("--strategy", "none"), "single": ("--strategy", "none", "--initial-hparams", "defaults")}
        explore = ("--explore", self.explore) if self.explore else ()
        return (*kind.get(self.kind, ()), *explore, *self.flags)

    def runs_on(self, env_id: str) -> bool:
        return not self.envs or env_id in self.envs


@dataclass(frozen=True)
class Comparison:
    """``a`` minus ``b`` on fresh returns at fraction ``at`` of the budget, paired by seed."""

    a: str
    b: str
    at: float = 1.0

    def __str__(self) -> str:
        return f"{self.a} − {self.b} at {percent(self.at)}"


@dataclass(frozen=True)
class Fresh:
    """The re-evaluation: ``episodes`` fresh episodes per member (spread over up to 8 envs, as
    evo/study/fresh.py plays them), at the checkpoints of fractions ``at`` of the budget; Procgen on levels
    ``levels`` (first, count)."""

    episodes: int = 20
    at: tuple[float, ...] = (1.0,)
    levels: tuple[int, int] | None = None
    actions: str = "auto"
    floors: bool | None = None
    """Play a uniform-random policy and every constant action on the same episodes (None: for Procgen)."""


@dataclass(frozen=True)
class Study:
    name: str
    envs: tuple[str, ...]
    methods: dict[str, Method]
    seeds: tuple[int, ...]
    budgets: dict[str, Budget]
    out: Path
    members: int = 4
    ranks: int = 2
    runs_in: Path | None = None
    """Another study's ``out`` whose runs this one shares: runs with the same command are made once."""
    hyperparams: dict[str, dict[str, Any]] = field(default_factory=dict)
    space: dict[str, dict[str, Any]] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    thresholds: dict[str, float] = field(default_factory=dict)
    fresh: Fresh | None = None
    reference: str = ""
    primary: Comparison | None = None
    secondary: tuple[Comparison, ...] = ()
    source: Path | None = None

    @property
    def runs(self) -> Path:
        """Where the runs are: ``out/runs``, or the shared study's."""
        return (self.runs_in if self.runs_in is not None else self.out) / "runs"

    @property
    def comparisons(self) -> tuple[Comparison, ...]:
        return ((self.primary,) if self.primary else ()) + self.secondary

    @property
    def judged(self) -> tuple[tuple[Comparison, str], ...]:
        """Each declared comparison on each env both its sides' methods run on (a method's ``envs``), the primary
        first: what the report judges, and how many judgements its secondary ones are corrected for."""
        return tuple(
            (comparison, env_id)
            for comparison in self.comparisons
            for env_id in self.envs
            if all(self.methods[side_method(side)].runs_on(env_id) for side in (comparison.a, comparison.b))
        )

    def budget(self, env_id: str, method: Method) -> Budget:
        """The env's budget as ``method`` runs it (its own generations, a population's steps for ``total``)."""
        base = self.budgets[env_id]
        steps = base.steps * self.members if method.total else base.steps
        return Budget(method.generations or base.generations, steps, base.eval_episodes)

    def generation_at(self, env_id: str, method: Method, fraction: float) -> int:
        """The generation at ``fraction`` of the method's budget on the env."""
        return round(fraction * self.budget(env_id, method).generations)

    def method_space(self, env_id: str, method: Method) -> dict[str, Any]:
        if env_id in method.space:
            return dict(method.space[env_id])
        if DEFAULT in method.space:
            return dict(method.space[DEFAULT])
        return self.space.get(env_id, {})


def percent(fraction: float) -> str:
    return f"{fraction * 100:g} %"


def load_study(path: Path | str, out: Path | None = None) -> Study:
    """The study of a YAML file (``study.name`` defaults to the file's stem); StudyError lists every problem."""
    from evo.core.textfiles import read_settings_file, yaml_problem

    path = Path(path)
    try:
        text = read_settings_file(path, "a study file (YAML)")
    except ValueError as error:
        raise StudyError([str(error)], str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise StudyError([f"not YAML: {yaml_problem(error)}"], str(path)) from error
    if not isinstance(data, dict):
        raise StudyError(["a study file is a mapping (study:, envs:, methods:, ...); see evo-study --help"], str(path))
    return parse_study(data, path.stem, source=path, out=out)


def parse_study(data: Mapping[str, Any], name: str = "study", source: Path | None = None, out=None) -> Study:
    """The study of a mapping (a parsed study file); StudyError lists every problem."""
    problems: list[str] = []
    _unknown(data, TOP_KEYS, "", problems)
    envs = tuple(_strings(data.get("envs"), "envs", problems))
    if not envs:
        problems.append("envs: name at least one env (a gymnasium id, module:Env or a Procgen game)")
    seeds = tuple(_integers(data.get("seeds", [0]), "seeds", problems, minimum=0))
    if len(set(seeds)) != len(seeds):
        problems.append(f"seeds: {list(seeds)} repeats a seed; give each once")
    members = _integer(data.get("members", 4), "members", problems, minimum=2)
    ranks = _integer(data.get("ranks", 2), "ranks", problems, minimum=1)
    if members and ranks and members % ranks:
        problems.append(f"members: {members} is not a multiple of ranks ({ranks}); give a multiple")
    methods = _methods(data.get("methods"), envs, problems)
    study = Study(
        name=str(data.get("study") or name),
        envs=envs,
        methods=methods,
        seeds=seeds,
        budgets=_budgets(data.get("budget"), envs, problems),
        out=Path(out if out is not None else data.get("out") or Path("runs") / str(data.get("study") or name)),
        members=members or 4,
        ranks=ranks or 2,
        runs_in=Path(data["runs_in"]) if data.get("runs_in") else None,
        hyperparams=_per_env(data.get("hyperparams"), envs, "hyperparams", problems),
        space=_per_env(data.get("space"), envs, "space", problems),
        flags=tuple(_strings(data.get("flags"), "flags", problems)),
        thresholds=_thresholds(data.get("thresholds"), envs, problems),
        fresh=_fresh(data.get("fresh"), problems),
        source=source,
    )
    study = _compare(study, data.get("compare"), problems)
    problems += _hyperparams_flag(study)
    problems += study_problems(study)
    if problems:
        raise StudyError(problems, str(source) if source else study.name)
    return study


def with_overrides(
    study: Study,
    envs: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    members: int | None = None,
    ranks: int | None = None,
    generations: int | None = None,
    steps: int | None = None,
    eval_episodes: int | None = None,
    out: Path | None = None,
) -> Study:
    """The study with the command line's changes (a subset of its envs, methods or seeds, another
    population or budget); StudyError lists every problem."""
    problems = []
    for flag, given, known in (("--envs", envs, study.envs), ("--methods", methods, tuple(study.methods))):
        for value in given or ():
            if value not in known:
                problems.append(f"{flag} {value}: not in the study ({', '.join(known)}){_suggest(value, known)}")
    for flag, value in (("--members", members), ("--ranks", ranks), ("--generations", generations),
                        ("--steps", steps), ("--eval-episodes", eval_episodes)):  # fmt: skip
        if value is not None and value < 1:
            problems.append(f"{flag} {value}: must be at least 1")
    envs = [env for env in envs or () if env in study.envs]
    methods = [name for name in methods or () if name in study.methods]
    budgets = {
        env: Budget(generations or b.generations, steps or b.steps, eval_episodes or b.eval_episodes)
        for env, b in study.budgets.items()
    }
    kept = {name: study.methods[name] for name in methods} if methods else study.methods
    changed = replace(
        study,
        envs=tuple(envs) if envs else study.envs,
        methods=kept,
        seeds=tuple(seeds) if seeds is not None else study.seeds,
        members=members or study.members,
        ranks=ranks or study.ranks,
        budgets=budgets,
        out=out if out is not None else study.out,
    )
    changed = replace(
        changed,
        reference=changed.reference if changed.reference in kept else next(iter(kept)),
        primary=changed.primary if changed.primary and _within(changed.primary, kept) else None,
        secondary=tuple(c for c in changed.secondary if _within(c, kept)),
    )
    problems += study_problems(changed)
    if problems:
        raise StudyError(problems, "the command line")
    return changed


def side_method(side: str) -> str:
    """The method of a comparison's side (``pbt`` of ``pbt:kept``)."""
    return side.removesuffix(KEPT)


def _within(comparison: Comparison, methods: Mapping[str, Method]) -> bool:
    return side_method(comparison.a) in methods and side_method(comparison.b) in methods


def study_problems(study: Study) -> list[str]:
    """What no run of the study could do: a population not a multiple of its ranks, fractions of the
    budget that are no whole generation or whose checkpoints the runs would not keep."""
    problems = []
    if study.members < 2 or study.members % study.ranks:
        problems.append(f"members {study.members}: use a multiple of ranks ({study.ranks}), at least 2")
    if not study.methods or study.fresh is None:
        return problems
    keep = _keep_checkpoints(study.flags)
    for env_id in [env for env in study.envs if env in study.budgets]:  # a missing budget is its own problem
        for method in [m for m in study.methods.values() if m.runs_on(env_id) and m.mpi]:
            generations = study.budget(env_id, method).generations
            whole = []
            for fraction in study.fresh.at:
                at = fraction * generations
                if abs(at - round(at)) > 1e-9 or round(at) < 1:
                    problems.append(
                        f"fresh.at {fraction:g}: {percent(fraction)} of {method.name}'s {generations} generations on "
                        f"{env_id} is not a whole generation; choose fractions that are"
                    )
                else:
                    whole.append(round(at))
            earliest = min(whole, default=generations)
            if keep is not None and earliest < generations - keep + 1:
                problems.append(
                    f"--keep-checkpoints {keep}: generation {earliest} of {method.name}'s {generations} on {env_id} "
                    f"(fresh.at {min(study.fresh.at):g}) would not be kept; give at least "
                    f"{generations - earliest + 1}, or leave --keep-checkpoints out (evo-study sets it)"
                )
    return problems


def _hyperparams_flag(study: Study) -> list[str]:
    """A ``--hyperparams`` in flags would replace the one evo-study writes (the last one given wins); an
    ``rl-zoo3`` method's flags are the cross-check's, whose ``--hyperparams`` are zoo's."""
    found = []
    for where, flags in [("flags", study.flags)] + [
        (f"methods.{m.name}.flags", m.flags) for m in study.methods.values() if m.mpi
    ]:
        if "--hyperparams" in flags:
            found.append(
                f"{where}: --hyperparams; give evo settings as hyperparams: (the study's, per env, or a method's) "
                "and a search space as space:, which evo-study writes into one --hyperparams"
            )
    return found


def flag_value(flags: Sequence[str], flag: str) -> str | None:
    """The value given to ``flag`` in a command's ``flags`` (its last one, as argparse reads them), or
    None where it is not given a value."""
    values = [str(flags[i + 1]) for i in range(len(flags) - 1) if flags[i] == flag]
    return values[-1] if values else None


def _keep_checkpoints(flags: Sequence[str]) -> int | None:
    value = flag_value(flags, "--keep-checkpoints")
    return int(value) if value is not None and value.isdigit() else None


def _suggest(value: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(value), list(known), n=1)
    return f"; did you mean {close[0]}?" if close else ""


def _not_one_of(where: str, value: Any, known: Sequence[str]) -> str:
    return f"{where}: {value!r} is not one of {', '.join(known)}{_suggest(value, known)}"


def _unknown(mapping: Mapping, known: Sequence[str], where: str, problems: list[str]) -> None:
    for key in mapping:
        if key not in known:
            problems.append(f"{where}{key}: not a study key (known: {', '.join(known)}){_suggest(key, known)}")


def _strings(value: Any, where: str, problems: list[str]) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, list):
        problems.append(f"{where}: {value!r} is not a list; write [a, b]")
        return []
    return [str(v) for v in value]


def _integer(value: Any, where: str, problems: list[str], minimum: int | None = None) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(f"{where}: {value!r} is not a whole number")
        return None
    if minimum is not None and value < minimum:
        problems.append(f"{where}: {value} must be at least {minimum}")
        return None
    return value


def _integers(value: Any, where: str, problems: list[str], minimum: int | None = None) -> list[int]:
    if not isinstance(value, list):
        problems.append(f"{where}: {value!r} is not a list of whole numbers; write [0, 1, 2]")
        return []
    found = [_integer(v, where, problems, minimum) for v in value]
    return [v for v in found if v is not None]


def _per_env(value: Any, envs: Sequence[str], where: str, problems: list[str]) -> dict[str, dict[str, Any]]:
    """``{env: block}`` of a mapping keyed by env id or ``default`` (an env's block replaces the default's)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(block, dict) for block in value.values()):
        problems.append(f"{where}: key it by env id or {DEFAULT}, each a mapping ({where}: {{{DEFAULT}: {{...}}}})")
        return {}
    for key in value:
        if key != DEFAULT and key not in envs:
            problems.append(
                f"{where}.{key}: not one of the study's envs ({', '.join(envs)}) nor {DEFAULT}"
                f"{_suggest(key, [*envs, DEFAULT])}"
            )
    return {env: dict(value[env]) for env in envs if env in value} | {
        env: dict(value[DEFAULT]) for env in envs if env not in value and DEFAULT in value
    }


def _budgets(value: Any, envs: Sequence[str], problems: list[str]) -> dict[str, Budget]:
    blocks = _per_env(value, envs, "budget", problems)
    budgets = {}
    for env in envs:
        block = blocks.get(env)
        if block is None:
            if value is not None or env == envs[0]:
                problems.append(f"budget: give {env}'s (or a default block) as {{generations: G, steps: S}}")
            continue
        _unknown(block, BUDGET_KEYS, f"budget.{env}.", problems)
        numbers = {key: _integer(block.get(key), f"budget.{env}.{key}", problems, 1) for key in BUDGET_KEYS[:2]}
        episodes = _integer(block.get("eval_episodes", 5), f"budget.{env}.eval_episodes", problems, 1)
        if all(numbers.values()) and episodes:
            budgets[env] = Budget(numbers["generations"], numbers["steps"], episodes)
    return budgets


def _thresholds(value: Any, envs: Sequence[str], problems: list[str]) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.append("thresholds: key them by env id ({HalfCheetah-v5: 1000})")
        return {}
    found = {}
    for env, threshold in value.items():
        if env not in envs:
            problems.append(f"thresholds.{env}: not one of the study's envs{_suggest(env, envs)}")
        elif isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            problems.append(f"thresholds.{env}: {threshold!r} is not a number")
        else:
            found[env] = float(threshold)
    return found


def _methods(value: Any, envs: Sequence[str], problems: list[str]) -> dict[str, Method]:
    if isinstance(value, list):  # a list of presets' names
        value = {name: {} for name in value}
    if not isinstance(value, dict) or not value:
        problems.append(f"methods: name at least one, as name: {{kind: ...}} (presets: {', '.join(PRESETS)})")
        return {}
    methods = {}
    for name, spec in value.items():
        name = str(name)
        spec = {} if spec is None else spec
        if not isinstance(spec, dict):
            problems.append(f"methods.{name}: {spec!r} is not a mapping; write {name}: {{kind: population}}")
            continue
        _unknown(spec, METHOD_KEYS, f"methods.{name}.", problems)
        fields = {**PRESETS.get(name, {}), **spec}
        if "kind" not in fields:
            problems.append(
                f"methods.{name}: give its kind ({', '.join(KINDS)}), or name it after a preset "
                f"({', '.join(PRESETS)}){_suggest(name, list(PRESETS))}"
            )
            _method(name, fields | {"kind": "population"}, envs, problems)  # its other problems too
            continue
        method = _method(name, fields, envs, problems)
        if method is not None:
            methods[name] = method
    return methods


def _method(name: str, fields: dict[str, Any], envs: Sequence[str], problems: list[str]) -> Method | None:
    where = f"methods.{name}"
    before = len(problems)
    if fields["kind"] not in KINDS:
        problems.append(_not_one_of(f"{where}.kind", fields["kind"], KINDS))
    if fields.get("selection", "truncation") not in SCRIPTS:
        problems.append(_not_one_of(f"{where}.selection", fields["selection"], tuple(SCRIPTS)))
    explore = fields.get("explore")
    if explore is not None and explore not in EXPLORE_NAMES:
        problems.append(_not_one_of(f"{where}.explore", explore, EXPLORE_NAMES))
    if fields["kind"] != "population" and (explore or "selection" in fields):
        problems.append(f"{where}: explore and selection are for kind population; drop them")
    if not isinstance(fields.get("total", False), bool):
        problems.append(f"{where}.total: {fields['total']!r} is not true or false")
    elif fields.get("total") and fields["kind"] != "single":
        problems.append(f"{where}.total: only a single agent is given a population's env steps; drop it")
    for env in _strings(fields.get("envs"), f"{where}.envs", problems):
        if env not in envs:
            problems.append(f"{where}.envs: {env} is not one of the study's envs{_suggest(env, envs)}")
    generations = fields.get("generations")
    if generations is not None:
        generations = _integer(generations, f"{where}.generations", problems, 1)
    hyperparams = fields.get("hyperparams") or {}
    if not isinstance(hyperparams, dict):
        problems.append(f"{where}.hyperparams: {hyperparams!r} is not a mapping of evo settings")
    space = _per_env(fields.get("space"), envs, f"{where}.space", problems)
    if space and fields["kind"] not in ("population", "random"):
        problems.append(f"{where}.space: only a population searches a space; drop it")
    flags = tuple(_strings(fields.get("flags"), f"{where}.flags", problems))
    if len(problems) > before:
        return None
    return Method(
        name, fields["kind"], fields.get("selection", "truncation"), explore, bool(fields.get("total", False)),
        flags, dict(hyperparams), space, tuple(fields.get("envs") or ()), generations,
    )  # fmt: skip


def _fresh(value: Any, problems: list[str]) -> Fresh | None:
    if value is None or value is False:
        return None
    value = {} if value is True else value
    if not isinstance(value, dict):
        problems.append("fresh: a mapping ({episodes: 20, at: [0.5, 1.0]}), true or left out")
        return None
    _unknown(value, FRESH_KEYS, "fresh.", problems)
    episodes = _integer(value.get("episodes", 20), "fresh.episodes", problems, 1) or 20
    at = value.get("at", [1.0])
    fractions: list[float] = []
    if not isinstance(at, list) or not all(isinstance(f, (int, float)) and not isinstance(f, bool) for f in at):
        problems.append("fresh.at: a list of fractions of the budget, e.g. [0.25, 0.5, 1.0]")
    else:
        fractions = sorted({float(f) for f in at})
        if any(not 0 < f <= 1 for f in fractions) or (fractions and fractions[-1] != 1.0):
            problems.append(f"fresh.at: {at} must lie in (0, 1] and include 1.0 (the end of the budget)")
    levels = value.get("levels")
    if levels is not None:
        if not (isinstance(levels, list) and len(levels) == 2 and all(isinstance(v, int) and v >= 0 for v in levels)):
            problems.append(f"fresh.levels: {levels!r} is not [first level, count] (Procgen's test levels)")
            levels = None
        else:
            levels = (levels[0], levels[1])
    actions = value.get("actions", "auto")
    if actions not in ACTIONS:
        problems.append(_not_one_of("fresh.actions", actions, ACTIONS))
    floors = value.get("floors")
    if floors is not None and not isinstance(floors, bool):
        problems.append(f"fresh.floors: {floors!r} is not true or false (left out: for Procgen)")
        floors = None
    return Fresh(episodes, tuple(fractions) or (1.0,), levels, actions if actions in ACTIONS else "auto", floors)


def _compare(study: Study, value: Any, problems: list[str]) -> Study:
    value = value or {}
    if not isinstance(value, dict):
        problems.append("compare: a mapping (reference:, primary:, secondary:)")
        return study
    _unknown(value, COMPARE_KEYS, "compare.", problems)
    names = list(study.methods)
    reference = str(value.get("reference") or (names[0] if names else ""))
    if names and reference not in study.methods:
        problems.append(f"compare.reference: {reference} is not a method of the study{_suggest(reference, names)}")
    primary = _comparison(value.get("primary"), "compare.primary", study, problems)
    secondary = value.get("secondary") or []
    if not isinstance(secondary, list):
        secondary = [secondary]
    others = [_comparison(item, "compare.secondary", study, problems) for item in secondary]
    return replace(study, reference=reference, primary=primary, secondary=tuple(c for c in others if c is not None))


def _comparison(value: Any, where: str, study: Study, problems: list[str]) -> Comparison | None:
    if value is None:
        return None
    if isinstance(value, dict):
        a, b, at = value.get("a"), value.get("b"), value.get("at", 1.0)
    else:
        match = COMPARISON.match(str(value))
        if match is None:
            problems.append(f"{where}: {value!r} is not 'a - b at F' (e.g. 'pbt - random at 1.0') nor {{a:, b:, at:}}")
            return None
        a, b, at = match["a"], match["b"], float(match["at"] or 1.0)
    known = True
    for side in (a, b):
        method = side_method(str(side))
        if method not in study.methods:
            problems.append(f"{where}: {method} is not a method of the study{_suggest(method, list(study.methods))}")
            known = False
        elif str(side).endswith(KEPT) and not (study.fresh and study.methods[method].mpi and at == 1.0):
            problems.append(
                f"{where}: {side} is {method}'s kept best, which the study re-evaluates at the end of an evo run's "
                f"budget only: compare it at 1.0, with fresh: given (an rl-zoo3 agent keeps none)"
            )
            known = False
    fractions = study.fresh.at if study.fresh else (1.0,)
    if not isinstance(at, (int, float)) or not any(math.isclose(at, f) for f in fractions):
        problems.append(f"{where}: at {at} is not among the fractions re-evaluated (fresh.at: {list(fractions)})")
        return None
    return Comparison(str(a), str(b), float(at)) if known else None
