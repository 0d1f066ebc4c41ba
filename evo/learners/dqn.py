"""DQN's settings (Stable-Baselines3's ``DQN``), declared once. Pure; its SB3 side is evo/sb3/dqn.py.

SB3's names and defaults: the off-policy settings (with DQN's own defaults) and ε-greedy exploration
(evo/learners/greedy.py, shared with QR-DQN: ε follows each member's env steps over its whole training).
At an exploit a recipient takes the donor's Q-network, its target network and their Adam; its replay
buffer and its place on the exploration schedule stay its own.
"""

from __future__ import annotations

from evo.learners.greedy import check, greedy_settings, q_memory
from evo.learners.offpolicy import OFF_POLICY
from evo.learners.spec import IMAGE_POLICIES, LearnerSpec

SPEC = LearnerSpec(
    name="dqn",
    title="DQN",
    settings=greedy_settings(
        learning_rate=1e-4, exploration_fraction=0.1, exploration_final_eps=0.05, max_grad_norm=10
    ),
    action_spaces=("Discrete",),
    policies=IMAGE_POLICIES,
    default_net_arch={"qf": (64, 64)},
    check=check,
    memory=q_memory,
    **OFF_POLICY,
)
