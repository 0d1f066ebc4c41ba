"""A whole run stopped by a real signal in this process and resumed (tests/support.py:run_in_process): a signal
sent while a member's env is held at a gate (tests/gated_env.py) stops the run there, and the resumed run
records exactly what the uninterrupted run records, through episodes longer than a generation. Moved down
from the e2e tier, where the stopped run was a job under mpiexec signalled through mpiexec: what it checks is
the records', the checkpoint's and the scores', not MPI's. (Signals to mpiexec and to ranks:
tests/e2e/test_resilience.py, test_stopping_runs.py, test_hung_env.py.)"""

import os
import signal
import threading
import time

import tests.gated_env
from evo.runner.stopping import EXIT_STOPPED, STOP_SIGNALS
from tests.gated_env import gate_flags
from tests.support import budget, generations_recorded, read_population, run_in_process

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
