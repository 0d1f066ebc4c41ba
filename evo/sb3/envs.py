"""Vectorised environments for one member: gymnasium ids and Procgen games.

Procgen comes from the ``procgen-mirror`` distribution, whose ``ProcgenGym3Env`` speaks
gym3 (and old ``gym`` spaces). :class:`ProcgenVecEnv` adapts it to SB3's ``VecEnv`` with
gymnasium spaces. It always passes ``rand_seed`` (procgen would otherwise derive one from
the MPI rank) and ``num_threads=0`` (one rank, one core).

Two things ``--objective`` and env parameters need (issue 38):

- :class:`EpisodeInfo` copies the keys of the env's ``info`` that the objective reads into SB3's
  record of each finished episode (Monitor's ``info["episode"]``, which reaches the model's
  ``ep_info_buffer``), and remembers which keys the env reported when its episodes ended;
- :func:`set_env_param` sets an env parameter on every env of a VecEnv while it runs. SB3's
  ``VecEnv.set_attr`` sets the attribute on the outermost gymnasium wrapper (the Monitor), where the
  env never reads it (``get_attr`` then reads it back from the wrapper, so it seems to work);
  gymnasium's ``set_wrapper_attr``, called on each env through ``VecEnv.env_method``, sets it where
  it is defined: on the env. What to re-check when SB3 or gymnasium change: ``DummyVecEnv.set_attr``
  and ``env_method``, ``Wrapper.set_wrapper_attr``, Monitor's ``info["episode"]``.
"""

from __future__ import annotations

import importlib
import logging
import math
import warnings
from typing import Any

from evo.sb3 import _quiet  # noqa: F401  (before SB3 and procgen)

# isort: split

import gymnasium as gym
import numpy as np
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecFrameStack, VecMonitor

from evo.config.envnames import (
    Wrappers,
    is_atari,
    is_mujoco,
    log_mujoco_warnings,
    procgen_game,
    register_atari,
    sticky_actions,
    wrapped,
)

logger = logging.getLogger(__name__)

SYSTEM_LIBRARIES_HINT = (
    "procgen's compiled library needs the system libraries libgl1 and libglib2.0-0 "
    "(Debian/Ubuntu: apt-get install -y libgl1 libglib2.0-0; `make install` does this when run as root)"
)


def _import_procgen():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            from procgen import ProcgenGym3Env
        except OSError as error:  # a missing libGL / libglib shows up here
            raise RuntimeError(f"cannot load procgen: {error}. {SYSTEM_LIBRARIES_HINT}") from error
    return ProcgenGym3Env


class ProcgenVecEnv(VecEnv):
    """SB3 VecEnv over ``ProcgenGym3Env`` (RGB 64x64x3 uint8 observations, 15 actions).

    Procgen resets finished episodes itself, so ``reset()`` returns the current observations
    and a done step's observation is already the next episode's first. Procgen has no
    time-limit truncation that should be bootstrapped, so no ``terminal_observation`` is set.
    """

    def __init__(
        self,
        game: str,
        num_envs: int,
        seed: int,
        distribution_mode: str = "easy",
        num_levels: int = 0,
        start_level: int = 0,
    ):
        ProcgenGym3Env = _import_procgen()
        self.game = game
        self.distribution_mode, self.num_levels, self.start_level = distribution_mode, num_levels, start_level
        self._env = ProcgenGym3Env(
            num=num_envs,
            env_name=game,
            distribution_mode=distribution_mode,
            num_levels=num_levels,
            start_level=start_level,
            rand_seed=int(seed) % (2**31 - 1),
            num_threads=0,
        )
        # gym3's CEnv.__del__ looks up `libenv_close` on first use, under cffi's non-reentrant
        # lock; if the garbage collector runs that while cffi holds the lock, the process
        # deadlocks. Resolve it now, outside any GC pass.
        self._env._c_lib.libenv_close  # noqa: B018
        observation_space = gym.spaces.Box(low=0, high=255, shape=(64, 64, 3), dtype=np.uint8)
        action_space = gym.spaces.Discrete(int(self._env.ac_space.eltype.n))
        self.render_mode = None
        super().__init__(num_envs, observation_space, action_space)
        self._actions: np.ndarray | None = None

    def _observe(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        reward, observation, first = self._env.observe()
        return observation["rgb"], reward, first

    def reset(self) -> np.ndarray:
        observation, _, _ = self._observe()
        return observation.copy()

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).reshape(self.num_envs)

    def step_wait(self):
        self._env.act(self._actions.astype(np.int32))
        observation, reward, first = self._observe()
        infos = [{} for _ in range(self.num_envs)]
        return observation.copy(), reward.astype(np.float32), first.astype(bool), infos

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        return [getattr(self, attr_name)] * len(self._get_indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        setattr(self, attr_name, value)

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list[Any]:
        raise NotImplementedError(f"ProcgenVecEnv has no per-env method {method_name!r}")

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False] * len(self._get_indices(indices))

    def get_images(self) -> list[np.ndarray]:
        observation, _, _ = self._observe()
        return list(observation)


class EpisodeInfo(gym.Wrapper):
    """Outside SB3's Monitor: at an episode's end, each of ``keys`` the env's info holds goes into the
    episode's record (``info["episode"]``, as a float, NaN and ±inf as they are: scoring leaves them out
    and counts them, evo.core.objective.term_values), and the keys the env reported are remembered
    (``objective_keys_reported``, sorted; one of ``keys`` only when its value was finite, so that a key
    only ever NaN or ±inf is one the env never reported; ``objective_episodes`` counts the episodes).
    Plain data only, so a checkpoint captures it with the envs (evo/sb3/envstate.py)."""

    def __init__(self, env: gym.Env, keys: tuple[str, ...] = ()):
        super().__init__(env)
        self.objective_keys = tuple(keys)
        self.objective_keys_reported: list[str] = []
        self.objective_episodes = 0

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            self.objective_episodes += 1
            values = {key: _number(key, info[key]) for key in self.objective_keys if key in info}
            unfit = {key for key, value in values.items() if not math.isfinite(value)}
            reported = {str(key) for key in info if key != "episode" and key not in unfit}
            self.objective_keys_reported = sorted(set(self.objective_keys_reported) | reported)
            episode = info.get("episode")
            if episode is not None:
                episode.update(values)
        return observation, reward, terminated, truncated, info


def _number(key: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"the env put {key}={value!r} in info at an episode's end; --objective info:{key} needs a number there"
        ) from None


def set_env_param(venv: VecEnv, name: str, value: Any) -> None:
    """Set the env attribute ``name`` to ``value`` on every env of ``venv``, where the env defines it
    (gymnasium's ``set_wrapper_attr``: see the module docstring); raises if an env lacks it."""
    found = venv.env_method("set_wrapper_attr", name, value, force=False)
    if not all(found):
        raise AttributeError(f"the env has no attribute {name!r} to set (an env parameter, env.{name})")


def env_param(venv: VecEnv, name: str) -> Any:
    """The value of the env attribute ``name`` in ``venv``'s first env, where the env defines it."""
    return venv.env_method("get_wrapper_attr", name, indices=[0])[0]


def make_env(
    env_id: str,
    num_envs: int,
    seed: int,
    distribution_mode: str = "easy",
    num_levels: int = 0,
    start_level: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    info_keys: tuple[str, ...] = (),
    frame_stack: int = 0,
    wrappers: Wrappers = (),
) -> VecEnv:
    """A monitored VecEnv for one member (episode returns reach ``model.ep_info_buffer``).

    ``env_id`` may be gymnasium's ``module:EnvId``: the module, which registers the env, is
    imported here, on the rank that builds the env (the config was checked on rank 0 only).
    ``env_kwargs`` go to ``gym.make`` for every copy of the env. ``info_keys``: the keys of info the
    objective reads, recorded with each episode (:class:`EpisodeInfo`); none: no such wrapper.
    An Atari game gets zoo's preprocessing (:func:`atari_wrapper`); ``frame_stack`` > 1 stacks that many
    frames (SB3's VecFrameStack, as zoo's ``frame_stack``); zoo's ``env_wrapper`` (``wrappers``: class paths and
    keyword arguments) wraps each env outside SB3's Monitor, in order, as zoo's ``make_vec_env`` does.
    """
    game = procgen_game(env_id)
    if game is not None:
        env = ProcgenVecEnv(game, num_envs, seed, distribution_mode, num_levels, start_level)
        return VecMonitor(env)
    register_module(env_id)
    atari = is_atari(env_id)
    if atari and (missing := register_atari()) is not None:
        raise RuntimeError(f"{env_id} needs ale-py on every rank ({missing}): make install EXTRAS=atari")
    if is_mujoco(env_id):
        log_mujoco_warnings()
    wrapper = {}
    if info_keys or wrappers:
        wrapper = {"wrapper_class": own_wrappers, "wrapper_kwargs": {"keys": tuple(info_keys), "wrappers": wrappers}}
    if atari:
        env_kwargs, sticky = sticky_actions(env_id, dict(env_kwargs or {}))
        wrapper = {"wrapper_class": atari_wrapper, "wrapper_kwargs": {"keys": tuple(info_keys), "sticky": sticky}}
    with warnings.catch_warnings():  # SB3 asks every env for render_mode="rgb_array", which training never draws;
        # gymnasium's warning that an env without that mode got it (a user's, on every rank) says nothing to act on
        warnings.filterwarnings("ignore", message=r".*initialised with render_mode='rgb_array' that is not in the")
        env = make_vec_env(
            env_id, n_envs=num_envs, seed=seed, vec_env_cls=DummyVecEnv, env_kwargs=env_kwargs, **wrapper
        )  # fmt: skip
    return VecFrameStack(env, frame_stack) if frame_stack > 1 else env


def own_wrappers(env: gym.Env, keys: tuple[str, ...] = (), wrappers: Wrappers = ()) -> gym.Env:
    """Over the Monitor: :class:`EpisodeInfo` for the objective's ``keys`` (if any), then zoo's ``env_wrapper``."""
    return wrapped(EpisodeInfo(env, keys) if keys else env, wrappers)


def atari_wrapper(env: gym.Env, keys: tuple[str, ...] = (), sticky: float = 0.0) -> gym.Env:
    """zoo's Atari preprocessing (its ``env_wrapper`` for every ``atari`` entry): SB3's AtariWrapper with its
    defaults, over the Monitor that records whole games (all lives, rewards unclipped), as zoo's
    ``make_vec_env`` stacks them: up to 30 no-op starts, 4 frames skipped (the max of the last two kept), FIRE
    at a reset where the game needs it, a life lost ends the learner's episode (not the game's), 84 x 84 grey
    frames, rewards clipped to their sign; and the game's sticky actions, each frame repeating the last action
    with probability ``sticky`` (evo.config.envnames.sticky_actions says why here rather than in the
    emulator). ``keys``: as :class:`EpisodeInfo`'s, under the preprocessing."""
    from stable_baselines3.common.atari_wrappers import AtariWrapper

    return AtariWrapper(EpisodeInfo(env, keys) if keys else env, action_repeat_probability=sticky)


def register_module(env_id: str) -> None:
    """Import the module of a ``module:EnvId`` id, so that its env is registered in this process."""
    module, colon, _ = env_id.partition(":")
    if not colon:
        return
    try:
        importlib.import_module(module)
    except ImportError as error:
        raise RuntimeError(
            f"--env-id {env_id}: cannot import module {module!r} on this rank ({error}); every rank must be able "
            "to import it: install it, or put its folder on PYTHONPATH for every rank (mpiexec -x PYTHONPATH)"
        ) from error
