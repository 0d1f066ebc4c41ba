"""The learners evo trains, by ``--algo`` name (rl-baselines3-zoo's ``ALGOS``). Pure, but for a learner
of your own, whose module is imported when it is named.

A learner is found by its files, with no list to edit: its declaration, evo/learners/<algo>.py,
whose ``SPEC`` (a :class:`~evo.learners.spec.LearnerSpec`) declares its settings once; its SB3
side, evo/sb3/<algo>.py, whose ``LEARNER`` builds and trains a member behind the learner
interface (:mod:`evo.learners.interface`); and its defaults and search spaces,
evo/hyperparams/<algo>.yml.

**A learner of your own** is ``--algo package.module:ClassName``: a class outside evo, importable on
every rank, with a class attribute ``spec`` (a :class:`~evo.learners.spec.LearnerSpec`: its settings,
their domains and reaches, the action spaces it acts in; ``hyperparams``: its YAML file), built as
``ClassName(setup, hparams)`` (an :class:`evo.sb3.learner.MemberSetup` and its hyperparameters) and
implementing :class:`evo.learners.interface.Learner` (:func:`~evo.learners.interface.learner_methods`
names what a run calls; ``evo.sb3.learner.SB3Learner`` has them all). :func:`user_learner` loads it and
says what is wrong at start-up; its spec takes the ``--algo`` text as its name (the records, config.yaml
and checkpoints name it so, and ``--resume`` loads it again). docs/examples/trpo_learner.py is one.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import pkgutil
import re
from collections.abc import Callable

from evo.learners.interface import learner_methods
from evo.learners.spec import LearnerSpec, Reach, Setting

DEFAULT_ALGO = "ppo"
"""The learner a run trains without ``--algo``, and the one that trained a run recorded before ``--algo``
existed (a config.yaml or checkpoint that names none): declared here once, read wherever a record lacks it."""
OWN_LEARNER = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
"""``--algo package.module:ClassName``: a learner of your own."""
EXAMPLE = "docs/examples/trpo_learner.py"

__all__ = [
    "DEFAULT_ALGO",
    "LearnerSpec",
    "Reach",
    "Setting",
    "algo_problem",
    "algos",
    "learner_spec",
    "specs",
    "user_learner",
]


@functools.cache
def specs() -> dict[str, LearnerSpec]:
    """Every learner's declaration by ``--algo`` name: the modules of this package with a SPEC."""
    found = {}
    for module in pkgutil.iter_modules(__path__):
        spec = getattr(importlib.import_module(f"{__name__}.{module.name}"), "SPEC", None)
        if isinstance(spec, LearnerSpec):
            found[spec.name] = spec
    return dict(sorted(found.items(), key=lambda item: (item[0] != DEFAULT_ALGO, item[0])))


def algos(where: Callable[[LearnerSpec], bool] | None = None) -> tuple[str, ...]:
    """The ``--algo`` names, the default first; with ``where``, of the learners whose spec it holds
    for (``algos(lambda spec: spec.replay)``: the off-policy learners)."""
    return tuple(name for name, spec in specs().items() if where is None or where(spec))


def learner_spec(algo: str) -> LearnerSpec:
    """The declaration of learner ``algo`` (a built-in name, or a learner of your own: :func:`user_learner`)."""
    found = specs()
    if algo in found:
        return found[algo]
    if ":" in algo:
        return user_learner(algo)[1]
    close = difflib.get_close_matches(algo, list(found), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ValueError(
        f"--algo {algo}: no such learner; {hint}use one of {', '.join(found)}, or a learner of your own as "
        f"package.module:ClassName ({EXAMPLE})"
    )


def algo_problem(algo: str) -> str | None:
    """Why ``--algo algo`` names no learner it can train (the fix said), or None."""
    try:
        learner_spec(algo)
    except ValueError as error:
        return str(error)
    return None


@functools.cache
def user_learner(algo: str) -> tuple[type, LearnerSpec]:
    """The class and the declaration (named ``algo``) of the learner of your own ``algo``
    (``package.module:ClassName``): imported, and checked to be a learner. Raises ValueError saying what
    is wrong and how to fix it (the module does not import, has no such class, the class has no ``spec``
    or lacks a method a run calls)."""
    if not OWN_LEARNER.fullmatch(algo):
        raise ValueError(f"--algo {algo}: a learner of your own is named package.module:ClassName ({EXAMPLE})")
    from evo.config.imports import stdlib_problem  # here: evo.config imports this package

    module_name, _, class_name = algo.partition(":")
    problem = stdlib_problem("--algo", algo)  # refused before its import runs anything
    if problem is not None:
        raise ValueError(problem)
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # whatever its import raises: the user's code
        raise ValueError(
            f"--algo {algo}: module {module_name!r} does not import ({type(error).__name__}: {error}); put its "
            "folder on PYTHONPATH (on every rank) or install it, and fix what its import raises"
        ) from error
    cls = getattr(module, class_name, None)
    if cls is None:
        classes = [name for name, value in vars(module).items() if isinstance(value, type)]
        close = difflib.get_close_matches(class_name, classes, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"--algo {algo}: module {module_name!r} has no {class_name!r}{hint}")
    if not isinstance(cls, type) or not isinstance(getattr(cls, "spec", None), LearnerSpec):
        raise ValueError(
            f"--algo {algo}: {class_name} is not a learner: a learner is a class with a class attribute spec, a "
            f"LearnerSpec (evo.learners.spec) declaring its settings, that implements evo.learners.interface.Learner "
            f"({EXAMPLE} is one)"
        )
    missing = [name for name in learner_methods() if not hasattr(cls, name)]
    if missing:
        raise ValueError(
            f"--algo {algo}: {class_name} lacks {', '.join(missing)}, which a run calls "
            "(evo.learners.interface.Learner); add them, or subclass evo.sb3.learner.SB3Learner, which has them all"
        )
    declared = cls.spec
    own = declared.settings[: len(declared.settings) - 2 * len(declared.net_arch_heads)]  # without the architecture's
    return cls, dataclasses.replace(declared, name=algo, settings=own)
