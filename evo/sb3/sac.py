"""SAC's SB3 side: SB3's ``SAC`` behind the learner interface (its settings are declared in
evo/learners/sac.py).

What moves at an exploit is what SAC names as its state (``_get_torch_save_params``): the
policy (actor, critics, target critics), the actor's and the critics' Adam, and with
``ent_coef: auto`` the learned ``log_ent_coef`` and its Adam; the replay buffer stays the
recipient's unless ``--exploit-buffer copy`` (evo/sb3/offpolicy.py). ``target_entropy`` reaches the
model, and every optimizer is an ``EagerAdam``, as for every maximum-entropy learner (evo/sb3/entropy.py).
"""

from __future__ import annotations

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

from stable_baselines3 import SAC

from evo.sb3.entropy import EntropyLearner


class SACLearner(EntropyLearner):
    """A SAC member."""

    algorithm = SAC


LEARNER = SACLearner
