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
from evo.learners.offpolicy import check_shared, collection_steps, shared_settings
from evo.learners.spec import EnvShape, LearnerSpec, Reach, check_ranges, setting

NOISE_TYPES = ("normal", "ornstein-uhlenbeck")

SETTINGS = (
    *shared_settings(learning_rate=1e-3),
    setting(
        "policy_delay",
        int,
        2,
        "critic updates per actor and target update",
        Reach.ATTRIBUTE,
        label="policy delay",
    ),
    setting(
        "target_policy_noise",
        float,
        0.2,
        "σ of the smoothing noise on the target policy's actions",
        Reach.ATTRIBUTE,
        label="target-policy noise σ",
    ),
    setting(
        "target_noise_clip",
        float,
        0.5,
        "bound of that smoothing noise",
        Reach.ATTRIBUTE,
        label="target-noise clip",
    ),
    setting(
        "noise_type",
        str,
        None,
        "exploration noise added to the actor's actions: 'normal', 'ornstein-uhlenbeck', or null for none "
        "(rl-baselines3-zoo's key)",
        Reach.CUSTOM,
        may_be_off=True,
        label="exploration noise",
    ),
    setting(
        "noise_std",
        float,
        0.1,
        "σ of the exploration noise (rl-baselines3-zoo's key)",
        Reach.CUSTOM,
        label="exploration noise σ",
    ),
)


def check(
    settings: dict[str, Any],
    space: Mapping[str, Kind],
    n_envs: int,
    shape: EnvShape | None,
    policy: str,
    problems: list[str],
) -> None:
    check_shared(settings, space, problems)
    if settings["policy_delay"] < 1:
        problems.append(f"policy_delay {settings['policy_delay']}: must be a positive whole number")
    for name in ("target_policy_noise", "target_noise_clip", "noise_std"):
        if settings[name] < 0:
            problems.append(f"{name} {settings[name]}: must be >= 0")
    noise_type = settings["noise_type"]
    if noise_type is not None and noise_type not in NOISE_TYPES:
        problems.append(f"noise_type {noise_type!r}: use {' or '.join(NOISE_TYPES)}, or null for no noise")
    kind = space.get("noise_type")
    if kind is not None and not kind.problems("noise_type"):
        unknown = [choice for choice in getattr(kind, "choices", ()) if choice not in NOISE_TYPES]
        if unknown:
            problems.append(f"search_space.noise_type: {unknown} are not noise types; use {', '.join(NOISE_TYPES)}")
        elif noise_type is None:
            problems.append(
                "search_space.noise_type: explore it from a noise, not from none: set noise_type in the YAML to one "
                f"of {', '.join(NOISE_TYPES)}"
            )
    check_ranges(
        space,
        {
            "policy_delay": (1, math.inf, "at least 1"),
            "target_policy_noise": (0, math.inf, "positive"),
            "target_noise_clip": (0, math.inf, "positive"),
            "noise_std": (0, math.inf, "positive"),
        },
        problems,
    )


SPEC = LearnerSpec(
    name="td3",
    title="TD3",
    settings=SETTINGS,
    action_spaces=("Box",),
    default_net_arch={"pi": (400, 300), "qf": (400, 300)},
    replay=True,
    check=check,
    steps=collection_steps,
)
