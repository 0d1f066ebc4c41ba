"""A user's env refused at start-up, saying why: a keyword its constructor does not take (``--env-kwargs``), a
module that does not import (``--env-id module:Env``), a MuJoCo task where the mujoco extra is missing (with the
install command); no traceback, nothing written. Moved down from the e2e tier, where each ran under
``mpiexec -n 2``: that a refusal at start-up is rank 0's, once, and exits 2 on every rank is the start-up's own,
proven for every bad input by tests/unit/test_main.py (rank 0 and a simulated rank 1) and under a real mpiexec
by tests/e2e/test_resilience.py; a user's env trained on every rank with its kwargs:
tests/e2e/test_user_env.py."""

import sys

import pytest

from evo.config import ConfigError, parse_config
from tests.support import user_env_module

MISSION_OBSERVATION = """

class MissionObservation(ConstantReward):  # MiniGrid's shape of observation: an image and a Text mission
    def __init__(self):
        super().__init__()
        self.observation_space = gym.spaces.Dict(
            {"image": gym.spaces.Box(0, 255, (7, 7, 3), np.uint8), "mission": gym.spaces.Text(20)}
        )


gym.register("MissionObservationUnit-v0", entry_point=MissionObservation)
"""
USER_MODULE = user_env_module("ConstantRewardUnit-v0") + MISSION_OBSERVATION
"""A user's env (tests/support.py's, as tests/e2e/test_user_env.py trains it) and one with MiniGrid's observations."""
TINY = ["--hyperparams", "n_envs:2", "n_steps:32", "batch_size:32", "n_epochs:1"]


def refusal(tmp_path, *argv: str) -> str:
    """The problems parse_config reports for ``argv``, as rank 0 prints them; nothing written."""
    run_dir = tmp_path / "run"
    with pytest.raises(ConfigError) as refused:
        parse_config([*argv, *TINY, "--run-dir", str(run_dir)])
    assert not run_dir.exists()
    return str(refused.value)


@pytest.mark.parametrize(
    "argv, expected",
    [
        (
            ["--env-id", "my_unit_envs:ConstantRewardUnit-v0", "--env-kwargs", "lenght:7"],
            "unexpected keyword argument 'lenght'",
        ),
        (["--env-id", "not_my_unit_envs:ConstantRewardUnit-v0"], "cannot import module 'not_my_unit_envs'"),
        (  # it crashed every rank (SB3 cannot batch a Text field), leaving two half-made run folders
            ["--env-id", "my_unit_envs:MissionObservationUnit-v0"],
            "its observations hold mission (Text), which SB3 cannot put in a batch",
        ),
        (  # MiniGrid's ids are registered when minigrid is imported, which evo does only when named so
            ["--env-id", "MiniGrid-Empty-5x5-v0"],
            "MiniGrid-Empty-5x5-v0 is registered by the minigrid package when it is imported: name it "
            "minigrid:MiniGrid-Empty-5x5-v0",
        ),
    ],
)
def test_bad_user_env_input_is_refused(tmp_path, monkeypatch, argv, expected):
    folder = tmp_path / "user_code"
    folder.mkdir()
    (folder / "my_unit_envs.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(folder))
    import gymnasium as gym

    for env_id in [env_id for env_id in gym.registry if env_id.startswith("MiniGrid-")]:
        monkeypatch.delitem(gym.registry, env_id)  # as in a new process: another test may have imported minigrid
    message = refusal(tmp_path, *argv)
    assert expected in message and "Traceback" not in message


def test_missing_mujoco_extra_is_refused_with_the_install_command(tmp_path, monkeypatch):
    """mujoco stays installed; None in sys.modules makes its import fail, standing in for its absence."""
    monkeypatch.setitem(sys.modules, "mujoco", None)
    message = refusal(tmp_path, "--env-id", "HalfCheetah-v5")
    assert "needs the physics engine" in message and "make install EXTRAS=mujoco" in message


@pytest.mark.parametrize(
    "env_id, instead",
    [("AntBulletEnv-v0", "MuJoCo's Ant-v5"), ("pybullet_envs:Walker2DBulletEnv-v0", "MuJoCo's Walker2d-v5")],
)
def test_a_pybullet_locomotion_env_is_refused_naming_its_mujoco_task(env_id, instead, tmp_path):
    """The EVO seed's AntBulletEnv-v0: pybullet_envs registers with the old gym API, which gymnasium cannot run;
    refused before the module is imported, naming the MuJoCo task that stands in for it."""
    with pytest.raises(ConfigError) as refused:
        parse_config(["--env-id", env_id, "--run-dir", str(tmp_path / "run")], world_size=1)
    assert len(refused.value.problems) == 1 and "PyBullet's locomotion envs" in refused.value.problems[0]
    assert instead in refused.value.problems[0] and "pybullet_envs" not in sys.modules
