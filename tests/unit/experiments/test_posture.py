"""experiments/posture.py: the on-its-back test on the torso's pitch (the look at a real
HalfCheetah run's members is tested in tests/e2e/test_posture.py)."""

import math

import numpy as np
import pytest

from experiments.posture import on_its_back
from tests.support import need_mujoco


@pytest.mark.parametrize(
    ("pitch", "back"),
    [(0.0, False), (1.5, False), (-1.5, False), (1.6, True), (-1.6, True), (math.pi, True), (2 * math.pi + 0.1, False)],
)
def test_on_its_back_past_ninety_degrees_either_way(pitch, back):
    assert on_its_back(pitch) is back


def test_a_cheetah_turned_over_in_mujoco_is_on_its_back():
    need_mujoco()
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
