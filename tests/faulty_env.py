"""A CartPole that raises on one MPI rank after some steps, to test that a failure on one
rank ends the whole job (used as --env-id tests.faulty_env:FaultyCartPole-v0)."""

import os

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class FaultyCartPole(CartPoleEnv):
    FAIL_RANK = int(os.environ.get("EVO_TEST_FAIL_RANK", "2"))
    FAIL_AFTER = int(os.environ.get("EVO_TEST_FAIL_AFTER", "3000"))

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        from mpi4py import MPI

        self.rank = MPI.COMM_WORLD.Get_rank()
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.rank == self.FAIL_RANK and self.steps > self.FAIL_AFTER:
            raise RuntimeError(f"injected fault on rank {self.rank}")
        return super().step(action)


gym.register("FaultyCartPole-v0", entry_point=FaultyCartPole, max_episode_steps=500)
