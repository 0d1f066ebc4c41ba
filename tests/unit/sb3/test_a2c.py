"""A2C behind the learner interface (evo/sb3/a2c.py; real SB3, real CartPole, no MPI job): every tunable
value reaches the next update, each checked where the update uses it (the advantages the rollout buffer
computes, the loss that is back-propagated, the gradient clip, RMSprop's step size); the optimizer is
RMSprop as SB3's A2C builds it (its eager twin) or Adam without use_rms_prop. The state's moves (exploit,
checkpoint): test_zoo_learners.py."""

import numpy as np
import pytest
import torch

from evo.config import parse_config
from evo.sb3.optimizer import EagerAdam, EagerRMSprop
from tests.support import member_of

NEW = {"learning_rate": 2e-3, "ent_coef": 0.02, "gamma": 0.9, "gae_lambda": 0.8, "vf_coef": 0.3, "max_grad_norm": 0.9}


def a2c_config(*hyperparams):
    return parse_config(
        ["--algo", "a2c", "--env-id", "CartPole-v1", "--hyperparams", "n_envs:2", "n_steps:8", *hyperparams],
        check_run_dir=False,
    )


def gae(rewards, values, starts, last_values, dones, gamma, lam) -> np.ndarray:
    """GAE's advantages of a rollout (n_steps x n_envs), written out from the paper's recursion."""
    advantages, running = np.zeros_like(rewards), np.zeros(rewards.shape[1], dtype=rewards.dtype)
    for step in reversed(range(len(rewards))):
        following = last_values if step == len(rewards) - 1 else values[step + 1]
        alive = 1.0 - (dones if step == len(rewards) - 1 else starts[step + 1])
        delta = rewards[step] + gamma * following * alive - values[step]
        running = delta + gamma * lam * alive * running
        advantages[step] = running
    return advantages


def test_every_tunable_value_reaches_the_next_update(monkeypatch):
    config = a2c_config()
    spec = config.agent.spec
    assert set(NEW) == set(spec.tunable) - set(spec.architecture)
    member = member_of(config, 0)
    member.train(32)  # updates ran with the YAML's values
    effective = member.effective_hparams(list(NEW))
    assert all(effective[name] != value for name, value in NEW.items()), effective
    member.set_hparams(NEW)

    model, buffer = member.model, member.model.rollout_buffer
    rollouts, losses, clips = [], [], []
    compute, backward, clip = (
        buffer.compute_returns_and_advantage,
        torch.Tensor.backward,
        torch.nn.utils.clip_grad_norm_,
    )

    def recording_compute(last_values, dones):
        compute(last_values, dones)
        rollouts.append(
            (buffer.rewards.copy(), buffer.values.copy(), buffer.episode_starts.copy())
            + (last_values.clone().numpy().ravel(), dones.copy(), buffer.advantages.copy())
        )

    def recording_backward(loss, *args, **kwargs):
        losses.append(float(loss.detach()))
        return backward(loss, *args, **kwargs)

    def recording_clip(parameters, max_norm, *args, **kwargs):
        clips.append(max_norm)
        return clip(parameters, max_norm, *args, **kwargs)

    monkeypatch.setattr(buffer, "compute_returns_and_advantage", recording_compute)
    monkeypatch.setattr(torch.Tensor, "backward", recording_backward)
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recording_clip)
    member.train(16)  # one rollout of 2 x 8 env steps, one update
    monkeypatch.undo()

    # gamma and gae_lambda: the advantages the rollout buffer computed are GAE's with the new values
    (rewards, values, starts, last_values, dones, advantages) = rollouts[-1]
    assert len(rollouts) == 1
    expected = gae(rewards, values, starts, last_values, dones, 0.9, 0.8)
    np.testing.assert_allclose(advantages, expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(advantages, gae(rewards, values, starts, last_values, dones, 0.99, 1.0))
    # ent_coef and vf_coef: the loss back-propagated is the policy loss + 0.02 x entropy loss + 0.3 x value loss
    logged = model.logger.name_to_value
    (loss,) = losses
    combined = logged["train/policy_loss"] + 0.02 * logged["train/entropy_loss"] + 0.3 * logged["train/value_loss"]
    assert loss == pytest.approx(combined, rel=1e-5)
    # max_grad_norm: the gradient is clipped at the new norm
    assert clips == [0.9]
    # learning_rate: RMSprop's step size (SB3 resets it from lr_schedule at each train()), and what it logs
    assert [group["lr"] for group in model.policy.optimizer.param_groups] == [2e-3]
    assert logged["train/learning_rate"] == pytest.approx(2e-3)
    assert member.effective_hparams() == pytest.approx(NEW) and member.hparams == NEW


@pytest.mark.parametrize(
    ("use_rms_prop", "optimizer_class", "expected"),
    [(True, EagerRMSprop, {"alpha": 0.99, "eps": 3e-5, "weight_decay": 0}), (False, EagerAdam, {"eps": 1e-5})],
    ids=["rmsprop", "adam"],
)
def test_the_optimizer_is_the_one_sb3s_a2c_builds(use_rms_prop, optimizer_class, expected):
    """SB3's A2C: RMSprop (alpha 0.99, eps rms_prop_eps, no weight decay), or Adam with SB3's eps 1e-5;
    here their eager twins, whose state sits in the flat buffer from the start."""
    member = member_of(a2c_config(f"use_rms_prop:{str(use_rms_prop).lower()}", "rms_prop_eps:3e-5"), 0)
    optimizer = member.model.policy.optimizer
    assert type(optimizer) is optimizer_class
    assert {name: optimizer.defaults[name] for name in expected} == expected
    first = next(iter(member.model.policy.parameters()))
    keys = ["step", "square_avg"] if use_rms_prop else ["step", "exp_avg", "exp_avg_sq"]
    assert list(optimizer.state[first]) == keys
    member.close()
