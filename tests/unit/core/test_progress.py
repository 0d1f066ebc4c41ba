"""Progress during a generation (evo.core.progress): the model's ETA and the reporter's output,
on a fake clock and fake streams."""

import io

import pytest

from evo.core.progress import Progress, ProgressReporter, describe, duration


class FakeClock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_eta_of_the_generation_and_of_the_run_on_a_fake_clock():
    clock = FakeClock()
    progress = Progress(steps_per_generation=10_000, total_generations=5, clock=clock, generation=1)
    progress.begin(2)
    assert progress.rate() == 0 and progress.eta_generation() is None and progress.eta_run() is None
    clock.now += 10
    progress.advance(2_500)
    assert progress.rate() == pytest.approx(250)
    assert progress.fraction == pytest.approx(0.25)
    assert progress.eta_generation() == pytest.approx(30)  # 7,500 steps left at 250/s
    # before a generation has completed, each remaining one (3, 4, 5) is projected at 40 s of training
    assert progress.eta_run() == pytest.approx(30 + 3 * 40)
    clock.now += 30
    progress.advance(7_500)
    assert progress.eta_generation() == 0
    clock.now += 5  # scoring and the exchange
    progress.end()
    assert progress.last_generation_s == pytest.approx(45)
    progress.begin(3)
    clock.now += 20
    progress.advance(5_000)
    # the completed generation's wall time (45 s, scoring included) predicts generations 4 and 5
    assert progress.eta_generation() == pytest.approx(20)
    assert progress.eta_run() == pytest.approx(20 + 2 * 45)


def test_durations_read_at_a_glance():
    assert [duration(s) for s in (None, 42, 185, 7620, 3 * 86400 + 4 * 3600)] == ["?", "42s", "3m05s", "2h07m", "3d04h"]


def test_a_file_gets_a_line_every_interval_with_steps_rate_and_eta():
    clock = FakeClock()
    lines = []
    stream = io.StringIO()
    reporter = ProgressReporter(Progress(491_520, 20, clock=clock), 30, lines.append, stream=stream)
    reporter.begin(1)
    for _ in range(29):  # 29 s of 64 env steps every second: no line yet
        clock.now += 1
        reporter.advance(64)
    assert lines == []
    for _ in range(71):  # up to 100 s: a line at 30, 60 and 90 s
        clock.now += 1
        reporter.advance(64)
    assert len(lines) == 3
    assert lines[0] == describe_at(30 * 64, 491_520, 64)
    assert "gen 1/20" in lines[0] and "1,920/491,520 (0%)" in lines[0] and "64 env-steps/s" in lines[0]
    assert "ETA generation 2h07m, run " in lines[0]
    assert stream.getvalue() == ""  # a file gets log lines, never a bar


def describe_at(done: int, total: int, rate: float) -> str:
    clock = FakeClock(0.0)
    progress = Progress(total, 20, clock=clock)
    progress.begin(1)
    clock.now = done / rate
    progress.advance(done)
    return describe(progress)


def test_a_terminal_gets_a_bar_redrawn_in_place_and_cleared_at_the_end():
    clock = FakeClock()
    lines = []
    terminal = io.StringIO()
    reporter = ProgressReporter(Progress(1000, 3, clock=clock), 30, lines.append, stream=terminal, terminal=True)
    reporter.begin(1)
    for _ in range(10):
        clock.now += 0.25
        reporter.advance(50)
    assert lines == []  # no log lines on a terminal
    drawn = terminal.getvalue()
    assert drawn.count("\r[") == 5  # redrawn every 0.5 s, not every step
    assert "\n" not in drawn
    assert drawn.rsplit("\r", 1)[-1].startswith("[############............] gen 1/3  rank 0 env steps 500/1,000 (50%)")
    reporter.end()
    assert terminal.getvalue().endswith("\r\x1b[K")


def test_a_pipe_is_not_a_terminal_and_a_rank_s_pseudo_terminal_needs_its_launcher_s():
    from evo.logs import output_is_terminal

    class PseudoTerminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert not output_is_terminal(io.StringIO())
    # pytest's parent (the shell or CI runner) decides: a pseudo-terminal alone is not enough
    import os

    try:
        parent = os.readlink(f"/proc/{os.getppid()}/fd/1")
    except OSError:  # pytest's parent gone (pytest adopted by init) or not ours to read: isatty is trusted
        parent = "/dev/pts/"
    assert output_is_terminal(PseudoTerminal()) == parent.startswith(("/dev/pts/", "/dev/tty"))


def test_the_first_rollout_of_a_generation_ends_with_a_line_even_before_the_interval():
    """PPO's update counts no step (minutes on CPU for bigfish): the first line must not wait for it."""
    clock = FakeClock()
    lines = []
    reporter = ProgressReporter(Progress(491_520, 50, clock=clock), 30, lines.append, stream=io.StringIO())
    reporter.begin(1)
    for _ in range(20):
        clock.now += 1
        reporter.advance(512)
    assert lines == []
    reporter.rollout_ended()  # 20 s in: the first rollout is collected
    assert len(lines) == 1 and "10,240/491,520" in lines[0]
    clock.now += 10
    reporter.rollout_ended()  # the next one, 10 s later: not yet due
    assert len(lines) == 1
    reporter.begin(2)
    clock.now += 5
    reporter.rollout_ended()  # a short first rollout: quiet
    assert len(lines) == 1
    clock.now += 6
    reporter.rollout_ended()  # 11 s into generation 2, nothing shown yet
    assert len(lines) == 2 and lines[1].startswith("gen 2/50")
