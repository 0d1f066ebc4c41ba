"""A gate for the tests that stop a run mid-generation: an env that, at a step of its own, holds its
rank until a stop signal reaches the process. The test waits for the gate to be reached (a file),
sends the signal, and the run stops exactly there, on a fast machine as on a slow one: no sleep,
and no race between the signal and the end of the generation.

    --env-id tests.gated_env:Gated-v0 --env-kwargs inner:CartPole-v1 gate_at:1100 gate_dir:DIR

wraps ``inner`` (made by ``gymnasium.make``, with its time limit). Each of a member's envs counts
its steps; the first to reach step ``gate_at`` on a rank writes ``DIR/held-<rank>`` (holding the
process's PID) and waits until SIGTERM, SIGUSR1 or SIGINT reaches the process, which evo's own
handler then gets as usual (the gate only watches it pass). ``gate_ranks`` (a list) limits the gate
to those MPI ranks. A rank opens its gate once per run: released, it writes ``DIR/released-<rank>``,
and a resumed part of the run (whose envs count from the checkpoint again) goes through.

Every attribute is plain data, so evo's checkpoints capture the env (evo/sb3/envstate.py) and a
resumed run continues its episodes exactly as with ``inner`` alone. Give the gate a step that
training reaches, not evaluation (the evaluation env counts its own steps too).
"""

import os
import signal
import time
from pathlib import Path

import gymnasium as gym

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
_seen: list[int] = []  # the stop signals this process got while a gate held it


def mpi_rank() -> int:
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


def hold(gate_dir: str, rank: int) -> None:
    """Wait here until a stop signal reaches the process, passing it on to the handler evo
    installed; say so in ``gate_dir`` before and after."""
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}

    def watch(signum, frame):
        _seen.append(signum)
        handler = previous[signum]
        if callable(handler):
            handler(signum, frame)

    for signum in STOP_SIGNALS:
        signal.signal(signum, watch)
    try:
        (Path(gate_dir) / f"held-{rank}").write_text(str(os.getpid()))
        while not _seen:
            time.sleep(0.01)  # a signal ends the sleep; its handler runs before the next test
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    (Path(gate_dir) / f"released-{rank}").write_text(signal.Signals(_seen[0]).name)


class Gated(gym.Wrapper):
    def __init__(self, inner: str, gate_at: int = 0, gate_dir: str = "", gate_ranks=None, **inner_kwargs):
        super().__init__(gym.make(inner, **inner_kwargs))
        self.gate_at = int(gate_at)
        self.gate_dir = str(gate_dir)
        self.gate_ranks = None if gate_ranks is None else [int(rank) for rank in gate_ranks]
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.gate_at > 0 and self.steps == self.gate_at:
            # the rank is asked here, not kept: an asynchronous run's member moves with its envs' state
            rank = mpi_rank()
            if (self.gate_ranks is None or rank in self.gate_ranks) and not self.released(rank):
                hold(self.gate_dir, rank)
        return self.env.step(action)

    def released(self, rank: int) -> bool:
        return bool(_seen) or (Path(self.gate_dir) / f"released-{rank}").exists()


gym.register("Gated-v0", entry_point=Gated)


def gate_flags(inner: str, gate_at: int, gate_dir, ranks=None) -> list[str]:
    """The flags of a run on ``inner`` behind a gate at env step ``gate_at`` (``ranks``: only those)."""
    kwargs = [f"inner:{inner}", f"gate_at:{gate_at}", f"gate_dir:{gate_dir}"]
    if ranks is not None:
        kwargs.append(f"gate_ranks:{list(ranks)}")
    return ["--env-id", "tests.gated_env:Gated-v0", "--env-kwargs", *kwargs]


def held(gate_dir, ranks) -> dict[int, int]:
    """{rank: PID} of the ranks held at their gate so far."""
    found = {}
    for rank in ranks:
        path = Path(gate_dir) / f"held-{rank}"
        if path.exists() and path.read_text():
            found[rank] = int(path.read_text())
    return found
