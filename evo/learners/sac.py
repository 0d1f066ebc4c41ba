"""SAC's settings (Stable-Baselines3's ``SAC``), declared once. Pure; its SB3 side is evo/sb3/sac.py.

At an exploit a recipient takes the donor's networks (actor, critics, target critics), their
optimizers and, with ``ent_coef: auto``, the learned entropy coefficient and its optimizer; its
replay buffer stays its own unless --exploit-buffer copy.
"""

from __future__ import annotations

from evo.learners.entropy import check, entropy_settings
from evo.learners.offpolicy import (
    OFF_POLICY,
    actor_critic_memory,
    shared_settings,
)
from evo.learners.spec import (
    Footprint,
    LearnerContext,
    LearnerSpec,
)

SETTINGS = (*shared_settings(learning_rate=3e-4), *entropy_settings())


def memory(context: LearnerContext) -> list[Footprint]:
    """The actor (a mean and a log-std per action dimension), two critics and their targets, and the replay buffer."""
    return actor_critic_memory(context, actor_outputs=2 * context.shape.action_dims, actor_targets=0)


SPEC = LearnerSpec(
    name="sac",
    title="SAC",
    settings=SETTINGS,
    action_spaces=("Box",),
    policy_kwargs={"log_std_init": float},
    default_net_arch={"pi": (256, 256), "qf": (256, 256)},
    check=check,
    memory=memory,
    **OFF_POLICY,
)
