"""CrossQ's SB3 side: sb3-contrib's ``CrossQ`` behind the learner interface (its settings are declared in
evo/learners/crossq.py).

What moves at an exploit is what CrossQ names as its state (``_get_torch_save_params``): the policy
(actor and critics, no target networks, with each batch-renormalisation layer's running mean and variance
and its int64 step count, buffers the flat state holds bit for bit), both Adams and the entropy coefficient
(evo/sb3/entropy.py). sb3-contrib builds its optimizers as torch's Adam with β1 0.5 (the CrossQ paper's)
when none is named; here they are ``EagerAdam`` with those betas. ``policy_delay`` is read from the model
at every gradient step. What to re-check when sb3-contrib changes: the policy's default
``optimizer_kwargs``, ``BatchRenorm``'s buffers, ``policy_delay``.
"""

from __future__ import annotations

from typing import Any

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

from sb3_contrib import CrossQ

from evo.sb3.entropy import EntropyLearner

BETAS = (0.5, 0.999)
"""sb3-contrib's Adam betas for CrossQ (its policy's default when the optimizer is torch's Adam)."""


class CrossQLearner(EntropyLearner):
    """A CrossQ member."""

    algorithm = CrossQ

    def policy_kwargs(self) -> dict[str, Any]:
        return {**super().policy_kwargs(), "optimizer_kwargs": {"betas": BETAS}}


LEARNER = CrossQLearner
