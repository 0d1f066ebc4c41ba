"""Vectorised environments for one member: gymnasium ids and Procgen games.

Procgen comes from the ``procgen-mirror`` distribution, whose ``ProcgenGym3Env`` speaks
gym3 (and old ``gym`` spaces). :class:`ProcgenVecEnv` adapts it to SB3's ``VecEnv`` with
gymnasium spaces. It always passes ``rand_seed`` (procgen would otherwise derive one from
the MPI rank) and ``num_threads=0`` (one rank, one core).
"""

from __future__ import annotations

import importlib
import logging
import warnings
from typing import Any

from evo.sb3 import _quiet  # noqa: F401  (before SB3 and procgen)

# isort: split

import gymnasium as gym
import numpy as np
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecMonitor

from evo.config.envnames import is_mujoco, log_mujoco_warnings, procgen_game

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


def make_env(
    env_id: str,
    num_envs: int,
    seed: int,
    distribution_mode: str = "easy",
    num_levels: int = 0,
    start_level: int = 0,
    env_kwargs: dict[str, Any] | None = None,
) -> VecEnv:
    """A monitored VecEnv for one member (episode returns reach ``model.ep_info_buffer``).

    ``env_id`` may be gymnasium's ``module:EnvId``: the module, which registers the env, is
    imported here, on the rank that builds the env (the config was checked on rank 0 only).
    ``env_kwargs`` go to ``gym.make`` for every copy of the env.
    """
    game = procgen_game(env_id)
    if game is not None:
        env = ProcgenVecEnv(game, num_envs, seed, distribution_mode, num_levels, start_level)
        return VecMonitor(env)
    register_module(env_id)
    if is_mujoco(env_id):
        log_mujoco_warnings()
    return make_vec_env(env_id, n_envs=num_envs, seed=seed, vec_env_cls=DummyVecEnv, env_kwargs=env_kwargs)


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
