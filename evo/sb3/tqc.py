"""TQC's SB3 side: sb3-contrib's ``TQC`` behind the learner interface (its settings are declared in
evo/learners/tqc.py). What moves at an exploit is what TQC names as its state (``_get_torch_save_params``):
the policy (actor, quantile critics, their targets), both Adams and the entropy coefficient (learned: its
log and its Adam; fixed: its tensor); ``target_entropy`` and the optimizers as for every maximum-entropy
learner (evo/sb3/entropy.py). ``top_quantiles_to_drop_per_net`` is read from the model at every gradient
step. What to re-check when sb3-contrib changes: that attribute, and evo/sb3/entropy.py's list."""

from __future__ import annotations

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

from sb3_contrib import TQC

from evo.sb3.entropy import EntropyLearner


class TQCLearner(EntropyLearner):
    """A TQC member."""

    algorithm = TQC


LEARNER = TQCLearner
