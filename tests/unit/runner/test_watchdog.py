"""The watchdog (evo/runner/watchdog.py) in one process, on a clock the test moves: a stall logged once,
naming the member; a stop interrupting a member stuck in its env after the grace; a member hung past the
step timeout failing; nothing raised outside a member's training; a learner's update not timed as a wait for
an env step (a real PPO's and SAC's update held past the step timeout); the evaluation episodes of a real
member under the watchdog (the session's score): a hang there said and failed, a stop request ending them."""

import logging
import signal
import threading
import time

import pytest

from evo.runner.watchdog import STALL_FACTOR, STALL_MIN_S, STOP_GRACE_S, MemberHung, Watchdog


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
        pending.append(watchdog.pending)  # asserted in the main thread: an assert here could not fail the test
        clock.now += 5
        watchdog.check()  # past the grace: the main thread is interrupted

    pending = []
    with caplog.at_level(logging.WARNING, logger="evo"):
        assert hang_in_main_thread(watchdog, clock, stop) == []  # the interruption ended the block quietly
    assert pending == [None]  # within the grace, nothing was pending
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


# --- env steps are timed, updates are not (an update is said only when as long as a stall) -------------


def test_an_update_is_not_timed_by_the_step_timeout_and_a_long_one_is_said_as_an_update(caplog):
    clock = Clock()
    watchdog = Watchdog(lambda: False, rank=0, stall_timeout=500, step_timeout=20, clock=clock)
    fired = []
    watchdog._fire = fired.append  # what would interrupt the main thread
    beat = watchdog.beating(lambda: False)
    with caplog.at_level(logging.WARNING, logger="evo"), watchdog.watching("member 0 (Env)"):
        clock.now += 19
        beat.updating()  # a rollout ends: the learner's update begins, 19 s after the last env step
        clock.now += 10_000
        watchdog.check()
        assert fired == []
        assert caplog.text.count("rank 0: member 0 (Env) has been in one update for 10000 s; it may be hung") == 1
        assert "--step-timeout does not count updates" in caplog.text
        beat.stepping()  # the next rollout starts: the wait for an env step begins now
        clock.now += 19
        watchdog.check()
        assert fired == []
        clock.now += 1
        watchdog.check()
        (hung,) = fired
        assert str(hung) == "member 0 (Env) made no env step for 20 s (--step-timeout 20)"


class Looking(Watchdog):
    """A watchdog whose thread counts its looks, so that a test can wait for several of them."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.looks = 0
        self.looked = threading.Condition()

    def check(self) -> None:
        super().check()
        with self.looked:
            self.looks += 1
            self.looked.notify_all()

    def look_again(self, times: int) -> None:
        """Wait until the thread has looked ``times`` more times (two minutes at most)."""
        with self.looked:
            target = self.looks + times
            assert self.looked.wait_for(lambda: self.looks >= target, timeout=120), "the watchdog never looked"


@pytest.mark.parametrize(
    "argv",
    [
        ["--hyperparams", "n_envs:2", "n_steps:32", "n_minibatches:1", "n_epochs:1"],
        ["--algo", "sac", "--env-id", "Pendulum-v1", "--hyperparams", "learning_starts:40", "train_freq:8"]
        + ["buffer_size:128", "batch_size:32", "gradient_steps:1", "policy_kwargs:{net_arch: [8]}"],
    ],
    ids=["ppo", "sac"],
)
def test_an_update_longer_than_the_step_timeout_fails_no_member(argv):
    """A real learner's first update lasts 1000 s of the watchdog's clock (``--step-timeout`` 0.2) and
    holds until the watchdog's thread has looked at it three times: the member trains on to the end of its
    budget, its later env steps timed again. (Before, the first look failed it: MemberHung inside train().)"""
    from evo.config import parse_config
    from tests.support import member_of

    config = parse_config([*argv, "--num-agents", "1"], world_size=1, check_run_dir=False)
    member = member_of(config, 0)
    clock = Clock()
    watchdog = Looking(lambda: False, step_timeout=0.2, clock=clock).install(check_s=0.01)
    updates = []
    update = member.model.train

    def long_update(*args, **kwargs):
        updates.append(clock.now)
        if len(updates) == 1:
            clock.now += 1000
            watchdog.look_again(3)
        return update(*args, **kwargs)

    member.model.train = long_update  # SB3's learn() calls the model's train(): the update
    try:
        with watchdog.watching("member 0 (Env)"):
            member.train(128, watchdog.beating(lambda: False))
        assert len(updates) >= 2 and member.env_steps >= 128  # it went on after the long update
        assert watchdog.pending is None and watchdog.updating is not None  # the last update, not timed
    finally:
        watchdog.uninstall()
        member.close()


# --- evaluation episodes under the watchdog (the session's score, a real member) ---------------------


@pytest.fixture
def evaluating(tmp_path, monkeypatch):
    """``scoring(then)``: a session on MPI.COMM_SELF and one PPO member scored on 2 evaluation episodes of
    tests/hanging_env.py, whose env hangs (``then="hang"``) or sends this process SIGUSR1 and goes on
    (``then="stop"``) at the first step of its first evaluation; the session's watchdog moved onto a clock
    the test moves (``--stall-timeout 30 --step-timeout 60``), its thread looking only when asked.
    Returns (session, member, clock); the process's stop handlers are put back afterwards."""
    from mpi4py import MPI

    import tests.hanging_env as hanging_env
    from evo.config import parse_config
    from evo.runner.session import open_session
    from evo.runner.stopping import STOP_SIGNALS
    from tests.support import TINY_DEFAULT, member_of, write_hyperparams

    monkeypatch.setattr(hanging_env, "_evaluations", [None, 0])
    monkeypatch.setattr(hanging_env, "hung", threading.Event())
    monkeypatch.setattr(hanging_env, "stopping", [])
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    opened = []

    def scoring(then: str):
        argv = ["--env-id", "tests.hanging_env:HangingCartPole-v0", "--env-kwargs", "hang_rank:0", "hang_evaluation:1"]
        argv += [f"hang_dir:{tmp_path}", f"then:{then}", "--eval-episodes", "2", "--select-on", "test"]
        argv += ["--hyperparams", str(write_hyperparams(tmp_path, TINY_DEFAULT)), "--run-dir", str(tmp_path / "run")]
        config = parse_config(argv, world_size=1, check_run_dir=False)
        session = open_session(config, MPI.COMM_SELF, records=False)
        opened.append(session)
        session.watchdog.uninstall()
        clock = Clock()
        session.watchdog = Watchdog(lambda: session.stop.requested, 0, 30, 60, clock).install(check_s=3600)
        member = member_of(config, 0)
        opened.append(member)
        return session, member, clock

    yield scoring
    for opened_thing in reversed(opened):
        opened_thing.close()
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


def looking(watchdog, left: threading.Event) -> None:
    """The watchdog's looks until the main thread has ``left`` its scoring: as its thread looks, once a second,
    each look interrupting the main thread again while the interruption is pending (Watchdog._fire: one that
    reached the main thread just before it went to sleep in the hung env is not acted on until the next)."""
    while not left.is_set():
        watchdog.check()
        left.wait(0.01)


def once_hung(fire) -> threading.Thread:
    """A thread that does ``fire()`` once the env hangs (tests/hanging_env.py:hung; two minutes at most)."""
    import tests.hanging_env as hanging_env

    def helper():
        if hanging_env.hung.wait(120):
            fire()

    thread = threading.Thread(target=helper)
    thread.start()
    return thread


def test_a_hang_in_the_evaluation_episodes_is_said_and_past_the_step_timeout_fails_the_member(evaluating, caplog):
    """Before, evaluation episodes ran outside the watchdog: a hung env there was never said, never failed."""
    session, member, clock = evaluating("hang")
    watchdog = session.watchdog

    left = threading.Event()

    def hang():
        clock.now += 31
        watchdog.check()  # past --stall-timeout 30: said
        clock.now += 30
        looking(watchdog, left)  # past --step-timeout 60: the member fails

    thread = once_hung(hang)
    with caplog.at_level(logging.WARNING, logger="evo"), pytest.raises(MemberHung) as failed:
        try:
            session.score(member)
        finally:
            left.set()
    thread.join()
    what = "member 0 (tests.hanging_env:HangingCartPole-v0) in its evaluation episodes"
    assert f"rank 0: {what} has made no env step for 31 s; it may be hung" in caplog.text
    assert str(failed.value) == f"{what} made no env step for 61 s (--step-timeout 60)"
    assert member.scores == []


def test_a_stop_request_ends_evaluation_episodes_in_a_hung_env_after_the_grace(evaluating, caplog):
    """SIGUSR1 while the env hangs in evaluation: 5 s (the grace) later the episodes are interrupted and the
    member has no scores (the generation is dropped). Before, nothing ended them: only SIGTERM's default."""
    session, member, clock = evaluating("hang")
    watchdog = session.watchdog

    left = threading.Event()

    def stop():
        # to the main thread, asleep in the hung env: the run's handler runs there (sent to the process from this
        # thread, the kernel may give it to this thread, and the main thread sleeps on); again until it is taken,
        # as one that comes just before the main thread enters its sleep is acted on only when the sleep returns
        while not session.stop.requested:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)
            left.wait(0.01)
        watchdog.check()  # the stop is seen: the grace begins
        pending.append(watchdog.pending)  # asserted in the main thread: an assert here could not fail the test
        clock.now += STOP_GRACE_S
        looking(watchdog, left)  # past the grace: the main thread is interrupted

    pending = []
    thread = once_hung(stop)
    with caplog.at_level(logging.WARNING, logger="evo"):
        try:
            assert session.score(member) is None
        finally:
            left.set()
    thread.join()
    assert pending == [None]  # within the grace, nothing was pending
    assert "member 0 (tests.hanging_env:HangingCartPole-v0) in its evaluation episodes interrupted by the stop" in (
        caplog.text
    )
    assert member.scores == []


def test_a_stop_request_ends_evaluation_episodes_at_their_next_env_step(evaluating, caplog):
    """SIGUSR1 in the middle of healthy evaluation episodes: they end at once, the env that took the signal
    stepping no more; the watchdog never had to look (its clock never moved, its thread never looked)."""
    import tests.hanging_env as hanging_env

    session, member, clock = evaluating("stop")
    with caplog.at_level(logging.WARNING, logger="evo"):
        assert session.score(member) is None
    (env,) = hanging_env.stopping
    assert env.steps_after_stop == 0 and session.stop.requested
    assert session.watchdog.pending is None and "interrupted" not in caplog.text
    assert member.scores == []
