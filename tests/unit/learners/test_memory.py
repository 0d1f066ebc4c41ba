"""Each learner's memory estimate (its LearnerSpec.memory, pure) against what SB3 really allocates: the
parameters of the networks it trains and keeps, and the bytes of its replay or rollout buffer. The estimate
is a lower bound by design (no activations, no log-std or entropy coefficient); here it is exact for what
it counts."""

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3 import PPO, SAC, TD3
from stable_baselines3.common.buffers import ReplayBuffer

from evo.learners import learner_spec
from evo.learners.offpolicy import replay_footprint
from evo.learners.spec import FLOAT32, TRAINED, EnvShape, LearnerContext

PENDULUM = EnvShape("Box", (1,), (3,), 4)


def parameters(*modules) -> int:
    return sum(p.numel() for module in modules for p in module.parameters())


def test_ppos_networks_and_rollout_buffer_are_as_sb3_builds_them():
    model = PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=32, policy_kwargs={"net_arch": [48, 32]})
    net_arch = {"pi": [48, 32], "vf": [48, 32]}
    context = LearnerContext({"n_steps": 64}, n_envs=1, shape=PENDULUM, net_arch=net_arch, inputs=3)
    networks, rollout = learner_spec("ppo").memory(context)
    trained = parameters(model.policy) - model.policy.log_std.numel()
    assert networks.bytes == trained * TRAINED
    arrays = ("observations", "actions", "rewards", "returns", "episode_starts", "values", "log_probs", "advantages")
    assert rollout.bytes == sum(getattr(model.rollout_buffer, name).nbytes for name in arrays)


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_the_actor_critic_networks_are_as_sb3_builds_them(algo):
    net_arch = {"pi": [40, 30], "qf": [50, 20]}
    model = {"sac": SAC, "td3": TD3}[algo](
        "MlpPolicy", "Pendulum-v1", buffer_size=100, policy_kwargs={"net_arch": net_arch}
    )
    context = LearnerContext({"buffer_size": 100}, n_envs=1, shape=PENDULUM, net_arch=net_arch, inputs=3)
    networks, _ = learner_spec(algo).memory(context)
    policy = model.policy
    trained = parameters(policy.actor, policy.critic)
    kept = parameters(policy.critic_target, *([policy.actor_target] if algo == "td3" else []))
    assert networks.bytes == trained * TRAINED + kept * FLOAT32
    assert networks.what == "networks pi [40, 30], qf [50, 20]"


@pytest.mark.parametrize("n_envs, buffer_size", [(1, 1000), (3, 1000), (4, 2)])
def test_the_replay_buffer_is_as_sb3_allocates_it(n_envs, buffer_size):
    """float64 observations stay float64 (a MuJoCo task's); float64 actions are stored as float32."""
    observations = gym.spaces.Box(-1, 1, (17,), np.float64)
    actions = gym.spaces.Box(-1, 1, (6,), np.float64)
    buffer = ReplayBuffer(buffer_size, observations, actions, n_envs=n_envs)
    arrays = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")
    shape = EnvShape("Box", (6,), (17,), 8)
    footprint = replay_footprint(LearnerContext({"buffer_size": buffer_size}, n_envs=n_envs, shape=shape))
    assert footprint.bytes == sum(getattr(buffer, name).nbytes for name in arrays)
