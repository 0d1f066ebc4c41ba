"""Stop requests from signals (SIGTERM, SIGINT, SIGUSR1), handled at safe points.

The handler only records the signal; the run loop and an SB3 callback poll it. A second
signal while a stop is already under way aborts at once (KeyboardInterrupt).
"""

from __future__ import annotations

import signal

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)
EXIT_STOPPED = 75  # EX_TEMPFAIL: stopped on request, checkpoint written; resume with --resume


class StopRequest:
    """Records stop signals; ``requested`` is true once one arrived."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self._previous: dict[int, object] = {}

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    def _handle(self, signum, frame) -> None:
        if self.signal_name is not None:
            raise KeyboardInterrupt(f"second signal ({signal.Signals(signum).name}) while stopping")
        self.signal_name = signal.Signals(signum).name

    def install(self) -> StopRequest:
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def uninstall(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
