"""What SB3's on-policy learners (PPO, A2C) share, declared once: GAE's λ, the advantage's
normalisation and gSDE (settings and rule), the rollout a generation's budget is rounded to, and the
memory of the networks and the rollout buffer. Pure; their SB3 side is
evo/sb3/onpolicy.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evo.learners.spec import (
    COUNT,
    FLOAT32,
    FRACTION,
    TRAINED,
    EnvShape,
    Footprint,
    LearnerContext,
    Reach,
    Setting,
    Values,
    mlp_parameters,
    networks_footprint,
    setting,
)


def gae_lambda(default: float) -> Setting:
    """GAE's λ, with the learner's default (PPO 0.95, A2C 1: plain n-step returns)."""
    return setting("gae_lambda", float, default, "GAE's λ", Reach.CUSTOM, label="GAE λ", domain=FRACTION)


def advantage_and_sde(normalize_advantage: bool, per: str) -> tuple[Setting, ...]:
    """The advantage's normalisation (the learner's default, ``per`` "minibatch" or "rollout") and
    generalised state-dependent exploration, as SB3 names them."""
    return (
        setting(
            "normalize_advantage",
            bool,
            normalize_advantage,
            f"normalise the advantages of each {per}",
            why_fixed="a switch of the loss, not a value to tune",
        ),
        setting(
            "use_sde",
            bool,
            False,
            "generalised state-dependent exploration (continuous actions)",
            why_fixed="it shapes the policy",
        ),
        setting(
            "sde_sample_freq",
            int,
            -1,
            "with gSDE, a new noise matrix every this many steps (-1: at each rollout's start only)",
            why_fixed="not tuned by evo",
            domain=COUNT | Values((-1,)),
        ),
    )


def check_sde(settings: Mapping[str, Any], shape: EnvShape | None, problems: list[str]) -> None:
    """gSDE needs continuous actions."""
    if settings["use_sde"] and shape is not None and shape.action_space != "Box":
        problems.append(
            f"use_sde: gSDE explores continuous actions, and this env's are {shape.action_space}; set use_sde: false"
        )


def rollout_steps(settings: Mapping[str, Any], n_envs: int) -> int:
    """Env steps collected per update (n_envs * n_steps): a generation's budget is rounded up to them."""
    return n_envs * settings["n_steps"]


def memory(context: LearnerContext) -> list[Footprint]:
    """The policy and value networks (one output per action dimension: a lower bound for discrete
    actions' logits), and SB3's rollout buffer: per env step an observation in the space's dtype, an
    action, and six float32 values (reward, return, episode start, value, log-probability, advantage)."""
    net_arch, inputs, shape = context.net_arch, context.inputs, context.shape
    actions = shape.action_dims
    parameters = mlp_parameters(inputs, net_arch["pi"], actions) + mlp_parameters(inputs, net_arch["vf"], 1)
    steps = context.n_envs * context.settings["n_steps"]
    step = shape.observation_dims * shape.observation_itemsize + actions * FLOAT32 + 6 * FLOAT32
    rollout = Footprint(f"rollout buffer {steps} x {step} bytes", steps * step, "a smaller n_steps or n_envs")
    return [networks_footprint(net_arch, parameters * TRAINED), rollout]
