"""A whole run stopped by a real signal in this process and resumed (tests/support.py:run_in_process): a signal
sent while a member's env is held at a gate (tests/gated_env.py) stops the run there, and the resumed run
records exactly what the uninterrupted run records, through episodes longer than a generation; a signal in
the middle of evaluation episodes ends them at once, and the resume plays that generation again. Moved down
from the e2e tier, where the stopped run was a job under mpiexec signalled through mpiexec: what it checks is
the records', the checkpoint's and the scores', not MPI's. (Signals to mpiexec and to ranks:
tests/e2e/test_resilience.py, test_stopping_runs.py, test_hung_env.py.)"""

import os
import signal
import threading
import time

import pytest

import tests.gated_env
from evo.rundir import checkpoint as ckpt
from evo.runner.stopping import EXIT_STOPPED, STOP_SIGNALS
from tests.gated_env import gate_flags
from tests.support import (
    TINY_DEFAULT,
    assert_each_member_has,
    budget,
    generations_recorded,
    read_population,
    recorded_intervals,
    run_in_process,
    write_hyperparams,
)

LONG = "default:\n  n_envs: 2\n  n_steps: 32\n  n_minibatches: 1\n  n_epochs: 4\n"
"""2 envs x 32 steps a generation: every member ends an episode in its first, and CartPole's episodes soon
grow longer than a generation (with seed 5, recipients finish none in generations 6, 7, 8 and 10)."""
GENERATIONS = 10
STOP_AFTER = 6


def signalled_when_held(gate, signum) -> tuple[threading.Thread, list]:
    """A thread that sends ``signum`` to this process once rank 0's gate holds it (a file of the gate's),
    or after 240 s, noting that it timed out, so that the test fails instead of waiting at the gate."""
    timed_out = []

    def watch():
        deadline = time.monotonic() + 240
        while not (gate / "held-0").exists():
            if time.monotonic() > deadline:
                timed_out.append(True)
                break
            time.sleep(0.01)
        os.kill(os.getpid(), signum)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread, timed_out


def stopped_in_process(argv, gate, signum=signal.SIGUSR1) -> int:
    """``run_in_process(argv)`` with ``signum`` sent for real once its gate holds it; this process's stop
    handlers are put back afterwards (a stopped run leaves them ignoring repeats while it exits)."""
    handlers = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    thread, timed_out = signalled_when_held(gate, signum)
    try:
        status = run_in_process(argv)
    finally:
        thread.join()
        for s, handler in handlers.items():
            signal.signal(s, handler)
    assert not timed_out, "the gate was never reached"
    return status


def test_long_episodes_no_score_is_lost_to_an_exploit_or_a_resume(tmp_path, monkeypatch):
    """Generations far shorter than CartPole's episodes: a recipient often finishes no episode in the
    generation after its exploit. It is scored by the score its new weights carried (marked stale), never
    NaN; and since the training envs travel in the checkpoint, the run stopped by SIGUSR1 and resumed records
    exactly what the uninterrupted run records (no more stale scores). The stopped run is held in generation
    7 until the signal comes; the whole run goes through the same env ungated."""
    monkeypatch.setattr(tests.gated_env, "_seen", [])  # the stop signals this process's gates saw: none yet
    hyperparams = tmp_path / "long.yml"
    hyperparams.write_text(LONG)
    args = [*budget(4, GENERATIONS, 64), "--tb-writer", "False", "--hyperparams", str(hyperparams), "--seed", "5"]
    gate = tmp_path / "gate"
    gate.mkdir()
    assert run_in_process([*args, *gate_flags("CartPole-v1", 0, gate), "--run-dir", str(tmp_path / "whole")]) == 0

    run_dir = tmp_path / "stopped"
    # each env's 32 steps a generation: generation 7 starts at its step 193
    stopped = [*args, *gate_flags("CartPole-v1", STOP_AFTER * 32 + 5, gate), "--run-dir", str(run_dir)]
    assert stopped_in_process(stopped, gate) == EXIT_STOPPED
    assert max(generations_recorded(run_dir)) == STOP_AFTER
    assert run_in_process(["--run-dir", str(run_dir), "--resume"]) == 0

    whole, interrupted = read_population(tmp_path / "whole"), read_population(run_dir)
    for population in (whole, interrupted):
        assert len(population) == 4 * GENERATIONS
        assert not [row for row in population if row["score"] == "nan"]
    stale = [(row["generation"], row["member"]) for row in whole if row["score_train_stale"] == "1"]
    assert stale, "the test must reach generations where a recipient finishes no episode"
    assert [(row["generation"], row["member"]) for row in interrupted if row["score_train_stale"] == "1"] == stale
    assert interrupted == whole  # the envs' episodes in progress continued through the checkpoint


@pytest.mark.parametrize("mode", [[], ["--asynchronous"]], ids=["synchronous", "asynchronous"])
def test_a_stop_during_evaluation_episodes_drops_the_generation_and_the_resume_plays_it_again(
    tmp_path, monkeypatch, mode
):
    """SIGUSR1 arrives at the first step of the process's 3rd evaluation episodes (tests/hanging_env.py
    ``then:stop``; 2 members: generation 2's first): they end at that step and the run stops. Synchronous:
    generation 1's checkpoint and records stand (generation 2 dropped, its other member never evaluated), and
    the resume plays generation 2 again, recording what the run never stopped records. Asynchronous: that
    interval is dropped (two recorded), and the resume completes each member's intervals once. Before, the
    episodes ran on and the generation (the interval) was recorded at the stop."""
    import tests.hanging_env as hanging_env

    monkeypatch.setattr(hanging_env, "_evaluations", [None, 0])
    monkeypatch.setattr(hanging_env, "stopping", [])
    hyperparams = write_hyperparams(tmp_path, TINY_DEFAULT)
    args = [*budget(2, 3, 128), "--eval-episodes", "2", "--select-on", "test", "--seed", "5", "--tb-writer", "False"]
    args += ["--hyperparams", str(hyperparams), "--env-id", "tests.hanging_env:HangingCartPole-v0", *mode]
    stopping = ["hang_rank:0", "hang_evaluation:3", "then:stop"]
    handlers = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    run_dir = tmp_path / "stopped"
    try:
        stopped = ["--env-kwargs", *stopping, f"hang_dir:{tmp_path}"]
        assert run_in_process([*args, *stopped, "--run-dir", str(run_dir)]) == EXIT_STOPPED
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    (env,) = hanging_env.stopping
    assert env.steps_after_stop == 0  # the episodes ended at the step the stop came in
    if mode:
        assert len(recorded_intervals(run_dir)) == 2
        assert run_in_process(["--run-dir", str(run_dir), "--resume"]) == 0
        assert_each_member_has(recorded_intervals(run_dir), {0: 3, 1: 3}, 128)
        return
    assert generations_recorded(run_dir) == {1: [0, 1]}
    assert ckpt.latest(run_dir)[0].generation == 1
    assert run_in_process(["--run-dir", str(run_dir), "--resume"]) == 0
    whole, never = tmp_path / "whole", tmp_path / "never"
    never.mkdir()
    (never / "hung-0").write_text("")  # an env made while this file exists never stops
    assert run_in_process([*args, "--env-kwargs", *stopping, f"hang_dir:{never}", "--run-dir", str(whole)]) == 0
    assert read_population(run_dir) == read_population(whole)
