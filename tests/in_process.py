"""What the unit tier's whole runs in one process share (beside tests/support.py:run_in_process): a run
whose log lines are kept (a module-scoped fixture has no caplog), the plot tool run in this process, a
TensorBoard event directory's scalars."""

import logging
from pathlib import Path

from tests.support import run_in_process

PNG = b"\x89PNG\r\n\x1a\n"


class _Keep(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.INFO)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(self.format(record))


def logged(argv: list[str], strategy: str = "truncation", transport: str = "p2p") -> tuple[int, str]:
    """``run_in_process(argv, strategy, transport)`` with what the ``evo`` loggers said at INFO and above
    (tracebacks included) kept. Returns (the exit status, the log's text). The thread pools of NumPy's and
    SciPy's BLAS get one thread, as a rank bound to its core under mpiexec has (PB2's GP on two threads, beside
    the suite's other work on 2 cores, took twice as long)."""
    import scipy.optimize  # noqa: F401  (its BLAS loaded, so that the limit reaches it)
    from threadpoolctl import threadpool_limits

    keep, evo = _Keep(), logging.getLogger("evo")
    level = evo.level
    evo.addHandler(keep)
    evo.setLevel(logging.INFO)
    try:
        with threadpool_limits(limits=1):
            status = run_in_process(argv, strategy, transport)
    finally:
        evo.removeHandler(keep)
        evo.setLevel(level)
    return status, "\n".join(keep.lines)


def plots(run_dir, out: Path) -> dict[str, Path]:
    """``python -m evo.tools.plot RUN_DIR --out OUT`` in this process: its three PNGs, written into ``out``."""
    from evo.tools.plot import main

    assert main([str(run_dir), "--out", str(out)]) == 0
    written = {name: Path(out) / f"{name}.png" for name in ("scores", "hparams", "lineage")}
    for path in written.values():
        assert path.read_bytes()[:8] == PNG
    return written


def scalar_tags(event_dir):
    """A TensorBoard event directory's accumulator, loaded, and its scalars' tags."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(event_dir))
    accumulator.Reload()
    return accumulator, set(accumulator.Tags()["scalars"])
