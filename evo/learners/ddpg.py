"""DDPG's settings (Stable-Baselines3's ``DDPG``), declared once. Pure; its SB3 side is evo/sb3/ddpg.py.

SB3's DDPG is its TD3 with one critic, the actor updated at every critic update and no target-policy
smoothing: the off-policy settings, and zoo's two for the exploration noise (``noise_type``,
``noise_std``: TD3's, evo/learners/td3.py). At an exploit a recipient takes the donor's actor, critic,
their target networks and both Adams; its replay buffer and its exploration noise stay its own.
"""

from __future__ import annotations

from evo.learners.offpolicy import (
    OFF_POLICY,
    actor_critic_memory,
    check_shared,
    shared_settings,
)
from evo.learners.spec import Footprint, LearnerContext, LearnerSpec
from evo.learners.td3 import NOISE_SETTINGS, check_noise


def check(context: LearnerContext, problems: list[str]) -> None:
    settings, space = context.settings, context.space
    check_shared(settings, space, problems)
    check_noise(settings, space, problems)


def memory(context: LearnerContext) -> list[Footprint]:
    """The actor and its target, one critic and its target, and the replay buffer."""
    return actor_critic_memory(context, context.shape.action_dims, actor_targets=1, critics=1)


SPEC = LearnerSpec(
    name="ddpg",
    title="DDPG",
    settings=(*shared_settings(learning_rate=1e-3), *NOISE_SETTINGS),
    action_spaces=("Box",),
    default_net_arch={"pi": (400, 300), "qf": (400, 300)},
    check=check,
    memory=memory,
    **OFF_POLICY,
)
