"""The settings SB3's off-policy learners share (``OffPolicyAlgorithm``: SAC, TD3), declared once,
and their rules. Pure; their SB3 side is evo/sb3/offpolicy.py."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from evo.core.kinds import Kind
from evo.learners.spec import Reach, check_ranges, setting

A, LR, D, C = Reach.ATTRIBUTE, Reach.LEARNING_RATE, Reach.DISCOUNT, Reach.CUSTOM

BUFFER_FIXED = "it sizes the replay buffer, allocated once when the member is built"
N_STEPS_FIXED = "the replay buffer computes n-step returns with it from the start: it cannot change mid-run"


def shared_settings(learning_rate: float) -> tuple:
    """The settings of every off-policy learner, with the learner's own default learning rate."""
    return (
        setting("learning_rate", float, learning_rate, "Adam's step size (every optimizer)", LR, label="learning rate"),
        setting("gamma", float, 0.99, "discount factor", D, label="discount γ"),
        setting("tau", float, 0.005, "soft (Polyak) update coefficient of the target networks", A, label="τ (Polyak)"),
        setting("batch_size", int, 256, "minibatch size of each gradient step", A, label="minibatch size"),
        setting(
            "train_freq",
            int,
            1,
            "update the model every this many env steps (per env)",
            C,
            label="env steps between updates",
        ),
        setting(
            "gradient_steps",
            int,
            1,
            "gradient steps after each collection; -1: as many as env steps collected (an update-to-data ratio of 1)",
            A,
            label="gradient steps per update",
        ),
        setting("buffer_size", int, 1_000_000, "replay buffer size (transitions)", why_fixed=BUFFER_FIXED),
        setting(
            "learning_starts",
            int,
            100,
            "env steps before the first update",
            why_fixed="it only matters before the first update",
        ),
        setting("n_steps", int, 1, "n-step returns for the Q targets (1: one-step TD)", why_fixed=N_STEPS_FIXED),
        setting(
            "optimize_memory_usage",
            bool,
            False,
            "SB3's memory-efficient replay buffer (next observations not stored twice)",
            why_fixed="it shapes the replay buffer",
        ),
    )


def check_shared(settings: dict[str, Any], space: Mapping[str, Kind], problems: list[str]) -> None:
    """The off-policy rules: positive sizes and counts, tau in (0, 1], and search ranges an update can run."""
    for name in ("batch_size", "train_freq", "buffer_size", "n_steps"):
        if settings[name] < 1:
            problems.append(f"{name} {settings[name]}: must be a positive whole number")
    if settings["gradient_steps"] < -1:
        problems.append(
            f"gradient_steps {settings['gradient_steps']}: give a number of gradient steps, or -1 for as many as "
            "env steps collected"
        )
    if settings["learning_starts"] < 0:
        problems.append(f"learning_starts {settings['learning_starts']}: must be >= 0")
    if not 0 < settings["tau"] <= 1:
        problems.append(f"tau {settings['tau']}: must be in (0, 1] (1 copies the networks into the targets)")
    if settings["optimize_memory_usage"]:
        problems.append(
            "optimize_memory_usage: evo's replay buffers keep next observations (they travel and are checkpointed "
            "as plain arrays); set it false"
        )
    check_ranges(
        space,
        {
            "batch_size": (1, math.inf, "at least 1"),
            "train_freq": (1, math.inf, "at least 1"),
            "gradient_steps": (1, math.inf, "at least 1"),
            "tau": (0, 1, "in (0, 1]"),
            "learning_rate": (0, math.inf, "positive"),
        },
        problems,
    )


def collection_steps(settings: Mapping[str, Any], n_envs: int) -> int:
    """Env steps of one collection (train_freq steps of every env): a budget is rounded up to them."""
    return n_envs * settings["train_freq"]
