"""Continuous control: the YAML's keys for continuous actions (gSDE, log_std_init, separate
policy and value networks, activations) really reach SB3's PPO, on Pendulum and HalfCheetah
(models built in-process). That they resolve and are checked: tests/unit/config/test_continuous.py."""

import numpy as np
import torch
from torch import nn

from evo.runner.session import member_factory
from tests.support import need_mujoco
from tests.unit.continuous import NO_NORMALIZE, parse


def linear_sizes(network):
    return [layer.out_features for layer in network if isinstance(layer, nn.Linear)]


def test_yaml_keys_reach_sb3(tmp_path):
    config = parse(
        [
            "--env-id",
            "Pendulum-v1",
            "--hyperparams",
            "n_envs:2",
            "n_steps:32",
            "batch_size:32",
            "n_epochs:1",
            "sde_sample_freq:3",
            "policy_kwargs:{net_arch: {pi: [16], vf: [32, 8]}, log_std_init: -1.5, activation_fn: relu}",
        ],
        tmp_path,
    )
    member = member_factory(config).make(0, config.agent.defaults, tensorboard=False)
    model, policy = member.model, member.model.policy
    assert model.use_sde is True and model.sde_sample_freq == 3
    assert torch.all(policy.log_std == -1.5)
    assert linear_sizes(policy.mlp_extractor.policy_net) == [16]
    assert linear_sizes(policy.mlp_extractor.value_net) == [32, 8]
    assert any(isinstance(layer, nn.ReLU) for layer in policy.mlp_extractor.policy_net)
    assert not any(isinstance(layer, nn.Tanh) for layer in policy.mlp_extractor.modules())
    member.train(64)
    assert member.env_steps == 64
    member.close()


def test_without_sde_pendulum_gets_a_plain_gaussian(tmp_path):
    config = parse(
        ["--env-id", "Pendulum-v1", "--hyperparams", "use_sde:false", "n_envs:1", "n_steps:32", "batch_size:32"],
        tmp_path,
    )
    member = member_factory(config).make(0, config.agent.defaults, tensorboard=False)
    assert member.model.use_sde is False
    assert tuple(member.model.policy.log_std.shape) == (1,) and torch.all(member.model.policy.log_std == 0.0)
    assert linear_sizes(member.model.policy.mlp_extractor.policy_net) == [64, 64]
    member.close()


def test_halfcheetah_builds_and_trains_one_rollout(tmp_path, monkeypatch):
    need_mujoco()
    monkeypatch.chdir(tmp_path)

    config = parse(
        ["--env-id", "HalfCheetah-v5", *NO_NORMALIZE, "n_steps:64", "batch_size:32", "n_epochs:1"],
        tmp_path,
    )
    member = member_factory(config).make(0, config.agent.defaults, tensorboard=False)
    policy = member.model.policy
    assert member.model.action_space.shape == (6,)
    assert linear_sizes(policy.mlp_extractor.policy_net) == [256, 256]
    assert linear_sizes(policy.mlp_extractor.value_net) == [256, 256]
    assert torch.all(policy.log_std == -2.0)
    before = member.pack().copy()
    member.train(64)
    assert member.env_steps == 64
    assert not np.array_equal(before, member.pack())  # one PPO update changed the weights
    member.close()
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()  # MuJoCo's warnings go to logging instead
