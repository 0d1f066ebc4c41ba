"""The command-line options, derived from the fields of :class:`Config`. Pure.

Each option is declared once, as a field of :class:`~evo.config.resolved.Config` (CleanRL's
``Args``): ``option(...)`` gives its flag, type, default, help, the check of its own value and
what ``--resume`` does with it (:mod:`evo.config.declare`), and its group in ``--help``
(``GROUPS``). ``OPTIONS`` lists them in declaration order; the parser (:func:`build_parser`, its
help in those groups, each default written once), the flags found on a command line
(:func:`explicit_flags`), the values saved with a run and restored from it, and the resume rules
are all derived from it. Checks that involve several options (the population and the world size,
the evaluation levels and the training ones ...) live in :mod:`evo.config.checks`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from evo.config.declare import Option, Resume, options_of, str2bool
from evo.config.resolved import GROUPS, Config
from evo.learners import specs

__all__ = [
    "GROUPS",
    "OPTIONS",
    "OPTION_BY_FLAG",
    "OPTION_BY_NAME",
    "TAKEN_FROM_RUN",
    "Option",
    "Resume",
    "build_parser",
    "explicit_flags",
    "option_problems",
    "restore_options",
    "saved_options",
    "str2bool",
]

OPTIONS: tuple[Option, ...] = options_of(Config, GROUPS)
OPTION_BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}
OPTION_BY_FLAG: dict[str, Option] = {option.flag_name: option for option in OPTIONS}
TAKEN_FROM_RUN: tuple[Option, ...] = tuple(option for option in OPTIONS if option.resume is not Resume.OWN)


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """argparse's parser for ``OPTIONS``: ``--help`` lists every flag in its group (``GROUPS``, in
    order), each default written once (:attr:`Option.help_text`); the learners and explorers it
    names are the registries' now."""
    titles = ", ".join(spec.title for spec in specs().values())
    parser = argparse.ArgumentParser(
        prog=prog,
        description=f"Population Based Training of Stable-Baselines3 agents ({titles}: --algo) over MPI. "
        "Run under mpiexec: every rank trains num_agents / world_size members.",
        allow_abbrev=False,
    )
    groups = {key: parser.add_argument_group(title) for key, title in GROUPS.items()}
    for key, group in groups.items():
        for option in OPTIONS:
            if option.group == key:
                option.add_to(group)
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
