"""PPO's SB3 side: SB3's ``PPO`` with microbatched updates and a precision, and the member that
trains it (its settings are declared in evo/learners/ppo.py).

SB3 runs a minibatch through the network in one forward and backward pass, so the activations
of the whole minibatch are alive at once: with the Procgen paper's minibatch (2048 images) and
the IMPALA CNN an agent peaks at 4.2 GB, in tensors far larger than the CPU's caches (1.4 GB
in microbatches of 256; docs/performance.md). Here the minibatch's loss is split into pieces
of ``microbatch_size`` samples whose gradients add up in ``.grad`` before the one optimizer
step. The loss is a mean over the minibatch, so the gradient is the same sum, only added in
another order (float rounding); advantage normalisation, the KL early stop and the logged
statistics are those of the whole minibatch, as in SB3.

And ``precision``: 'bf16' runs the policy's network in bfloat16 autocast wherever SB3 calls it
(the rollout's forward, both ``train()`` paths, evaluation), through the policies of
evo/sb3/policies.py that stand in for SB3's 'MlpPolicy' and 'CnnPolicy'.

PPO's own ways for a value to reach the update (the rest are the generic reaches of
evo/sb3/learner.py): ``gae_lambda`` is copied into the rollout buffer, which computes the
advantages; ``n_minibatches`` sets ``batch_size`` to ceil(n_envs * n_steps / n_minibatches).
``train()`` reads ``n_epochs``, ``batch_size``, ``max_grad_norm``, ``target_kl``, ``ent_coef`` and
``vf_coef`` from the model at every call (SB3's and the microbatched one alike). What to re-check
when SB3 changes: those attributes, the rollout buffer's ``gae_lambda``, and ``train()`` below
against SB3's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3.common.utils import explained_variance

from evo.config.agent import AgentSettings
from evo.sb3.learner import SB3Learner, common_policy_kwargs
from evo.sb3.policies import EXTRACTORS, MixedPrecisionCnnPolicy, MixedPrecisionPolicy


class PPO(SB3PPO):
    """``stable_baselines3.PPO`` plus ``microbatch_size``: minibatches larger than it are
    back-propagated in pieces of that many samples. 0 (or a size >= batch_size) runs SB3's own
    ``train()`` unchanged. And ``precision`` ('fp32' or 'bf16'), handed to the policy: 'MlpPolicy'
    and 'CnnPolicy' name SB3's policies with a precision (evo/sb3/policies.py)."""

    policy_aliases = {"MlpPolicy": MixedPrecisionPolicy, "CnnPolicy": MixedPrecisionCnnPolicy}

    def __init__(self, *args, microbatch_size: int = 0, precision: str = "fp32", policy_kwargs=None, **kwargs):
        self.microbatch_size = microbatch_size
        self.precision = precision
        super().__init__(*args, policy_kwargs={**(policy_kwargs or {}), "precision": precision}, **kwargs)

    def train(self) -> None:
        if not 0 < self.microbatch_size < self.batch_size:
            return super().train()
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        clip_range = self.clip_range(self._current_progress_remaining)
        clip_range_vf = None if self.clip_range_vf is None else self.clip_range_vf(self._current_progress_remaining)

        stats: dict[str, list[float]] = {"entropy": [], "policy": [], "value": [], "clip": []}
        continue_training = True
        for epoch in range(self.n_epochs):
            approx_kl_divs = []
            for data in self.rollout_buffer.get(self.batch_size):
                means, loss = self._accumulate_gradient(data, clip_range, clip_range_vf)
                for key in stats:
                    stats[key].append(means[key])
                approx_kl_divs.append(means["kl"])
                if self.target_kl is not None and means["kl"] > 1.5 * self.target_kl:
                    continue_training = False
                    if self.verbose >= 1:
                        print(f"Early stopping at step {epoch} due to reaching max kl: {means['kl']:.2f}")
                    break
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()
            self._n_updates += 1
            if not continue_training:
                break

        buffer = self.rollout_buffer
        self.logger.record("train/entropy_loss", np.mean(stats["entropy"]))
        self.logger.record("train/policy_gradient_loss", np.mean(stats["policy"]))
        self.logger.record("train/value_loss", np.mean(stats["value"]))
        self.logger.record("train/approx_kl", np.mean(approx_kl_divs))
        self.logger.record("train/clip_fraction", np.mean(stats["clip"]))
        self.logger.record("train/loss", loss)
        self.logger.record(
            "train/explained_variance", explained_variance(buffer.values.flatten(), buffer.returns.flatten())
        )
        if hasattr(self.policy, "log_std"):
            self.logger.record("train/std", torch.exp(self.policy.log_std).mean().item())
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/clip_range", clip_range)
        if clip_range_vf is not None:
            self.logger.record("train/clip_range_vf", clip_range_vf)

    def _accumulate_gradient(self, data, clip_range: float, clip_range_vf: float | None) -> tuple[dict, float]:
        """Leave the gradient of the minibatch's PPO loss in ``.grad``; return the minibatch's
        mean losses, clip fraction and approximate KL, and the loss."""
        n = len(data.advantages)
        actions = data.actions
        if isinstance(self.action_space, spaces.Discrete):
            actions = actions.long().flatten()
        advantages = data.advantages
        if self.normalize_advantage and n > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

        self.policy.optimizer.zero_grad()
        totals = torch.zeros(5, dtype=torch.float64)  # policy, value, entropy, clipped, kl
        for start in range(0, n, self.microbatch_size):
            part = slice(start, start + self.microbatch_size)
            values, log_prob, entropy = self.policy.evaluate_actions(data.observations[part], actions[part])
            values = values.flatten()
            log_ratio = log_prob - data.old_log_prob[part]
            ratio = torch.exp(log_ratio)
            gain = advantages[part] * ratio
            clipped_gain = advantages[part] * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
            policy_sum = -torch.min(gain, clipped_gain).sum()
            if clip_range_vf is not None:
                old_values = data.old_values[part]
                values = old_values + torch.clamp(values - old_values, -clip_range_vf, clip_range_vf)
            value_sum = (data.returns[part] - values).square().sum()
            entropy_sum = log_prob.sum() if entropy is None else -entropy.sum()
            ((policy_sum + self.ent_coef * entropy_sum + self.vf_coef * value_sum) / n).backward()
            with torch.no_grad():
                totals += torch.stack(
                    [
                        policy_sum,
                        value_sum,
                        entropy_sum,
                        ((ratio - 1).abs() > clip_range).sum(),
                        ((ratio - 1) - log_ratio).sum(),
                    ]
                ).double()
        policy, value, entropy, clipped, kl = (totals / n).tolist()
        means = {"policy": policy, "value": value, "entropy": entropy, "clip": clipped, "kl": kl}
        return means, policy + self.ent_coef * entropy + self.vf_coef * value


def rollout_size(model: PPO) -> int:
    return int(model.n_steps * model.n_envs)


def set_gae_lambda(learner: SB3Learner, value: float) -> None:
    learner.model.gae_lambda = float(value)
    learner.model.rollout_buffer.gae_lambda = float(value)


def set_n_minibatches(learner: SB3Learner, value: int) -> None:
    """The rollout in ``value`` minibatches of ceil(rollout / value) samples."""
    learner.model.batch_size = math.ceil(rollout_size(learner.model) / int(value))


def policy_arguments(agent: AgentSettings, channels_last: bool = False) -> tuple[str, dict[str, Any]]:
    """SB3's policy name and policy_kwargs for our policy names (the CNNs: their features extractor)."""
    kwargs = common_policy_kwargs(agent)
    if agent.policy == "mlp":
        return "MlpPolicy", kwargs
    kwargs["features_extractor_class"] = EXTRACTORS[agent.policy]
    kwargs["features_extractor_kwargs"] = {
        "features_dim": agent.policy_kwargs.get("features_dim", 256 if agent.policy == "impala" else 512),
        "channels_last": channels_last,
    }
    return "CnnPolicy", kwargs


class PPOLearner(SB3Learner):
    """A PPO member: on-policy, its state the policy and its Adam optimizer."""

    algorithm = PPO
    custom = {"gae_lambda": set_gae_lambda, "n_minibatches": set_n_minibatches}
    readers = {
        "gae_lambda": lambda learner: float(learner.model.rollout_buffer.gae_lambda),
        "n_minibatches": lambda learner: math.ceil(rollout_size(learner.model) / learner.model.batch_size),
    }

    def build_model(self, env, values: Mapping[str, Any], seed: int) -> PPO:
        return PPO(
            self.policy_name(),
            env,
            precision=self.setup.precision,
            policy_kwargs=self.policy_kwargs(),
            stats_window_size=100,
            verbose=0,
            seed=seed,
            device="cpu",
            **self.constructor_arguments(values),
        )

    def policy_name(self) -> str:
        return "MlpPolicy" if self.agent.policy == "mlp" else "CnnPolicy"

    def policy_kwargs(self) -> dict[str, Any]:
        """SB3's policy_kwargs for our policy names (the CNNs: their features extractor)."""
        kwargs = common_policy_kwargs(self.agent)
        if self.agent.policy != "mlp":
            kwargs["features_extractor_class"] = EXTRACTORS[self.agent.policy]
            kwargs["features_extractor_kwargs"] = {
                "features_dim": self.agent.policy_kwargs.get(
                    "features_dim", 256 if self.agent.policy == "impala" else 512
                ),
                "channels_last": self.setup.channels_last,
            }
        return kwargs


LEARNER = PPOLearner
