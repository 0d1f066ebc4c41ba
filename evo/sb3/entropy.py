"""What the maximum-entropy actor-critics (SB3's SAC, sb3-contrib's TQC and CrossQ) share on the SB3 side.

What moves at an exploit is what each names as its state (``_get_torch_save_params``): the policy (actor,
critics, their targets where it has them), the actor's and the critics' optimizers, and with
``ent_coef: auto`` the learned ``log_ent_coef`` and its Adam (a fixed coefficient: the tensor
``ent_coef_tensor``). ``target_entropy``, which the algorithm resolves from 'auto' when it builds the
model and reads from the model at every gradient step, is set there. Each builds the entropy
coefficient's optimizer as torch's Adam; it is replaced here by :class:`~evo.sb3.optimizer.EagerAdam`
(the same arithmetic, without importing torch._dynamo), and so are the actor's and the critics'
(``optimizer_class``). What to re-check when SB3 or sb3-contrib changes: ``target_entropy``,
``ent_coef_optimizer`` and ``_get_torch_save_params``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evo.sb3.learner import SB3Learner
from evo.sb3.offpolicy import OffPolicyLearner
from evo.sb3.optimizer import EagerAdam


def set_target_entropy(learner: SB3Learner, value: float) -> None:
    learner.model.target_entropy = float(value)


class EntropyLearner(OffPolicyLearner):
    """A member of a maximum-entropy actor-critic (``algorithm``: SB3's or sb3-contrib's class)."""

    held_arguments = (*OffPolicyLearner.held_arguments, "target_entropy")  # 'auto' resolved

    custom = {**OffPolicyLearner.custom, "target_entropy": set_target_entropy}
    readers = {**OffPolicyLearner.readers, "target_entropy": lambda learner: float(learner.model.target_entropy)}

    def policy_kwargs(self) -> dict[str, Any]:
        return {**super().policy_kwargs(), "optimizer_class": EagerAdam}

    def build_model(self, env, values: Mapping[str, Any], seed: int | None):
        model = super().build_model(env, values, seed)
        if model.ent_coef_optimizer is not None:
            model.ent_coef_optimizer = EagerAdam([model.log_ent_coef], lr=model.lr_schedule(1))
        return model
