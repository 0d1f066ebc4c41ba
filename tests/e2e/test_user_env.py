"""A user's own env, in a module outside evo, trains under mpiexec with --env-kwargs on every
rank; a bad module, a bad keyword or a missing MuJoCo extra is refused with exit status 2."""

import csv
import json

import pytest

from tests.support import mpiexec

EXIT_BAD_INPUT = 2

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


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--env-id", "my_envs:ConstantReward-v0", "--env-kwargs", "lenght:7"], "unexpected keyword argument 'lenght'"),
        (["--env-id", "not_my_envs:ConstantReward-v0"], "cannot import module 'not_my_envs'"),
    ],
)
def test_bad_user_env_input_exits_2_on_every_rank(tmp_path, argv, expected):
    env, _ = user_module(tmp_path)
    run_dir = tmp_path / "run"
    result = mpiexec(2, ["pbt_rl_truct.py", *argv, *TINY, "--run-dir", str(run_dir)], env=env, timeout=120)
    assert result.returncode == EXIT_BAD_INPUT, result.stderr[-3000:]
    assert expected in result.stderr
    assert "Traceback" not in result.stderr and not run_dir.exists()


def test_missing_mujoco_extra_exits_2_with_the_install_command(tmp_path):
    """mujoco stays installed; a module of that name that fails to import stands in for its absence."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "mujoco.py").write_text("raise ImportError('No module named mujoco (blocked by the test)')\n")
    run_dir = tmp_path / "run"
    result = mpiexec(
        2,
        ["pbt_rl_truct.py", "--env-id", "HalfCheetah-v5", "--run-dir", str(run_dir)],
        env={"PYTHONPATH": str(blocker)},
        timeout=120,
    )
    assert result.returncode == EXIT_BAD_INPUT, result.stderr[-3000:]
    assert "needs the physics engine" in result.stderr and "make install EXTRAS=mujoco" in result.stderr
    assert "Traceback" not in result.stderr and not run_dir.exists()
