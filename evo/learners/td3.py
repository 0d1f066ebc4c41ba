"""TD3's settings (Stable-Baselines3's ``TD3``), declared once. Pure; its SB3 side is evo/sb3/td3.py.

SB3's names and defaults, and rl-baselines3-zoo's two for the exploration noise SB3 takes as an
object: ``noise_type`` ('normal' or 'ornstein-uhlenbeck'; null: none) and ``noise_std`` (its σ).
At an exploit a recipient takes the donor's actor, critics, their target networks and both Adam
optimizers; its replay buffer and its exploration noise stay its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from evo.core.kinds import Kind
from evo.learners.offpolicy import (
    OFF_POLICY,
    actor_critic_memory,
    check_shared,
    shared_settings,
)
from evo.learners.spec import (
    COUNT,
    NON_NEGATIVE,
    Footprint,
    LearnerContext,
    LearnerSpec,
    Reach,
    Values,
    check_ranges,
    setting,
)

NOISE_TYPES = ("normal", "ornstein-uhlenbeck")

NOISE_SETTINGS = (
    setting(
        "noise_type",
        str,
        None,
        "exploration noise added to the actor's actions: 'normal', 'ornstein-uhlenbeck', or null for none "
        "(rl-baselines3-zoo's key)",
        Reach.CUSTOM,
        may_be_off=True,
        label="exploration noise",
        domain=Values(NOISE_TYPES),
    ),
    setting(
        "noise_std",
        float,
        0.1,
        "σ of the exploration noise (rl-baselines3-zoo's key)",
        Reach.CUSTOM,
        label="exploration noise σ",
        domain=NON_NEGATIVE,
    ),
)
"""The exploration noise's two settings, zoo's names (DDPG's too)."""

SETTINGS = (
    *shared_settings(learning_rate=1e-3),
    setting(
        "policy_delay",
        int,
        2,
        "critic updates per actor and target update",
        Reach.ATTRIBUTE,
        label="policy delay",
        domain=COUNT,
    ),
    setting(
        "target_policy_noise",
        float,
        0.2,
        "σ of the smoothing noise on the target policy's actions",
        Reach.ATTRIBUTE,
        label="target-policy noise σ",
        domain=NON_NEGATIVE,
    ),
    setting(
        "target_noise_clip",
        float,
        0.5,
        "bound of that smoothing noise",
        Reach.ATTRIBUTE,
        label="target-noise clip",
        domain=NON_NEGATIVE,
    ),
    *NOISE_SETTINGS,
)


def check(context: LearnerContext, problems: list[str]) -> None:
    settings, space = context.settings, context.space
    check_shared(settings, space, problems)
    check_noise(settings, space, problems)
    trap = "positive (a perturbation multiplies: a member at 0 would stay there)"
    check_ranges(space, {name: (0, math.inf, trap) for name in ("target_policy_noise", "target_noise_clip")}, problems)


def check_noise(settings: Mapping[str, Any], space: Mapping[str, Kind], problems: list[str]) -> None:
    """The exploration noise's rules (TD3's and DDPG's): explored from a noise, its σ from above 0."""
    if "noise_type" in space and settings["noise_type"] is None:
        problems.append(
            "search_space.noise_type: explore it from a noise, not from none: set noise_type in the YAML to one "
            f"of {', '.join(NOISE_TYPES)}"
        )
    trap = "positive (a perturbation multiplies: a member at 0 would stay there)"
    check_ranges(space, {"noise_std": (0, math.inf, trap)}, problems)


def memory(context: LearnerContext) -> list[Footprint]:
    """The actor and its target, two critics and their targets, and the replay buffer."""
    return actor_critic_memory(context, actor_outputs=context.shape.action_dims, actor_targets=1)


SPEC = LearnerSpec(
    name="td3",
    title="TD3",
    settings=SETTINGS,
    action_spaces=("Box",),
    default_net_arch={"pi": (400, 300), "qf": (400, 300)},
    check=check,
    memory=memory,
    **OFF_POLICY,
)
