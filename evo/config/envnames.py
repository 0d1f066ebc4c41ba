"""Environment ids: which exist, which are Procgen games, and close matches for typos.

Pure apart from reading gymnasium's registry (and importing the module of a ``module:EnvId``
id, which registers it, and ale-py, whose import registers the Atari games); it never imports
procgen. It creates an env to check ``--env-kwargs``
(:func:`env_kwargs_message`) and to read its spaces (:func:`env_shape`).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from evo.config.imports import stdlib_problem
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
ATARI_INSTALL = "make install EXTRAS=atari (or pip install 'evo[atari]')"
ATARI_ENTRY_POINT = "ale_py.env:AtariEnv"
ATARI_ID = re.compile(r"^(ALE/[A-Za-z0-9]+-v5|[A-Z][A-Za-z0-9]*?(NoFrameskip|Deterministic)?-v[04])$")
"""The forms of the Atari ids ale-py registers (``ALE/Pong-v5``, ``PongNoFrameskip-v4`` ...), known without
it so that a run on one without the extra is told to install it rather than that the id is unknown."""
ATARI_SCREEN = (84, 84, 1)
"""The frame zoo's Atari preprocessing gives (SB3's AtariWrapper: 84 x 84 grey), before frames are stacked."""
DISTRIBUTION_MODES = ("easy", "hard", "extreme", "memory", "exploration")


def procgen_game(env_id: str) -> str | None:
    """The Procgen game named by ``env_id`` (``bigfish``, ``procgen:bigfish``,
    ``procgen-bigfish-v0``, ``procgen:procgen-bigfish-v0``), or None if it names none."""
    name = env_id.split(":", 1)[1] if env_id.startswith("procgen:") else env_id
    if name.startswith("procgen-") and name.endswith("-v0"):
        name = name[len("procgen-") : -len("-v0")]
    return name if name in PROCGEN_GAMES else None


@functools.cache
def register_atari() -> str | None:
    """Register ale-py's Atari games with gymnasium (importing ale_py does it); None, or why it cannot. The
    emulator's greeting, printed by every emulator built (every env of every rank), is left out: errors only."""
    try:
        ale_py = importlib.import_module("ale_py")
    except ImportError as error:
        return str(error)
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    return None


def gymnasium_ids() -> list[str]:
    import gymnasium

    return sorted(gymnasium.envs.registry.keys())


def is_atari(env_id: str) -> bool:
    """Whether ``env_id`` is one of ale-py's Atari games (registered, or of their forms when ale-py is
    missing): zoo's test, the entry point ``ale_py.env:AtariEnv``. ale-py is imported (registering its
    games) only for an id of their form that gymnasium does not know yet: other envs never pay for it."""
    import gymnasium

    spec = gymnasium.envs.registry.get(env_id)
    if spec is None and ATARI_ID.match(env_id) and bullet_message(env_id) is None:  # AntBulletEnv-v0 has the form
        if register_atari() is not None:
            return True  # the form of an Atari id, ale-py missing
        spec = gymnasium.envs.registry.get(env_id)
    return spec is not None and spec.entry_point == ATARI_ENTRY_POINT


def sticky_actions(env_id: str, env_kwargs: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """An Atari game's sticky actions moved out of the emulator: ``env_kwargs`` with
    ``repeat_action_probability: 0`` for ``gymnasium.make``, and the probability (the kwargs' or the id's,
    0.25 for ``-v5`` ids) for SB3's StickyActionEnv, which draws them per frame as the emulator would (Machado
    et al. 2018) but holds its last action as plain data, where ale-py's emulator keeps it outside the state it
    clones: a restored game would otherwise repeat another action than the saved one's."""
    import gymnasium

    spec = gymnasium.spec(env_id)
    probability = float(env_kwargs.get("repeat_action_probability", spec.kwargs.get("repeat_action_probability", 0)))
    return {**env_kwargs, "repeat_action_probability": 0.0}, probability


def atari_env_kwargs(env_id: str, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``env_kwargs`` for an Atari game under zoo's preprocessing, whose AtariWrapper skips 4 frames itself: a
    ``-v5`` id (which skips 4 frames of its own, with sticky actions) gets ``frameskip: 1`` unless it is given,
    so that an agent acts every 4th frame as on a ``NoFrameskip-v4`` id, the sticky actions kept (Machado et
    al. 2018's protocol). Other envs' kwargs are returned as they are."""
    import gymnasium

    spec = gymnasium.envs.registry.get(env_id) if is_atari(env_id) else None
    if spec is None or "frameskip" in env_kwargs or spec.kwargs.get("frameskip", 1) == 1:
        return env_kwargs
    return {**env_kwargs, "frameskip": 1}


REGISTERED_BY = {"MiniGrid-": "minigrid", "BabyAI-": "minigrid"}
"""Env id prefixes of packages that register their envs when imported (and are not gymnasium's own)."""


def registered_by(bare: str) -> str | None:
    """The package of :data:`REGISTERED_BY` whose import registers the env id ``bare`` (no ``module:``), or None."""
    return next((name for prefix, name in REGISTERED_BY.items() if bare.startswith(prefix)), None)


BULLET_ID = re.compile(r"^(?:pybullet_envs:)?([A-Za-z0-9]+?)(?:Bullet)?Env-v\d+$")
BULLET_TO_MUJOCO = {
    "Ant": "Ant-v5",
    "HalfCheetah": "HalfCheetah-v5",
    "Hopper": "Hopper-v5",
    "Walker2D": "Walker2d-v5",
    "Humanoid": "Humanoid-v5",
    "InvertedPendulum": "InvertedPendulum-v5",
    "InvertedDoublePendulum": "InvertedDoublePendulum-v5",
    "Reacher": "Reacher-v5",
}
"""PyBullet's locomotion envs (``<Name>BulletEnv-v0``) and gymnasium's MuJoCo task each stands in for."""


def bullet_message(env_id: str) -> str | None:
    """The refusal of a PyBullet locomotion env (the EVO seed's ``AntBulletEnv-v0``), naming MuJoCo's task."""
    found = BULLET_ID.match(env_id)
    if found is None or "Bullet" not in env_id:
        return None
    task = BULLET_TO_MUJOCO.get(found.group(1))
    instead = f"MuJoCo's {task}, its maintained equivalent" if task else "one of MuJoCo's tasks (Ant-v5, Hopper-v5 ...)"
    return (
        f"--env-id {env_id}: PyBullet's locomotion envs register with the old gym API (pybullet 3.2.7's "
        "pybullet_envs fails under gym 0.26: registry.env_specs), which gymnasium and SB3 2.x do not run; use "
        f"{instead} (make install EXTRAS=mujoco)"
    )


def unknown_env_message(env_id: str) -> str | None:
    """None if ``env_id`` can be made, else a message with close matches."""
    if procgen_game(env_id) is not None:
        return None
    if (bullet := bullet_message(env_id)) is not None:  # before its module import runs pybullet_envs
        return bullet
    if ":" in env_id and not env_id.startswith("procgen:"):
        # gymnasium's "module:EnvId" form: importing the module registers the env.
        module = env_id.split(":", 1)[0]
        problem = stdlib_problem("--env-id", env_id)  # refused before its import runs anything
        if problem is not None:
            return problem
        try:
            importlib.import_module(module)
        except ImportError as error:
            return f"--env-id {env_id!r}: cannot import module {module!r} ({error})"
        env_id = env_id.split(":", 1)[1]
    if env_id not in gymnasium_ids():
        register_atari()  # an Atari id not registered yet, or an unknown one: ale-py's games among the matches
    known = gymnasium_ids()
    if env_id in known:
        return missing_extra_message(env_id)
    missing = register_atari()
    if missing is not None and ATARI_ID.match(env_id):
        return (
            f"--env-id {env_id} is not registered, and has the form of an Atari game's id, which ale-py (the "
            f"emulator and its ROMs) registers: it is not installed ({missing}). Install evo's atari extra: "
            f"{ATARI_INSTALL}; or check the id"
        )
    candidates = known + list(PROCGEN_GAMES)
    bare = env_id.split(":", 1)[-1]
    matches = difflib.get_close_matches(bare, candidates, n=5, cutoff=0.6)
    matches += [c for c in candidates if c.lower() == bare.lower() and c not in matches]
    hint = f" Did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""
    package = registered_by(bare)
    if package is not None:
        hint += f" {bare} is registered by the {package} package when it is imported: name it {package}:{bare}"
        hint += f" (pip install {package} where it is missing)."
    else:
        hint += " An env that a package registers when it is imported is named module:EnvId (gymnasium's form)."
    return (
        f"--env-id {env_id!r} is neither a registered gymnasium env nor a Procgen game.{hint} "
        f"Procgen games: {', '.join(PROCGEN_GAMES)}."
    )


def missing_extra_message(env_id: str) -> str | None:
    """None unless ``env_id`` is one of gymnasium's MuJoCo tasks and the ``mujoco`` package
    (evo's optional extra) cannot be imported (gymnasium registers those ids either way), or an Atari
    game and OpenCV, which zoo's preprocessing resizes frames with (the atari extra), cannot."""
    import gymnasium

    if is_atari(env_id):
        try:
            importlib.import_module("cv2")
        except ImportError as error:
            return (
                f"--env-id {env_id}: zoo's Atari preprocessing resizes frames with OpenCV, which is not installed "
                f"({error}). Install evo's atari extra: {ATARI_INSTALL}"
            )
        return None
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


Wrappers = Sequence[tuple[str, Mapping[str, Any]]]
"""zoo's ``env_wrapper`` as evo keeps it: each wrapper's class path and keyword arguments (evo.config.zoo)."""


def wrapper_class(path: str) -> Any:
    """The class (any callable of an env) a wrapper's path names: ``package.module.Class``."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def wrapped(env, wrappers: Wrappers):
    """``env`` in each of ``wrappers`` in turn, the first innermost (as zoo's list)."""
    for path, kwargs in wrappers:
        env = wrapper_class(path)(env, **dict(kwargs))
    return env


def wrapper_problems(wrappers: Wrappers) -> list[str]:
    """Each wrapper whose module does not import or has no such callable, naming it and the fix."""
    problems = []
    for path, _ in wrappers:
        module, _, name = path.rpartition(".")
        problem = stdlib_problem("env_wrapper", f"{module}:{name}")
        if problem is not None:
            problems.append(problem)
            continue
        try:
            found = wrapper_class(path)
        except ImportError as error:
            problems.append(f"env_wrapper {path}: cannot import {module} ({error}); install it, or fix the path")
            continue
        except AttributeError:
            problems.append(f"env_wrapper {path}: {module} has no {name}; check the class's name")
            continue
        if not callable(found):
            problems.append(f"env_wrapper {path}: {name} is not a class or function of an env")
    return problems


def _hashable(wrappers: Wrappers) -> tuple:
    return tuple((path, tuple(sorted(dict(kwargs).items()))) for path, kwargs in wrappers)


@functools.lru_cache(maxsize=64)
def _shape_of(env_id: str, env_kwargs: tuple[tuple[str, Any], ...], wrappers: tuple = ()) -> EnvShape | None:
    if procgen_game(env_id) is not None:
        return EnvShape("Discrete", (), (64, 64, 3), 1)  # Procgen's 15 buttons; 64 x 64 RGB frames
    if unknown_env_message(env_id) is not None:
        return None  # reported as the env id's own problem
    try:
        env = make_env_once(
            env_id.split(":", 1)[-1] if ":" in env_id else env_id,
            dict(env_kwargs),
            [(path, dict(kwargs)) for path, kwargs in wrappers],
        )
    except Exception:  # a user's env may raise anything; --env-kwargs' check reports it
        return None
    try:
        actions, observations = env.action_space, env.observation_space
        itemsize = observations.dtype.itemsize if observations.dtype is not None else 4
        shape = ATARI_SCREEN if is_atari(env_id) else tuple(int(n) for n in (observations.shape or ()))
        actions_shape = tuple(int(n) for n in (actions.shape or ()))
        return EnvShape(type(actions).__name__, actions_shape, shape, int(itemsize), unbatchable(observations))
    finally:
        env.close()


BATCHABLE = ("Box", "Discrete", "MultiDiscrete", "MultiBinary")
"""The observation spaces SB3's buffers hold, alone or as the fields of a (flat) Dict."""


def unbatchable(space) -> tuple[str, ...]:
    """The parts of an observation space SB3 cannot batch, each as ``name (Space)``: the space itself, or the
    fields of a Dict that are not of :data:`BATCHABLE` (a Text, a Sequence, a nested Dict or Tuple)."""
    kind = type(space).__name__
    if kind == "Dict":
        return tuple(
            f"{key} ({type(sub).__name__})" for key, sub in space.spaces.items() if type(sub).__name__ not in BATCHABLE
        )
    return () if kind in BATCHABLE else (f"the observation ({kind})",)


def unbatchable_message(env_id: str, parts: Sequence[str]) -> str:
    """The refusal of an env whose observations hold ``parts`` that SB3 cannot batch, with what to do."""
    minigrid = registered_by(env_id.rpartition(":")[2]) == "minigrid"
    wrapper = (
        "minigrid.wrappers.ImgObsWrapper (the image alone) or FlatObsWrapper (the image and the mission, encoded)"
        if minigrid
        else "a gymnasium wrapper that drops or encodes them (gymnasium.wrappers.FilterObservation keeps the fields "
        "you name)"
    )
    return (
        f"--env-id {env_id}: its observations hold {', '.join(parts)}, which SB3 cannot put in a batch (it takes "
        f"{', '.join(BATCHABLE)}, or a flat Dict of them). Wrap the env with {wrapper}, and register the wrapped env "
        "in a module of yours as your own id, run as module:YourEnv-v0"
    )


def env_shape(env_id: str, env_kwargs: dict[str, Any] | None = None, wrappers: Wrappers = ()) -> EnvShape | None:
    """The env's action space (its class and shape) and observations (their shape and bytes per
    element; an Atari game's: the preprocessed frame, :data:`ATARI_SCREEN`), made once with ``env_kwargs``
    and in zoo's ``wrappers`` (what the members see); None if it cannot be made (the reason is the env id's,
    the keyword arguments' or the wrappers' own problem)."""
    kwargs = tuple(sorted((env_kwargs or {}).items()))
    try:
        return _shape_of(env_id, kwargs, _hashable(wrappers))
    except TypeError:  # a keyword argument that cannot be hashed (a list): make it uncached
        return _shape_of.__wrapped__(env_id, kwargs, _hashable(wrappers))


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


def stacked_shape(shape: EnvShape | None, frame_stack: int) -> EnvShape | None:
    """``shape`` with ``frame_stack`` frames stacked on the last axis (SB3's VecFrameStack of channel-last
    images), as a member's networks and replay buffer see them; as it is without stacking."""
    if shape is None or frame_stack <= 1 or not shape.observation_shape:
        return shape
    *rest, last = shape.observation_shape
    return EnvShape(shape.action_space, shape.action_shape, (*rest, last * frame_stack), shape.observation_itemsize)


def make_env_once(env_id: str, env_kwargs: dict[str, Any], wrappers: Wrappers = ()):
    """``gymnasium.make`` of a registered id, in zoo's ``wrappers``, for a check at start-up (MuJoCo's
    warnings logged, never written to MUJOCO_LOG.TXT in the working directory)."""
    import gymnasium

    is_atari(env_id)  # registers ale-py's games for an Atari id
    if is_mujoco(env_id):
        log_mujoco_warnings()
    return wrapped(gymnasium.make(env_id, **env_kwargs), wrappers)
