"""experiments/posture.py: the on-its-back test on the torso's pitch, and the look at a real
HalfCheetah run's members from its last checkpoint."""

import math

import numpy as np
import pytest

from experiments.posture import on_its_back, posture, run_config
from tests.conftest import mpiexec


@pytest.mark.parametrize(
    ("pitch", "back"),
    [(0.0, False), (1.5, False), (-1.5, False), (1.6, True), (-1.6, True), (math.pi, True), (2 * math.pi + 0.1, False)],
)
def test_on_its_back_past_ninety_degrees_either_way(pitch, back):
    assert on_its_back(pitch) is back


def test_a_cheetah_turned_over_in_mujoco_is_on_its_back():
    pytest.importorskip("mujoco", reason="MuJoCo is an optional extra: make install EXTRAS=mujoco")
    import gymnasium

    env = gymnasium.make("HalfCheetah-v5")
    env.reset(seed=0)
    data = env.unwrapped.data
    assert not on_its_back(float(data.qpos[2]))
    qpos, qvel = data.qpos.copy(), data.qvel.copy()
    qpos[1], qpos[2] = 1.0, math.pi  # lifted and rotated half a turn about the pitch axis
    env.unwrapped.set_state(qpos, qvel)
    for _ in range(50):  # let it fall: it lands and stays on its back
        env.step(np.zeros(env.action_space.shape))
    assert on_its_back(float(data.qpos[2]))
    env.close()


@pytest.mark.e2e
def test_posture_of_a_real_run_reads_every_member_of_its_last_checkpoint(tmp_path):
    pytest.importorskip("mujoco", reason="MuJoCo is an optional extra: make install EXTRAS=mujoco")
    run_dir = tmp_path / "run"
    arguments = ["--env-id", "HalfCheetah-v5", "--num-agents", "2", "--total-generations", "1"]
    arguments += ["--agent-training-steps", "512", "--eval-episodes", "0", "--run-dir", str(run_dir)]
    result = mpiexec(1, ["pbt_rl_truct.py", *arguments], timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    config = run_config(run_dir)
    assert (config.env_id, config.num_agents, config.world_size) == ("HalfCheetah-v5", 2, 1)
    rows = posture(run_dir, episodes=1)
    assert [row["member"] for row in rows] == [0, 1]
    for row in rows:
        assert row["checkpoint"] == "gen_000001"
        assert len(row["returns"]) == 1 and math.isfinite(row["returns"][0])
        assert 0.0 <= row["on_its_back"][0] <= 1.0
