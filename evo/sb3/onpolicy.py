"""What SB3's on-policy learners (PPO, A2C) share on the SB3 side: GAE's λ reaching the update.

SB3 copies ``gae_lambda`` into the rollout buffer when it builds the model, and the buffer computes the
advantages with its own copy: a new value goes into both. What to re-check when SB3 changes: the rollout
buffer's ``gae_lambda``.
"""

from __future__ import annotations

from evo.sb3.learner import SB3Learner


def set_gae_lambda(learner: SB3Learner, value: float) -> None:
    learner.model.gae_lambda = float(value)
    learner.model.rollout_buffer.gae_lambda = float(value)


def gae_lambda_of(learner: SB3Learner) -> float:
    """The λ the advantages are computed with: the rollout buffer's."""
    return float(learner.model.rollout_buffer.gae_lambda)
