"""Microbatched PPO (evo/sb3/ppo.py) computes SB3's update: same seed, same weights, Adam state and
logged statistics as SB3's own whole-minibatch ``train()`` (real SB3, real envs, no MPI)."""

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from evo.config import ConfigError, parse_config, resume_differences
from evo.runner.session import member_factory
from evo.sb3.ppo import PPO, PPOLearner
from tests.support import capture_logger

STATS = (
    "train/policy_gradient_loss",
    "train/value_loss",
    "train/entropy_loss",
    "train/clip_fraction",
    "train/approx_kl",
    "train/loss",
    "train/explained_variance",
)


def config_for(tmp_path, env_block: str, microbatch: int):
    hp = tmp_path / f"mb{microbatch}.yml"
    hp.write_text(f"{env_block}  microbatch_size: {microbatch}\n")
    env = "bigfish" if env_block.startswith("procgen") else env_block.split(":")[0]
    return parse_config(["--env-id", env, "--hyperparams", str(hp)], check_run_dir=False)


@dataclass
class Trained:
    state: np.ndarray
    """The packed weights and Adam state after training."""
    stats: dict
    """The train/ values logged by the last train()."""
    sizes: list
    """Batch sizes the policy was evaluated on during the updates."""
    gradients: list
    """The (clipped) gradient handed to each optimizer step."""
    n_updates: int


def train_once(config, steps: int, learning_rate: float | None = None, **model_settings) -> Trained:
    hparams = dict(config.agent.defaults)
    if learning_rate is not None:
        hparams["learning_rate"] = learning_rate
    member = member_factory(config).make(0, hparams, tensorboard=False)
    model = member.model
    for name, value in model_settings.items():
        setattr(model, name, value)
    logger, capture = capture_logger()
    model.set_logger(logger)
    sizes, gradients = [], []
    evaluate, step = model.policy.evaluate_actions, model.policy.optimizer.step

    def recording_evaluate(observations, actions):
        sizes.append(len(actions))
        return evaluate(observations, actions)

    def recording_step(*args, **kwargs):
        gradients.append(torch.cat([p.grad.flatten() for p in model.policy.parameters()]).numpy().copy())
        return step(*args, **kwargs)

    model.policy.evaluate_actions, model.policy.optimizer.step = recording_evaluate, recording_step
    member.train(steps)
    model.logger.dump(member.env_steps)
    stats = [row for row in capture.rows if "train/loss" in row][-1]
    trained = Trained(member.pack().copy(), stats, sizes, gradients, model._n_updates)
    member.close()
    return trained


def assert_same_update(split: Trained, whole: Trained) -> None:
    """The same gradients (up to float rounding: 1e-5 of the largest component) at every step,
    and the same logged statistics."""
    assert len(split.gradients) == len(whole.gradients) > 0
    for mine, sb3 in zip(split.gradients, whole.gradients, strict=True):
        assert np.abs(mine - sb3).max() < 1e-5 * np.abs(sb3).max()
        assert np.abs(sb3).max() > 0
    for key in STATS:
        assert split.stats[key] == pytest.approx(whole.stats[key], rel=1e-4, abs=1e-6), key


CARTPOLE = "CartPole-v1:\n  n_envs: 2\n  n_steps: 64\n  n_minibatches: 2\n  n_epochs: 3\n"


@pytest.mark.parametrize("settings", [{}, {"clip_range_vf": lambda _: 0.2}], ids=["plain", "value-clipping"])
def test_microbatches_give_sb3s_update_on_cartpole(tmp_path, settings):
    """64-sample minibatches in pieces of 5 (the last one ragged): the six Adam steps get SB3's
    gradients and land on SB3's weights."""
    whole = train_once(config_for(tmp_path, CARTPOLE, 0), 256, **settings)
    split = train_once(config_for(tmp_path, CARTPOLE, 5), 256, **settings)
    assert set(whole.sizes) == {64}
    assert max(split.sizes) == 5 and 4 in split.sizes  # 64 = 12 x 5 + 4
    assert sum(split.sizes) == sum(whole.sizes)
    assert_same_update(split, whole)
    lr = 2.5e-4  # CartPole's default; one Adam step moves a weight by up to about lr
    assert np.abs(split.state - whole.state).max() < lr / 100
    config = config_for(tmp_path, CARTPOLE, 0)
    untrained = member_factory(config).make(0, config.agent.defaults, tensorboard=False).pack()
    assert np.abs(untrained - whole.state).max() > lr  # training did move the weights


def test_microbatches_give_sb3s_update_on_bigfish_with_impala(tmp_path):
    """The IMPALA CNN's gradients, 32-sample minibatches in pieces of 12, at learning rate 0 so
    that every step's gradient is taken at the same weights in both runs. (With a real learning
    rate the runs drift apart by more than rounding after a few steps, in SB3's own train() as
    much as here: Adam moves every component with |g| >> eps by about lr whatever its size, so
    a component whose gradient is within rounding of zero may step either way.)"""
    block = "procgen:\n  n_envs: 2\n  n_steps: 32\n  n_minibatches: 2\n  n_epochs: 2\n"
    whole = train_once(config_for(tmp_path, block, 0), 64, learning_rate=0.0)
    split = train_once(config_for(tmp_path, block, 12), 64, learning_rate=0.0)
    assert set(split.sizes) == {12, 8}  # 32 = 2 x 12 + 8
    assert len(whole.gradients) == 4
    assert_same_update(split, whole)
    assert np.abs(split.state - whole.state).max() < 1e-5  # Adam's moments too (weights unchanged)


def test_kl_early_stop_is_decided_on_the_whole_minibatch(tmp_path):
    """With a tiny target_kl both stop at the same minibatch, before its optimizer step."""
    whole, split = (train_once(config_for(tmp_path, CARTPOLE, size), 256, target_kl=1e-6) for size in (0, 5))
    assert split.n_updates == whole.n_updates < 3 * 2  # stopped early: fewer than epochs x rollouts
    assert_same_update(split, whole)
    assert np.abs(split.state - whole.state).max() < 2.5e-4 / 100


def test_microbatch_size_in_the_yaml(tmp_path):
    procgen = parse_config(["--env-id", "bigfish"], check_run_dir=False)
    assert procgen.agent.settings["microbatch_size"] == 256 < procgen.agent.settings["batch_size"] == 2048
    cartpole = parse_config([], check_run_dir=False)
    assert cartpole.agent.settings["microbatch_size"] == 0  # SB3's whole-minibatch pass for small MLPs
    member = member_factory(procgen).make(0, procgen.agent.defaults, tensorboard=False)
    assert isinstance(member, PPOLearner)
    assert isinstance(member.model, PPO) and member.model.microbatch_size == 256
    member.close()

    with pytest.raises(ConfigError, match=r"microbatch_size .*is -4; it must be >= 0"):
        config_for(tmp_path, CARTPOLE, -4)


def test_a_run_resumes_with_another_microbatch_size_but_not_another_batch_size(tmp_path):
    saved = config_for(tmp_path, CARTPOLE, 0).to_dict()
    assert resume_differences(saved, config_for(tmp_path, CARTPOLE, 16).to_dict()) == []
    other = config_for(tmp_path, CARTPOLE.replace("n_minibatches: 2", "n_minibatches: 4"), 16).to_dict()
    (problem,) = resume_differences(saved, other)
    assert "batch_size: 64 -> 32" in problem and "microbatch" not in problem
