"""A CartPole whose ``step()`` never returns once, on one MPI rank, to test what a hung env does to a run:
``--env-id tests.hanging_env:HangingCartPole-v0 --env-kwargs hang_rank:R hang_after:N hang_dir:DIR``. On rank
R, the first env instance of the process to pass its N-th step writes ``DIR/hung-<R>`` (its PID) and sleeps
for ever there (a signal's handler runs in the sleep, as Python runs it between two bytecodes); an env made
when that file exists never hangs, so a resumed run, or a member rebuilt after the hang, goes through.

``hang_evaluation:K`` (K > 0) hangs in evaluation episodes only: at the first step of the K-th evaluation (a
call of SB3's ``evaluate_policy``) that this process plays on rank R, never in training (``hang_after`` is then
unused). ``then:stop`` sends SIGUSR1 to its own process there instead of hanging, and goes on: a stop request
arriving in the middle of the episodes. :data:`hung` is set when it hangs or stops, and :data:`stopping` holds the
env that sent the stop (for a test in this process: its ``steps_after_stop``).
"""

import os
import signal
import sys
import threading
import time
from pathlib import Path

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv

hung = threading.Event()
"""Set in this process when an env hangs (or, with ``then:stop``, sends its stop)."""
stopping: list = []
"""The env of this process that sent its stop (``then:stop``)."""
_evaluations: list = [None, 0]
"""The last ``evaluate_policy`` frame an env of this process stepped in (held, so that a new call's frame is
another object), and how many such calls it has seen."""


def evaluation_number() -> int | None:
    """Which evaluation of this process the current env step is in (1, 2, ...), or None if not in one."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != "evaluate_policy":
        frame = frame.f_back
    if frame is None:
        return None
    if frame is not _evaluations[0]:
        _evaluations[:] = [frame, _evaluations[1] + 1]
    return _evaluations[1]


class HangingCartPole(CartPoleEnv):
    def __init__(
        self,
        hang_rank: int = 1,
        hang_after: int = 100,
        hang_dir: str = ".",
        hang_evaluation: int = 0,
        then: str = "hang",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hang_rank, self.hang_after, self.hang_dir = int(hang_rank), int(hang_after), str(hang_dir)
        self.hang_evaluation, self.then = int(hang_evaluation), str(then)
        self.armed = not (Path(self.hang_dir) / f"hung-{self.hang_rank}").exists()
        self.steps = 0
        self.steps_after_stop: int | None = None

    def step(self, action):
        self.steps += 1
        if self.armed and self.due():
            from mpi4py import MPI

            rank = MPI.COMM_WORLD.Get_rank()
            marker = Path(self.hang_dir) / f"hung-{rank}"
            if rank == self.hang_rank and not marker.exists():
                marker.write_text(str(os.getpid()))
                hung.set()
                if self.then == "stop":
                    os.kill(os.getpid(), signal.SIGUSR1)
                    stopping.append(self)
                    self.steps_after_stop = -1  # this step's own
                else:
                    while True:  # hung: no env step ever returns
                        time.sleep(3600)
            self.armed = False
        if self.steps_after_stop is not None:
            self.steps_after_stop += 1
        return super().step(action)

    def due(self) -> bool:
        if self.hang_evaluation <= 0:
            return self.steps > self.hang_after
        return evaluation_number() == self.hang_evaluation


gym.register("HangingCartPole-v0", entry_point=HangingCartPole, max_episode_steps=500)
