"""The settings SB3's off-policy learners share (``OffPolicyAlgorithm``: SAC, TD3), declared once,
and their rules. Pure; their SB3 side is evo/sb3/offpolicy.py."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from evo.core.kinds import Kind
from evo.learners.spec import (
    COUNT,
    DISCOUNT,
    FLOAT32,
    NON_NEGATIVE,
    POSITIVE,
    TRAINED,
    Footprint,
    Interval,
    LearnerContext,
    Reach,
    Values,
    check_ranges,
    mlp_parameters,
    networks_footprint,
    setting,
)

A, LR, D, C = Reach.ATTRIBUTE, Reach.LEARNING_RATE, Reach.DISCOUNT, Reach.CUSTOM

BUFFER_FIXED = "it sizes the replay buffer, allocated once when the member is built"
N_STEPS_FIXED = "the replay buffer computes n-step returns with it from the start: it cannot change mid-run"


def shared_settings(
    learning_rate: float,
    tau: float | None = 0.005,
    batch_size: int = 256,
    train_freq: int = 1,
    learning_starts: int = 100,
) -> tuple:
    """The settings of every off-policy learner, with the learner's own defaults (SB3's differ: DQN's
    targets are copied whole, tau 1, from minibatches of 32 every 4 env steps; ``tau`` None: a learner
    without target networks, CrossQ)."""
    found = (
        setting(
            "learning_rate",
            float,
            learning_rate,
            "Adam's step size (every optimizer)",
            LR,
            label="learning rate",
            domain=POSITIVE,
        ),
        setting("gamma", float, 0.99, "discount factor", D, label="discount γ", domain=DISCOUNT),
        setting(
            "tau",
            float,
            tau,
            "soft (Polyak) update coefficient of the target networks (1 copies the networks into the targets)",
            A,
            label="τ (Polyak)",
            domain=Interval(0, 1, low_open=True),
        ),
        setting(
            "batch_size",
            int,
            batch_size,
            "minibatch size of each gradient step",
            A,
            label="minibatch size",
            domain=COUNT,
        ),
        setting(
            "train_freq",
            int,
            train_freq,
            "update the model every this many env steps (per env)",
            C,
            label="env steps between updates",
            domain=COUNT,
        ),
        setting(
            "gradient_steps",
            int,
            1,
            "gradient steps after each collection; -1: as many as env steps collected (an update-to-data ratio of 1)",
            A,
            label="gradient steps per update",
            domain=COUNT | Values((-1,)),
        ),
        setting(
            "buffer_size", int, 1_000_000, "replay buffer size (transitions)", why_fixed=BUFFER_FIXED, domain=COUNT
        ),
        setting(
            "learning_starts",
            int,
            learning_starts,
            "env steps before the first update",
            why_fixed="it only matters before the first update",
            domain=NON_NEGATIVE,
        ),
        setting(
            "n_steps",
            int,
            1,
            "n-step returns for the Q targets (1: one-step TD)",
            why_fixed=N_STEPS_FIXED,
            domain=COUNT,
        ),
        setting(
            "optimize_memory_usage",
            bool,
            False,
            "SB3's memory-efficient replay buffer (next observations not stored twice)",
            why_fixed="it shapes the replay buffer",
        ),
    )
    return tuple(declared for declared in found if declared.name != "tau" or tau is not None)


def check_shared(settings: dict[str, Any], space: Mapping[str, Kind], problems: list[str]) -> None:
    """The off-policy rules across settings (each value's own range is its domain, checked before): the
    replay buffer evo keeps, and gradient steps explored as counts."""
    if settings["optimize_memory_usage"]:
        problems.append(
            "optimize_memory_usage: evo's replay buffers keep next observations (they travel and are checkpointed "
            "as plain arrays); set it false"
        )
    check_ranges(
        space, {"gradient_steps": (1, math.inf, "at least 1 (-1, as many as collected, is not a count)")}, problems
    )


def replay_footprint(context: LearnerContext) -> Footprint:
    """SB3's ``ReplayBuffer`` (``optimize_memory_usage`` off, as evo keeps it): ``buffer_size`` rows (a
    whole number per env) of an observation and the next one in the observation space's dtype, an action
    in float32 (SB3 casts float64 actions down), and a float32 reward, done and timeout."""
    n_envs, shape = context.n_envs, context.shape
    rows = max(context.settings["buffer_size"] // n_envs, 1) * n_envs
    row = 2 * shape.observation_dims * shape.observation_itemsize + shape.action_dims * FLOAT32 + 3 * FLOAT32
    return Footprint(f"replay buffer {rows} x {row} bytes", rows * row, "a smaller buffer_size")


def actor_critic_memory(
    context: LearnerContext,
    actor_outputs: int,
    actor_targets: int,
    critics: int = 2,
    critic_outputs: int = 1,
    critic_targets: bool = True,
) -> list[Footprint]:
    """An actor (``pi``, with ``actor_outputs`` outputs, and ``actor_targets`` target copies of it) and
    ``critics`` critics (``qf``: the observation and the action in, ``critic_outputs`` values out: SB3's two
    Q values; DDPG's one; TQC's quantiles) with their targets (none without ``critic_targets``: CrossQ); and
    the replay buffer (:func:`replay_footprint`)."""
    net_arch, inputs, actions = context.net_arch, context.inputs, context.shape.action_dims
    actor = mlp_parameters(inputs, net_arch["pi"], actor_outputs)
    critic = critics * mlp_parameters(inputs + actions, net_arch["qf"], critic_outputs)
    trained, kept = actor + critic, actor_targets * actor + (critic if critic_targets else 0)
    return [networks_footprint(net_arch, trained * TRAINED + kept * FLOAT32), replay_footprint(context)]


def budget_notes(settings: Mapping[str, Any], env_steps: int) -> list[str]:
    """A member whose budget never passes ``learning_starts`` acts at random for all of it and learns nothing."""
    starts = int(settings["learning_starts"])
    if env_steps > starts:
        return []
    return [
        f"each member trains {env_steps} env steps in all and learning_starts is {starts}: no member passes it, so "
        "every one acts at random and never updates; give more env steps (--total-generations, --agent-training-steps) "
        f"or a smaller learning_starts (e.g. --hyperparams learning_starts:{max(env_steps // 10, 1)})"
    ]


def collection_steps(settings: Mapping[str, Any], n_envs: int) -> int:
    """Env steps of one collection (train_freq steps of every env): a budget is rounded up to them."""
    return n_envs * settings["train_freq"]


OFF_POLICY = {"replay": True, "steps": collection_steps, "notes": budget_notes}
"""The fields of a LearnerSpec every off-policy learner shares: a replay buffer, a budget in whole collections,
and the note on a budget that never passes ``learning_starts``."""
