"""TD3's SB3 side: SB3's ``TD3`` behind the learner interface (its settings are declared in
evo/learners/td3.py).

What moves at an exploit is what TD3 names as its state (``_get_torch_save_params``): the
policy (actor, critics and their target networks) and the actor's and the critics' Adam. The
replay buffer stays the recipient's unless ``--exploit-buffer copy`` (evo/sb3/offpolicy.py), and
so does its exploration noise, like its envs.

TD3's own ways for a value to reach the model: the exploration noise is an object, not a
number. Its σ is the private ``_sigma`` of SB3's ``NormalActionNoise`` or
``OrnsteinUhlenbeckActionNoise``, and with several envs SB3 wraps the noise in a
``VectorizedActionNoise`` holding one deep copy per env (at the first ``learn()``), so a new σ goes
into every copy; a new ``noise_type`` builds a new noise object of that type (per env) with the
member's σ. The Ornstein-Uhlenbeck noise's running value is part of the member, in its
checkpoint. What to re-check when SB3 changes: ``_sigma``, ``noise_prev``,
``VectorizedActionNoise.noises`` and where SB3 wraps the noise (``_setup_learn``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

import numpy as np
import torch
from stable_baselines3 import TD3 as SB3TD3
from stable_baselines3.common.noise import (
    ActionNoise,
    NormalActionNoise,
    OrnsteinUhlenbeckActionNoise,
    VectorizedActionNoise,
)

from evo.sb3.learner import SB3Learner
from evo.sb3.offpolicy import OffPolicyLearner
from evo.sb3.optimizer import EagerAdam

NOISES: dict[str, type[ActionNoise]] = {
    "normal": NormalActionNoise,
    "ornstein-uhlenbeck": OrnsteinUhlenbeckActionNoise,
}


def make_noise(noise_type: str | None, sigma: float, dims: int) -> ActionNoise | None:
    if noise_type is None:
        return None
    return NOISES[noise_type](mean=np.zeros(dims), sigma=float(sigma) * np.ones(dims))


def base_noises(noise: ActionNoise | None) -> list[ActionNoise]:
    """The per-env noises (one, unless SB3 vectorised it over several envs)."""
    if noise is None:
        return []
    return list(noise.noises) if isinstance(noise, VectorizedActionNoise) else [noise]


def noise_type_of(noise: ActionNoise | None) -> str | None:
    noises = base_noises(noise)
    if not noises:
        return None
    return next(name for name, cls in NOISES.items() if isinstance(noises[0], cls))


def configure_noise(learner: SB3Learner) -> None:
    """Make the model's exploration noise the member's ``noise_type`` with its ``noise_std``,
    in every env's copy: a new object only when the type changes."""
    model = learner.model
    values = {**learner.agent.settings, **learner.hparams}
    noise_type, sigma = values["noise_type"], float(values["noise_std"])
    dims = int(np.prod(model.action_space.shape))
    if noise_type_of(model.action_noise) != noise_type:
        noise = make_noise(noise_type, sigma, dims)
        if noise is not None and isinstance(model.action_noise, VectorizedActionNoise):
            noise = VectorizedActionNoise(noise, model.n_envs)
        model.action_noise = noise
    for noise in base_noises(model.action_noise):
        noise._sigma = sigma * np.ones(dims)


def ou_noises(noise: ActionNoise | None) -> list[OrnsteinUhlenbeckActionNoise]:
    return [n for n in base_noises(noise) if isinstance(n, OrnsteinUhlenbeckActionNoise)]


class TD3(SB3TD3):
    """SB3's TD3, its exploration noise running on from one ``learn()`` to the next: evo trains a
    member one ``learn()`` per generation, and SB3's ``_setup_learn`` resets the noise at each (an
    Ornstein-Uhlenbeck process would restart from zero every generation, mid-episode, and the running
    value a checkpoint keeps would be dropped before it is used)."""

    def _setup_learn(self, *args, **kwargs):
        running = [noise.noise_prev.copy() for noise in ou_noises(self.action_noise)]
        result = super()._setup_learn(*args, **kwargs)
        noises = ou_noises(self.action_noise)
        if len(running) == 1 and len(noises) > 1:  # vectorised just now: every env's copy of the one process
            running = running * len(noises)
        if len(running) == len(noises):
            for noise, prev in zip(noises, running, strict=True):
                noise.noise_prev = prev.copy()
        return result


class TD3Learner(OffPolicyLearner):
    """A TD3 member."""

    zoo_names = ("noise_type", "noise_std")  # zoo's own names for the action noise

    algorithm = TD3
    custom = {
        **OffPolicyLearner.custom,
        "noise_type": lambda learner, value: configure_noise(learner),
        "noise_std": lambda learner, value: configure_noise(learner),
    }
    readers = {
        **OffPolicyLearner.readers,
        "noise_type": lambda learner: noise_type_of(learner.model.action_noise),
        "noise_std": lambda learner: float(base_noises(learner.model.action_noise)[0]._sigma[0]),
    }

    def policy_kwargs(self) -> dict[str, Any]:
        return {**super().policy_kwargs(), "optimizer_class": EagerAdam}

    def build_model(self, env, values: Mapping[str, Any], seed: int) -> TD3:
        dims = int(np.prod(env.action_space.shape))
        return TD3(
            self.policy_name(),
            env,
            action_noise=make_noise(values["noise_type"], values["noise_std"], dims),
            policy_kwargs=self.policy_kwargs(),
            verbose=0,
            seed=seed,
            device=self.device,
            **self.constructor_arguments(values),
        )

    def member_state(self, replay: bool = True) -> dict[str, Any]:
        """The member, and its Ornstein-Uhlenbeck noise's running value per env (a normal noise has none)."""
        state = super().member_state(replay)
        state["noise"] = [
            torch.from_numpy(np.array(noise.noise_prev, dtype=np.float64))
            for noise in ou_noises(self.model.action_noise)
        ]
        return state

    def restore(self, payload: Mapping[str, Any]) -> str | None:
        note = super().restore(payload)
        saved = payload.get("noise") or []
        noises = ou_noises(self.model.action_noise)
        if saved and len(saved) != len(noises) and len(noises) == 1 and self.model.n_envs > 1:
            # saved vectorised; SB3 vectorises this model's noise at its first learn(): do it now
            self.model.action_noise = VectorizedActionNoise(self.model.action_noise, self.model.n_envs)
            noises = ou_noises(self.model.action_noise)
        for noise, prev in zip(noises, saved, strict=False):
            noise.noise_prev = prev.numpy().copy()
        return note


LEARNER = TD3Learner
