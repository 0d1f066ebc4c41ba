"""The run configuration: command line + YAML hyperparameters, validated at start-up.

Pure: no MPI, no torch, no SB3. ``parse_config(argv, strategy=..., transport=...,
world_size=...)`` returns a frozen :class:`Config` or raises :class:`ConfigError` listing
every problem found, each with the bad value and how to fix it.

- ``resolved.py``: Config, whose fields declare every command-line option once (flag, type,
  default, help, its own check, what ``--resume`` does with it) and every derived value.
  ``declare.py``: ``option()`` and ``derived()``, the two ways to declare a field.
- ``options.py``: ``OPTIONS``, read from Config's fields, and the parser derived from them.
- ``hyperparams.py``: the YAML layers and ``--hyperparams key:value`` overrides.
- ``checks.py``: checks across options; ``agent.py``: the learner's settings for the env
  (AgentSettings, from the learner's declaration in evo/learners; every value within its declared
  domain); ``memory.py``: whether the members of a host's ranks fit in its memory; ``resume.py``: the
  run's saved config and what a resume may change; ``imports.py``: which modules a name (``module:EnvId``,
  ``--algo package.module:Class``) may have imported (none inside a run directory being read, none of the
  standard library).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import difflib
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evo.config import checks, probe
from evo.config.agent import CNN_POLICIES, AgentSettings, build_agent
from evo.config.checks import TRANSPORTS, run_dir_problems
from evo.config.envnames import (
    env_shape,
    is_atari,
    procgen_game,
    stacked_shape,
    unbatchable_message,
    wrapper_problems,
)
from evo.config.hyperparams import (
    PARAM_SETS,
    agent_keys,
    builtin_hyperparams,
    hyperparams_sources,
    load_hyperparams_file,
    resolve_agent,
)
from evo.config.imports import shipped_module_problems
from evo.config.memory import RankHost, memory_problems, this_rank
from evo.config.options import (
    OPTION_BY_FLAG,
    OPTIONS,
    Option,
    Resume,
    build_parser,
    explicit_flags,
    option_problems,
    restore_options,
    saved_options,
    str2bool,
)
from evo.config.precision import resolve_precision
from evo.config.resolved import Config, ConfigError
from evo.config.resume import (
    FIXED_ON_RESUME,
    RESUMED_FLAGS,
    load_saved_config,
    resume_differences,
    resume_dir,
)
from evo.config.source import SourceRef, source_problems, zip_source
from evo.core.envparams import is_env_param
from evo.core.names import file_name
from evo.learners import DEFAULT_ALGO, LearnerSpec, algo_problem, learner_spec

__all__ = [
    "CNN_POLICIES",
    "FIXED_ON_RESUME",
    "OPTIONS",
    "PARAM_SETS",
    "RESUMED_FLAGS",
    "TRANSPORTS",
    "AgentSettings",
    "Config",
    "ConfigError",
    "Option",
    "Resume",
    "agent_keys",
    "build_parser",
    "builtin_hyperparams",
    "explicit_flags",
    "load_hyperparams_file",
    "load_saved_config",
    "parse_config",
    "resolve_agent",
    "resume_differences",
    "run_dir_problems",
    "str2bool",
]


def parse_config(
    argv: Sequence[str] | None = None,
    *,
    strategy: str = "truncation",
    transport: str = "p2p",
    world_size: int = 1,
    prog: str | None = None,
    now: _dt.datetime | None = None,
    check_run_dir: bool = True,
    ranks: Sequence[RankHost] | None = None,
) -> Config:
    """Parse and validate; raise :class:`ConfigError` naming every problem.

    argparse's own errors (a flag that is not a number, say) exit with status 2 as usual.
    ``ranks``: where each rank runs, its host and that host's available memory (evo/main.py gathers them
    from every rank), for the check that the members of every host's ranks fit in its memory; None: all
    ``world_size`` ranks on this host.
    """
    tokens = list(argv) if argv is not None else sys.argv[1:]
    args, problems = read_command_line(tokens, prog)
    given = explicit_flags(tokens)
    saved = restore_from_run(args, given) if args.resume else None
    if saved is not None:  # before anything imports a module the run directory names
        shipped = shipped_module_problems(saved, {"--env-id": args.env_id, "--algo": args.algo}, args.run_dir)
        if shipped:
            raise ConfigError(shipped)
    if saved is not None and (before := saved.get("algo", DEFAULT_ALGO)) != args.algo:
        # the run's settings (its --hyperparams too) are another learner's: say only that
        raise ConfigError(
            [
                f"--resume: algo was {before!r} in this run, the command gives {args.algo!r}; a run resumes with "
                "the same value (drop the flag to keep it)"
            ]
        )
    checks.initial_hparams(args, problems)
    checks.asynchronous(args, strategy, transport, problems)
    strategy = checks.script_strategy(strategy, args.strategy, args.explore, transport, problems)
    problems += option_problems(args)
    if algo_problem(args.algo) is not None:
        raise ConfigError(problems)  # --algo's own check said why: nothing else can be checked without a learner
    spec = learner_spec(args.algo)
    game = procgen_game(args.env_id)
    param_set = apply_param_set(args, given, game, problems)
    conf_file, file_flag, overrides = hyperparams_sources(args.conf_file, args.hyperparams, problems, spec)
    sources: dict[str, str] = {}
    settings = resolve_agent(
        spec,
        args.env_id,
        conf_file,
        problems,
        param_set=param_set,
        overrides=overrides,
        file_flag=file_flag,
        sources=sources,
    )
    resolved = cross_option_checks(args, spec, settings, game, world_size, problems)
    resolved["init_source"] = init_source(args.init_from, saved, problems)
    resolved.update(run_names(args, game, prog, now, check_run_dir, problems))
    ranges = {"learning_rate": args.learning_rate_range, "gamma": args.gamma_range}
    wrappers = [(path, kwargs) for path, kwargs in settings.get("env_wrapper", ())]
    if game or is_atari(args.env_id):
        wrappers = []  # a Procgen game takes none, an Atari game zoo's own (build_agent says so)
    wrapping = wrapper_problems(wrappers)
    problems += wrapping
    shape = env_shape(args.env_id, resolved["env_kwargs"], () if wrapping else wrappers)
    if shape is not None and shape.unbatchable:
        problems.append(unbatchable_message(args.env_id, shape.unbatchable))
    agent = build_agent(spec, settings, args.env_id, game, shape, args.num_envs, ranges, problems, sources)
    agent, resolved["objective"] = probed(args, agent, resolved["env_kwargs"], problems)
    if not args.resume:  # a resumed run's sizes were accepted when it started (and evo's tools open runs so)
        members_per_rank = max(resolved["num_agents"] // max(world_size, 1), 1)
        stacked = stacked_shape(shape, agent.frame_stack)  # as the networks and replay buffers hold observations
        where = ranks if ranks is not None else [this_rank()] * max(world_size, 1)
        problems += memory_problems(agent, stacked, members_per_rank, where)
    if problems:
        raise ConfigError(problems)
    config = build_config(
        args,
        strategy=strategy,
        transport=transport,
        world_size=world_size,
        agent=agent,
        conf_file=conf_file,
        hyperparams=overrides,
        command=tuple(argv) if argv is not None else (),
        run_id=saved["run_id"] if saved else uuid.uuid4().hex,
        cli={**saved_options(args), "num_agents": resolved["num_agents"]},  # a resume on another world size
        **resolved,
    )
    if saved is not None and (differences := resume_differences(saved, config.to_dict())):
        raise ConfigError(differences)
    return config


def read_command_line(argv: Sequence[str], prog: str | None) -> tuple[argparse.Namespace, list[str]]:
    """The options' values, and a problem for every flag or argument that is not an option."""
    args, unknown = build_parser(prog).parse_known_args(argv)
    flags = [*OPTION_BY_FLAG, "-h", "--help"]
    problems = []
    previous_was_flag = False
    for arg in unknown:
        if arg.startswith("-") and not _is_number(arg):
            close = difflib.get_close_matches(arg.split("=")[0], flags, n=1)
            hint = f"; did you mean {close[0]}?" if close else "; see --help"
            problems.append(f"unknown option {arg}{hint}")
            previous_was_flag = True
        elif not previous_was_flag:  # a value right after an unknown flag is its value
            problems.append(f"unexpected argument {arg!r}; see --help")
    return args, problems


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def restore_from_run(args: argparse.Namespace, given: set[str]) -> dict[str, Any]:
    """``--resume``: the run's saved config; the options of the run not given again take its values."""
    run_dir = resume_dir(args.run_dir, args.exp_name)
    saved = load_saved_config(run_dir)
    restore_options(args, saved["cli"], given)
    args.run_dir = run_dir
    return saved


def init_source(text: str | None, saved: dict[str, Any] | None, problems: list[str]) -> SourceRef | None:
    """``--init-from``'s agent: a resumed run's as its config.yaml recorded it; a new run's zip with its digest
    (a run's member is chosen at start-up: evo/tools/source.py), once SOURCE is checked to be one."""
    if saved is not None:
        recorded = saved.get("init_source")
        return SourceRef(**recorded) if recorded else None
    if text is None:
        return None
    found = source_problems(text)
    problems += found
    return zip_source(text) if not found and Path(text).is_file() else None


def apply_param_set(args: argparse.Namespace, given: set[str], game: str | None, problems: list[str]) -> str | None:
    """``--param-set NAME`` on a Procgen game: its YAML block, and the options it stands for (the
    distribution mode and training levels of its name...) unless given (a resume already has the
    run's values)."""
    if args.param_set not in PARAM_SETS:  # None, or a name its own check reports
        return None
    if not game:
        problems.append(
            f"--param-set {args.param_set} is a Procgen parameter set; {args.env_id} is not a Procgen game "
            "(use --conf-file FILE or --hyperparams key:value for other envs)"
        )
        return None
    for name, value in PARAM_SETS[args.param_set].items():
        if name not in given and not args.resume:
            setattr(args, name, value)
    return args.param_set


def cross_option_checks(
    args: argparse.Namespace,
    spec: LearnerSpec,
    settings: dict[str, Any],
    game: str | None,
    world_size: int,
    problems: list[str],
) -> dict[str, Any]:
    """Population, budget, Procgen levels, evaluation, schedule, precision and the learner's own
    options: the Config fields they resolve."""
    num_agents = checks.population(args.num_agents, world_size, problems)
    total_generations, agent_training_steps = checks.budget(args, settings, problems)
    checks.procgen_levels(args, game, problems)
    checks.learner_options(spec, args.exploit_buffer, args.checkpoint_buffers, problems)
    checks.explorer_space(args.explore, settings.get("search_space") or {}, problems)
    checks.stages(args, spec, settings.get("search_space") or {}, num_agents, problems)
    checks.final_pick(args, num_agents, problems)
    precision = resolve_precision(args.precision, settings.get("precision"), problems)
    if precision not in spec.precisions:
        where = "--precision" if args.precision is not None else "precision (YAML)"
        problems.append(
            f"{where} {precision}: {spec.title} runs in {' or '.join(spec.precisions)} only (its networks have "
            "no mixed-precision policy here); use --precision fp32"
        )
    return {
        "env_kwargs": checks.env_kwargs(args.env_id, args.env_kwargs, problems),
        "num_agents": num_agents,
        "total_generations": total_generations,
        "agent_training_steps": agent_training_steps,
        "eval_start_level": checks.evaluation(args, game, problems),
        "schedule": checks.schedule(
            args.schedule, args.env_id, num_agents, spec, problems, list(settings.get("search_space") or {})
        ),
        "precision": precision,
    }


def probed(
    args: argparse.Namespace, agent: AgentSettings, env_kwargs: dict[str, Any], problems: list[str]
) -> tuple[AgentSettings, Any]:
    """``--objective`` resolved and checked, and what a probe env says of it and of the search space's
    env parameters (evo.config.probe): the agent's settings with each env parameter's default."""
    objective = checks.objective(args.objective, args.explore, args.max_distillations, problems)
    names = [name for name in agent.search_space if is_env_param(name)]
    defaults = probe.env_parameters(args.env_id, env_kwargs, names, problems, agent.env_wrapper)
    checks.env_defaults(args.initial_hparams, agent.search_space, defaults, problems)
    problems += probe.objective_problems(args.env_id, env_kwargs, objective, agent.env_wrapper)
    return dataclasses.replace(agent, env_params=defaults), objective


def run_names(
    args: argparse.Namespace,
    game: str | None,
    prog: str | None,
    now: _dt.datetime | None,
    check_run_dir: bool,
    problems: list[str],
) -> dict[str, Any]:
    """The experiment name (default ``<script>-<env>-<time>``) and the run directory, new unless resumed."""
    stem = Path(prog).stem if prog else "evo"
    stamp = (now or _dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    exp_name = args.exp_name or f"{stem}-{file_name(game or args.env_id)}-{stamp}"
    run_dir = args.run_dir if args.run_dir is not None else Path("runs") / exp_name
    if check_run_dir and not args.resume:
        problems += run_dir_problems(run_dir)
    return {"exp_name": exp_name, "run_dir": run_dir}


def build_config(args: argparse.Namespace, **resolved: Any) -> Config:
    """The Config: every option's field from its value, then the values the steps resolved."""
    fields = {}
    for option in OPTIONS:
        value = getattr(args, option.name)
        fields[option.field_name] = tuple(value) if isinstance(value, list) else value
    return Config(**{**fields, **resolved})
