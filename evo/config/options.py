"""Every command-line option, declared once. Pure.

An :class:`Option` carries what argparse needs (flag, type, default, help), the check of its
own value, the :class:`Config` field it fills and what ``--resume`` does with it. The parser
(:func:`build_parser`), the flags found on a command line (:func:`explicit_flags`), the values
saved with a run and restored from it, and the resume rules are all derived from ``OPTIONS``.
Checks that involve several options (the population and the world size, the evaluation
levels and the training ones ...) live in :mod:`evo.config.checks`.
"""

from __future__ import annotations

import argparse
import difflib
import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo.config.envnames import DISTRIBUTION_MODES, unknown_env_message
from evo.config.hyperparams import PARAM_SETS
from evo.core.explore import EXPLORERS


class Resume(enum.Enum):
    """What ``--resume`` does with an option."""

    RESTORED = "taken from the run unless given again; may change on resume"
    FIXED = "taken from the run; refused if given with another value"
    OWN = "this invocation's own; never taken from the run"


Check = Callable[[str, Any], "str | None"]
"""``check(flag, value)``: the problem with an option's value, or None."""


@dataclass(frozen=True)
class Option:
    """One command-line option: argparse's arguments, its check, its Config field, its resume class."""

    name: str
    """argparse's dest, and the key under ``cli`` in config.yaml."""
    help: str
    resume: Resume
    default: Any = None
    type: Callable[[str], Any] | None = None
    nargs: int | str | None = None
    choices: Sequence[str] | None = None
    metavar: str | tuple[str, ...] | None = None
    action: str | None = None
    const: Any = None
    flag: str = ""
    """The flag; '' for ``--`` + the name with dashes."""
    field: str | None = ""
    """The Config field it fills: '' for the same name, None when it only shapes another field."""
    check: Check | None = None

    @property
    def flag_name(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def field_name(self) -> str | None:
        return self.name if self.field == "" else self.field

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        settings = {
            "type": self.type,
            "nargs": self.nargs,
            "choices": self.choices,
            "metavar": self.metavar,
            "action": self.action,
            "const": self.const,
        }
        given = {key: value for key, value in settings.items() if value is not None}
        parser.add_argument(self.flag_name, dest=self.name, default=self.default, help=self.help, **given)

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` for this option alone, or None."""
        return self.check(self.flag_name, value) if self.check is not None else None

    def saved(self, value: Any) -> Any:
        """``value`` as plain YAML data for the run's ``cli`` record."""
        if isinstance(value, Path):
            return str(value)
        return list(value) if isinstance(value, tuple) else value

    def restored(self, value: Any) -> Any:
        """A value read back from the run's ``cli`` record, as argparse would have made it."""
        if value is None:
            return None
        if self.type is Path:
            return Path(value)
        if self.nargs in ("+", "*") and isinstance(value, str):
            return [value]  # runs from before --hyperparams took several values
        return value


def must(holds: Callable[[Any], bool], tail: str) -> Check:
    """A check that reports ``FLAG VALUE: tail`` when ``holds(value)`` is false (None is not checked)."""

    def check(flag: str, value: Any) -> str | None:
        return None if value is None or holds(value) else f"{flag} {value}: {tail}"

    return check


def ordered_range(flag: str, bounds: Sequence[float] | None) -> str | None:
    """``--learning-rate-range LOW HIGH`` and the like: LOW < HIGH."""
    if bounds is None or bounds[0] < bounds[1]:
        return None
    kind = "reversed" if bounds[0] > bounds[1] else "empty"
    return f"{flag} {bounds[0]:g} {bounds[1]:g}: the range is {kind}; give LOW < HIGH"


def known_param_set(flag: str, name: str | None) -> str | None:
    if name is None or name in PARAM_SETS:
        return None
    close = difflib.get_close_matches(name, list(PARAM_SETS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{flag} {name!r} is not one of {', '.join(PARAM_SETS)}{hint}"


def str2bool(text: str) -> bool:
    """'True'/'False' as EVO users type them (argparse's type=bool would make 'False' true)."""
    lowered = str(text).strip().lower()
    if lowered in ("1", "true", "yes", "y", "on"):
        return True
    if lowered in ("0", "false", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected True or False, got {text!r}")


RESTORED, FIXED, OWN = Resume.RESTORED, Resume.FIXED, Resume.OWN

OPTIONS: tuple[Option, ...] = (
    Option(
        "env_id",
        "gymnasium id, or a Procgen game ('bigfish', 'procgen:coinrun')",
        FIXED,
        default="CartPole-v1",
        check=lambda flag, value: unknown_env_message(value),
    ),
    Option(
        "num_agents",
        "population size (default: number of MPI ranks)",
        FIXED,
        type=int,
        check=must(lambda n: n >= 1, "the population needs at least one member"),
    ),
    Option("total_generations", "generations to train (default: from the YAML)", RESTORED, type=int),
    Option("agent_training_steps", "env steps per member per generation (default: from the YAML)", RESTORED, type=int),
    Option(
        "strategy",
        "'none': the control PBT must beat: the same population with the same initial hyperparameters, "
        "trained with no exploit or explore (random search)",
        FIXED,
        metavar="none",
    ),
    Option(
        "explore",
        "how recipients change their hyperparameters: 'perturb' (multiply by --perturb-factors, or resample) "
        "or 'pb2' (PB2's GP bandit on the population's history, Parker-Holder et al. 2020)",
        RESTORED,
        default="perturb",
        choices=EXPLORERS,
    ),
    Option(
        "truncation_fraction",
        "fraction replaced by truncation, in (0, 0.5]",
        RESTORED,
        default=0.25,
        type=float,
        check=must(
            lambda f: 0 < f <= 0.5,
            "must be in (0, 0.5] (the bottom and top groups may not overlap); the default is 0.25",
        ),
    ),
    Option(
        "perturb_factors",
        "explore multiplies by one of these",
        RESTORED,
        default=[0.8, 1.2],
        type=float,
        nargs="+",
        check=must(lambda fs: all(f > 0 and math.isfinite(f) for f in fs), "every factor must be a positive number"),
    ),
    Option(
        "resample_probability",
        "chance explore resamples instead of perturbing",
        RESTORED,
        default=0.25,
        type=float,
        check=must(lambda p: 0 <= p <= 1, "must be in [0, 1]"),
    ),
    Option(
        "eval_episodes",
        "0: score = mean return of the last 10 training episodes; N>0: N deterministic eval episodes",
        FIXED,
        default=0,
        type=int,
        check=must(lambda n: n >= 0, "use 0 (training episodes) or a positive count"),
    ),
    Option(
        "initial_hparams",
        "'sample': each member starts from its own draw from the search space; 'defaults': every member "
        "starts from the YAML's values (with --num-agents 1: plain PPO with the env's tuned settings)",
        RESTORED,
        default="sample",
        choices=("sample", "defaults"),
    ),
    Option("seed", "base seed", FIXED, default=0, type=int, check=must(lambda s: s >= 0, "must be >= 0")),
    Option("exp_name", "experiment name (default: <script>-<env>-<time>)", RESTORED),
    Option("run_dir", "run directory (default: runs/<exp-name>)", OWN, type=Path),
    Option(
        "tb_writer",
        "write TensorBoard event files ('--tb-writer False' to turn off)",
        RESTORED,
        default=True,
        type=str2bool,
        nargs="?",
        const=True,
    ),
    Option(
        "torch_threads",
        "torch threads per rank",
        RESTORED,
        default=1,
        type=int,
        check=must(lambda n: n >= 1, "must be at least 1"),
    ),
    Option(
        "conf_file",
        "YAML file layered over hyperparams/ppo.yml (its default, procgen and env blocks)",
        RESTORED,
        type=Path,
        metavar="FILE",
    ),
    Option(
        "hyperparams",
        "PPO settings for the env as key:value (e.g. learning_rate:1e-3 n_epochs:4 "
        "'policy_kwargs:{net_arch: [32, 32]}'), layered over every YAML file; or one FILE, as --conf-file",
        RESTORED,
        nargs="+",
        metavar="KEY:VALUE",
    ),
    Option(
        "learning_rate_range",
        "search range for learning_rate",
        RESTORED,
        type=float,
        nargs=2,
        metavar=("LOW", "HIGH"),
        field=None,
        check=ordered_range,
    ),
    Option(
        "gamma_range",
        "search range for gamma",
        RESTORED,
        type=float,
        nargs=2,
        metavar=("LOW", "HIGH"),
        field=None,
        check=ordered_range,
    ),
    Option(
        "num_envs",
        "parallel envs per member (default: from the YAML)",
        RESTORED,
        type=int,
        field=None,
        check=must(lambda n: n >= 1, "must be at least 1"),
    ),
    Option(
        "param_set",
        "Procgen: train-procgen-pytorch's parameter set easy, easy-200, hard or hard-500 (envs, budget, "
        "and the distribution mode and training levels of its name unless given)",
        RESTORED,
        metavar="NAME",
        field=None,
        check=known_param_set,
    ),
    Option(
        "select_on",
        "score that drives selection: 'train' = training episodes, 'test' = the --eval-episodes evaluation "
        "(on Procgen held-out levels: selecting on them uses them as a validation set)",
        RESTORED,
        default="train",
        choices=("train", "test"),
    ),
    Option(
        "eval_start_level",
        "Procgen: first evaluation level (default: the level after the training levels)",
        RESTORED,
        type=int,
    ),
    Option(
        "eval_num_levels",
        "Procgen: evaluation levels (default 0: full distribution)",
        RESTORED,
        default=0,
        type=int,
    ),
    Option("distribution_mode", f"Procgen: one of {', '.join(DISTRIBUTION_MODES)}", FIXED, default="easy"),
    Option("num_levels", "Procgen: number of training levels (0 = unlimited)", FIXED, default=0, type=int),
    Option("start_level", "Procgen: first training level", FIXED, default=0, type=int),
    Option(
        "log_level",
        "rank 0's log level",
        OWN,
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
    ),
    Option(
        "cpu_tuning",
        "turn off evo's CPU speed-ups (glibc allocator settings, channels-last convolutions), for comparison",
        OWN,
        default=True,
        action="store_false",
        flag="--no-cpu-tuning",
    ),
    Option(
        "schedule",
        "train one agent (--num-agents 1) on a hyperparameter schedule written by python -m evo.replay",
        RESTORED,
        type=Path,
        metavar="FILE",
        field="schedule_file",
    ),
    Option(
        "checkpoint_every",
        "checkpoint the population every N generations",
        RESTORED,
        default=1,
        type=int,
        check=must(lambda n: n >= 1, "must be at least 1 (generations)"),
    ),
    Option(
        "keep_checkpoints",
        "complete checkpoints to keep",
        RESTORED,
        default=2,
        type=int,
        check=must(lambda n: n >= 1, "keep at least 1"),
    ),
    Option(
        "resume",
        "continue the run in --run-dir (or runs/--exp-name) from its last complete checkpoint; "
        "flags not given again keep the run's values, --total-generations may extend it",
        OWN,
        default=False,
        action="store_true",
    ),
)
OPTION_BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}
OPTION_BY_FLAG: dict[str, Option] = {option.flag_name: option for option in OPTIONS}
TAKEN_FROM_RUN: tuple[Option, ...] = tuple(option for option in OPTIONS if option.resume is not Resume.OWN)

# Config fields that no option fills: where each comes from.
DERIVED_FIELDS = {
    "transport": "the entry script",
    "world_size": "the MPI job",
    "agent": "the YAML layers, --hyperparams and the flags that shape the PPO settings",
    "command": "the command line",
    "run_id": "a new id, or the resumed run's",
    "cli": "the options' values, saved for --resume",
    "schedule": "the entries of --schedule FILE",
}


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """argparse's parser for ``OPTIONS`` (``--help`` lists every flag with its default)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Population Based Training of Stable-Baselines3 PPO agents over MPI. "
        "Run under mpiexec: every rank trains num_agents / world_size members.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        allow_abbrev=False,
    )
    for option in OPTIONS:
        option.add_to(parser)
    return parser


def explicit_flags(argv: Sequence[str]) -> set[str]:
    """Names of the options whose flag appears in ``argv`` (``--flag value`` or ``--flag=value``)."""
    found = set()
    for token in argv:
        option = OPTION_BY_FLAG.get(token.split("=", 1)[0]) if token.startswith("--") else None
        if option is not None:
            found.add(option.name)
    return found


def option_problems(args: argparse.Namespace) -> list[str]:
    """Every option's own check, on the values after ``--resume`` restored the run's."""
    found = (option.problem(getattr(args, option.name)) for option in OPTIONS)
    return [problem for problem in found if problem]


def saved_options(args: argparse.Namespace) -> dict[str, Any]:
    """The values ``--resume`` takes back from the run: every option not of class OWN."""
    return {option.name: option.saved(getattr(args, option.name)) for option in TAKEN_FROM_RUN}


def restore_options(args: argparse.Namespace, saved: dict[str, Any], given: set[str]) -> None:
    """Take the run's values for the options of the run that the command line does not give."""
    for name, value in saved.items():
        option = OPTION_BY_NAME.get(name)
        if option is not None and option.resume is not Resume.OWN and name not in given:
            setattr(args, name, option.restored(value))
