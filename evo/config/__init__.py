"""The run configuration: command line + YAML hyperparameters, validated at start-up.

Pure: no MPI, no torch, no SB3. ``parse_config(argv, strategy=..., transport=...,
world_size=...)`` returns a frozen :class:`Config` or raises :class:`ConfigError` listing
every problem found, each with the bad value and how to fix it.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import difflib
import math
import os
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evo.config.envnames import DISTRIBUTION_MODES, procgen_game, unknown_env_message
from evo.core.explore import EXPLORERS
from evo.core.schedule import load_schedule
from evo.core.selection import NO_PBT, STRATEGIES
from evo.core.space import EXPLORED, ParamSpace

# The built-in defaults ship inside the package (hyperparams/ppo.yml at the top of the repository is a
# link to this file, the copy users read and edit).
DEFAULT_HYPERPARAMS = Path(__file__).resolve().parent.parent / "hyperparams" / "ppo.yml"
TRANSPORTS = ("p2p", "collective")
POLICIES = ("mlp", "impala", "nature")

# Keys an env block of a hyperparameter file may hold, with the type each is coerced to.
AGENT_KEYS: dict[str, type] = {
    "policy": str,
    "n_envs": int,
    "n_steps": int,
    "n_minibatches": int,
    "batch_size": int,
    "microbatch_size": int,
    "n_epochs": int,
    "max_grad_norm": float,
    "normalize_advantage": bool,
    "agent_training_steps": int,
    "total_generations": int,
    **{name: float for name in EXPLORED},
    "policy_kwargs": dict,
    "search_space": dict,
}
POLICY_KWARGS_KEYS: dict[str, type] = {
    "net_arch": list,
    "activation_fn": str,
    "ortho_init": bool,
    "features_dim": int,
}
SPACE_KEYS: dict[str, type] = {"low": float, "high": float, "scale": str}
ACTIVATIONS = ("tanh", "relu", "elu", "leaky_relu")


class ConfigError(ValueError):
    """Bad user input; carries every problem found so the user can fix them in one go."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))

    def __str__(self) -> str:
        lines = "\n".join(f"  - {p}" for p in self.problems)
        return f"invalid configuration ({len(self.problems)} problem(s)):\n{lines}"


@dataclass(frozen=True)
class AgentSettings:
    """PPO settings for one env, resolved from the YAML layers."""

    policy: str
    n_envs: int
    n_steps: int
    batch_size: int
    n_epochs: int
    max_grad_norm: float
    normalize_advantage: bool
    policy_kwargs: dict[str, Any]
    defaults: dict[str, float]
    """Default value of each explored hyperparameter (used when PBT does not sample)."""
    search_space: dict[str, ParamSpace]
    microbatch_size: int = 0
    """Back-propagate each minibatch in pieces of this many samples (0: whole; see evo.sb3.ppo)."""

    @property
    def rollout_steps(self) -> int:
        """Env steps collected per PPO update (n_envs * n_steps)."""
        return self.n_envs * self.n_steps


@dataclass(frozen=True)
class Config:
    """Everything a run needs; the same object on every rank."""

    strategy: str
    """Selection rule: 'wta' (winner takes all) or 'truncation'."""
    transport: str
    """How weights move between ranks: 'p2p' (send/recv) or 'collective' (Bcast)."""
    env_id: str
    """Gymnasium id, or a Procgen game by bare name ('bigfish') or 'procgen:bigfish'."""
    world_size: int
    """Number of MPI ranks."""
    num_agents: int
    """Population size; a multiple of world_size."""
    total_generations: int
    """Generations to train; each ends with selection and explore."""
    agent_training_steps: int
    """Env steps of PPO per member per generation (rounded up to whole rollouts)."""
    truncation_fraction: float
    """Fraction of the population replaced by truncation selection, in (0, 0.5]."""
    perturb_factors: tuple[float, ...]
    """Explore multiplies a hyperparameter by one of these."""
    resample_probability: float
    """Probability that explore resamples a hyperparameter instead of perturbing it."""
    eval_episodes: int
    """0: score = mean return of the last 10 training episodes; N>0: mean return of N
    deterministic episodes on a separate evaluation env."""
    seed: int
    """Base seed; members, envs and selection derive theirs from it."""
    exp_name: str
    run_dir: Path
    """Where the run's records, TensorBoard files and checkpoints go."""
    tb_writer: bool
    """Write TensorBoard event files."""
    torch_threads: int
    """torch intra-op threads per rank."""
    distribution_mode: str
    num_levels: int
    start_level: int
    hyperparams_file: Path | None
    agent: AgentSettings
    log_level: str = "INFO"
    command: tuple[str, ...] = field(default=())
    checkpoint_every: int = 1
    """Write a population checkpoint every this many generations (and on a stop signal)."""
    keep_checkpoints: int = 2
    """Complete checkpoints kept on disk."""
    resume: bool = False
    """Continue the run in run_dir from its last complete checkpoint."""
    run_id: str = ""
    """Identifies the run; a checkpoint from another run is refused."""
    cli: dict[str, Any] = field(default_factory=dict)
    """The command-line values this run was started with (a resume starts from them)."""
    cpu_tuning: bool = True
    """Allocator settings and channels-last convolutions (no change to PPO's maths)."""
    explore: str = "perturb"
    """How recipients explore: 'perturb' (random perturbation/resampling) or 'pb2' (GP bandit)."""
    initial_hparams: str = "sample"
    """'sample' (each member draws from the search space) or 'defaults' (the YAML's values)."""
    select_on: str = "train"
    """Which score drives selection: 'train' (training episodes) or 'test' (evaluation episodes)."""
    eval_start_level: int = 0
    eval_num_levels: int = 0
    """Procgen levels of the evaluation env (held out: by default the full distribution,
    from the first level after the training levels)."""
    schedule_file: Path | None = None
    """A replayed hyperparameter schedule (``python -m evo.replay``) for a single agent."""
    schedule: tuple[tuple[int, dict[str, float]], ...] = ()
    """``(env_steps, hparams)`` entries of ``schedule_file``, sorted; empty without one."""

    @property
    def members_per_rank(self) -> int:
        return self.num_agents // self.world_size

    @property
    def procgen_game(self) -> str | None:
        return procgen_game(self.env_id)

    def members_of(self, rank: int) -> range:
        """Member ids held by ``rank`` (contiguous blocks: rank r holds r*k .. r*k+k-1)."""
        k = self.members_per_rank
        return range(rank * k, rank * k + k)

    def owner(self, member: int) -> int:
        """Rank that holds ``member``."""
        return member // self.members_per_rank

    def to_dict(self) -> dict[str, Any]:
        """A plain, YAML-safe view of the resolved config."""

        def plain(value: Any) -> Any:
            if isinstance(value, Path):
                return str(value)
            if isinstance(value, tuple):
                return [plain(v) for v in value]
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            if isinstance(value, list):
                return [plain(v) for v in value]
            return value

        return plain(asdict(self))


# ---------------------------------------------------------------------------------------
# YAML hyperparameters


def _coerce(value: Any, kind: type, where: str, problems: list[str]) -> Any:
    """Coerce a YAML value to ``kind`` (PyYAML reads ``3e-4`` as a string)."""
    if kind is bool:
        if isinstance(value, bool):
            return value
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, (float, str)) and not isinstance(value, bool):
            try:
                number = float(value)
            except ValueError:
                number = math.nan
            if math.isfinite(number) and number == int(number):
                return int(number)
    elif kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif isinstance(value, kind):
        return value
    problems.append(f"{where} must be {kind.__name__}, got {value!r} ({type(value).__name__})")
    return None


def _unknown_key(key: str, known: Sequence[str], where: str) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
    return f"{where}: unknown key {key!r}{hint}"


def _check_keys(mapping: dict, schema: dict[str, type], where: str, problems: list[str]) -> dict[str, Any]:
    """Coerce each known key of ``mapping`` to its type in ``schema``; report the rest."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if key not in schema:
            problems.append(_unknown_key(str(key), list(schema), where))
            continue
        coerced = _coerce(value, schema[key], f"{where}.{key}", problems)
        if coerced is not None:
            out[key] = coerced
    return out


def _check_block(block: Any, where: str, problems: list[str]) -> dict[str, Any]:
    """Validate and coerce one env block of a hyperparameter file."""
    if not isinstance(block, dict):
        problems.append(f"{where} must be a mapping of settings, got {type(block).__name__}")
        return {}
    out = _check_keys(block, AGENT_KEYS, where, problems)
    if "policy_kwargs" in out:
        out["policy_kwargs"] = _check_policy_kwargs(out["policy_kwargs"], f"{where}.policy_kwargs", problems)
    if "search_space" in out:
        out["search_space"] = _check_space(out["search_space"], f"{where}.search_space", problems)
    return out


def _check_policy_kwargs(kwargs: dict, where: str, problems: list[str]) -> dict[str, Any]:
    out = _check_keys(kwargs, POLICY_KWARGS_KEYS, where, problems)
    net_arch = out.get("net_arch")
    if net_arch is not None and not all(isinstance(n, int) and n > 0 for n in net_arch):
        problems.append(f"{where}.net_arch must be a list of positive layer sizes, got {net_arch!r}")
        del out["net_arch"]
    if out.get("activation_fn", "tanh") not in ACTIVATIONS:
        problems.append(f"{where}.activation_fn is {out['activation_fn']!r}; use one of {', '.join(ACTIVATIONS)}")
        del out["activation_fn"]
    return out


def _check_space(space: dict, where: str, problems: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, entry in space.items():
        if name not in EXPLORED:
            problems.append(_unknown_key(str(name), list(EXPLORED), where))
        elif not isinstance(entry, dict):
            problems.append(f"{where}.{name} must be a mapping like {{low: 0.1, high: 0.3, scale: linear}}")
        else:
            out[name] = _check_keys(entry, SPACE_KEYS, f"{where}.{name}", problems)
    return out


def load_hyperparams_file(path: Path, problems: list[str]) -> dict[str, Any]:
    """Read a hyperparameter YAML file (safe_load), reporting unreadable or invalid files."""
    try:
        text = Path(path).read_text()
    except OSError as error:
        problems.append(f"--hyperparams {path}: cannot read the file ({error.strerror or error})")
        return {}
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        problems.append(f"--hyperparams {path}: invalid YAML: {error}".replace("\n", " "))
        return {}
    if data is None:
        return {}
    if not isinstance(data, dict):
        problems.append(
            f"--hyperparams {path}: expected a mapping of env ids to settings "
            f"(e.g. 'CartPole-v1: {{n_steps: 128}}'), got {type(data).__name__}"
        )
        return {}
    return data


# --param-set NAME: (distribution mode, training levels) that the name stands for
PARAM_SETS = {"easy": ("easy", 0), "easy-200": ("easy", 200), "hard": ("hard", 0), "hard-500": ("hard", 500)}


def _layers(
    data: Mapping[str, Any],
    env_key: str,
    game: str | None,
    source: str,
    problems: list[str],
    param_set: str | None = None,
) -> list:
    procgen_names = ["procgen"] + ([f"procgen-{param_set}"] if param_set else [])
    names = ["default"] + (procgen_names if game else []) + [env_key]
    return [_check_block(data[name], f"{source}[{name}]", problems) for name in names if name in data]


def resolve_agent(
    env_id: str,
    hyperparams_file: Path | None,
    problems: list[str],
    builtin: Path = DEFAULT_HYPERPARAMS,
    param_set: str | None = None,
) -> dict[str, Any]:
    """Merge the YAML layers for ``env_id`` (and a Procgen ``param_set``) into one flat settings dict."""
    game = procgen_game(env_id)
    env_key = game or env_id
    layers = _layers(load_hyperparams_file(builtin, problems), env_key, game, builtin.name, problems, param_set)
    if hyperparams_file is not None:
        data = load_hyperparams_file(hyperparams_file, problems)
        layers += _layers(data, env_key, game, str(hyperparams_file), problems, param_set)
        if data and not ({"default", "procgen", env_key} & set(data)):
            problems.append(
                f"--hyperparams {hyperparams_file}: no block applies to {env_id!r}; "
                f"its blocks are {', '.join(map(str, data))} (use 'default' or {env_key!r})"
            )
    merged: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if key in ("policy_kwargs", "search_space"):
                merged[key] = {**merged.get(key, {}), **value}
            else:
                merged[key] = value
            # batch_size and n_minibatches say the same thing; the later layer wins.
            if key == "batch_size":
                merged.pop("n_minibatches", None)
            elif key == "n_minibatches":
                merged.pop("batch_size", None)
    return merged


# ---------------------------------------------------------------------------------------
# Command line


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def str2bool(text: str) -> bool:
    """'True'/'False' as EVO users type them (argparse's type=bool would make 'False' true)."""
    lowered = str(text).strip().lower()
    if lowered in ("1", "true", "yes", "y", "on"):
        return True
    if lowered in ("0", "false", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected True or False, got {text!r}")


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Population Based Training of Stable-Baselines3 PPO agents over MPI. "
        "Run under mpiexec: every rank trains num_agents / world_size members.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        allow_abbrev=False,
    )
    add = parser.add_argument
    add("--env-id", default="CartPole-v1", help="gymnasium id, or a Procgen game ('bigfish', 'procgen:coinrun')")
    add("--num-agents", type=int, default=None, help="population size (default: number of MPI ranks)")
    add("--total-generations", type=int, default=None, help="generations to train (default: from the YAML)")
    add(
        "--agent-training-steps",
        type=int,
        default=None,
        help="env steps per member per generation (default: from the YAML)",
    )
    add(
        "--strategy",
        default=None,
        metavar="none",
        help="'none': the control PBT must beat: the same population with the same initial hyperparameters, "
        "trained with no exploit or explore (random search)",
    )
    add(
        "--explore",
        choices=EXPLORERS,
        default="perturb",
        help="how recipients change their hyperparameters: 'perturb' (multiply by --perturb-factors, or resample) "
        "or 'pb2' (PB2's GP bandit on the population's history, Parker-Holder et al. 2020)",
    )
    add("--truncation-fraction", type=float, default=0.25, help="fraction replaced by truncation, in (0, 0.5]")
    add("--perturb-factors", type=float, nargs="+", default=[0.8, 1.2], help="explore multiplies by one of these")
    add("--resample-probability", type=float, default=0.25, help="chance explore resamples instead of perturbing")
    add(
        "--eval-episodes",
        type=int,
        default=0,
        help="0: score = mean return of the last 10 training episodes; N>0: N deterministic eval episodes",
    )
    add(
        "--initial-hparams",
        choices=("sample", "defaults"),
        default="sample",
        help="'sample': each member starts from its own draw from the search space; 'defaults': every member "
        "starts from the YAML's values (with --num-agents 1: plain PPO with the env's tuned settings)",
    )
    add("--seed", type=int, default=0, help="base seed")
    add("--exp-name", default=None, help="experiment name (default: <script>-<env>-<time>)")
    add("--run-dir", type=Path, default=None, help="run directory (default: runs/<exp-name>)")
    add(
        "--tb-writer",
        type=str2bool,
        nargs="?",
        const=True,
        default=True,
        help="write TensorBoard event files ('--tb-writer False' to turn off)",
    )
    add("--torch-threads", type=int, default=1, help="torch threads per rank")
    add("--hyperparams", type=Path, default=None, help="YAML file layered over hyperparams/ppo.yml")
    add("--learning-rate-range", type=float, nargs=2, metavar=("LOW", "HIGH"), help="search range for learning_rate")
    add("--gamma-range", type=float, nargs=2, metavar=("LOW", "HIGH"), help="search range for gamma")
    add("--num-envs", type=int, default=None, help="parallel envs per member (default: from the YAML)")
    add(
        "--param-set",
        default=None,
        metavar="NAME",
        help="Procgen: train-procgen-pytorch's parameter set easy, easy-200, hard or hard-500 (envs, budget, "
        "and the distribution mode and training levels of its name unless given)",
    )
    add(
        "--select-on",
        choices=("train", "test"),
        default="train",
        help="score that drives selection: 'train' = training episodes, 'test' = the --eval-episodes evaluation "
        "(on Procgen held-out levels: selecting on them uses them as a validation set)",
    )
    add(
        "--eval-start-level",
        type=int,
        default=None,
        help="Procgen: first evaluation level (default: the level after the training levels)",
    )
    add("--eval-num-levels", type=int, default=0, help="Procgen: evaluation levels (default 0: full distribution)")
    add("--distribution-mode", default="easy", help=f"Procgen: one of {', '.join(DISTRIBUTION_MODES)}")
    add("--num-levels", type=int, default=0, help="Procgen: number of training levels (0 = unlimited)")
    add("--start-level", type=int, default=0, help="Procgen: first training level")
    add("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="rank 0's log level")
    add(
        "--no-cpu-tuning",
        dest="cpu_tuning",
        action="store_false",
        help="turn off evo's CPU speed-ups (glibc allocator settings, channels-last convolutions), for comparison",
    )
    add(
        "--schedule",
        type=Path,
        default=None,
        metavar="FILE",
        help="train one agent (--num-agents 1) on a hyperparameter schedule written by python -m evo.replay",
    )
    add("--checkpoint-every", type=int, default=1, help="checkpoint the population every N generations")
    add("--keep-checkpoints", type=int, default=2, help="complete checkpoints to keep")
    add(
        "--resume",
        action="store_true",
        help="continue the run in --run-dir (or runs/--exp-name) from its last complete checkpoint; "
        "flags not given again keep the run's values, --total-generations may extend it",
    )
    return parser


# Flags a resumed run takes from the command line only if given again.
RESUMED_FLAGS = (
    "env_id",
    "strategy",
    "num_agents",
    "total_generations",
    "agent_training_steps",
    "truncation_fraction",
    "explore",
    "initial_hparams",
    "perturb_factors",
    "resample_probability",
    "eval_episodes",
    "seed",
    "exp_name",
    "tb_writer",
    "torch_threads",
    "hyperparams",
    "learning_rate_range",
    "gamma_range",
    "num_envs",
    "distribution_mode",
    "num_levels",
    "start_level",
    "checkpoint_every",
    "keep_checkpoints",
    "schedule",
    "param_set",
    "select_on",
    "eval_start_level",
    "eval_num_levels",
)
# What may not differ between a run and its resumption.
FIXED_ON_RESUME = (
    "env_id",
    "num_agents",
    "strategy",
    "seed",
    "eval_episodes",
    "distribution_mode",
    "num_levels",
    "start_level",
    "agent",
)
# PPO settings that change how the update is computed, not what it computes: a run may resume
# with another value (e.g. a smaller microbatch after running out of memory).
AGENT_FREE_ON_RESUME = ("microbatch_size",)


def explicit_flags(parser: argparse.ArgumentParser, argv: Sequence[str]) -> set[str]:
    """Destinations of the flags that appear in ``argv``."""
    found = set()
    for token in argv:
        if token.startswith("--"):
            action = parser._option_string_actions.get(token.split("=", 1)[0])
            if action is not None:
                found.add(action.dest)
    return found


def _cli_values(args: argparse.Namespace) -> dict[str, Any]:
    values = {}
    for name in RESUMED_FLAGS:
        value = getattr(args, name)
        values[name] = str(value) if isinstance(value, Path) else (list(value) if isinstance(value, tuple) else value)
    return values


def load_saved_config(run_dir: Path) -> dict[str, Any]:
    """The config.yaml of an existing run (raises ConfigError if it cannot be read)."""
    path = Path(run_dir) / "config.yaml"
    try:
        saved = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(
            [f"--resume: {run_dir} is not an evo run directory (no config.yaml); check --run-dir / --exp-name"]
        ) from None
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError([f"--resume: cannot read {path}: {error}"]) from error
    if not isinstance(saved, dict) or not isinstance(saved.get("cli"), dict):
        raise ConfigError([f"--resume: {path} was not written by this version of evo (no 'cli' section)"])
    return saved


def parse_config(
    argv: Sequence[str] | None = None,
    *,
    strategy: str = "truncation",
    transport: str = "p2p",
    world_size: int = 1,
    prog: str | None = None,
    now: _dt.datetime | None = None,
    check_run_dir: bool = True,
) -> Config:
    """Parse and validate; raise :class:`ConfigError` naming every problem.

    argparse's own errors (a flag that is not a number, say) exit with status 2 as usual.
    """
    parser = build_parser(prog)
    args, unknown = parser.parse_known_args(argv)
    problems: list[str] = []
    saved: dict[str, Any] | None = None
    if args.resume:
        if args.run_dir is None and args.exp_name is None:
            raise ConfigError(["--resume needs the run: give --run-dir DIR (or --exp-name NAME for runs/NAME)"])
        resume_dir = args.run_dir if args.run_dir is not None else Path("runs") / args.exp_name
        saved = load_saved_config(resume_dir)
        given = explicit_flags(parser, list(argv) if argv is not None else sys.argv[1:])
        for name, value in saved["cli"].items():
            if name in RESUMED_FLAGS and name not in given:
                if name in ("hyperparams", "schedule") and value is not None:
                    value = Path(value)
                setattr(args, name, value)
        args.run_dir = resume_dir
    if unknown:
        flags = [a for action in parser._actions for a in action.option_strings]
        previous_was_flag = False
        for arg in unknown:
            if arg.startswith("-") and not _is_number(arg):
                close = difflib.get_close_matches(arg.split("=")[0], flags, n=1)
                hint = f"; did you mean {close[0]}?" if close else "; see --help"
                problems.append(f"unknown option {arg}{hint}")
                previous_was_flag = True
            elif not previous_was_flag:  # a value right after an unknown flag is its value
                problems.append(f"unexpected argument {arg!r}; see --help")

    if strategy not in STRATEGIES:
        problems.append(f"strategy {strategy!r} is unknown; use one of {', '.join(STRATEGIES)}")
    elif args.strategy is not None and args.strategy != strategy:
        if args.strategy == NO_PBT:
            strategy = NO_PBT
        else:
            problems.append(
                f"--strategy {args.strategy}: this script does {strategy} selection; --strategy takes only 'none' "
                "(the same population with no exploit or explore). For another rule run its script: "
                "pbt_rl_wta.py (wta), pbt_rl_truct.py or pbt_rl_truct_collective.py (truncation)"
            )
    if strategy == NO_PBT and args.explore != "perturb":
        problems.append(
            f"--explore {args.explore} with --strategy none: the control never explores; drop one of the two flags"
        )
    if transport not in TRANSPORTS:
        problems.append(f"transport {transport!r} is unknown; use one of {', '.join(TRANSPORTS)}")

    env_problem = unknown_env_message(args.env_id)
    if env_problem:
        problems.append(env_problem)
    game = procgen_game(args.env_id)

    param_set = None
    if args.param_set is not None:
        if args.param_set not in PARAM_SETS:
            close = difflib.get_close_matches(args.param_set, list(PARAM_SETS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problems.append(f"--param-set {args.param_set!r} is not one of {', '.join(PARAM_SETS)}{hint}")
        elif not game:
            problems.append(
                f"--param-set {args.param_set} is a Procgen parameter set; {args.env_id} is not a Procgen game "
                "(use --hyperparams FILE for other envs)"
            )
        else:
            param_set = args.param_set
            # the name's mode and levels, unless given (a resume already has the run's values)
            given = explicit_flags(parser, list(argv) if argv is not None else sys.argv[1:])
            mode, levels = PARAM_SETS[param_set]
            if "distribution_mode" not in given and not args.resume:
                args.distribution_mode = mode
            if "num_levels" not in given and not args.resume:
                args.num_levels = levels
    settings = resolve_agent(args.env_id, args.hyperparams, problems, param_set=param_set)

    num_agents = world_size if args.num_agents is None else args.num_agents
    if num_agents < 1:
        problems.append(f"--num-agents {num_agents}: the population needs at least one member")
    elif num_agents % world_size:
        below = num_agents - num_agents % world_size
        options = sorted({max(world_size, below), below + world_size})
        problems.append(
            f"--num-agents {num_agents} is not a multiple of the {world_size} MPI ranks: every rank "
            f"must hold the same number of members. Use --num-agents {' or '.join(map(str, options))}, "
            f"or run with mpiexec -n N where N divides {num_agents}."
        )

    generations = args.total_generations if args.total_generations is not None else settings.get("total_generations")
    steps = args.agent_training_steps if args.agent_training_steps is not None else settings.get("agent_training_steps")
    for flag, value in (("--total-generations", generations), ("--agent-training-steps", steps)):
        if value is None:
            problems.append(f"{flag} is not set, on the command line or in the YAML")
        elif value < 1:
            problems.append(f"{flag} {value}: must be a positive whole number")

    if not (0 < args.truncation_fraction <= 0.5):
        problems.append(
            f"--truncation-fraction {args.truncation_fraction}: must be in (0, 0.5] "
            "(the bottom and top groups may not overlap); the default is 0.25"
        )
    if any(not (f > 0 and math.isfinite(f)) for f in args.perturb_factors):
        problems.append(f"--perturb-factors {args.perturb_factors}: every factor must be a positive number")
    if not (0 <= args.resample_probability <= 1):
        problems.append(f"--resample-probability {args.resample_probability}: must be in [0, 1]")
    if args.eval_episodes < 0:
        problems.append(f"--eval-episodes {args.eval_episodes}: use 0 (training episodes) or a positive count")
    if args.torch_threads < 1:
        problems.append(f"--torch-threads {args.torch_threads}: must be at least 1")
    if args.num_envs is not None and args.num_envs < 1:
        problems.append(f"--num-envs {args.num_envs}: must be at least 1")
    if args.seed < 0:
        problems.append(f"--seed {args.seed}: must be >= 0")
    if args.checkpoint_every < 1:
        problems.append(f"--checkpoint-every {args.checkpoint_every}: must be at least 1 (generations)")
    if args.keep_checkpoints < 1:
        problems.append(f"--keep-checkpoints {args.keep_checkpoints}: keep at least 1")
    if game:
        if args.distribution_mode not in DISTRIBUTION_MODES:
            close = difflib.get_close_matches(args.distribution_mode, DISTRIBUTION_MODES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problems.append(
                f"--distribution-mode {args.distribution_mode!r} is not one of {', '.join(DISTRIBUTION_MODES)}{hint}"
            )
        if args.num_levels < 0 or args.start_level < 0:
            problems.append(f"--num-levels {args.num_levels} / --start-level {args.start_level}: must be >= 0")

    agent = _build_agent(settings, args, game, problems)
    eval_start = _check_evaluation(args, game, problems)
    schedule = _load_schedule(args, num_agents, problems)

    stem = Path(prog).stem if prog else "evo"
    stamp = (now or _dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    exp_name = args.exp_name or f"{stem}-{(game or args.env_id).replace(':', '_').replace('/', '_')}-{stamp}"
    run_dir = args.run_dir if args.run_dir is not None else Path("runs") / exp_name
    if check_run_dir and not args.resume:
        problems += run_dir_problems(run_dir)

    if problems:
        raise ConfigError(problems)
    cli = _cli_values(args)
    cli["num_agents"] = num_agents  # a resume on another world size keeps the population
    config = Config(
        strategy=strategy,
        transport=transport,
        env_id=args.env_id,
        world_size=world_size,
        num_agents=num_agents,
        total_generations=int(generations),
        agent_training_steps=int(steps),
        truncation_fraction=args.truncation_fraction,
        perturb_factors=tuple(args.perturb_factors),
        resample_probability=args.resample_probability,
        eval_episodes=args.eval_episodes,
        seed=args.seed,
        exp_name=exp_name,
        run_dir=run_dir,
        tb_writer=args.tb_writer,
        torch_threads=args.torch_threads,
        distribution_mode=args.distribution_mode,
        num_levels=args.num_levels,
        start_level=args.start_level,
        hyperparams_file=args.hyperparams,
        agent=agent,
        log_level=args.log_level,
        command=tuple(argv) if argv is not None else (),
        checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints,
        resume=args.resume,
        run_id=saved["run_id"] if saved else uuid.uuid4().hex,
        cli=cli,
        cpu_tuning=args.cpu_tuning,
        explore=args.explore,
        initial_hparams=args.initial_hparams,
        select_on=args.select_on,
        eval_start_level=eval_start,
        eval_num_levels=args.eval_num_levels,
        schedule_file=args.schedule,
        schedule=schedule,
    )
    if saved is not None:
        differences = resume_differences(saved, config.to_dict())
        if differences:
            raise ConfigError(differences)
    return config


def resume_differences(saved: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Why a run may not be resumed with this configuration."""
    found = []
    for name in FIXED_ON_RESUME:
        if name == "agent":
            keys = sorted(
                k
                for k in set(saved["agent"]) | set(new["agent"])
                if k not in AGENT_FREE_ON_RESUME and saved["agent"].get(k) != new["agent"].get(k)
            )
            if keys:
                detail = "; ".join(f"{k}: {saved['agent'].get(k)!r} -> {new['agent'].get(k)!r}" for k in keys)
                found.append(
                    f"--resume: the PPO settings differ from the run's ({detail}); the YAML or --hyperparams "
                    "changed since the run started. Restore them, or start a new run."
                )
        elif saved.get(name) != new.get(name):
            found.append(
                f"--resume: {name} was {saved.get(name)!r} in this run, the command gives {new.get(name)!r}; "
                "a run resumes with the same value (drop the flag to keep it)"
            )
    return found


def _check_evaluation(args: argparse.Namespace, game: str | None, problems: list[str]) -> int:
    """Validate --select-on and the evaluation levels; returns the evaluation start level."""
    if args.select_on == "test" and args.eval_episodes < 1:
        problems.append("--select-on test selects on evaluation episodes: give --eval-episodes N (e.g. 10)")
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


def _load_schedule(args: argparse.Namespace, num_agents: int, problems: list[str]) -> tuple:
    if args.schedule is None:
        return ()
    try:
        schedule, env_id = load_schedule(args.schedule)
    except ValueError as error:
        problems.append(str(error))
        return ()
    if num_agents != 1:
        problems.append(
            f"--schedule trains one agent with no population, but --num-agents is {num_agents}: "
            "pass --num-agents 1 (and run on one rank)"
        )
    if env_id is not None and env_id != args.env_id:
        problems.append(
            f"--schedule {args.schedule} was found on {env_id}, not {args.env_id}: pass --env-id {env_id}, "
            "or edit env_id in the file if you mean to transfer it"
        )
    return tuple(schedule)


def _build_agent(settings: dict[str, Any], args: argparse.Namespace, game: str | None, problems: list[str]):
    n_envs = args.num_envs if args.num_envs is not None else settings.get("n_envs", 1)
    n_steps = settings.get("n_steps", 0)
    if n_steps < 1:
        problems.append(f"n_steps {n_steps}: must be a positive whole number")
    rollout = max(1, n_envs * max(n_steps, 1))
    if "batch_size" in settings:
        batch_size = settings["batch_size"]
    else:
        minibatches = settings.get("n_minibatches", 1)
        if minibatches < 1:
            problems.append(f"n_minibatches {minibatches}: must be a positive whole number")
            minibatches = 1
        batch_size = rollout // minibatches
    if not (2 <= batch_size <= rollout):
        problems.append(
            f"batch_size {batch_size}: must be between 2 and n_envs * n_steps = {rollout}; "
            "set batch_size or n_minibatches in the YAML"
        )
    for key in ("n_epochs",):
        if settings.get(key, 1) < 1:
            problems.append(f"{key} {settings[key]}: must be a positive whole number")
    microbatch_size = settings.get("microbatch_size") or 0
    if microbatch_size < 0:
        problems.append(
            f"microbatch_size {microbatch_size}: must be a positive number of samples, or 0 to back-propagate "
            "each minibatch whole"
        )

    policy = settings.get("policy", "mlp").lower()
    aliases = {"mlppolicy": "mlp", "cnnpolicy": "nature", "impalacnn": "impala"}
    policy = aliases.get(policy, policy)
    if policy not in POLICIES:
        close = difflib.get_close_matches(policy, POLICIES, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        problems.append(f"policy {policy!r} is unknown; use one of {', '.join(POLICIES)}{hint}")
    elif game and policy == "mlp":
        problems.append(f"policy 'mlp' cannot read Procgen's images ({game}); use 'impala' or 'nature'")
    elif not game and policy != "mlp":
        problems.append(f"policy {policy!r} is a CNN for image observations; use 'mlp' for {args.env_id}")

    raw_space = settings.get("search_space", {})
    space: dict[str, ParamSpace] = {}
    for name in EXPLORED:
        entry = dict(raw_space.get(name, {}))
        override = {"learning_rate": args.learning_rate_range, "gamma": args.gamma_range}.get(name)
        if override is not None:
            entry.update(low=override[0], high=override[1])
            flag = "--learning-rate-range" if name == "learning_rate" else "--gamma-range"
            if override[0] >= override[1]:
                kind = "reversed" if override[0] > override[1] else "empty"
                problems.append(f"{flag} {override[0]:g} {override[1]:g}: the range is {kind}; give LOW < HIGH")
                continue
        if "low" not in entry or "high" not in entry:
            problems.append(f"search_space.{name} needs both low and high (got {entry or 'nothing'})")
            continue
        param = ParamSpace(entry["low"], entry["high"], entry.get("scale", "linear"))
        found = param.problems(name)
        problems += found
        if not found:
            space[name] = param

    defaults = {name: settings.get(name) for name in EXPLORED}
    for name, value in defaults.items():
        if value is None:
            problems.append(f"{name} has no default value in the YAML")

    return AgentSettings(
        policy=policy,
        n_envs=n_envs,
        n_steps=n_steps,
        batch_size=batch_size,
        n_epochs=settings.get("n_epochs", 10),
        max_grad_norm=settings.get("max_grad_norm", 0.5),
        normalize_advantage=settings.get("normalize_advantage", True),
        policy_kwargs=settings.get("policy_kwargs", {}),
        defaults=defaults,
        search_space=space,
        microbatch_size=microbatch_size,
    )


def run_dir_problems(run_dir: Path) -> list[str]:
    """Why a new run may not start in ``run_dir`` (it exists, or cannot be created)."""
    run_dir = Path(run_dir)
    if run_dir.exists():
        return [
            f"--run-dir {run_dir} already exists; evo will not overwrite a run. "
            "Pick another --run-dir or --exp-name, or delete it."
        ]
    parent = run_dir.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        return [f"--run-dir {run_dir}: cannot create it, {parent} is not a writable directory"]
    return []
