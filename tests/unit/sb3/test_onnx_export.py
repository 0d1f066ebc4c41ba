"""evo.sb3.onnx_export's action head for every learner family: SB3's and sb3-contrib's own models (small
untrained networks, no run), exported to ONNX; onnxruntime's ``action``, turned into the env's action as the
description's ``postprocessing`` says, equals the model's own ``predict`` (deterministic) on the same
observations. Members of real runs, with their preprocessing: tests/unit/tools/test_export_onnx.py and
test_export_impala.py."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from tests.support import need_onnx

FAMILIES = {
    "ppo-discrete": ("stable_baselines3:PPO", "CartPole-v1"),
    "ppo-box": ("stable_baselines3:PPO", "Pendulum-v1"),
    "a2c": ("stable_baselines3:A2C", "CartPole-v1"),
    "dqn": ("stable_baselines3:DQN", "CartPole-v1"),
    "qrdqn": ("sb3_contrib:QRDQN", "CartPole-v1"),
    "trpo": ("sb3_contrib:TRPO", "Pendulum-v1"),
    "sac": ("stable_baselines3:SAC", "Pendulum-v1"),
    "td3": ("stable_baselines3:TD3", "Pendulum-v1"),
    "ddpg": ("stable_baselines3:DDPG", "Pendulum-v1"),
    "tqc": ("sb3_contrib:TQC", "Pendulum-v1"),
    "crossq": ("sb3_contrib:CrossQ", "Pendulum-v1"),
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_onnxruntime_gives_the_models_own_actions(family):
    need_onnx()
    import importlib

    import onnxruntime

    from evo.sb3.onnx_export import action_space, to_onnx

    path, env_id = FAMILIES[family]
    module, name = path.split(":")
    algorithm = getattr(importlib.import_module(module), name)
    model = algorithm("MlpPolicy", gym.make(env_id), policy_kwargs={"net_arch": [16, 16]}, seed=3, device="cpu")
    env = gym.make(env_id)
    obs = np.stack([env.reset(seed=seed)[0] for seed in range(16)]).astype(np.float32)
    if env_id == "Pendulum-v1":  # past the bounds too, where a Box action is clipped or squashed
        obs = obs * np.float32(4.0)
    head, onnx_model = to_onnx(model.policy, obs[:1])
    session = onnxruntime.InferenceSession(onnx_model, providers=["CPUExecutionProvider"])
    action = session.run(["action"], {"obs": obs})[0]
    expected, _ = model.predict(obs, deterministic=True)
    described = action_space(model.policy, head)
    if described["type"] == "Discrete":
        assert np.array_equal(action, expected)
        return
    low, high = np.asarray(described["low"]), np.asarray(described["high"])
    postprocessing = described["postprocessing"]
    if postprocessing == "clip(action, low, high)":
        action = np.clip(action, low, high)
    else:
        assert postprocessing == "low + (action + 1) / 2 * (high - low)"
        action = low + (action + 1) / 2 * (high - low)
    assert action == pytest.approx(expected, abs=1e-5)
