"""SAC's settings (Stable-Baselines3's ``SAC``), declared once. Pure; its SB3 side is evo/sb3/sac.py.

At an exploit a recipient takes the donor's networks (actor, critics, target critics), their
optimizers and, with ``ent_coef: auto``, the learned entropy coefficient and its optimizer; its
replay buffer stays its own unless --exploit-buffer copy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evo.core.kinds import Kind
from evo.learners.offpolicy import (
    actor_critic_memory,
    budget_notes,
    check_shared,
    collection_steps,
    replay_footprint,
    shared_settings,
)
from evo.learners.spec import (
    COUNT,
    POSITIVE,
    EnvShape,
    Footprint,
    Interval,
    LearnerSpec,
    Named,
    Reach,
    Values,
    setting,
)

AUTO = Values(("auto",))

SETTINGS = (
    *shared_settings(learning_rate=3e-4),
    setting(
        "target_entropy",
        (float, str),
        "auto",
        "the entropy the learned coefficient aims at; 'auto': -dim(action space)",
        Reach.CUSTOM,
        label="target entropy",
        domain=Interval() | AUTO,
    ),
    setting(
        "ent_coef",
        (float, str),
        "auto",
        "entropy coefficient: a number, or 'auto' (learned; 'auto_0.1' starts it at 0.1)",
        why_fixed="with 'auto' it is learned (and moves with the weights at an exploit): tune target_entropy",
        domain=POSITIVE | AUTO | Named("auto_", POSITIVE),
    ),
    setting(
        "target_update_interval",
        int,
        1,
        "gradient steps between target-network updates",
        why_fixed="not tuned by evo (tau sets how fast the targets follow)",
        domain=COUNT,
    ),
    setting("use_sde", bool, False, "generalised state-dependent exploration", why_fixed="it shapes the policy"),
    setting(
        "sde_sample_freq",
        int,
        -1,
        "with gSDE, a new noise matrix every this many steps (-1: at each rollout's start only)",
        why_fixed="not tuned",
        domain=COUNT | Values((-1,)),
    ),
    setting(
        "use_sde_at_warmup",
        bool,
        False,
        "gSDE instead of uniform random actions before learning_starts",
        why_fixed="not tuned",
    ),
)


def check(
    settings: dict[str, Any],
    space: Mapping[str, Kind],
    n_envs: int,
    shape: EnvShape | None,
    policy: str,
    problems: list[str],
) -> None:
    check_shared(settings, space, problems)
    if settings["target_entropy"] == "auto" and shape is not None:
        settings["target_entropy"] = -float(shape.action_dims)  # SB3's 'auto', resolved here for the records
    if "target_entropy" in space and not str(settings["ent_coef"]).startswith("auto"):
        problems.append(
            f"search_space.target_entropy: the entropy coefficient is fixed at {settings['ent_coef']}, so no target "
            "entropy is used; set ent_coef: auto, or explore something else"
        )


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
