"""QR-DQN's SB3 side: sb3-contrib's ``QRDQN`` behind the learner interface (its settings are declared in
evo/learners/qrdqn.py), with ε over each member's whole training and its target-network step count kept
(evo/sb3/greedy.py). What moves at an exploit is what QR-DQN names as its state
(``_get_torch_save_params``: the policy, holding the quantile network and its target, and the policy's
Adam); the replay buffer stays the recipient's unless ``--exploit-buffer copy``. ``n_quantiles`` shapes the
network (a ``policy_kwargs`` key, fixed for a run)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

from sb3_contrib import QRDQN as ContribQRDQN

from evo.sb3.greedy import GreedyLearner, MemberExploration


class QRDQN(MemberExploration, ContribQRDQN):
    """sb3-contrib's QR-DQN, its ε following the member's env steps over its whole training."""


class QRDQNLearner(GreedyLearner):
    """A QR-DQN member."""

    algorithm = QRDQN

    def build_model(self, env, values: Mapping[str, Any], seed: int | None):
        """sb3-contrib's model, its Adam's ``eps`` as sb3-contrib sets it: 0.01 / ``batch_size`` (Dabney et al.'s
        0.01 / 32, scaled). sb3-contrib sets it only where no optimizer class is given, and evo gives its eager
        Adam (evo/sb3/greedy.py), which left torch's 1e-8: the learning table (docs/results.md) found evo's
        QR-DQN behind rl_zoo3's on CartPole with it."""
        model = super().build_model(env, values, seed)
        optimizer = model.policy.optimizer
        optimizer.defaults["eps"] = 0.01 / int(values["batch_size"])
        for group in optimizer.param_groups:
            group["eps"] = optimizer.defaults["eps"]
        return model


LEARNER = QRDQNLearner
