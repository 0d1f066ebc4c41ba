"""A rank's watch over its members' training and evaluation episodes: a member that hangs is seen, and a
stop request is honoured within seconds even then.

A stop request (SIGTERM, SIGUSR1, SLURM's warning before its time limit) only sets a flag, polled at every
env step (evo/runner/stopping.py); an env whose ``step()`` never returns never reaches the next poll, so
the rank would spin with no log line, the job would be killed at its limit and the generation's work lost.
:class:`Watchdog` is a thread beside the main one that knows when the main thread trains or evaluates a
member (:meth:`Watchdog.watching`) and, through the member's :class:`Heartbeat`, when it last made an env
step and whether it is in its learner's update (between a rollout's end and the next one's start):

- after ``stall_timeout`` seconds without an env step, or in one update (default: 10 × the longest a
  member's training or evaluation has taken on this rank so far, and at least :data:`STALL_MIN_S`), it
  logs, once per stall, which member and env on which rank, and whether in its env steps or its update;
- once a stop is requested, if the main thread is still training or evaluating :data:`STOP_GRACE_S`
  seconds later, it interrupts it: :class:`StopInterrupt` is raised in the main thread where it is (in
  the env's ``step``, in an update), :meth:`Watchdog.watching` swallows it, and the run stops as at any
  stop: the generation (the interval) is dropped, the last checkpoint stands, exit 75. In evaluation
  episodes the stop needs no grace: their heartbeat raises it at the next env step (SB3's
  ``evaluate_policy`` has no other way to end early);
- with ``step_timeout`` > 0, a member that waits that long for one env step fails: :class:`MemberHung`
  (an ordinary exception) is raised in its training or evaluation, and the run restarts it as it restarts
  a member whose env raised (``--max-member-failures``). Only env steps are timed: the time in the
  learner's update (``train()``, its backward passes) is not counted, however long an update takes.

The interruption is a signal (:data:`INTERRUPT`) the thread sends to the main thread, whose handler raises
the pending exception, only inside a member's training or evaluation: Python runs a signal handler between
two bytecodes of the main thread, also when it sleeps or waits on a lock. An env stuck in C code that holds
the GIL cannot be interrupted (nor can the watchdog run); the job then ends at its time limit, as before.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

logger = logging.getLogger("evo")

STALL_MIN_S = 600.0
"""The default stall timeout's floor: no warning before 10 minutes without an env step (or in one update)."""
STALL_FACTOR = 10.0
"""The default stall timeout: this many times the longest a member's training or evaluation took on the rank."""
STOP_GRACE_S = 5.0
"""How long a stop request waits for the main thread to reach its next env step before interrupting it."""
CHECK_S = 1.0
"""How often the watchdog thread looks."""
INTERRUPT = signal.SIGUSR2
"""The signal the watchdog thread sends to the main thread to interrupt a member's training."""


class StopInterrupt(BaseException):
    """A stop request ends the main thread's training or evaluation where it is: found past its grace by
    the watchdog (``forced``), or seen by an evaluation's heartbeat. A BaseException, as KeyboardInterrupt,
    so that no ``except Exception`` of an env or SB3 swallows it."""

    def __init__(self, message: str, forced: bool = True):
        super().__init__(message)
        self.forced = forced


class MemberHung(Exception):
    """A member waited ``--step-timeout`` seconds for one env step: it fails (and is restarted as failures are)."""


class Heartbeat:
    """What a member calls while the watchdog watches it (:meth:`Watchdog.beating`): called at every env
    step, it notes the step and returns ``should_stop()`` (the stop poll a learner's ``train`` takes);
    :meth:`updating` when the learner's update begins and :meth:`stepping` when env steps begin again
    (evo.sb3.callbacks calls both at a rollout's end and start), so that ``--step-timeout`` does not count
    the update. With ``ends`` (evaluation episodes), a stop request raises :class:`StopInterrupt` at once."""

    def __init__(self, watchdog: Watchdog, should_stop: Callable[[], bool], ends: bool = False):
        self.watchdog, self.should_stop, self.ends = watchdog, should_stop, ends

    def __call__(self) -> bool:
        self.stepping()
        stop = self.should_stop()
        if stop and self.ends:
            raise StopInterrupt(f"{self.watchdog.training}: stopped", forced=False)
        return stop

    def updating(self) -> None:
        watchdog = self.watchdog
        watchdog.updating, watchdog.warned = watchdog.clock(), False

    def stepping(self) -> None:
        watchdog = self.watchdog
        watchdog.last, watchdog.updating, watchdog.warned = watchdog.clock(), None, False  # a new stall is said again


class Watchdog:
    """The watch of one rank (see the module docstring). ``requested()``: whether a stop was requested;
    ``clock``: seconds (monotonic)."""

    def __init__(
        self,
        requested: Callable[[], bool],
        rank: int = 0,
        stall_timeout: float | None = None,
        step_timeout: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        grace_s: float = STOP_GRACE_S,
    ):
        self.requested = requested
        self.rank = rank
        self.stall_timeout = stall_timeout
        self.step_timeout = step_timeout
        self.clock = clock
        self.grace_s = grace_s
        self.training: str | None = None
        """What the main thread trains or evaluates now ("member 3 (CartPole-v1)"), or None."""
        self.last = clock()
        """When the member began to wait for its next env step: its last env step, or its update's end."""
        self.updating: float | None = None
        """When the member's update began, while it is in one (None: in its env steps)."""
        self.longest = 0.0
        """The longest a member's training or evaluation has taken on this rank (s)."""
        self.stop_seen: float | None = None
        self.warned = False
        self.pending: BaseException | None = None
        self._main = threading.main_thread().ident
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._previous = None

    # --- the main thread ----------------------------------------------------------------------------

    def install(self, check_s: float = CHECK_S) -> Watchdog:
        """The interrupt's handler (main thread only) and the watching thread."""
        self._previous = signal.signal(INTERRUPT, self._interrupt)
        self._thread = threading.Thread(target=self._watch, args=(check_s,), name="watchdog", daemon=True)
        self._thread.start()
        return self

    def uninstall(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._previous is not None:
            signal.signal(INTERRUPT, self._previous)
            self._previous = None

    @contextmanager
    def watching(self, what: str) -> Iterator[None]:
        """The main thread trains or evaluates ``what`` (a member and its env) inside the block. A stop
        ends the block quietly (the caller's next stop poll is true); a :class:`MemberHung` propagates."""
        began = self.clock()
        self.last, self.updating, self.warned, self.pending = began, None, False, None
        self.training = what
        try:
            yield
        except StopInterrupt as stop:
            if stop.forced:
                logger.warning("rank %d: %s interrupted by the stop request (its work is dropped)", self.rank, what)
        finally:
            self.training = None
            self.longest = max(self.longest, self.clock() - began)

    def beating(self, should_stop: Callable[[], bool], ends: bool = False) -> Heartbeat:
        """The :class:`Heartbeat` of a member that polls ``should_stop`` at every env step (``ends``: its
        evaluation episodes, which a stop request ends at the next step)."""
        return Heartbeat(self, should_stop, ends)

    def _interrupt(self, signum, frame) -> None:
        pending, self.pending = self.pending, None
        if pending is not None and self.training is not None:
            raise pending

    # --- the watching thread ------------------------------------------------------------------------

    def _watch(self, check_s: float) -> None:
        # a stop request sent to the process (SIGTERM, SIGINT, SIGUSR1) is the main thread's to take: the kernel
        # gives it to any thread that does not block it, and Python runs its handler only in the main thread, so
        # one taken here would wait for a main thread asleep in a hung env
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGUSR1})
        while not self._done.wait(check_s):
            self.check()

    def stall_limit(self) -> float:
        if self.stall_timeout is not None:
            return self.stall_timeout
        return max(STALL_MIN_S, STALL_FACTOR * self.longest)

    def check(self) -> None:
        """One look: a stall's warning, a stop's interruption or a hung member's failure, when due."""
        what, updating = self.training, self.updating
        now = self.clock()
        if not self.requested():
            self.stop_seen = None
        elif what is not None:
            self.stop_seen = now if self.stop_seen is None else self.stop_seen
            if now - self.stop_seen >= self.grace_s:
                self._fire(StopInterrupt(f"{what}: stopped"))
            return
        if what is None:
            return
        if updating is not None:  # the learner's update: not timed by --step-timeout, only said when long
            if not self.warned and now - updating >= self.stall_limit():
                self.warned = True
                logger.warning(
                    "rank %d: %s has been in one update for %.0f s; it may be hung (a stop request interrupts it; "
                    "--step-timeout does not count updates)",
                    self.rank,
                    what,
                    now - updating,
                )
            return
        idle = now - self.last
        if self.step_timeout > 0 and idle >= self.step_timeout:
            self._fire(MemberHung(f"{what} made no env step for {idle:.0f} s (--step-timeout {self.step_timeout:g})"))
        elif not self.warned and idle >= self.stall_limit():
            self.warned = True
            logger.warning(
                "rank %d: %s has made no env step for %.0f s; it may be hung (a stop request interrupts it; "
                "--step-timeout S makes it a failure, restarted)",
                self.rank,
                what,
                idle,
            )

    def _fire(self, error: BaseException) -> None:
        if self.pending is None:
            self.pending = error
        # sent again at every look while it is pending: a signal that reaches the main thread just before it
        # enters a blocking call (an env's sleep) is taken by the C handler but not acted on until that call
        # returns, which a hung env's never does; the next one interrupts the call
        signal.pthread_kill(self._main, INTERRUPT)
