"""A hung env in real runs under mpiexec (tests/hanging_env.py: a CartPole whose step never returns once,
on rank 1): the rank says which member is stuck, a stop request (SIGUSR1 to mpiexec, which forwards it to
both ranks) is honoured even then (exit 75, the stopped generation or interval dropped, the last checkpoint
standing), in both modes; the resume, in this process, completes every
(member, generation) once. (With --step-timeout the member fails and is restarted:
tests/unit/runner/test_restart_runs.py; the watchdog itself: tests/unit/runner/test_watchdog.py.)"""

import signal
import subprocess

import pytest

from evo.rundir import checkpoint as ckpt
from tests.e2e.runs import common, running, wait_for
from tests.support import TINY_DEFAULT, budget, generations_recorded, run_in_process, write_hyperparams


def hanging(tmp_path, after: int) -> list[str]:
    """The env, hung on rank 1 at its step ``after`` (2 envs x 64 steps a generation: 100 is in generation 2)."""
    return [
        *("--env-id", "tests.hanging_env:HangingCartPole-v0"),
        *("--env-kwargs", "hang_rank:1", f"hang_after:{after}", f"hang_dir:{tmp_path}"),
    ]


@pytest.mark.parametrize("mode", [[], ["--asynchronous"]], ids=["synchronous", "asynchronous"])
def test_a_stop_is_honoured_while_an_env_hangs_and_the_resume_completes(tmp_path, mode):
    run_dir = tmp_path / "run"
    output = tmp_path / "output.txt"
    flags = [*hanging(tmp_path, 100), *budget(4, 3, 128), *common(run_dir, write_hyperparams(tmp_path, TINY_DEFAULT))]
    flags += [*mode, "--stall-timeout", "1"]
    with (
        output.open("w") as sink,
        running(2, ["pbt_rl_truct.py", *flags], stdout=sink, stderr=subprocess.STDOUT) as job,
    ):
        wait_for((tmp_path / "hung-1").exists, 300, "rank 1's env to hang")
        wait_for(lambda: "has made no env step for" in output.read_text(), 120, "the stall's warning")
        job.send_signal(signal.SIGUSR1)
        job.wait(timeout=120)
        assert job.returncode == 75, output.read_text()[-3000:]
    log = output.read_text()
    assert "rank 1: member 2 (tests.hanging_env:HangingCartPole-v0) has made no env step for" in log
    assert "interrupted by the stop request" in log
    if mode:  # every member's last ready point stands; no interval is recorded twice after the resume
        done = generations_recorded(run_dir)
        assert all(2 not in members for interval, members in done.items() if interval > 1)
    else:  # the hung generation 2 is dropped: generation 1's checkpoint and rows stand
        assert ckpt.latest(run_dir)[0].generation == 1
        assert generations_recorded(run_dir) == {1: [0, 1, 2, 3]}
    assert run_in_process(["--run-dir", str(run_dir), "--resume"]) == 0
    assert generations_recorded(run_dir) == {g: [0, 1, 2, 3] for g in (1, 2, 3)}
