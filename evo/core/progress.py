"""Progress during a generation, as rank 0 sees it (pure: no MPI, torch or SB3).

A generation can last hours (bigfish: 491,520 env steps per member); without this nothing
reaches the console until it ends. Rank 0 counts its own members' env steps (the SB3 layer's
:class:`~evo.sb3.callbacks.ProgressCallback` calls :meth:`Progress.advance`), and its members stand
for the generation: other ranks' progress is not communicated mid-generation.

:class:`Progress` is the model: env steps done of the generation's total, the rate, and the
ETA of the generation and of the run. :class:`ProgressReporter` shows it: a bar redrawn in
place (``\\r``) on a terminal, or one line every ``interval`` seconds when the output is a file
(a SLURM log). Both take a clock, so tests drive them with a fake one.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

Clock = Callable[[], float]
BAR_WIDTH = 24
TERMINAL_REDRAW_S = 0.5
FIRST_LINE_AFTER_S = 10.0
"""A generation's first rollout that ends later than this gets a line (see ``rollout_ended``)."""


@dataclass
class Progress:
    """Env steps of rank 0's members in the current generation, and what they predict.

    ``steps_per_generation``: env steps rank 0's members train per generation (members on
    rank 0 × steps per member, rounded up to whole rollouts). The run's ETA is the rest of the
    generation plus the remaining generations at the last complete generation's wall time
    (which includes scoring and the exchange), or, before one has completed, at this
    generation's projected training time.
    """

    steps_per_generation: int
    total_generations: int
    clock: Clock = time.monotonic
    generation: int = 0
    done: int = 0
    started: float = 0.0
    last_generation_s: float | None = None

    def begin(self, generation: int) -> None:
        """Generation ``generation`` starts now."""
        self.generation, self.done, self.started = generation, 0, self.clock()

    def advance(self, steps: int) -> None:
        self.done += steps

    def end(self) -> None:
        """The generation is over (scored, exchanged): its wall time predicts the next ones."""
        self.last_generation_s = self.clock() - self.started

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.steps_per_generation) if self.steps_per_generation else 1.0

    def rate(self) -> float:
        """Env steps per second of rank 0's members in this generation so far (0 before any)."""
        elapsed = self.clock() - self.started
        return self.done / elapsed if elapsed > 0 and self.done > 0 else 0.0

    def eta_generation(self) -> float | None:
        """Seconds until rank 0's members finish this generation's training; None before a rate."""
        rate = self.rate()
        if rate <= 0:
            return None
        return max(0, self.steps_per_generation - self.done) / rate

    def eta_run(self) -> float | None:
        """Seconds until the run's last generation ends; None before a rate."""
        left = self.eta_generation()
        if left is None:
            return None
        per_generation = self.last_generation_s
        if per_generation is None:
            per_generation = self.steps_per_generation / self.rate()
        return left + (self.total_generations - self.generation) * per_generation


def duration(seconds: float | None) -> str:
    """``42s``, ``3m05s``, ``2h07m``, ``3d04h``; ``?`` when unknown."""
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def describe(progress: Progress) -> str:
    """One line: the generation, rank 0's env steps done of its total, the rate and both ETAs."""
    return (
        f"gen {progress.generation}/{progress.total_generations}  rank 0 env steps "
        f"{progress.done:,}/{progress.steps_per_generation:,} ({100 * progress.fraction:.0f}%)  "
        f"{progress.rate():,.0f} env-steps/s  ETA generation {duration(progress.eta_generation())}, "
        f"run {duration(progress.eta_run())}"
    )


class ProgressReporter:
    """Shows a :class:`Progress`: on a terminal (``terminal``) a bar redrawn in place on
    ``stream`` at most every 0.5 s; otherwise (a file, a SLURM log) a line every ``interval``
    seconds through ``log``."""

    def __init__(
        self,
        progress: Progress,
        interval: float,
        log: Callable[[str], None],
        stream: TextIO | None = None,
        terminal: bool = False,
        clock: Clock | None = None,
    ):
        self.progress = progress
        self.stream = stream if stream is not None else sys.stdout
        self.terminal = terminal
        self.interval = TERMINAL_REDRAW_S if self.terminal else interval
        self.log = log
        self.clock = clock or progress.clock
        self.shown = 0.0
        self.bar_shown = False
        self.lines = 0  # shown in this generation

    def begin(self, generation: int) -> None:
        self.progress.begin(generation)
        self.shown = self.clock()
        self.lines = 0

    def advance(self, steps: int) -> None:
        """Count ``steps``; report if ``interval`` has passed since the last report."""
        self.progress.advance(steps)
        now = self.clock()
        if now - self.shown >= self.interval:
            self.shown = now
            self.show()

    def rollout_ended(self) -> None:
        """A rollout is collected and PPO's update starts, during which no step is counted (on
        CPU, minutes for a large rollout): report now if due, or if the generation has shown
        nothing yet after 10 s, so the first line comes after the first rollout, not after its
        update (short generations stay quiet)."""
        now = self.clock()
        first = self.lines == 0 and now - self.progress.started >= min(self.interval, FIRST_LINE_AFTER_S)
        if first or now - self.shown >= self.interval:
            self.shown = now
            self.show()

    def show(self) -> None:
        self.lines += 1
        line = describe(self.progress)
        if self.terminal:
            filled = int(BAR_WIDTH * self.progress.fraction)
            self.stream.write(f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {line}\x1b[K")
            self.stream.flush()
            self.bar_shown = True
        else:
            self.log(line)

    def end(self) -> None:
        """The generation ended: its time is kept for the ETA, and the bar is cleared so the
        generation's log line starts at the left margin."""
        self.progress.end()
        if self.bar_shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.bar_shown = False
