"""PPO's settings (Stable-Baselines3's ``PPO``), declared once. Pure; its SB3 side is evo/sb3/ppo.py.

SB3's names and defaults, and evo's own: ``n_minibatches`` (the rollout cut into that many
minibatches, instead of ``batch_size``), ``microbatch_size`` (each minibatch back-propagated in
pieces of that many samples: the same update in less memory), and DrAC's two (Raileanu et al.
2021, as the Procgen AutoRL paper tunes them): ``aug_coef``, the weight of the augmentation
regulariser in the loss (0: off, PPO's own update), and ``aug_type``, the augmentation of the frames,
one of :data:`AUG_TYPES`. DrAC augments images, so it needs a CNN policy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from evo.core.kinds import Kind
from evo.learners.onpolicy import advantage_and_sde, check_sde, gae_lambda, memory, rollout_steps
from evo.learners.spec import (
    CNN_POLICIES,
    COUNT,
    DISCOUNT,
    IMAGE_POLICIES,
    NON_NEGATIVE,
    POSITIVE,
    LearnerContext,
    LearnerSpec,
    Reach,
    Values,
    at_least,
    check_ranges,
    setting,
)

A, S, LR, D, C = Reach.ATTRIBUTE, Reach.SCHEDULE, Reach.LEARNING_RATE, Reach.DISCOUNT, Reach.CUSTOM

AUG_TYPES = ("crop", "random-conv", "grayscale", "flip", "rotate", "cutout", "cutout-color", "color-jitter")
"""DrAC's augmentations by name (the paper's eight; evo/sb3/augment.py implements them, and a test
keeps the two lists equal: this module stays free of torch)."""

N_STEPS_FIXED = (
    "it sizes the rollout buffer (n_envs * n_steps samples) that PPO allocates once and that every "
    "generation's agent_training_steps is rounded to, so changing it mid-run would reallocate the buffer and "
    "shift the members' generation boundaries; set n_steps as a fixed setting, and explore batch_size or "
    "n_minibatches instead"
)

SETTINGS = (
    setting("learning_rate", float, 3e-4, "Adam's step size", LR, label="learning rate", domain=POSITIVE),
    setting("ent_coef", float, 0.0, "entropy bonus coefficient", A, label="entropy coefficient", domain=NON_NEGATIVE),
    setting(
        "clip_range",
        float,
        0.2,
        "PPO's clip range of the probability ratio",
        S,
        label="PPO clip range",
        domain=POSITIVE,
    ),
    setting("gamma", float, 0.99, "discount factor", D, label="discount γ", domain=DISCOUNT),
    gae_lambda(0.95),
    setting("vf_coef", float, 0.5, "value-loss coefficient", A, label="value-loss coefficient", domain=NON_NEGATIVE),
    setting("n_epochs", int, 10, "epochs over each rollout", A, label="epochs per update", domain=COUNT),
    setting("batch_size", int, 64, "minibatch size", A, label="minibatch size", domain=at_least(2)),
    setting(
        "n_minibatches",
        int,
        None,
        "minibatches per epoch: batch_size = ceil(n_envs * n_steps / n_minibatches); give this or batch_size",
        C,
        label="minibatches per epoch",
        domain=COUNT,
    ),
    setting("max_grad_norm", float, 0.5, "gradient-norm clip", A, label="gradient-norm clip", domain=POSITIVE),
    setting(
        "target_kl",
        float,
        None,
        "stop an update's epochs once the approximate KL passes 1.5 x this; null: never",
        A,
        may_be_off=True,
        label="KL early-stop target",
        domain=POSITIVE,
    ),
    setting("n_steps", int, 2048, "env steps per env per rollout", why_fixed=N_STEPS_FIXED, domain=COUNT),
    *advantage_and_sde(True, "minibatch"),
    setting(
        "microbatch_size",
        int,
        0,
        "back-propagate each minibatch in pieces of this many samples (0: whole); the same update in less memory",
        why_fixed="it changes how the update is computed, not what it computes",
        free_on_resume=True,
        domain=NON_NEGATIVE,
    ),
    setting(
        "aug_coef",
        float,
        0.0,
        "DrAC's weight of the augmentation regulariser in the loss (0: off, PPO's own update); image "
        "observations only (policy impala or nature)",
        A,
        label="DrAC coefficient",
        domain=NON_NEGATIVE,
    ),
    setting(
        "aug_type",
        str,
        "crop",
        f"DrAC's augmentation of the frames: {', '.join(AUG_TYPES)}",
        A,
        label="DrAC augmentation",
        domain=Values(AUG_TYPES),
    ),
)


def check(context: LearnerContext, problems: list[str]) -> None:
    """PPO's rules across its settings (each value's own range is its domain, checked before): a batch
    size within the rollout (from ``n_minibatches`` if given), search ranges within the rollout, gSDE
    with continuous actions only, and DrAC's (:func:`check_drac`)."""
    settings, space = context.settings, context.space
    rollout = max(1, context.n_envs * settings["n_steps"])
    if settings["n_minibatches"] is not None:
        settings["batch_size"] = rollout // settings["n_minibatches"]
    if not (2 <= settings["batch_size"] <= rollout):
        problems.append(
            f"batch_size {settings['batch_size']}: must be between 2 and n_envs * n_steps = {rollout}; "
            "set batch_size or n_minibatches in the YAML"
        )
    settings["n_minibatches"] = math.ceil(rollout / max(settings["batch_size"], 1))
    if "batch_size" in space and "n_minibatches" in space:
        problems.append(
            "search_space gives both batch_size and n_minibatches; they say the same thing (n_minibatches = "
            "n_envs * n_steps / batch_size): explore one of them"
        )
    check_ranges(
        space,
        {
            "batch_size": (2, rollout, f"between 2 and n_envs * n_steps = {rollout}"),
            "n_minibatches": (1, rollout // 2, f"between 1 and n_envs * n_steps / 2 = {rollout // 2}"),
        },
        problems,
    )
    check_sde(settings, context.shape, problems)
    check_drac(settings, space, context.policy, problems)


def check_drac(settings: Mapping[str, Any], space: Mapping[str, Kind], policy: str, problems: list[str]) -> None:
    """DrAC's rules across settings (a known augmentation and a weight >= 0 are their domains): an
    explored augmentation needs DrAC on, and DrAC a policy that reads images (it augments frames)."""
    aug_coef = settings["aug_coef"]
    if "aug_type" in space and aug_coef == 0 and "aug_coef" not in space:
        problems.append(
            "search_space.aug_type: DrAC is off (aug_coef 0), so no augmentation is used; set aug_coef > 0 (e.g. "
            "0.1) or explore aug_coef too"
        )
    drac = aug_coef > 0 or "aug_coef" in space or "aug_type" in space
    if drac and policy not in CNN_POLICIES and policy in IMAGE_POLICIES:
        problems.append(
            f"DrAC (aug_coef {aug_coef}{', explored' if 'aug_coef' in space or 'aug_type' in space else ''}) needs "
            f"image observations: it augments frames, and policy {policy!r} reads vectors; train a CNN policy "
            f"({' or '.join(CNN_POLICIES)}) on an image env such as a Procgen game, or set aug_coef: 0 and leave "
            "aug_coef and aug_type out of the search space"
        )


def upgrade(recorded: dict[str, Any]) -> None:
    """A run recorded before the learners kept the batch size only; n_minibatches is resolved now."""
    if recorded.get("n_minibatches") is None:
        rollout = recorded["n_envs"] * recorded["n_steps"]
        recorded["n_minibatches"] = math.ceil(rollout / max(recorded["batch_size"], 1))


SPEC = LearnerSpec(
    name="ppo",
    title="PPO",
    settings=SETTINGS,
    action_spaces=("Box", "Discrete", "MultiDiscrete", "MultiBinary"),
    policies=IMAGE_POLICIES,
    policy_kwargs={"ortho_init": bool, "log_std_init": float},
    default_net_arch={"pi": (64, 64), "vf": (64, 64)},
    precisions=("fp32", "bf16"),
    distils=True,
    check=check,
    steps=rollout_steps,
    memory=memory,
    upgrade=upgrade,
    exclusive=(("batch_size", "n_minibatches"),),
)
