"""TQC's settings (sb3-contrib's ``TQC``: Kuznetsov et al. 2020's truncated quantile critics), declared
once. Pure; its SB3 side is evo/sb3/tqc.py.

sb3-contrib's names and defaults: SAC's (the off-policy settings, the entropy coefficient and its target:
evo/learners/entropy.py), ``top_quantiles_to_drop_per_net`` (how many of each critic's top quantiles the
target leaves out: TQC's control of overestimation), and in ``policy_kwargs`` ``n_quantiles`` (25) and
``n_critics`` (2). At an exploit a recipient takes the donor's actor, critics, target critics, both Adams
and, with ``ent_coef: auto``, the learned entropy coefficient and its Adam (a fixed one: its tensor).
"""

from __future__ import annotations

from evo.learners.entropy import check, entropy_settings
from evo.learners.offpolicy import (
    OFF_POLICY,
    actor_critic_memory,
    shared_settings,
)
from evo.learners.spec import NON_NEGATIVE, Footprint, LearnerContext, LearnerSpec, Reach, setting

QUANTILES, CRITICS = 25, 2
"""sb3-contrib's defaults: quantiles per critic, critics."""

SETTINGS = (
    *shared_settings(learning_rate=3e-4),
    *entropy_settings(),
    setting(
        "top_quantiles_to_drop_per_net",
        int,
        2,
        "the top quantiles of each critic the target leaves out (fewer than n_quantiles)",
        Reach.ATTRIBUTE,
        label="quantiles dropped per critic",
        domain=NON_NEGATIVE,
    ),
)


def memory(context: LearnerContext) -> list[Footprint]:
    """The actor (a mean and a log-std per action dimension), the critics of sb3-contrib's defaults (each
    ``QUANTILES`` quantiles out) and their targets, and the replay buffer."""
    return actor_critic_memory(
        context, 2 * context.shape.action_dims, actor_targets=0, critics=CRITICS, critic_outputs=QUANTILES
    )


SPEC = LearnerSpec(
    name="tqc",
    title="TQC",
    settings=SETTINGS,
    action_spaces=("Box",),
    policy_kwargs={"log_std_init": float, "n_quantiles": int, "n_critics": int},
    default_net_arch={"pi": (256, 256), "qf": (256, 256)},
    check=check,
    memory=memory,
    **OFF_POLICY,
)
