"""DDPG's settings (Stable-Baselines3's ``DDPG``), declared once. Pure; its SB3 side is evo/sb3/ddpg.py.

SB3's DDPG is its TD3 with one critic, the actor updated at every critic update and no target-policy
smoothing: the off-policy settings, and zoo's two for the exploration noise (``noise_type``,
``noise_std``: TD3's, evo/learners/td3.py). At an exploit a recipient takes the donor's actor, critic,
their target networks and both Adams; its replay buffer and its exploration noise stay its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evo.core.kinds import Kind
from evo.learners.offpolicy import (
    actor_critic_memory,
    budget_notes,
    check_shared,
    collection_steps,
    replay_footprint,
    shared_settings,
)
from evo.learners.spec import EnvShape, Footprint, LearnerSpec
from evo.learners.td3 import NOISE_SETTINGS, check_noise


def check(
    settings: dict[str, Any],
    space: Mapping[str, Kind],
    n_envs: int,
    shape: EnvShape | None,
    policy: str,
    problems: list[str],
) -> None:
    check_shared(settings, space, problems)
    check_noise(settings, space, problems)


def memory(
    settings: Mapping[str, Any], net_arch: Mapping[str, Sequence[int]], inputs: int, n_envs: int, shape: EnvShape
) -> list[Footprint]:
    """The actor and its target, one critic and its target, and the replay buffer."""
    networks = actor_critic_memory(net_arch, inputs, shape, shape.action_dims, actor_targets=1, critics=1)
    return [networks, replay_footprint(settings, n_envs, shape)]


SPEC = LearnerSpec(
    name="ddpg",
    title="DDPG",
    settings=(*shared_settings(learning_rate=1e-3), *NOISE_SETTINGS),
    action_spaces=("Box",),
    default_net_arch={"pi": (400, 300), "qf": (400, 300)},
    replay=True,
    check=check,
    steps=collection_steps,
    memory=memory,
    notes=budget_notes,
)
