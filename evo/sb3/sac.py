"""SAC's SB3 side: SB3's ``SAC`` behind the learner interface (its settings are declared in
evo/learners/sac.py).

What moves at an exploit is what SAC names as its state (``_get_torch_save_params``): the
policy (actor, critics, target critics), the actor's and the critics' Adam, and with
``ent_coef: auto`` the learned ``log_ent_coef`` and its Adam; the replay buffer stays the
recipient's unless ``--exploit-buffer copy`` (evo/sb3/offpolicy.py).

SAC's own way for a value to reach the update: ``target_entropy``, which SB3 resolves from
'auto' when it builds the model and reads from the model at every gradient step, is set there.
SB3 builds the entropy coefficient's optimizer as torch's Adam; it is replaced here by
:class:`~evo.sb3.optimizer.EagerAdam` (the same arithmetic, without importing torch._dynamo).
What to re-check when SB3 changes: ``target_entropy``, ``ent_coef_optimizer`` and
``_get_torch_save_params``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

from stable_baselines3 import SAC

from evo.sb3.learner import SB3Learner
from evo.sb3.offpolicy import OffPolicyLearner
from evo.sb3.optimizer import EagerAdam


def set_target_entropy(learner: SB3Learner, value: float) -> None:
    learner.model.target_entropy = float(value)


class SACLearner(OffPolicyLearner):
    """A SAC member."""

    held_arguments = (*OffPolicyLearner.held_arguments, "target_entropy")  # 'auto' resolved

    algorithm = SAC
    custom = {**OffPolicyLearner.custom, "target_entropy": set_target_entropy}
    readers = {**OffPolicyLearner.readers, "target_entropy": lambda learner: float(learner.model.target_entropy)}

    def policy_kwargs(self) -> dict[str, Any]:
        return {**super().policy_kwargs(), "optimizer_class": EagerAdam}

    def build_model(self, env, values: Mapping[str, Any], seed: int) -> SAC:
        model = super().build_model(env, values, seed)
        if model.ent_coef_optimizer is not None:
            model.ent_coef_optimizer = EagerAdam([model.log_ent_coef], lr=model.lr_schedule(1))
        return model


LEARNER = SACLearner
