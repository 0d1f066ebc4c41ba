"""An off-policy run stopped mid-generation by SIGUSR1 to mpiexec and resumed in a new mpiexec job records
exactly what the uninterrupted run records, as a PPO run does (tests/e2e/test_resilience.py): the
checkpoint carries each member's networks, optimizers, replay buffer, envs and the ranks' random states,
and the resumed members' replay buffers go on from the saved transitions. SAC on 2 ranks, the off-policy
learners' one stop and resume under mpiexec: the same resume in process for TD3 (its exploration noise
too), a resume without the buffers (--no-checkpoint-buffers), and the off-policy runs' records, explorers,
plots and replayed schedules are in tests/unit/runner/test_sac_runs.py and test_td3_runs.py; every learner's
checkpoint bit for bit in tests/unit/sb3.

The tiny budget and settings of the runs: tests/offpolicy_runs.py."""

import signal
import subprocess

import pytest
import torch

from evo.rundir import checkpoint as ckpt
from tests.e2e.runs import running, wait_for
from tests.gated_env import held
from tests.offpolicy_runs import GENERATION_STEPS, MEMBERS, tiny
from tests.support import generations_recorded, mpiexec, read_lineage, read_population

RANKS, GENERATIONS = 2, 2


def args_of(run_dir, gate) -> list[str]:
    flags = ["--num-agents", str(MEMBERS), "--total-generations", str(GENERATIONS), "--seed", "7"]
    return ["pbt_rl_truct.py", *tiny("sac", gate=gate), *flags, "--tb-writer", "False", "--run-dir", str(run_dir)]


def member_payloads(run_dir, generation):
    return {
        m: ckpt.load_payload(ckpt.generation_dir(run_dir, generation) / ckpt.member_filename(m)) for m in range(MEMBERS)
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The uninterrupted run (through the gated env's ungated twin); the same run with both ranks held in
    generation 2 (tests/gated_env.py) until SIGUSR1 reaches mpiexec, its exit status, output, records and
    checkpoint as it stopped; then its resume in a new job. Three mpiexec jobs of 2 ranks (about 20 s on a
    busy 2-core host), shared by the tests below."""
    root = tmp_path_factory.mktemp("offpolicy-resume")
    gate = root / "gate"
    gate.mkdir()
    whole = mpiexec(RANKS, args_of(root / "whole", gate=(0, gate)))
    assert whole.returncode == 0, whole.stderr[-3000:]

    run_dir = root / "stopped"
    with running(RANKS, args_of(run_dir, gate=(GENERATION_STEPS + 1, gate)), stderr=subprocess.STDOUT) as job:
        wait_for(lambda: len(held(gate, range(RANKS))) == RANKS or job.poll() is not None, 240, "the gate")
        job.send_signal(signal.SIGUSR1)
        output, _ = job.communicate(timeout=300)
    stopped = {
        "status": job.returncode,
        "output": output,
        "recorded": generations_recorded(run_dir),
        "rows": {(int(r["generation"]), int(r["member"])): r for r in read_population(run_dir)},
        "generation": ckpt.latest(run_dir)[0].generation,
        "payloads": member_payloads(run_dir, 1) if job.returncode == 75 else None,
    }
    resumed = mpiexec(RANKS, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume"])
    return {"whole": root / "whole", "run_dir": run_dir, "stopped": stopped, "resumed": resumed}


def test_a_stop_mid_generation_checkpoints_every_members_replay_buffer(runs):
    stopped = runs["stopped"]
    assert stopped["status"] == 75, stopped["output"][-4000:]
    assert "checkpoint of generation 1" in stopped["output"], stopped["output"][-4000:]
    assert stopped["recorded"] == {1: list(range(MEMBERS))}  # generation 2 was cut short
    assert stopped["generation"] == 1
    for member, payload in stopped["payloads"].items():
        assert payload["algo"] == "sac" and "replay" in payload
        assert payload["num_timesteps"] == int(stopped["rows"][(1, member)]["env_steps"])
        # every transition the member collected (1 env, a buffer of 4000 not yet full)
        replay = payload["replay"]
        assert (replay["position"], replay["full"]) == (payload["num_timesteps"], False)
        assert {len(array) for array in replay["arrays"].values()} == {payload["num_timesteps"]}


def test_the_resumed_run_records_what_the_uninterrupted_one_does(runs):
    resumed, run_dir = runs["resumed"], runs["run_dir"]
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-4000:]
    assert "resumed from" in resumed.stdout + resumed.stderr
    assert generations_recorded(run_dir) == {g: list(range(MEMBERS)) for g in range(1, GENERATIONS + 1)}
    assert read_population(run_dir) == read_population(runs["whole"])
    assert read_lineage(run_dir) == read_lineage(runs["whole"])


def test_the_resumed_members_replay_buffers_go_on_from_the_saved_transitions(runs):
    resumed, run_dir = runs["resumed"], runs["run_dir"]
    assert runs["stopped"]["status"] == 75 and resumed.returncode == 0, resumed.stderr[-4000:]
    assert "replay buffer was left out" not in resumed.stdout + resumed.stderr
    for member, payload in member_payloads(run_dir, GENERATIONS).items():
        # the buffer came back and grew: the transitions before the stop, then the resumed run's
        replay, before = payload["replay"], runs["stopped"]["payloads"][member]["replay"]
        assert replay["position"] == payload["num_timesteps"]
        for name, array in before["arrays"].items():
            assert torch.equal(replay["arrays"][name][: len(array)], array), (member, name)
