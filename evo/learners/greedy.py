"""What the ε-greedy Q-learners (SB3's DQN, sb3-contrib's QR-DQN) share, declared once: their settings
beside the off-policy ones, their rules and their memory. Pure; their SB3 side is evo/sb3/greedy.py.

**The exploration schedule follows the member.** ε falls linearly from ``exploration_initial_eps`` to
``exploration_final_eps`` over the first ``exploration_fraction`` of the env steps a member trains in all
(its generations times its steps per generation: zoo's ``n_timesteps`` in its blocks), read from the
member's own env-step counter. SB3 reads the fraction of *one* ``learn()``, and evo calls ``learn()``
once per generation. At an exploit a recipient takes its donor's Q-network and target network and keeps
its own counter, so its place on the schedule stays its own, as its replay buffer does; a new
``exploration_final_eps`` (or fraction) takes effect from its next env step.
"""

from __future__ import annotations

import math

from evo.learners.offpolicy import check_shared, replay_footprint, shared_settings
from evo.learners.spec import (
    COUNT,
    FLOAT32,
    FRACTION,
    POSITIVE,
    TRAINED,
    Footprint,
    Interval,
    LearnerContext,
    Reach,
    check_ranges,
    mlp_parameters,
    networks_footprint,
    setting,
)


def greedy_settings(
    learning_rate: float, exploration_fraction: float, exploration_final_eps: float, max_grad_norm: float | None
) -> tuple:
    """The off-policy settings with SB3's DQN defaults (targets copied whole every
    ``target_update_interval`` env steps, minibatches of 32 every 4 env steps), and ε-greedy exploration."""
    return (
        *shared_settings(learning_rate, tau=1.0, batch_size=32, train_freq=4),
        setting(
            "target_update_interval",
            int,
            10000,
            "env steps between target-network updates (each a Polyak step of tau; tau 1 copies the network)",
            Reach.ATTRIBUTE,
            label="target update interval",
            domain=COUNT,
        ),
        setting(
            "exploration_fraction",
            float,
            exploration_fraction,
            "the fraction of a member's env steps in all over which ε falls from its initial to its final value",
            Reach.CUSTOM,
            label="exploration fraction",
            domain=Interval(0, 1, low_open=True),
        ),
        setting(
            "exploration_initial_eps",
            float,
            1.0,
            "ε, the probability of a random action, at a member's first env step",
            Reach.CUSTOM,
            label="initial ε",
            domain=FRACTION,
        ),
        setting(
            "exploration_final_eps",
            float,
            exploration_final_eps,
            "ε once exploration_fraction of a member's env steps have passed",
            Reach.CUSTOM,
            label="final ε",
            domain=FRACTION,
        ),
        setting(
            "max_grad_norm",
            float,
            max_grad_norm,
            "gradient-norm clip" + ("" if max_grad_norm is not None else "; null: none"),
            Reach.ATTRIBUTE,
            may_be_off=max_grad_norm is None,
            label="gradient-norm clip",
            domain=POSITIVE,
        ),
    )


def check(context: LearnerContext, problems: list[str]) -> None:
    """The off-policy rules; an ε or a target interval explored from 0 would stay there."""
    settings, space = context.settings, context.space
    check_shared(settings, space, problems)
    trap = "positive (a perturbation multiplies: a member at 0 would stay there)"
    check_ranges(space, {"exploration_final_eps": (0, 1, f"{trap} and at most 1")}, problems)
    check_ranges(space, {"target_update_interval": (1, math.inf, "at least 1")}, problems)


def q_memory(context: LearnerContext, outputs_per_action: int = 1) -> list[Footprint]:
    """The Q-network (at least one action's ``outputs_per_action`` outputs: the space's size is not known
    here) and its target, and the replay buffer."""
    net_arch = context.net_arch
    network = mlp_parameters(context.inputs, net_arch["qf"], outputs_per_action)
    return [networks_footprint(net_arch, network * TRAINED + network * FLOAT32), replay_footprint(context)]
