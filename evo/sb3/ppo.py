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

And DrAC (Raileanu et al. 2021), for image observations: with ``aug_coef`` > 0 each minibatch's
loss gains ``aug_coef * (-mean log π(a* | aug(s)) + ½ mean (V(s) - V(aug(s)))²)``, ``aug`` the
augmentation ``aug_type`` of evo/sb3/augment.py, a* sampled from the current policy on the plain
frames s and V(s) their current value, both targets without gradient (:func:`drac_loss`). As in
the paper's code it is computed per minibatch, on the minibatch's frames, and it goes through the
microbatched path (whole minibatches are one piece). ``aug_coef`` 0 runs none of it.

And BG-PBT's distillation (Wan et al. 2022; evo/core/distill.py): with a frozen ``teacher`` policy
set on the model, each minibatch's loss gains ``distill_coef * (½ mean (V(s) - V_t(s))² + mean
KL(π_t(·|s) ‖ π(·|s)))`` (:func:`distill_terms`), the teacher evaluated without gradient on the
minibatch's observations (normalised as the student's rollout buffer holds them: the student takes
the teacher's statistics when it starts). It goes through the microbatched path too, the teacher
evaluated piece by piece, and adds to the PPO loss of the pass PPO's loss takes (no second pass of
the student). The member's side (:meth:`PPOLearner.start_distillation`) builds the teacher and sets
``distill_coef`` before each update. No teacher runs none of it.

PPO's own ways for a value to reach the update (the rest are the generic reaches of
evo/sb3/learner.py): ``gae_lambda`` is copied into the rollout buffer, which computes the
advantages; ``n_minibatches`` sets ``batch_size`` to ceil(n_envs * n_steps / n_minibatches).
``train()`` reads ``n_epochs``, ``batch_size``, ``max_grad_norm``, ``target_kl``, ``ent_coef``,
``vf_coef``, ``aug_coef``, ``aug_type``, ``teacher`` and ``distill_coef`` from the model at every
call (SB3's and the microbatched one alike). What to re-check when SB3 changes: those attributes,
the rollout buffer's ``gae_lambda`` and the dtype of its observations (the frames' own, uint8 for
images), ``train()`` below against SB3's, and what :func:`policy_outputs` copies of
``ActorCriticPolicy.evaluate_actions`` (``extract_features``, ``mlp_extractor``,
``_get_action_dist_from_latent``, ``value_net``), :func:`sampled_actions` and :func:`policy_kl` of
SB3's distributions (their ``.distribution``), and :meth:`PPOLearner.teacher_policy` of
``OnPolicyAlgorithm._setup_model`` (the policy's constructor arguments) and of
``_get_torch_save_params`` (the flat buffer's order).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3.common.callbacks import CallbackList
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.preprocessing import get_action_dim
from stable_baselines3.common.utils import explained_variance

from evo.core.distill import distillation_weight
from evo.core.streams import DRAC_STREAM
from evo.sb3.augment import AUGMENTATIONS, Augmentation
from evo.sb3.callbacks import DistillationCallback, training_callbacks
from evo.sb3.flat import bind_tensor
from evo.sb3.learner import SB3Learner, policy_arguments
from evo.sb3.normalize import load_statistics, renormalize_last_obs
from evo.sb3.onpolicy import gae_lambda_of, set_gae_lambda
from evo.sb3.policies import MixedPrecisionCnnPolicy, MixedPrecisionPolicy

"""The seed stream of DrAC's draws (after the member's model and evaluation streams)."""
TAIL = 1e-7
"""Uniform draws are kept this far from 0 and 1 (the Gaussian's inverse CDF is infinite there)."""


class PPO(SB3PPO):
    """``stable_baselines3.PPO`` plus ``microbatch_size``: minibatches larger than it are
    back-propagated in pieces of that many samples. 0 (or a size >= batch_size) runs SB3's own
    ``train()`` unchanged. And ``precision`` ('fp32' or 'bf16'), handed to the policy: 'MlpPolicy'
    and 'CnnPolicy' name SB3's policies with a precision (evo/sb3/policies.py). And DrAC's
    ``aug_coef`` and ``aug_type`` (the module docstring): with ``aug_coef`` > 0 every update runs
    the microbatched path, whole minibatches as one piece if ``microbatch_size`` is 0. And
    BG-PBT's distillation: with a ``teacher`` policy (None by default) every update runs the
    microbatched path and adds ``distill_coef`` (α) times the teacher's term (the module docstring)."""

    policy_aliases = {"MlpPolicy": MixedPrecisionPolicy, "CnnPolicy": MixedPrecisionCnnPolicy}

    def __init__(
        self,
        *args,
        microbatch_size: int = 0,
        precision: str = "fp32",
        aug_coef: float = 0.0,
        aug_type: str = "crop",
        policy_kwargs=None,
        **kwargs,
    ):
        if aug_type not in AUGMENTATIONS:
            raise ValueError(f"aug_type {aug_type!r}: use one of {', '.join(AUGMENTATIONS)}")
        self.microbatch_size = microbatch_size
        self.precision = precision
        self.aug_coef = float(aug_coef)
        self.aug_type = aug_type
        self.teacher: ActorCriticPolicy | None = None
        self.distill_coef = 0.0
        super().__init__(*args, policy_kwargs={**(policy_kwargs or {}), "precision": precision}, **kwargs)

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "teacher"]  # not the student's: never saved with it

    def train(self) -> None:
        drac = self.aug_coef > 0
        distill = self.teacher is not None
        if not drac and not distill and not 0 < self.microbatch_size < self.batch_size:
            return super().train()
        piece = self.microbatch_size if 0 < self.microbatch_size < self.batch_size else self.batch_size
        generator = drac_generator(self.seed, self._n_updates) if drac else None
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        clip_range = self.clip_range(self._current_progress_remaining)
        clip_range_vf = None if self.clip_range_vf is None else self.clip_range_vf(self._current_progress_remaining)

        stats: dict[str, list[float]] = {"entropy": [], "policy": [], "value": [], "clip": []}
        if drac:
            stats.update(drac_policy=[], drac_value=[])
        if distill:
            stats.update(distill_kl=[], distill_value_mse=[])
        continue_training = True
        for epoch in range(self.n_epochs):
            approx_kl_divs = []
            for data in self.rollout_buffer.get(self.batch_size):
                means, loss = self._accumulate_gradient(data, clip_range, clip_range_vf, piece, generator)
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
        if drac:
            self.logger.record("train/drac_policy_loss", np.mean(stats["drac_policy"]))
            self.logger.record("train/drac_value_loss", np.mean(stats["drac_value"]))
        if distill:
            self.logger.record("train/distill_coef", self.distill_coef)
            self.logger.record("train/distill_kl", np.mean(stats["distill_kl"]))
            self.logger.record("train/distill_value_mse", np.mean(stats["distill_value_mse"]))
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

    def _accumulate_gradient(
        self, data, clip_range: float, clip_range_vf: float | None, piece: int, generator: torch.Generator | None
    ) -> tuple[dict, float]:
        """Leave the gradient of the minibatch's loss in ``.grad``, back-propagated in pieces of
        ``piece`` samples; return the minibatch's mean losses, clip fraction and approximate KL, and
        the loss. With a ``generator``, DrAC's too: its draws are made for the whole minibatch
        first, so the pieces add up to the whole minibatch's gradient whatever their size; a
        piece's PPO loss is back-propagated before its augmented pass runs, so the two passes'
        activations are not alive at once. With a teacher, its term on the piece joins the piece's
        PPO loss (the same pass of the student), as a sum over the piece divided by ``n``."""
        n = len(data.advantages)
        actions = data.actions
        if isinstance(self.action_space, spaces.Discrete):
            actions = actions.long().flatten()
        advantages = data.advantages
        if self.normalize_advantage and n > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        if generator is not None:
            uniforms, augmented = drac_draws(self.policy, data.observations, AUGMENTATIONS[self.aug_type], generator)

        teacher = self.teacher
        self.policy.optimizer.zero_grad()
        # policy, value, entropy, clipped, kl, drac policy, drac value, distill kl, distill squared value error
        totals = torch.zeros(9, dtype=torch.float64)
        for start in range(0, n, piece):
            part = slice(start, start + piece)
            if generator is None and teacher is None:
                values, log_prob, entropy = self.policy.evaluate_actions(data.observations[part], actions[part])
                values = values.flatten()
            else:
                distribution, values = policy_outputs(self.policy, data.observations[part])
                log_prob, entropy = distribution.log_prob(actions[part]), distribution.entropy()
                if generator is not None:
                    targets = drac_targets(distribution, values, uniforms[part])
                if teacher is not None:
                    distill_sums = distill_terms(teacher, data.observations[part], distribution, values)
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
            piece_loss = (policy_sum + self.ent_coef * entropy_sum + self.vf_coef * value_sum) / n
            if teacher is not None:
                piece_loss = piece_loss + self.distill_coef * (distill_sums[0] + 0.5 * distill_sums[1]) / n
            piece_loss.backward()
            if generator is not None:
                drac_sums = drac_terms(self.policy, augmented[part], *targets)
                (self.aug_coef * (drac_sums[0] + drac_sums[1]) / n).backward()
            with torch.no_grad():
                sums = [
                    policy_sum,
                    value_sum,
                    entropy_sum,
                    ((ratio - 1).abs() > clip_range).sum(),
                    ((ratio - 1) - log_ratio).sum(),
                ]
                totals[: len(sums)] += torch.stack(sums).double()
                if generator is not None:
                    totals[5:7] += torch.stack(drac_sums).double()
                if teacher is not None:
                    totals[7:] += torch.stack(distill_sums).double()
        policy, value, entropy, clipped, kl, drac_policy, drac_value, distill_kl, distill_mse = (totals / n).tolist()
        means = {"policy": policy, "value": value, "entropy": entropy, "clip": clipped, "kl": kl}
        loss = policy + self.ent_coef * entropy + self.vf_coef * value
        if generator is not None:
            means.update(drac_policy=drac_policy, drac_value=drac_value)
            loss += self.aug_coef * (drac_policy + drac_value)
        if teacher is not None:
            means.update(distill_kl=distill_kl, distill_value_mse=distill_mse)
            loss += self.distill_coef * (distill_kl + 0.5 * distill_mse)
        return means, loss


# ---------------------------------------------------------------------------------------
# DrAC's regulariser


def drac_generator(seed: int | None, n_updates: int) -> torch.Generator:
    """DrAC's random stream for one ``train()``, seeded from (the model's seed, its update count).
    Both are already in a member's checkpoint (the seed derives from the run's and the member's id;
    ``_n_updates`` is saved and restored), so a resumed member draws what it would have drawn with
    no generator state of its own to save, and a recipient keeps its own stream after an exploit. A
    generator of its own also leaves torch's global one, which samples the rollouts' actions, as
    it would be without DrAC."""
    entropy = [0 if seed is None else int(seed), int(n_updates), DRAC_STREAM]
    state = int(np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint64)[0])
    return torch.Generator().manual_seed(state >> 1)


def drac_draws(
    policy: ActorCriticPolicy, observations: torch.Tensor, augmentation: Augmentation, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Everything DrAC draws for a batch, in this order: the uniforms that pick each a* (one per
    action dimension, :func:`sampled_actions`) and the augmented frames. ``observations`` are as
    SB3's rollout buffer holds image observations: (N, C, H, W), channels first (SB3 transposes an
    HWC env's; ``channels_last`` only changes the memory format inside the CNN), in the frames' own
    dtype (uint8, values 0..255): what the augmentations take, with no conversion."""
    uniforms = torch.rand((len(observations), get_action_dim(policy.action_space)), generator=generator)
    return uniforms, augmentation(observations, generator)


def policy_outputs(policy: ActorCriticPolicy, observations: torch.Tensor) -> tuple[Distribution, torch.Tensor]:
    """The action distribution π(·|s) and the values V(s) (flat), from one pass: what
    ``evaluate_actions`` computes before it evaluates the actions, so DrAC samples a* from the pass
    PPO's loss takes (no second pass over the plain frames)."""
    features = policy.extract_features(observations)
    if policy.share_features_extractor:
        latent_pi, latent_vf = policy.mlp_extractor(features)
    else:
        latent_pi = policy.mlp_extractor.forward_actor(features[0])
        latent_vf = policy.mlp_extractor.forward_critic(features[1])
    return policy._get_action_dist_from_latent(latent_pi), policy.value_net(latent_vf).flatten()


def sampled_actions(distribution: Distribution, uniforms: torch.Tensor) -> torch.Tensor:
    """Actions drawn from SB3's ``distribution`` by its inverse CDF at ``uniforms`` (N, action
    dims), a sample, not the mode: each a* is one draw of π(·|s). Drawn from given uniforms, not by
    ``distribution.sample()``, so that the draw comes from DrAC's generator, and a microbatch takes
    its rows of the minibatch's uniforms (the same a* as the whole minibatch's)."""
    inner = distribution.distribution
    if isinstance(inner, list):  # MultiDiscrete: a categorical per sub-space
        return torch.stack([_categorical(part.probs, uniforms[:, i]) for i, part in enumerate(inner)], dim=1)
    if isinstance(inner, torch.distributions.Categorical):
        return _categorical(inner.probs, uniforms[:, 0])
    if isinstance(inner, torch.distributions.Bernoulli):
        return (uniforms < inner.probs).to(inner.probs.dtype)
    if isinstance(inner, torch.distributions.Normal):  # Box, gSDE's included (its marginal at s)
        return inner.loc + inner.scale * torch.special.ndtri(uniforms.clamp(TAIL, 1 - TAIL).reshape(inner.loc.shape))
    raise TypeError(f"DrAC cannot sample actions of {type(distribution).__name__}")


def _categorical(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    below = (probs.cumsum(-1) < uniforms[:, None]).sum(-1)
    return below.clamp(max=probs.shape[-1] - 1)


def drac_targets(
    distribution: Distribution, values: torch.Tensor, uniforms: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """What DrAC pulls the augmented pass towards, from the pass on the plain frames s: actions a*
    sampled from ``distribution`` (π(·|s)) at ``uniforms``, and ``values`` (V(s)) detached. Targets,
    never moved themselves: the paper's code takes a* from ``act()``, which samples, and detaches
    V(s) (without it the value term would also pull V(s) towards V(aug(s)))."""
    with torch.no_grad():
        actions = sampled_actions(distribution, uniforms)
    return actions, values.detach()


def drac_terms(
    policy: ActorCriticPolicy, augmented: torch.Tensor, actions: torch.Tensor, values: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sums over a batch of DrAC's two terms, ``-log π(a* | aug(s))`` and ``½ (V(s) -
    V(aug(s)))²``, for the targets ``actions`` (a*) and ``values`` (V(s)) of :func:`drac_targets`."""
    augmented_values, log_prob, _ = policy.evaluate_actions(augmented, actions)
    return -log_prob.sum(), 0.5 * (values - augmented_values.flatten()).square().sum()


def drac_loss(
    policy: ActorCriticPolicy, observations: torch.Tensor, augmentation: Augmentation, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """DrAC's regulariser on a batch of frames (:func:`drac_draws` says which): the means
    ``-mean log π(a* | aug(s))`` and ``½ mean (V(s) - V(aug(s)))²``, with a gradient through the
    augmented pass only. PPO's ``train()`` adds ``aug_coef`` times their sum to each minibatch's
    loss, computed as here (in microbatches: the same draws, the sums split)."""
    uniforms, augmented = drac_draws(policy, observations, augmentation, generator)
    distribution, values = policy_outputs(policy, observations)
    policy_sum, value_sum = drac_terms(policy, augmented, *drac_targets(distribution, values, uniforms))
    return policy_sum / len(observations), value_sum / len(observations)


# ---------------------------------------------------------------------------------------
# BG-PBT's distillation


def policy_kl(teacher: Distribution, student: Distribution) -> torch.Tensor:
    """KL(π_t(·|s) ‖ π_s(·|s)) per sample, the teacher's distribution first: torch's closed form on
    SB3's distributions' ``.distribution``, a Categorical's for Discrete actions, a diagonal
    Gaussian's summed over the action dimensions for Box actions (gSDE's included: its marginal at
    s is that Gaussian). Other action spaces are not built."""
    inner_teacher, inner_student = teacher.distribution, student.distribution
    if isinstance(inner_teacher, torch.distributions.Categorical) and isinstance(
        inner_student, torch.distributions.Categorical
    ):
        return torch.distributions.kl_divergence(inner_teacher, inner_student)
    if isinstance(inner_teacher, torch.distributions.Normal) and isinstance(inner_student, torch.distributions.Normal):
        return torch.distributions.kl_divergence(inner_teacher, inner_student).sum(dim=-1)
    raise TypeError(
        f"distillation's KL is built for Discrete (Categorical) and Box (diagonal Gaussian) actions; got "
        f"{type(teacher).__name__} and {type(student).__name__}"
    )


def distill_terms(
    teacher: ActorCriticPolicy, observations: torch.Tensor, distribution: Distribution, values: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sums over a batch of KL(π_t(·|s) ‖ π(·|s)) and (V(s) - V_t(s))², for the student's
    ``distribution`` π(·|s) and ``values`` V(s) on ``observations``; the teacher's π_t and V_t are
    computed here without gradient (targets: nothing of the teacher moves or keeps a graph)."""
    with torch.no_grad():
        teacher_distribution, teacher_values = policy_outputs(teacher, observations)
    kl = policy_kl(teacher_distribution, distribution)
    return kl.sum(), (values - teacher_values).square().sum()


@dataclass(frozen=True)
class Distillation:
    """A member's distillation under way (:meth:`PPOLearner.start_distillation`)."""

    teacher: ActorCriticPolicy
    """The frozen teacher policy (its own copy of the teacher's weights)."""
    state: np.ndarray
    """The teacher's flat buffer the policy holds (what a checkpoint keeps of it)."""
    hparams: Mapping[str, Any]
    """The teacher's settings (its architecture shapes the policy)."""
    start: int
    """The student's env steps when it began."""
    total_steps: int
    """The distillation's length in env steps (α's schedule: evo/core/distill.py)."""


class FrozenPolicy:
    """What :func:`evo.sb3.flat.bind_flat` needs to lay a PPO member's flat buffer onto a bare policy:
    the names PPO's ``_get_torch_save_params`` gives (the policy, then its optimizer's state)."""

    def __init__(self, policy: ActorCriticPolicy):
        self.policy = policy

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        return SB3PPO._get_torch_save_params(self)


def rollout_size(model: PPO) -> int:
    return int(model.n_steps * model.n_envs)


def set_n_minibatches(learner: SB3Learner, value: int) -> None:
    """The rollout in ``value`` minibatches of ceil(rollout / value) samples."""
    learner.model.batch_size = math.ceil(rollout_size(learner.model) / int(value))


class PPOLearner(SB3Learner):
    """A PPO member: on-policy, its state the policy and its Adam optimizer. It can be distilled
    from a teacher (:meth:`start_distillation`): distillation lives here, for PPO's categorical and diagonal
    Gaussian policies with one value head. No other learner has it (their specs do not say ``distils``, and a
    stage of theirs is refused at start-up). SAC and TD3 would need their own terms: for SAC the KL between the
    teacher's and the student's squashed (tanh) Gaussian actors (equal to their pre-tanh Gaussians' KL, tanh
    being a bijection); for TD3, whose actor is deterministic, a distance to the teacher's actions; for both the
    MSE of the critics' Q(s, a) against the teacher's (each twin critic, at the replay buffer's actions)."""

    algorithm = PPO
    custom = {"gae_lambda": set_gae_lambda, "n_minibatches": set_n_minibatches}
    readers = {
        "gae_lambda": gae_lambda_of,
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
            device=self.device,
            **self.constructor_arguments(values),
        )

    # --- distillation (BG-PBT) ------------------------------------------------------------

    distillation: Distillation | None = None
    """The distillation under way, or None."""

    def start_distillation(
        self,
        teacher_state: np.ndarray,
        teacher_hparams: Mapping[str, Any],
        total_steps: int,
        teacher_normalization: np.ndarray | None = None,
    ) -> None:
        """From the next update on, learn from a teacher as BG-PBT's students do: PPO's loss on the
        member's own rollouts plus α (½ MSE(V, V_t) + KL(π_t ‖ π)), α = ``distillation_weight``(env
        steps since now, ``total_steps``) set before each update (1 at the first, 0.05 from 80 % of
        ``total_steps`` on; it stays there until :meth:`stop_distillation`).

        ``teacher_state``: the teacher's flat weights buffer (its ``exploit_state()['weights']``, of
        a PPO member of this run); ``teacher_hparams``: its settings, whose architecture
        (``pi_layers`` ...) shapes the teacher policy, which may differ from the member's. The
        teacher is a copy, frozen (no gradient, evaluation mode): the given buffer is never
        written. ``teacher_normalization``: its VecNormalize statistics, required if the run
        normalises: the member takes them (its own are replaced), so both read the same
        normalised observations; they keep updating as the member trains, as its own would.

        The teacher is in neither the member's flat state nor its exploit state (a student's donor
        at an exploit would hand over weights, not its teacher); the member's checkpoint holds it
        (:meth:`member_state`), so a member restored during a distillation goes on distilling, α
        where it was."""
        first = distillation_weight(0, total_steps)  # refuses a non-positive length now, not at the first update
        if self.stats is not None and teacher_normalization is None:
            raise ValueError(
                f"member {self.member_id}: the run normalises observations; give the teacher's statistics "
                "(its exploit_state()['normalization']) as teacher_normalization"
            )
        if self.stats is None and teacher_normalization is not None:
            raise ValueError(
                f"member {self.member_id}: the run does not normalise; a teacher has no statistics to give"
            )
        if self.stats is not None and teacher_normalization.size != self.stats.size:
            raise ValueError(
                f"member {self.member_id}: the teacher's statistics hold {teacher_normalization.size} values, "
                f"this env's {self.stats.size}"
            )
        teacher = self.teacher_policy(teacher_state, teacher_hparams)
        if self.stats is not None:
            np.copyto(self.stats, teacher_normalization)
            load_statistics(self.normalizer, self.stats)
            renormalize_last_obs(self.model, self.normalizer)
        kept = {name: teacher_hparams[name] for name in self.spec.architecture if name in teacher_hparams}
        copy = np.array(teacher_state, dtype=np.float32, copy=True)
        self.distillation = Distillation(teacher, copy, kept, self.env_steps, int(total_steps))
        self.model.teacher, self.model.distill_coef = teacher, first

    def stop_distillation(self) -> None:
        """Drop the teacher: the next updates are PPO's own."""
        self.distillation = None
        self.model.teacher, self.model.distill_coef = None, 0.0

    def teacher_policy(self, state: np.ndarray, hparams: Mapping[str, Any]) -> ActorCriticPolicy:
        """A frozen policy of the architecture ``hparams`` give holding a copy of the flat ``state``
        (a PPO member's of that architecture), built as PPO builds its policy; its construction's
        random initialisation (overwritten) does not advance torch's global random stream, which
        samples the member's actions."""
        architecture = self.architecture_of({**self.agent.settings, **hparams})
        kwargs = policy_arguments(self.agent, self.setup.channels_last, architecture)[1]
        model = self.model
        with torch.random.fork_rng(devices=[]):
            policy = model.policy_class(
                model.observation_space,
                model.action_space,
                model.lr_schedule,
                use_sde=model.use_sde,
                precision=self.setup.precision,
                **kwargs,
            ).to(self.device)
        flat = torch.from_numpy(np.array(state, dtype=np.float32, copy=True)).to(self.device)
        try:
            bind_tensor(FrozenPolicy(policy), flat, keep=False)
        except ValueError as error:
            raise ValueError(
                f"member {self.member_id}: the teacher's state does not fit its architecture: {error}"
            ) from error
        policy.requires_grad_(False)
        policy.set_training_mode(False)
        return policy

    def train(self, steps: int, should_stop=None, schedule=(), progress=None, callback=None) -> None:
        """SB3Learner's, and while distilling, α set before each rollout (so before its update)."""
        if self.distillation is not None:
            callback = CallbackList(
                [
                    callback or training_callbacks(self, should_stop or (lambda: False), schedule, progress),
                    DistillationCallback(self.distillation.start, self.distillation.total_steps),
                ]
            )
        super().train(steps, should_stop, schedule, progress, callback)

    def rebuild(self, hparams: Mapping[str, Any], state: np.ndarray | None = None) -> None:
        """SB3Learner's; a distilling member keeps its teacher and α on the new model (whether a
        stage's students exploit each other is the stages' business)."""
        coef = self.model.distill_coef
        super().rebuild(hparams, state)
        if self.distillation is not None:
            self.model.teacher, self.model.distill_coef = self.distillation.teacher, coef

    def member_state(self, replay: bool = True) -> dict[str, Any]:
        """SB3Learner's, with the distillation under way (its teacher's buffer and settings, where it
        began, its length and α now), or None."""
        state = super().member_state(replay)
        distillation = self.distillation
        state["distillation"] = None
        if distillation is not None:
            state["distillation"] = {
                "teacher": torch.from_numpy(distillation.state.copy()),
                "hparams": dict(distillation.hparams),
                "start": distillation.start,
                "total_steps": distillation.total_steps,
                "coef": float(self.model.distill_coef),
            }
        return state

    def restore(self, payload: Mapping[str, Any]) -> str | None:
        """SB3Learner's; a member saved during a distillation goes on with the same teacher, α where
        it was (checkpoints from before teachers were kept hold none: not distilling)."""
        self.stop_distillation()
        note = super().restore(payload)
        saved = payload.get("distillation")
        if saved is not None:
            state = saved["teacher"].numpy()
            teacher = self.teacher_policy(state, saved["hparams"])
            self.distillation = Distillation(
                teacher, np.array(state), dict(saved["hparams"]), int(saved["start"]), int(saved["total_steps"])
            )
            self.model.teacher, self.model.distill_coef = teacher, float(saved["coef"])
        return note


LEARNER = PPOLearner
