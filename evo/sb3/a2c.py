"""A2C's SB3 side: SB3's ``A2C`` behind the learner interface (its settings are declared in
evo/learners/a2c.py).

What moves at an exploit is what A2C names as its state (``_get_torch_save_params``): the policy
(actor and value networks) and its optimizer, RMSprop's square averages and step counts (or Adam's
moments without ``use_rms_prop``). SB3 builds the optimizer from the policy's ``optimizer_class``,
torch's RMSprop with ``alpha=0.99, eps=rms_prop_eps, weight_decay=0`` unless the policy names one:
here it names :class:`~evo.sb3.optimizer.EagerRMSprop` with those arguments (or ``EagerAdam`` with
SB3's ``eps=1e-5``), the same arithmetic without importing torch._dynamo; with ``rms_prop_tf_like``
(zoo's Atari setting) SB3's ``RMSpropTFLike``, whose state (its square averages, started at 1, and its
step count) travels as any optimizer's does.

A2C's own way for a value to reach the update: ``gae_lambda`` (evo/sb3/onpolicy.py); ``train()``
reads ``ent_coef``, ``vf_coef`` and ``max_grad_norm`` from the model at every call, and the learning
rate and the discount reach it as every learner's do. What to re-check when SB3 changes: the
optimizer arguments in ``A2C.__init__`` and the attributes ``train()`` reads.
"""

from __future__ import annotations

from typing import Any

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

from stable_baselines3 import A2C
from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

from evo.sb3.learner import SB3Learner
from evo.sb3.onpolicy import gae_lambda_of, set_gae_lambda
from evo.sb3.optimizer import EagerAdam, EagerRMSprop


class A2CLearner(SB3Learner):
    """An A2C member."""

    algorithm = A2C
    custom = {"gae_lambda": set_gae_lambda}
    readers = {"gae_lambda": gae_lambda_of}
    built = ("rms_prop_tf_like",)  # chooses the optimizer class in policy_kwargs

    def policy_kwargs(self) -> dict[str, Any]:
        """The networks, and the optimizer SB3's A2C would build, as its eager twin."""
        settings = self.agent.settings
        if settings["use_rms_prop"]:
            optimizer = {"alpha": 0.99, "eps": float(settings["rms_prop_eps"]), "weight_decay": 0}
            rmsprop = RMSpropTFLike if settings["rms_prop_tf_like"] else EagerRMSprop
            return {**super().policy_kwargs(), "optimizer_class": rmsprop, "optimizer_kwargs": optimizer}
        return {**super().policy_kwargs(), "optimizer_class": EagerAdam, "optimizer_kwargs": {"eps": 1e-5}}


LEARNER = A2CLearner
