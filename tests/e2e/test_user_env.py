"""A user's own env, in a module outside evo on every rank's PYTHONPATH, trains under mpiexec with --env-kwargs
on every rank. A bad module, a bad keyword or a missing MuJoCo extra refused at start-up:
tests/unit/config/test_user_env_refusals.py (exit 2 on every rank for any refused input:
tests/e2e/test_resilience.py)."""

import csv
import json

import pytest

from tests.support import mpiexec

USER_MODULE = '''
"""A user's env: episodes of `length` steps that pay `reward_scale` each, so every episode
returns length * reward_scale whatever the policy does. Each instance writes its kwargs and
its MPI rank to a file in $USER_ENV_LOG."""
import json
import os
import uuid

import gymnasium as gym
import numpy as np


class ConstantReward(gym.Env):
    def __init__(self, length=10, reward_scale=1.0):
        self.length, self.reward_scale, self.t = length, reward_scale, 0
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        log_dir = os.environ.get("USER_ENV_LOG")
        if log_dir:
            record = {"rank": int(os.environ.get("OMPI_COMM_WORLD_RANK", -1)), "length": length,
                      "reward_scale": reward_scale}
            with open(os.path.join(log_dir, uuid.uuid4().hex + ".json"), "w") as handle:
                json.dump(record, handle)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), float(self.reward_scale), self.t >= self.length, False, {}


gym.register("ConstantReward-v0", entry_point=ConstantReward)
'''

TINY = ["--hyperparams", "n_envs:2", "n_steps:32", "batch_size:32", "n_epochs:1"]


def user_module(tmp_path):
    folder = tmp_path / "user_code"
    folder.mkdir()
    (folder / "my_envs.py").write_text(USER_MODULE)
    log = tmp_path / "env_log"
    log.mkdir()
    return {"PYTHONPATH": str(folder), "USER_ENV_LOG": str(log)}, log


def test_user_env_trains_on_every_rank_with_its_kwargs(tmp_path):
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
    with (run_dir / "population.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {row["rank"] for row in rows} == {"0", "1"}
    for row in rows:  # 7 steps paying 2.5 each, in training and in evaluation, on both ranks
        assert float(row["score_train"]) == pytest.approx(17.5), row
        assert float(row["score_test"]) == pytest.approx(17.5), row
    records = [json.loads(path.read_text()) for path in log.iterdir()]
    assert {record["rank"] for record in records} == {0, 1}
    assert all((record["length"], record["reward_scale"]) == (7, 2.5) for record in records), records
