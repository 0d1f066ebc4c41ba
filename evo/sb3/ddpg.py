"""DDPG's SB3 side: SB3's ``DDPG`` (its TD3 with one critic, no delay, no target smoothing) behind the
learner interface (its settings are declared in evo/learners/ddpg.py). Everything but the algorithm is
TD3's (evo/sb3/td3.py): what moves at an exploit (``_get_torch_save_params``: the policy with the actor,
the critic and their targets, and both Adams), the exploration noise as an object with its σ in every
env's copy, and the Ornstein-Uhlenbeck noise running on across generations and checkpoints."""

from __future__ import annotations

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

from stable_baselines3 import DDPG as SB3DDPG

from evo.sb3.td3 import RunningNoise, TD3Learner


class DDPG(RunningNoise, SB3DDPG):
    """SB3's DDPG, its exploration noise running on across ``learn()`` calls."""


class DDPGLearner(TD3Learner):
    """A DDPG member."""

    algorithm = DDPG


LEARNER = DDPGLearner
