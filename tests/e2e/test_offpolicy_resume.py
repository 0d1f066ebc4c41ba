"""An off-policy run stopped mid-generation and resumed records exactly what the uninterrupted run
records, as a PPO run does (tests/e2e/test_resilience.py): the checkpoint carries each member's
networks, optimizers, replay buffer, envs, exploration noise and the ranks' random states. And a
TD3 run's records, plots and replayed schedule work as a SAC run's do (tests/e2e/test_sac_runs.py)."""

import signal

import pytest
import yaml

from tests.e2e.offpolicy import GENERATION_STEPS, MEMBERS, RANKS, tiny
from tests.e2e.runs import plots, python, running, wait_for
from tests.gated_env import held
from tests.support import generations_recorded, mpiexec, read_lineage, read_population

GENERATIONS = 3


def args_of(algo: str, run_dir, gate: tuple | None = None) -> list[str]:
    flags = ["--num-agents", str(MEMBERS), "--total-generations", str(GENERATIONS), "--seed", "7"]
    return ["pbt_rl_truct.py", *tiny(algo, gate=gate), *flags, "--tb-writer", "False", "--run-dir", str(run_dir)]


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_a_stopped_and_resumed_run_records_what_the_uninterrupted_one_does(tmp_path, algo):
    """The stopped run's ranks are held in generation 2 (tests/gated_env.py) until SIGUSR1 comes;
    the whole run goes through the same env ungated."""
    gate = tmp_path / "gate"
    gate.mkdir()
    whole = mpiexec(RANKS, args_of(algo, tmp_path / "whole", gate=(0, gate)))
    assert whole.returncode == 0, whole.stderr[-3000:]

    run_dir = tmp_path / "stopped"
    with running(RANKS, args_of(algo, run_dir, gate=(GENERATION_STEPS + 1, gate))) as job:
        wait_for(lambda: len(held(gate, range(RANKS))) == RANKS, 240, "the gate in generation 2")
        job.send_signal(signal.SIGUSR1)
        output, _ = job.communicate(timeout=120)
    assert job.returncode == 75, output[-2000:]
    assert max(generations_recorded(run_dir)) == 1
    resumed = mpiexec(RANKS, ["pbt_rl_truct.py", "--run-dir", str(run_dir), "--resume"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout + resumed.stderr

    assert generations_recorded(run_dir) == {g: list(range(MEMBERS)) for g in range(1, GENERATIONS + 1)}
    assert read_population(run_dir) == read_population(tmp_path / "whole")
    assert read_lineage(run_dir) == read_lineage(tmp_path / "whole")


def test_plot_replay_and_schedule_of_a_td3_run(tmp_path):
    """TD3's categorical noise type is drawn at its choices' positions, replayed by name, and one
    TD3 agent trains on the replayed schedule."""
    run_dir = tmp_path / "run"
    result = mpiexec(RANKS, args_of("td3", run_dir))
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(plots(run_dir, tmp_path / "plots")) == ["hparams", "lineage", "scores"]

    schedule = tmp_path / "schedule.yml"
    replayed = python("-m", "evo.tools.replay", str(run_dir), "--out", str(schedule))
    assert replayed.returncode == 0, replayed.stderr
    document = yaml.safe_load(schedule.read_text())
    assert document["algo"] == "td3" and document["env_id"] == "Pendulum-v1"
    for entry in document["schedule"]:
        assert entry["hparams"]["noise_type"] in ("normal", "ornstein-uhlenbeck")
        assert isinstance(entry["hparams"]["policy_delay"], int)

    one = tmp_path / "one"
    single = mpiexec(
        1,
        ["pbt_rl_truct.py", *tiny("td3"), "--num-agents", "1", "--total-generations", str(GENERATIONS)]
        + ["--schedule", str(schedule), "--run-dir", str(one), "--tb-writer", "False"],
    )
    assert single.returncode == 0, single.stderr[-3000:]
    rows = read_population(one)
    assert len(rows) == GENERATIONS
    first = document["schedule"][0]["hparams"]
    assert rows[0]["noise_type"] == first["noise_type"] and int(rows[0]["policy_delay"]) == first["policy_delay"]
