"""An Atari game end to end (issue 39; a real ROM through ale-py): PBT of PPO on ALE/Breakout-v5 under
``mpiexec -n 2`` at a tiny budget (no rank prints the emulator's greeting), zoo's Atari preprocessing and frame
stack, records its exploits and explores, resumes to a third generation with its games in progress (in this
process, from the job's checkpoint); its best member is played on fresh games by evo-evaluate and, exported, by
rl_zoo3's ``enjoy`` in the evo-less virtualenv with zoo's AtariWrapper and frame stack built from the exported
config. Bad Atari input (every problem at once) and a missing extra are refused on every rank before torch is
imported. What each part proves in-process: tests/unit/sb3/test_atari.py (an unknown game's closest ids among
them); a member moved to another rank with its games: tests/mpi/ranks/test_migration.py; a resume in a new
``mpiexec`` job: tests/e2e/test_resilience.py."""

from __future__ import annotations

import logging

import pytest
import yaml

from tests.e2e.runs import play, zoo_venv_python
from tests.e2e.test_export import evaluated, exported
from tests.e2e.test_resilience import WITHOUT_TORCH
from tests.support import generations_recorded, mpiexec, need_atari, read_lineage, read_population, run_in_process

GAME, MEMBERS, RANKS, STEPS = "ALE/Breakout-v5", 2, 2, 768
TINY = ["n_envs:2", "n_steps:64", "n_epochs:1", "n_minibatches:2"]
"""A random policy's Breakout game (5 lives) ends within about 250 agent steps; each env takes 384 a generation, so
every member finishes a game in its first generation whatever actions this host's floats pick."""


@pytest.fixture(autouse=True)
def _atari():
    need_atari()


def flags(run_dir, *extra: str) -> list[str]:
    flags = ["--env-id", GAME, "--agent-training-steps", str(STEPS), "--hyperparams", *TINY]
    return [*flags, "--num-agents", str(MEMBERS), "--run-dir", str(run_dir), "--seed", "5", *extra]


def test_pbt_on_an_atari_game_exploits_resumes_and_exports_for_zoo(tmp_path, caplog, capsys):
    """One run serves the records, the exploits, the resume, evo-evaluate, the export and enjoy (700 steps of
    Breakout in .venv-zoo): about half a minute on 2 cores."""
    run_dir = tmp_path / "run"
    result = mpiexec(RANKS, ["pbt_rl_truct.py", *flags(run_dir, "--total-generations", "2")], timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert "A.L.E" not in result.stdout + result.stderr  # the emulator's greeting, once per env, is left out
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["env_kwargs"] == {"frameskip": 1}  # zoo's AtariWrapper skips the frames
    assert (config["agent"]["policy"], config["agent"]["frame_stack"]) == ("nature", 4)
    assert generations_recorded(run_dir) == {1: list(range(MEMBERS)), 2: list(range(MEMBERS))}
    scores = [float(row["score"]) for row in read_population(run_dir)]
    assert all(score == score for score in scores), scores  # every member finished games: none is unscored
    lineage = read_lineage(run_dir)
    assert [exploit["generation"] for exploit in lineage] == [1, 2]
    assert all(exploit["new_hparams"] != exploit["old_hparams"] for exploit in lineage)

    with caplog.at_level(logging.INFO, logger="evo"):
        assert run_in_process(flags(run_dir, "--resume", "--total-generations", "3")) == 0
    assert f"resumed from {run_dir / 'checkpoints' / 'gen_000002'} (generation 2)" in caplog.text
    assert "starting fresh episodes" not in caplog.text  # the games in progress went on
    assert generations_recorded(run_dir) == {g: list(range(MEMBERS)) for g in (1, 2, 3)}

    # evo-evaluate plays the kept best on fresh games, its frames stacked as in training
    (member,) = evaluated(run_dir, tmp_path, "--member", "best", "--episodes", "2")["members"]
    assert len(member["returns"]) == 2 and all(value >= 0 for value in member["returns"])  # Breakout's scores

    capsys.readouterr()
    experiment = exported(run_dir, tmp_path / "logs")
    printed = capsys.readouterr().out
    assert experiment == tmp_path / "logs" / "ppo" / "ALE-Breakout-v5_1"  # zoo's name of the id: / as -
    stats = experiment / "ALE-Breakout-v5"
    assert (experiment / "ALE-Breakout-v5.zip").is_file()
    zoo_config = yaml.load((stats / "config.yml").read_text(), Loader=yaml.UnsafeLoader)  # as zoo reads it
    wrapper = "stable_baselines3.common.atari_wrappers.AtariWrapper"
    assert zoo_config["env_wrapper"] == [{wrapper: {"action_repeat_probability": 0.25}}]
    assert zoo_config["frame_stack"] == 4 and zoo_config["policy"] == "CnnPolicy"
    assert yaml.safe_load((stats / "args.yml").read_text()) == {
        "env_kwargs": {"frameskip": 1, "repeat_action_probability": 0.0}
    }
    zoo_python = zoo_venv_python()
    # the line evo-export printed, run as printed (issue 54: it said --env ALE-Breakout-v5, which zoo cannot make)
    assert f"--env {GAME} -f {tmp_path / 'logs'} --exp-id 1" in printed
    played = play(zoo_python, printed, 700, tmp_path, timeout=600)
    assert "Stacking 4 frames" in played and "Atari Episode Score" in played


def test_bad_atari_input_is_refused_on_every_rank_before_anything_is_written(tmp_path):
    """Each problem refused by rank 0 once, all at once, exit 2 on both ranks, nothing written, torch and SB3
    never imported (blocked): the game's action space is read from ale-py."""
    run_dir = tmp_path / "run"
    argv = ["pbt_rl_truct.py", "--env-id", GAME, "--algo", "sac", "--hyperparams", "frame_stack:-1"]
    result = mpiexec(RANKS, [*WITHOUT_TORCH, *argv, "--run-dir", str(run_dir)], timeout=300)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    for expected in ("--algo sac: SAC acts in Box action spaces", "frame_stack -1: must be 0"):
        assert result.stderr.count(expected) == 1, result.stderr[-3000:]
    assert not run_dir.exists()


def test_atari_without_the_extra_is_refused_on_every_rank(tmp_path):
    """As where ale-py is not installed (tests/without.py makes it unimportable on both ranks)."""
    run_dir = tmp_path / "run"
    argv = ["tests/without.py", "ale_py,torch,stable_baselines3", "pbt_rl_truct.py", "--env-id", "ALE/Pong-v5"]
    argv += ["--run-dir", str(run_dir)]
    result = mpiexec(RANKS, argv, timeout=300)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert result.stderr.count("make install EXTRAS=atari") == 1 and not run_dir.exists()
