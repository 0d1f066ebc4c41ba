"""Checks that involve several options, or an option and the MPI job, the YAML or the disk. Pure.

Each takes plain values and a ``problems`` list to append to, so that every problem is
reported at once; an option's checks of its own value are declared with it (its Config field, resolved.py).
What an explorer or a learner can do is declared on it (an explorer's class attributes,
evo/core/explorers/base.py; a learner's LearnerSpec, evo/learners/spec.py): the refusals and the
suggestions below are read from the registries, so none of them lists explorers or learners by name.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from evo.config.envnames import DISTRIBUTION_MODES, atari_env_kwargs, env_kwargs_message
from evo.config.hyperparams import DuplicateKey, load_yaml, parse_env_kwargs
from evo.core.envparams import is_env_param
from evo.core.explorers import DEFAULT_EXPLORER, EXPLORERS
from evo.core.kinds import Categorical, Kind, kind_from_entry
from evo.core.objective import Objective, parse_objective
from evo.core.schedule import load_schedule
from evo.core.selection import NO_PBT, STRATEGIES
from evo.learners import LearnerSpec, algos
from evo.rundir.unstarted import unstarted

TRANSPORTS = ("p2p", "collective")


def one_of(names: Sequence[str]) -> str:
    """'a', 'a or b', 'a, b or c': the names a suggestion offers."""
    return " or ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} or {names[-1]}"


def lacking(explore: str, ability: str) -> tuple[type | None, str]:
    """``--explore``'s explorer if it lacks ``ability`` (an explorer's flag: ``asynchronous``,
    ``several_objectives``), with the explorers that have it as :func:`one_of` says them ('' if none); (None, '')
    if it has it or is not an explorer's name (another check names that)."""
    explorer = EXPLORERS.get(explore)
    if explorer is None or getattr(explorer, ability):
        return None, ""
    return explorer, one_of([name for name, other in EXPLORERS.items() if getattr(other, ability)])


def script_strategy(script: str, flag: str | None, explore: str, transport: str, problems: list[str]) -> str:
    """The selection rule: the script's, or 'none' with ``--strategy none``; and the transport."""
    strategy = script
    if script not in STRATEGIES:
        problems.append(f"strategy {script!r} is unknown; use one of {', '.join(STRATEGIES)}")
    elif flag is not None and flag != script:
        if flag == NO_PBT:
            strategy = NO_PBT
        else:
            problems.append(
                f"--strategy {flag}: this script does {script} selection; --strategy takes only 'none' "
                "(the same population with no exploit or explore). For another rule run its script: "
                "pbt_rl_wta.py (wta), pbt_rl_truct.py or pbt_rl_truct_collective.py (truncation)"
            )
    if strategy == NO_PBT and explore != DEFAULT_EXPLORER:
        problems.append(
            f"--explore {explore} with --strategy none: the control never explores; drop one of the two flags"
        )
    if transport not in TRANSPORTS:
        problems.append(f"transport {transport!r} is unknown; use one of {', '.join(TRANSPORTS)}")
    return strategy


def explorer_space(explore: str, space: dict[str, dict[str, Any]], problems: list[str]) -> None:
    """An explorer that cannot explore named (unordered) choices (``named_choices`` False: PB2 reads
    every hyperparameter as a GP input with an order, ordered choices by their index) refuses a
    search space with some, suggesting the explorers that choose categories by a rule of their own."""
    explorer = EXPLORERS.get(explore)
    if explorer is None or explorer.named_choices:
        return
    named = [name for name, entry in space.items() if isinstance(kind_from_entry(entry), Categorical)]
    if named:
        choices = "; ".join(f"{name}: {list(space[name]['choices'])}" for name in named)
        rules = {name: other.category_rule for name, other in EXPLORERS.items() if other.named_choices}
        how = "; ".join(f"{name} {rule}" for name, rule in rules.items() if rule)
        able = [name for name, rule in rules.items() if rule]
        instead = (
            f"use --explore {one_of(able)} (categories by a rule of their own: {how}), or list" if able else "list"
        )
        problems.append(
            f"--explore {explore} with named choices in the search space ({choices}): {explorer.why_ordered}; "
            f"{instead} ordered numbers instead"
        )


def asynchronous(args: Any, script: str, transport: str, problems: list[str]) -> None:
    """``--asynchronous``: on pbt_rl_truct.py and pbt_rl_wta.py (``script``: the script's rule), with an
    explorer that decides one member at a time (its ``asynchronous``); not with a replayed schedule, nor with
    --checkpoint-every (every ready point is checkpointed)."""
    if not args.asynchronous:
        return
    explore, schedule, checkpoint_every = args.explore, args.schedule, args.checkpoint_every
    if script == "truncation" and transport == "collective":
        problems.append(
            "--asynchronous: pbt_rl_truct_collective.py moves weights by broadcasts every rank joins at a generation's "
            "end, which asynchronous PBT does not have; run pbt_rl_truct.py --asynchronous (truncation) or "
            "pbt_rl_wta.py --asynchronous (winner-takes-all)"
        )
    explorer, able = lacking(explore, "asynchronous")
    if explorer is not None:
        instead = f"use --explore {able}, or drop" if able else "drop"
        problems.append(
            f"--explore {explore} --asynchronous: {explore} {explorer.why_synchronous}; "
            f"asynchronous PBT decides one member at a time: {instead} --asynchronous"
        )
    if schedule is not None:
        problems.append(
            "--schedule FILE --asynchronous: a replayed schedule trains one agent; there is nothing to share "
            "between ranks; drop --asynchronous"
        )
    if checkpoint_every != 1:
        problems.append(
            f"--checkpoint-every {checkpoint_every} --asynchronous: an asynchronous run checkpoints every member at "
            "each of its ready points (there are no generations to skip); drop --checkpoint-every"
        )


def population(num_agents: int | None, world_size: int, problems: list[str]) -> int:
    """The population size: ``--num-agents``, or one member per rank; a multiple of the ranks."""
    if num_agents is None:
        return world_size
    if num_agents >= 1 and num_agents % world_size:
        below = num_agents - num_agents % world_size
        options = sorted({max(world_size, below), below + world_size})
        problems.append(
            f"--num-agents {num_agents} is not a multiple of the {world_size} MPI ranks: every rank "
            f"must hold the same number of members. Use --num-agents {' or '.join(map(str, options))}, "
            f"or run with mpiexec -n N where N divides {num_agents}."
        )
    return num_agents


def budget(args: Any, settings: dict[str, Any], problems: list[str]) -> tuple[int, int]:
    """Generations and env steps per member per generation: the flags, else the YAML; where the YAML gives
    zoo's ``n_timesteps`` (one agent's budget) instead of ``total_generations``, each member trains that many
    env steps in all: ``n_timesteps / agent_training_steps`` generations, rounded up."""
    found = {}
    for name in ("agent_training_steps", "total_generations"):
        flag = "--" + name.replace("_", "-")
        value = getattr(args, name)
        value = settings.get(name) if value is None else value
        if value is None and name == "total_generations" and settings.get("n_timesteps") is not None:
            if settings["n_timesteps"] < 1:
                problems.append(f"n_timesteps {settings['n_timesteps']}: must be a positive whole number")
                value = 1
            else:
                value = -(-settings["n_timesteps"] // max(found["agent_training_steps"], 1))
        if value is None:
            problems.append(f"{flag} is not set, on the command line or in the YAML")
        elif value < 1:
            problems.append(f"{flag} {value}: must be a positive whole number")
        found[name] = int(value or 0)
    return found["total_generations"], found["agent_training_steps"]


def env_kwargs(env_id: str, tokens: list[str] | None, problems: list[str]) -> dict[str, Any]:
    """``--env-kwargs key:value ...`` as a dict, checked by making the env with them once (an Atari game's
    with ``frameskip: 1`` where zoo's preprocessing needs it: evo.config.envnames.atari_env_kwargs)."""
    found = atari_env_kwargs(env_id, parse_env_kwargs(tokens, problems))
    problem = env_kwargs_message(env_id, found)
    if problem:
        problems.append(problem)
    return found


def procgen_levels(args: Any, game: str | None, problems: list[str]) -> None:
    """Procgen's distribution mode and training levels (ignored by other envs)."""
    if not game:
        return
    if args.distribution_mode not in DISTRIBUTION_MODES:
        close = difflib.get_close_matches(args.distribution_mode, DISTRIBUTION_MODES, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        problems.append(
            f"--distribution-mode {args.distribution_mode!r} is not one of {', '.join(DISTRIBUTION_MODES)}{hint}"
        )
    if args.num_levels < 0 or args.start_level < 0:
        problems.append(f"--num-levels {args.num_levels} / --start-level {args.start_level}: must be >= 0")


def evaluation(args: Any, game: str | None, problems: list[str]) -> int:
    """Validate --select-on and the evaluation levels; returns the evaluation start level."""
    if args.select_on == "test" and args.eval_episodes < 1:
        problems.append("--select-on test selects on evaluation episodes: give --eval-episodes N (e.g. 10)")
    if args.eval_actions != "deterministic" and args.eval_episodes < 1:
        problems.append(
            f"--eval-actions {args.eval_actions} chooses the actions of evaluation episodes, and there are none: "
            "give --eval-episodes N (e.g. 10), or drop --eval-actions"
        )
    if not game:
        if args.eval_start_level is not None or args.eval_num_levels:
            problems.append(
                f"--eval-start-level / --eval-num-levels choose Procgen levels; {args.env_id} has none "
                "(its evaluation env just uses other seeds)"
            )
        return 0
    start = args.start_level + args.num_levels if args.eval_start_level is None else args.eval_start_level
    if args.eval_num_levels < 0 or start < 0:
        problems.append(f"--eval-num-levels {args.eval_num_levels} / --eval-start-level {start}: must be >= 0")
    elif args.num_levels > 0 and args.eval_num_levels > 0:
        train = range(args.start_level, args.start_level + args.num_levels)
        test = range(start, start + args.eval_num_levels)
        if max(train.start, test.start) < min(train.stop, test.stop):
            problems.append(
                f"evaluation levels [{test.start}, {test.stop}) overlap the training levels "
                f"[{train.start}, {train.stop}): the test score would not be held out; "
                f"use --eval-start-level {train.stop} or later"
            )
    return start


def schedule(
    path: Path | None,
    env_id: str,
    num_agents: int,
    spec: LearnerSpec,
    problems: list[str],
    explored: Sequence[str] = (),
) -> tuple:
    """The entries of ``--schedule FILE``, which trains one agent of the learner on the env it was found on;
    each must give every name of ``explored`` (the search space's: the run records a column for each), each
    value within its setting's domain, and no key twice."""
    if path is None:
        return ()
    tunable = {s.name: (s.type, s.may_be_off) for s in spec.settings if s.tunable}
    tunable.update({name: ((int, float, str), False) for name in explored if is_env_param(name)})
    try:
        load_yaml(Path(path).read_text())
    except DuplicateKey as error:
        problems.append(f"--schedule {path}: {error}; keep one")
        return ()
    except (OSError, yaml.YAMLError):
        pass  # said by load_schedule
    try:
        entries, found_on, found_with = load_schedule(path, tunable, spec.record_order(explored))
    except ValueError as error:
        problems.append(str(error))
        return ()
    for steps, hparams in entries:
        for name, value in hparams.items():
            if is_env_param(name):
                continue  # the env's own value: any its search range gives
            problem = spec.by_name[name].value_problem(value, f"--schedule {path}, from env step {steps}")
            if problem is not None:
                problems.append(problem)
    if num_agents != 1:
        problems.append(
            f"--schedule trains one agent with no population, but --num-agents is {num_agents}: "
            "pass --num-agents 1 (and run on one rank)"
        )
    if found_on is not None and found_on != env_id:
        problems.append(
            f"--schedule {path} was found on {found_on}, not {env_id}: pass --env-id {found_on}, "
            "or edit env_id in the file if you mean to transfer it"
        )
    if found_with is not None and found_with != spec.name:
        problems.append(f"--schedule {path} was found with --algo {found_with}: pass --algo {found_with}")
    for name in spec.architecture:
        values = [hparams[name] for _, hparams in entries if name in hparams]
        if len(set(values)) > 1:
            problems.append(
                f"--schedule {path}: {name} goes from {values[0]} to {next(v for v in values if v != values[0])}; a "
                "network's architecture changes only with its weights (a replayed PBT schedule keeps its member's), "
                f"so give one {name} throughout"
            )
    return tuple(entries)


def learner_options(spec: LearnerSpec, exploit_buffer: str, checkpoint_buffers: bool, problems: list[str]) -> None:
    """The options of off-policy learners, refused for a learner without a replay buffer."""
    if spec.replay:
        return
    if exploit_buffer != "own":
        problems.append(
            f"--exploit-buffer {exploit_buffer}: {spec.title} learns from its own fresh rollouts and has no replay "
            f"buffer to copy; drop the flag (it is for --algo {one_of(algos(lambda other: other.replay))})"
        )
    if not checkpoint_buffers:
        problems.append(
            f"--no-checkpoint-buffers: {spec.title} has no replay buffer to leave out of checkpoints; drop the flag"
        )


def run_dir_problems(run_dir: Path) -> list[str]:
    """Why a new run may not start in ``run_dir`` (it exists, or cannot be created). One that a run left before
    its first checkpoint may: the new run takes it over (evo.rundir.unstarted, under its lock)."""
    run_dir = Path(run_dir)
    try:
        if run_dir.exists() and unstarted(run_dir) is None:
            return [
                f"--run-dir {run_dir} already exists; evo will not overwrite a run. "
                "Pick another --run-dir or --exp-name, or delete it."
            ]
        parent = run_dir.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
    except OSError as error:  # a folder on the way this user may not enter
        return [
            f"--run-dir {run_dir}: cannot look there ({error.strerror}: {error.filename}); give a --run-dir in a "
            "folder you may read and write"
        ]
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        return [f"--run-dir {run_dir}: cannot create it, {parent} is not a writable directory"]
    return []


def stages(args: Any, spec: Any, search_space: Mapping[str, Any], num_agents: int, problems: list[str]) -> None:
    """``--max-distillations N`` (BG-PBT's stages): synchronous runs of a learner that distils (its
    spec's ``distils``) with the networks' architecture in the search space and at least as many
    students as members."""
    if not args.max_distillations:
        return
    flag = f"--max-distillations {args.max_distillations}"
    if args.asynchronous:
        problems.append(
            f"{flag} --asynchronous: a stage replaces the whole population at once (BG-PBT refuses asynchronous "
            "runs); drop --asynchronous, or --max-distillations"
        )
    if not spec.distils:
        needs = "a distillation of its critics and its replay buffer" if spec.replay else "a distillation loss"
        able = algos(lambda other: other.distils)
        instead = f"use --algo {one_of(able)}, or drop" if able else "drop"
        problems.append(
            f"{flag} --algo {spec.name}: a stage distils its students from their teachers with the learner's own "
            f"loss; {spec.title} would need {needs}, not built; {instead} --max-distillations"
        )
        return
    architecture = [name for name in search_space if name in spec.architecture]
    if not architecture:
        problems.append(
            f"{flag}: a stage proposes new architectures, and the search space has none of "
            f"{', '.join(spec.architecture)}; add them to the YAML's search_space, e.g. "
            "pi_layers: {low: 1, high: 5, type: int} and pi_width: {choices: [64, 128, 256]}"
        )
    if args.schedule is not None:
        problems.append(f"{flag} --schedule FILE: a replayed schedule trains one fixed agent; drop one of them")
    students = args.students if args.students is not None else 3 * num_agents
    if students < num_agents:
        problems.append(
            f"--students {students}: a stage needs at least as many students as the {num_agents} members it replaces"
        )


def final_pick(args: Any, num_agents: int, problems: list[str]) -> None:
    """``--final-eval EPISODES --final-top K`` (the final pick, evo.core.final): K at most the population, only
    with EPISODES, on one objective (several have a front, not one best) and without BG-PBT's stages (a run
    may end within a stage, whose students are not yet the population)."""
    episodes, top = args.final_eval, args.final_top
    if top is not None and episodes == 0:
        problems.append(
            f"--final-top {top}: the final pick plays its top members only with --final-eval EPISODES; give "
            "--final-eval (e.g. 20), or drop --final-top"
        )
    if top is not None and top > num_agents >= 1:
        problems.append(
            f"--final-top {top}: the population has {num_agents} member(s); give --final-top {num_agents} or fewer"
        )
    if episodes <= 0:
        return
    if parse_objective(args.objective)[0].several:
        problems.append(
            f"--final-eval {episodes} --objective {args.objective}: several objectives rank members by Pareto "
            "fronts, and a front has no one best to pick (evo-export --front exports it); give one objective, or "
            "drop --final-eval"
        )
    if args.max_distillations:
        problems.append(
            f"--final-eval {episodes} --max-distillations {args.max_distillations}: a run may end within a stage, "
            "whose students are not yet its population, and the final pick is not built for stages; drop one of "
            "the two flags"
        )


def objective(text: str | None, explore: str, max_distillations: int, problems: list[str]) -> Objective:
    """``--objective``: its terms (evo.core.objective); several of them need an explorer that can serve a
    Pareto ranking (its ``several_objectives``) and no BG-PBT stages (whose successive halving cuts
    students by one score)."""
    found, own = parse_objective(text)
    problems += own
    if not found.several:
        return found
    explorer, able = lacking(explore, "several_objectives")
    if explorer is not None:
        instead = f"use --explore {able}" if able else "give one objective"
        problems.append(
            f"--objective {found.text} --explore {explore}: several objectives rank members by Pareto fronts, and "
            f"{explore} {explorer.why_one_objective}; {instead}, or give one objective (a weighted sum computed by "
            "the env and put in info is one)"
        )
    if max_distillations:
        problems.append(
            f"--objective {found.text} --max-distillations {max_distillations}: a stage cuts its students by "
            "successive halving on one score; give one objective, or drop --max-distillations"
        )
    return found


def _range(kind: Kind) -> str:
    choices = getattr(kind, "choices", None)
    return f"(the choices {list(choices)})" if choices is not None else f"[{kind.low}, {kind.high}]"


def initial_hparams(args: Any, problems: list[str]) -> None:
    """``--initial-hparams`` resolved: ``source`` with ``--init-from``, else ``sample``; the source's modes
    need a source."""
    if args.initial_hparams is None:
        args.initial_hparams = "source" if args.init_from is not None else "sample"
    elif args.initial_hparams in ("source", "around-source") and args.init_from is None:
        problems.append(
            f"--initial-hparams {args.initial_hparams} starts the members from an agent's hyperparameters: give "
            "--init-from SOURCE too, or use --initial-hparams sample or defaults"
        )


def env_defaults(how: str, space: Mapping[str, Kind], defaults: Mapping[str, Any], problems: list[str]) -> None:
    """``--initial-hparams defaults`` starts every member from the env's own value of each env
    parameter, which must then lie within its search range."""
    if how != "defaults":
        return
    for name, value in defaults.items():
        kind = space[name]
        if value is None or isinstance(value, bool) or not kind.contains(value):
            problems.append(
                f"search_space.{name}: with --initial-hparams defaults every member starts from the env's own "
                f"value, {value!r}, which is not in its search range {_range(kind)}; widen the range, or use "
                "--initial-hparams sample"
            )
