"""A user's own env, in a module outside evo on every rank's PYTHONPATH, trains under mpiexec with --env-kwargs
on every rank, and evo-export's "play it" line for it runs as printed in the evo-less virtualenv, from the
user's folder (rl_zoo3's enjoy imports the module: --gym-packages). A bad module, a bad keyword or a missing
MuJoCo extra refused at start-up: tests/unit/config/test_user_env_refusals.py (exit 2 on every rank for any
refused input: tests/e2e/test_resilience.py)."""

import csv
import json

import pytest

import evo.tools.export as export_tool
from tests.e2e.runs import play, zoo_venv_python
from tests.support import mpiexec, user_env_module

USER_MODULE = user_env_module("ConstantReward-v0")

TINY = ["--hyperparams", "n_envs:2", "n_steps:32", "batch_size:32", "n_epochs:1"]


def user_module(tmp_path):
    folder = tmp_path / "user_code"
    folder.mkdir()
    (folder / "my_envs.py").write_text(USER_MODULE)
    log = tmp_path / "env_log"
    log.mkdir()
    return {"PYTHONPATH": str(folder), "USER_ENV_LOG": str(log)}, log


def test_user_env_trains_on_every_rank_with_its_kwargs_and_its_export_plays(tmp_path, capsys, monkeypatch):
    env, log = user_module(tmp_path)
    run_dir = tmp_path / "run"
    result = mpiexec(
        2,
        [
            "pbt_rl_truct.py",
            "--env-id",
            "my_envs:ConstantReward-v0",
            "--env-kwargs",
            "length:7",
            "reward_scale:25e-1",  # PyYAML leaves 25e-1 a string; evo reads the float
            "--num-agents",
            "2",
            "--total-generations",
            "2",
            "--agent-training-steps",
            "64",
            "--eval-episodes",
            "2",
            *TINY,
            "--run-dir",
            str(run_dir),
        ],
        env=env,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "render_mode" not in result.stderr  # SB3's rgb_array request, which training never draws: not warned
    with (run_dir / "population.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {row["rank"] for row in rows} == {"0", "1"}
    for row in rows:  # 7 steps paying 2.5 each, in training and in evaluation, on both ranks
        assert float(row["score_train"]) == pytest.approx(17.5), row
        assert float(row["score_test"]) == pytest.approx(17.5), row
    records = [json.loads(path.read_text()) for path in log.iterdir()]
    assert {record["rank"] for record in records} == {0, 1}
    assert all((record["length"], record["reward_scale"]) == (7, 2.5) for record in records), records

    monkeypatch.syspath_prepend(env["PYTHONPATH"])  # the user's folder, as where they run evo-export
    capsys.readouterr()
    assert export_tool.main([str(run_dir), "--out", str(tmp_path / "logs")]) == 0
    printed = capsys.readouterr().out
    assert "--env ConstantReward-v0 --gym-packages my_envs -f" in printed, printed
    played = play(zoo_venv_python(), printed, 30, tmp_path / "user_code", {"USER_ENV_LOG": str(log)})
    assert "Episode Reward: 17.50" in played, played[-2000:]  # 7 steps of 2.5: its env_kwargs reached zoo
