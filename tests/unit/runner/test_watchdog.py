"""The watchdog (evo/runner/watchdog.py) in one process, on a clock the test moves: a stall logged once,
naming the member; a stop interrupting a member stuck in its env after the grace; a member hung past the
step timeout failing; nothing raised outside a member's training."""

import logging
import threading
import time

import pytest

from evo.runner.watchdog import STALL_FACTOR, STALL_MIN_S, MemberHung, Watchdog


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_stall_is_logged_once_naming_the_member_and_again_after_progress(caplog):
    clock = Clock()
    watchdog = Watchdog(lambda: False, rank=1, stall_timeout=30, clock=clock)
    poll = watchdog.beating(lambda: False)
    with caplog.at_level(logging.WARNING, logger="evo"), watchdog.watching("member 2 (CartPole-v1)"):
        clock.now += 29
        watchdog.check()
        assert caplog.text == ""
        clock.now += 2
        watchdog.check()
        watchdog.check()
        assert caplog.text.count("rank 1: member 2 (CartPole-v1) has made no env step for 31 s") == 1
        poll()  # an env step
        clock.now += 31
        watchdog.check()
        assert caplog.text.count("has made no env step") == 2
    clock.now += 1000
    watchdog.check()  # not training: nothing
    assert caplog.text.count("has made no env step") == 2


def test_the_default_stall_limit_grows_with_the_longest_training():
    clock = Clock()
    watchdog = Watchdog(lambda: False, clock=clock)
    assert watchdog.stall_limit() == STALL_MIN_S
    with watchdog.watching("member 0 (Env)"):
        clock.now += 100
    assert watchdog.longest == 100 and watchdog.stall_limit() == STALL_FACTOR * 100


def hang_in_main_thread(watchdog: Watchdog, clock: Clock, fire) -> list:
    """The main thread trains a member whose env never returns (a sleep loop); a helper thread, once it
    trains, does ``fire(watchdog, clock)``. Returns what left the training: [] or [the exception]."""
    watchdog.install(check_s=3600)  # the handler; its own thread would look only in an hour
    left = []

    def helper():
        while watchdog.training is None:
            time.sleep(0.01)
        fire(watchdog, clock)

    thread = threading.Thread(target=helper)
    try:
        thread.start()
        try:
            with watchdog.watching("member 1 (Hanging)"):
                for _ in range(60 * 100):  # a minute at most: the interruption ends it long before
                    time.sleep(0.01)
                left.append("never interrupted")
        except MemberHung as error:
            left.append(error)
    finally:
        thread.join()
        watchdog.uninstall()
    return left


def test_a_stop_interrupts_a_member_stuck_in_its_env_after_the_grace(caplog):
    stopping = []
    clock = Clock()
    watchdog = Watchdog(lambda: bool(stopping), rank=0, clock=clock, grace_s=5)

    def stop(watchdog, clock):
        stopping.append("SIGUSR1")
        watchdog.check()  # the stop is seen: the grace begins
        assert watchdog.pending is None
        clock.now += 5
        watchdog.check()  # past the grace: the main thread is interrupted

    with caplog.at_level(logging.WARNING, logger="evo"):
        assert hang_in_main_thread(watchdog, clock, stop) == []  # the interruption ended the block quietly
    assert "rank 0: member 1 (Hanging) interrupted by the stop request" in caplog.text


def test_a_member_hung_past_the_step_timeout_fails():
    clock = Clock()
    watchdog = Watchdog(lambda: False, clock=clock, step_timeout=20)

    def hang(watchdog, clock):
        clock.now += 20
        watchdog.check()

    (left,) = hang_in_main_thread(watchdog, clock, hang)
    assert isinstance(left, MemberHung)
    assert str(left) == "member 1 (Hanging) made no env step for 20 s (--step-timeout 20)"


def test_an_interruption_that_arrives_after_the_training_raises_nothing():
    watchdog = Watchdog(lambda: True)
    watchdog.pending = MemberHung("late")
    watchdog._interrupt(None, None)  # the handler, outside any training
    assert watchdog.pending is None


@pytest.mark.parametrize("timeout", [0.0, None])
def test_no_step_timeout_no_failure(timeout):
    clock = Clock()
    watchdog = Watchdog(lambda: False, clock=clock, step_timeout=timeout or 0.0)
    with watchdog.watching("member 0 (Env)"):
        clock.now += 10**6
        watchdog.check()
        assert watchdog.pending is None
