"""CartPole that makes one MPI rank twice as slow: the benchmarks' slow rank (the product has no such
switch). ``--env-id bench.slow_env:SlowCartPole-v0 --env-kwargs slow_rank:1`` makes each step of an
env on rank ``slow_rank`` sleep as long as the process computed since the previous step ended (the
env step, the policy's forward pass, an update between rollouts, an evaluation's steps: everything
the rank does), so that all of that rank's work costs twice as much. A gap longer than ``MAX_GAP_S``
is not doubled (the rank was waiting for another, not computing). The rank is asked in the process,
not kept in the env: an asynchronous run's member moves to another rank with its envs' state."""

import time

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv

MAX_GAP_S = 2.0
_rank: list[int] = []
_last = [0.0]  # when this process's previous slowed step ended


def rank() -> int:
    if not _rank:
        from mpi4py import MPI

        _rank.append(MPI.COMM_WORLD.Get_rank())
    return _rank[0]


class SlowCartPole(CartPoleEnv):
    def __init__(self, slow_rank: int = -1, **kwargs):
        super().__init__(**kwargs)
        self.slow_rank = int(slow_rank)

    def step(self, action):
        result = super().step(action)
        if rank() == self.slow_rank:
            now = time.perf_counter()
            gap = now - _last[0]
            if gap < MAX_GAP_S:
                time.sleep(gap)
            _last[0] = time.perf_counter()
        return result


gym.register("SlowCartPole-v0", entry_point=SlowCartPole, max_episode_steps=500)
