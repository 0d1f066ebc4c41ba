"""Environment ids: which exist, which are Procgen games, and close matches for typos.

Pure apart from reading gymnasium's registry (and importing the module of a ``module:EnvId``
id, which registers it); it never imports procgen. It creates an env to check ``--env-kwargs``
(:func:`env_kwargs_message`) and to read its spaces (:func:`env_shape`).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import logging
from typing import Any

from evo.learners.spec import EnvShape

logger = logging.getLogger(__name__)

# The 16 games of procgen 0.10 (procgen.env.ENV_NAMES), kept here so that validating an
# id does not import procgen (which imports the old `gym` and prints a warning).
PROCGEN_GAMES = (
    "bigfish",
    "bossfight",
    "caveflyer",
    "chaser",
    "climber",
    "coinrun",
    "dodgeball",
    "fruitbot",
    "heist",
    "jumper",
    "leaper",
    "maze",
    "miner",
    "ninja",
    "plunder",
    "starpilot",
)
MUJOCO_INSTALL = "make install EXTRAS=mujoco (or pip install 'evo[mujoco]')"
DISTRIBUTION_MODES = ("easy", "hard", "extreme", "memory", "exploration")


def procgen_game(env_id: str) -> str | None:
    """The Procgen game named by ``env_id`` (``bigfish``, ``procgen:bigfish``,
    ``procgen-bigfish-v0``, ``procgen:procgen-bigfish-v0``), or None if it names none."""
    name = env_id.split(":", 1)[1] if env_id.startswith("procgen:") else env_id
    if name.startswith("procgen-") and name.endswith("-v0"):
        name = name[len("procgen-") : -len("-v0")]
    return name if name in PROCGEN_GAMES else None


def gymnasium_ids() -> list[str]:
    import gymnasium

    return sorted(gymnasium.envs.registry.keys())


def unknown_env_message(env_id: str) -> str | None:
    """None if ``env_id`` can be made, else a message with close matches."""
    if procgen_game(env_id) is not None:
        return None
    if ":" in env_id and not env_id.startswith("procgen:"):
        # gymnasium's "module:EnvId" form: importing the module registers the env.
        module = env_id.split(":", 1)[0]
        try:
            importlib.import_module(module)
        except ImportError as error:
            return f"--env-id {env_id!r}: cannot import module {module!r} ({error})"
        env_id = env_id.split(":", 1)[1]
    known = gymnasium_ids()
    if env_id in known:
        return missing_extra_message(env_id)
    candidates = known + list(PROCGEN_GAMES)
    bare = env_id.split(":", 1)[-1]
    matches = difflib.get_close_matches(bare, candidates, n=5, cutoff=0.6)
    matches += [c for c in candidates if c.lower() == bare.lower() and c not in matches]
    hint = f" Did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""
    return (
        f"--env-id {env_id!r} is neither a registered gymnasium env nor a Procgen game.{hint} "
        f"Procgen games: {', '.join(PROCGEN_GAMES)}."
    )


def missing_extra_message(env_id: str) -> str | None:
    """None unless ``env_id`` is one of gymnasium's MuJoCo tasks and the ``mujoco`` package
    (evo's optional extra) cannot be imported; gymnasium registers those ids either way."""
    import gymnasium

    entry_point = gymnasium.spec(env_id).entry_point
    if not (isinstance(entry_point, str) and entry_point.startswith("gymnasium.envs.mujoco")):
        return None
    try:
        importlib.import_module("mujoco")
    except ImportError as error:
        return (
            f"--env-id {env_id} is a MuJoCo task and needs the physics engine, which is not installed "
            f"({error}). Install evo's mujoco extra: {MUJOCO_INSTALL}"
        )
    return None


def env_kwargs_message(env_id: str, env_kwargs: dict[str, Any]) -> str | None:
    """None if gymnasium can make ``env_id`` with ``env_kwargs`` (it builds one and closes it),
    else what went wrong: an unknown keyword shows up as the env's TypeError."""
    if not env_kwargs or unknown_env_message(env_id) is not None:
        return None  # nothing to check, or the id's own problem is reported
    if procgen_game(env_id) is not None:
        return (
            f"--env-kwargs {_spelled(env_kwargs)}: Procgen games take no keyword arguments here; "
            "use --distribution-mode, --num-levels and --start-level"
        )
    try:
        make_env_once(env_id, env_kwargs).close()
    except Exception as error:  # a user's env may raise anything on bad arguments
        return (
            f"--env-kwargs {_spelled(env_kwargs)}: gymnasium.make({env_id!r}) refused them: "
            f"{type(error).__name__}: {error}. Check the keyword names and values of the env's constructor"
        )
    return None


def _spelled(env_kwargs: dict[str, Any]) -> str:
    return " ".join(f"{key}:{value}" for key, value in env_kwargs.items())


@functools.lru_cache(maxsize=64)
def _shape_of(env_id: str, env_kwargs: tuple[tuple[str, Any], ...]) -> EnvShape | None:
    if procgen_game(env_id) is not None:
        return EnvShape("Discrete", (), (64, 64, 3), 1)  # Procgen's 15 buttons; 64 x 64 RGB frames
    if unknown_env_message(env_id) is not None:
        return None  # reported as the env id's own problem
    try:
        env = make_env_once(env_id.split(":", 1)[-1] if ":" in env_id else env_id, dict(env_kwargs))
    except Exception:  # a user's env may raise anything; --env-kwargs' check reports it
        return None
    try:
        actions, observations = env.action_space, env.observation_space
        itemsize = observations.dtype.itemsize if observations.dtype is not None else 4
        return EnvShape(
            type(actions).__name__,
            tuple(int(n) for n in (actions.shape or ())),
            tuple(int(n) for n in (observations.shape or ())),
            int(itemsize),
        )
    finally:
        env.close()


def env_shape(env_id: str, env_kwargs: dict[str, Any] | None = None) -> EnvShape | None:
    """The env's action space (its class and shape) and observations (their shape and bytes per
    element), made once with ``env_kwargs``; None if it cannot be made (the reason is the env id's or
    the keyword arguments' own problem)."""
    try:
        return _shape_of(env_id, tuple(sorted((env_kwargs or {}).items())))
    except TypeError:  # a keyword argument that cannot be hashed (a list): make it uncached
        return _shape_of.__wrapped__(env_id, tuple(sorted((env_kwargs or {}).items())))


def is_mujoco(env_id: str) -> bool:
    """Whether ``env_id`` (registered; ``module:EnvId`` with its module imported) is a MuJoCo task."""
    import gymnasium

    entry_point = gymnasium.spec(env_id.rpartition(":")[2]).entry_point
    return isinstance(entry_point, str) and entry_point.startswith("gymnasium.envs.mujoco")


_MUJOCO_WARNINGS_SEEN: set[str] = set()


def log_mujoco_warnings() -> None:
    """Send MuJoCo's warnings to this module's logger, each text once per process, instead of
    MuJoCo's default: printing it and appending it to MUJOCO_LOG.TXT in the working directory.
    (gymnasium's v5 models use ``settotalmass``, which MuJoCo 3.3+ warns about at every load.)"""
    import mujoco

    def warn(text: str) -> None:
        if text not in _MUJOCO_WARNINGS_SEEN:
            _MUJOCO_WARNINGS_SEEN.add(text)
            logger.warning("mujoco: %s", text)

    mujoco.set_mju_user_warning(warn)


def make_env_once(env_id: str, env_kwargs: dict[str, Any]):
    """``gymnasium.make`` of a registered id, for a check at start-up (MuJoCo's warnings logged,
    never written to MUJOCO_LOG.TXT in the working directory)."""
    import gymnasium

    if is_mujoco(env_id):
        log_mujoco_warnings()
    return gymnasium.make(env_id, **env_kwargs)
