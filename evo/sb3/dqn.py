"""DQN's SB3 side: SB3's ``DQN`` behind the learner interface (its settings are declared in
evo/learners/dqn.py), with ε over each member's whole training and its target-network step count kept
(evo/sb3/greedy.py). What moves at an exploit is what DQN names as its state (``_get_torch_save_params``:
the policy, holding the Q-network and its target, and the policy's Adam); the replay buffer stays the
recipient's unless ``--exploit-buffer copy`` (evo/sb3/offpolicy.py)."""

from __future__ import annotations

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

from stable_baselines3 import DQN as SB3DQN

from evo.sb3.greedy import GreedyLearner, MemberExploration


class DQN(MemberExploration, SB3DQN):
    """SB3's DQN, its ε following the member's env steps over its whole training."""


class DQNLearner(GreedyLearner):
    """A DQN member."""

    algorithm = DQN


LEARNER = DQNLearner
