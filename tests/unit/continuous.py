"""What the continuous-control tests share (tests/unit/config/test_continuous.py: the settings resolve;
tests/unit/sb3/test_continuous.py: they reach SB3): the MuJoCo tasks, and parse_config skipping a MuJoCo
task where the extra is absent."""

from evo.config import parse_config
from tests.support import need_mujoco

MUJOCO = ["HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5"]
NO_NORMALIZE = ["--hyperparams", "normalize:false"]


def parse(argv, tmp_path):
    """parse_config; a MuJoCo task is skipped (with the install command) where the extra is
    absent, since its env id is refused there."""
    if any(env_id in argv for env_id in MUJOCO):
        need_mujoco()
    return parse_config([*argv, "--run-dir", str(tmp_path / "run")])
