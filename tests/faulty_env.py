"""A CartPole that raises on one MPI rank after some steps, to test what a failing member does to
a run: it ends the job (``--max-member-failures 0``) or is restarted. Used as
``--env-id tests.faulty_env:FaultyCartPole-v0 --env-kwargs fail_rank:R fail_after:N [fail_times:K]``:
on rank R, an env instance raises at each step after its N-th; at most K times in the process (so a
restarted member, whose envs are new, can fail again or not)."""

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv

_raised = [0]  # faults raised in this process


class FaultyCartPole(CartPoleEnv):
    def __init__(self, fail_rank: int = 2, fail_after: int = 3000, fail_times: int = -1, **kwargs):
        super().__init__(**kwargs)
        self.fail_rank, self.fail_after, self.fail_times = int(fail_rank), int(fail_after), int(fail_times)
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps > self.fail_after and _raised[0] != self.fail_times:
            # the rank is asked here, not kept: an asynchronous run's member moves with its envs' state
            from mpi4py import MPI

            rank = MPI.COMM_WORLD.Get_rank()
            if rank == self.fail_rank:
                _raised[0] += 1
                raise RuntimeError(f"injected fault on rank {rank}")
        return super().step(action)


gym.register("FaultyCartPole-v0", entry_point=FaultyCartPole, max_episode_steps=500)
