"""QR-DQN's settings (sb3-contrib's ``QRDQN``: Dabney et al. 2018's quantile regression DQN), declared once.
Pure; its SB3 side is evo/sb3/qrdqn.py.

sb3-contrib's names and defaults: DQN's (evo/learners/greedy.py, with QR-DQN's own defaults: a smaller
learning rate, a shorter exploration, no gradient clip unless ``max_grad_norm`` is set) and, in
``policy_kwargs``, ``n_quantiles`` (200: the quantiles of each action's return the network outputs).
At an exploit a recipient takes the donor's quantile network, its target network and their Adam; its
replay buffer and its place on the exploration schedule stay its own.
"""

from __future__ import annotations

from evo.learners.greedy import check, greedy_settings, q_memory
from evo.learners.offpolicy import OFF_POLICY
from evo.learners.spec import IMAGE_POLICIES, Footprint, LearnerContext, LearnerSpec

QUANTILES = 200
"""sb3-contrib's default number of quantiles."""


def memory(context: LearnerContext) -> list[Footprint]:
    """DQN's, with ``n_quantiles`` outputs per action (sb3-contrib's default: the YAML's is not given here)."""
    return q_memory(context, outputs_per_action=QUANTILES)


SPEC = LearnerSpec(
    name="qrdqn",
    title="QR-DQN",
    settings=greedy_settings(
        learning_rate=5e-5, exploration_fraction=0.005, exploration_final_eps=0.01, max_grad_norm=None
    ),
    action_spaces=("Discrete",),
    policies=IMAGE_POLICIES,
    policy_kwargs={"n_quantiles": int},
    default_net_arch={"qf": (64, 64)},
    check=check,
    memory=memory,
    **OFF_POLICY,
)
