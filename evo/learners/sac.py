"""SAC's settings (Stable-Baselines3's ``SAC``), declared once. Pure; its SB3 side is evo/sb3/sac.py.

At an exploit a recipient takes the donor's networks (actor, critics, target critics), their
optimizers and, with ``ent_coef: auto``, the learned entropy coefficient and its optimizer; its
replay buffer stays its own unless --exploit-buffer copy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evo.core.kinds import Kind
from evo.learners.entropy import check_entropy, entropy_settings
from evo.learners.offpolicy import (
    actor_critic_memory,
    budget_notes,
    check_shared,
    collection_steps,
    replay_footprint,
    shared_settings,
)
from evo.learners.spec import (
    EnvShape,
    Footprint,
    LearnerSpec,
)

SETTINGS = (*shared_settings(learning_rate=3e-4), *entropy_settings())


def check(
    settings: dict[str, Any],
    space: Mapping[str, Kind],
    n_envs: int,
    shape: EnvShape | None,
    policy: str,
    problems: list[str],
) -> None:
    check_shared(settings, space, problems)
    check_entropy(settings, space, shape, problems)


def memory(
    settings: Mapping[str, Any], net_arch: Mapping[str, Sequence[int]], inputs: int, n_envs: int, shape: EnvShape
) -> list[Footprint]:
    """The actor (a mean and a log-std per action dimension), two critics and their targets, and the replay buffer."""
    networks = actor_critic_memory(net_arch, inputs, shape, actor_outputs=2 * shape.action_dims, actor_targets=0)
    return [networks, replay_footprint(settings, n_envs, shape)]


SPEC = LearnerSpec(
    name="sac",
    title="SAC",
    settings=SETTINGS,
    action_spaces=("Box",),
    policy_kwargs={"log_std_init": float},
    default_net_arch={"pi": (256, 256), "qf": (256, 256)},
    replay=True,
    check=check,
    steps=collection_steps,
    memory=memory,
    notes=budget_notes,
)
