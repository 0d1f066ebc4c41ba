"""A CartPole whose ``step()`` never returns once, on one MPI rank, to test what a hung env does to a run:
``--env-id tests.hanging_env:HangingCartPole-v0 --env-kwargs hang_rank:R hang_after:N hang_dir:DIR``. On rank
R, the first env instance of the process to pass its N-th step writes ``DIR/hung-<R>`` (its PID) and sleeps
for ever there (a signal's handler runs in the sleep, as Python runs it between two bytecodes); an env made
when that file exists never hangs, so a resumed run, or a member rebuilt after the hang, goes through."""

import os
import time
from pathlib import Path

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class HangingCartPole(CartPoleEnv):
    def __init__(self, hang_rank: int = 1, hang_after: int = 100, hang_dir: str = ".", **kwargs):
        super().__init__(**kwargs)
        self.hang_rank, self.hang_after, self.hang_dir = int(hang_rank), int(hang_after), str(hang_dir)
        self.armed = not (Path(self.hang_dir) / f"hung-{self.hang_rank}").exists()
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.armed and self.steps > self.hang_after:
            from mpi4py import MPI

            rank = MPI.COMM_WORLD.Get_rank()
            marker = Path(self.hang_dir) / f"hung-{rank}"
            if rank == self.hang_rank and not marker.exists():
                marker.write_text(str(os.getpid()))
                while True:  # hung: no env step ever returns
                    time.sleep(3600)
            self.armed = False
        return super().step(action)


gym.register("HangingCartPole-v0", entry_point=HangingCartPole, max_episode_steps=500)
