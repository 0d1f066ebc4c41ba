"""Stop requests from signals (SIGTERM, SIGINT, SIGUSR1), handled at safe points.

The handler only records the signal; the run loop and an SB3 callback poll it.

Schedulers and launchers deliver the same stop signal more than once: ``scancel --full``
signals every process of a SLURM job, so each rank gets SIGUSR1 from SLURM and again from
mpiexec (and from the batch script, which forwards it too). So SIGTERM and SIGUSR1 during a
stop are ignored: they never turn the graceful stop into an abort. Only SIGINT while a stop
is already under way aborts at once (KeyboardInterrupt): that is Ctrl-C pressed a second
time at a terminal, by someone who does not want to wait for the checkpoint.

Repeats can arrive late, after the run has stopped and while the process exits (srun
forwards its copy of the signal after SLURM's own reached the ranks), so ``uninstall``
after a stop leaves SIGTERM and SIGUSR1 ignored: their default action would end the
process with the signal instead of the exit status 75 that tells the batch script to
requeue the job.
"""

from __future__ import annotations

import signal

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)
ABORT_SIGNAL = signal.SIGINT  # a second Ctrl-C; repeated SIGTERM or SIGUSR1 never aborts
EXIT_STOPPED = 75  # EX_TEMPFAIL: stopped on request, checkpoint written; resume with --resume


class StopRequest:
    """Records stop signals; ``requested`` is true once one arrived.

    ``signal_name`` is the first stop signal; ``repeats`` counts the ignored ones after it.
    """

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self.repeats = 0
        self._previous: dict[int, object] = {}

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    def _handle(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        if self.signal_name is None:
            self.signal_name = name
            return
        if signum == ABORT_SIGNAL:
            raise KeyboardInterrupt(f"{name} while stopping on {self.signal_name}: aborting without a checkpoint")
        self.repeats += 1

    def install(self) -> StopRequest:
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def uninstall(self) -> None:
        """Restores the previous handlers; after a stop, ignores repeats of SIGTERM and SIGUSR1."""
        for signum, handler in self._previous.items():
            stopping_repeat = self.requested and signum != ABORT_SIGNAL
            signal.signal(signum, signal.SIG_IGN if stopping_repeat else handler)
        self._previous.clear()
