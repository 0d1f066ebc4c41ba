"""What the ε-greedy Q-learners (SB3's DQN, sb3-contrib's QR-DQN) share on the SB3 side: ε over the
member's whole training, the target network's step counter, and the Q-network's single head.

**ε follows the member** (evo/learners/greedy.py says why). SB3 computes ε at every env step from
``_current_progress_remaining``, the progress of the current ``learn()``; evo calls ``learn()`` once per
generation, so SB3 alone would spend the whole decay in the first generation. :class:`MemberExploration`
computes it from the member's own env steps over ``exploration_budget`` (its env steps in all:
``MemberSetup.budget``), after SB3's ``_on_step`` and when a ``learn()`` starts (so that a resumed member,
whose ε SB3 leaves at 0 until its first step, acts as the uninterrupted one from its first action). A new
fraction or ε builds a new ``LinearSchedule``.

**The target network** is updated (a Polyak step of ``tau``; tau 1 copies it) every
``target_update_interval`` env steps, counted in ``_n_calls`` (one per vectorised step): a member's
checkpoint keeps that count, and a member rebuilt to another architecture carries it, so the updates fall
on the same steps as in the uninterrupted run. The networks themselves (Q-network, target network) and
the optimizer's state are what the algorithm names as its state (``policy``, ``policy.optimizer``).

What to re-check when SB3 or sb3-contrib changes: ``_on_step``, ``exploration_schedule`` (a
``LinearSchedule``), ``exploration_rate`` as ``predict`` reads it, ``_n_calls``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

import numpy as np
from stable_baselines3.common.utils import LinearSchedule

from evo.sb3.learner import SB3Learner
from evo.sb3.offpolicy import OffPolicyLearner
from evo.sb3.optimizer import EagerAdam

SCHEDULE = ("exploration_initial_eps", "exploration_final_eps", "exploration_fraction")


class MemberExploration:
    """A mixin for SB3's DQN and sb3-contrib's QRDQN: ε from the member's env steps over
    ``exploration_budget`` (0: SB3's own, over the current ``learn()``)."""

    exploration_budget: int = 0

    def member_progress(self) -> float:
        """SB3's "progress remaining" (1 at the start, 0 at the end) of the member's whole training."""
        if self.exploration_budget <= 0:
            return self._current_progress_remaining
        return 1.0 - min(self.num_timesteps / self.exploration_budget, 1.0)

    def follow_schedule(self) -> None:
        self.exploration_rate = self.exploration_schedule(self.member_progress())

    def _setup_learn(self, *args, **kwargs):
        result = super()._setup_learn(*args, **kwargs)
        self.follow_schedule()
        return result

    def _on_step(self) -> None:
        super()._on_step()
        self.follow_schedule()
        self.logger.record("rollout/exploration_rate", self.exploration_rate)


def set_schedule(learner: SB3Learner, value: Any = None) -> None:
    """ε's schedule of the member's values (``value``: the one that changed, already in its hyperparameters)."""
    model = learner.model
    values = {**learner.agent.settings, **learner.hparams}
    start, end, fraction = (float(values[name]) for name in SCHEDULE)
    model.exploration_initial_eps, model.exploration_final_eps, model.exploration_fraction = start, end, fraction
    model.exploration_schedule = LinearSchedule(start, end, fraction)
    model.follow_schedule()


class GreedyLearner(OffPolicyLearner):
    """A member of an ε-greedy Q-learner (``algorithm``: evo's subclass of it with :class:`MemberExploration`)."""

    custom = {**OffPolicyLearner.custom, **dict.fromkeys(SCHEDULE, set_schedule)}
    readers = {
        **OffPolicyLearner.readers,
        "exploration_initial_eps": lambda learner: float(learner.model.exploration_schedule.start),
        "exploration_final_eps": lambda learner: float(learner.model.exploration_schedule.end),
        "exploration_fraction": lambda learner: float(learner.model.exploration_schedule.end_fraction),
    }

    def build_model(self, env, values: Mapping[str, Any], seed: int | None):
        model = super().build_model(env, values, seed)
        model.exploration_budget = int(self.setup.budget)
        return model

    def policy_kwargs(self) -> dict[str, Any]:
        """Its one network's hidden layers as a list (SB3's Q-network policies take no mapping of heads), and
        ``EagerAdam`` (torch's Adam, SB3's default for them)."""
        kwargs = super().policy_kwargs()
        if isinstance(kwargs.get("net_arch"), dict):
            kwargs["net_arch"] = list(kwargs["net_arch"]["qf"])
        return {**kwargs, "optimizer_class": EagerAdam}

    def rebuild(self, hparams: Mapping[str, Any], state: np.ndarray | None = None) -> None:
        calls = self.model._n_calls
        super().rebuild(hparams, state)
        self.model._n_calls = calls

    def member_state(self, replay: bool = True) -> dict[str, Any]:
        """The member, and the env steps its target-network updates are counted in."""
        return {**super().member_state(replay), "n_calls": int(self.model._n_calls)}

    def restore(self, payload: Mapping[str, Any]) -> str | None:
        note = super().restore(payload)
        self.model._n_calls = int(payload["n_calls"])
        self.model.follow_schedule()
        return note
