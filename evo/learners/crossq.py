"""CrossQ's settings (sb3-contrib's ``CrossQ``: Bhatt et al. 2024, batch-renormalised critics without target
networks), declared once. Pure; its SB3 side is evo/sb3/crossq.py.

sb3-contrib's names and defaults: the off-policy settings but ``tau`` (no target networks), SAC's
entropy coefficient and its target (evo/learners/entropy.py), ``policy_delay`` (critic updates per actor
update), and in ``policy_kwargs`` the batch renormalisation's ``batch_norm_momentum`` (0.01) and
``renorm_warmup_steps`` (100,000: its batch steps on batch statistics alone). At an exploit a recipient
takes the donor's actor and critics with their batch-renormalisation statistics (running mean, variance
and step count: the step count an int64, moved bit for bit), both Adams and, with ``ent_coef: auto``, the
learned entropy coefficient and its Adam.
"""

from __future__ import annotations

from evo.learners.entropy import check, entropy_settings
from evo.learners.offpolicy import (
    OFF_POLICY,
    actor_critic_memory,
    shared_settings,
)
from evo.learners.spec import COUNT, Footprint, LearnerContext, LearnerSpec, Reach, setting

SETTINGS = (
    *shared_settings(learning_rate=1e-3, tau=None),
    *entropy_settings(target_update_interval=False),
    setting(
        "policy_delay",
        int,
        3,
        "critic updates per actor update",
        Reach.ATTRIBUTE,
        label="policy delay",
        domain=COUNT,
    ),
)


def memory(context: LearnerContext) -> list[Footprint]:
    """The actor (a mean and a log-std per action dimension) and two critics, no target networks, and the
    replay buffer."""
    return actor_critic_memory(context, 2 * context.shape.action_dims, actor_targets=0, critic_targets=False)


SPEC = LearnerSpec(
    name="crossq",
    title="CrossQ",
    settings=SETTINGS,
    action_spaces=("Box",),
    policy_kwargs={"log_std_init": float, "use_expln": bool, "batch_norm_momentum": float, "renorm_warmup_steps": int},
    default_net_arch={"pi": (256, 256), "qf": (1024, 1024)},
    check=check,
    memory=memory,
    **OFF_POLICY,
)
