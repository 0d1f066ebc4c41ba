"""What the maximum-entropy actor-critics (SB3's SAC, sb3-contrib's TQC and CrossQ) share, declared
once: the entropy coefficient and its target, gSDE, and their rule. Pure; their SB3 side is
evo/sb3/entropy.py.

With ``ent_coef: auto`` the coefficient is learned (its log and its Adam move with the weights at an
exploit), towards ``target_entropy``, which is what evo tunes; a fixed coefficient is a tensor of the
algorithm's state too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evo.core.kinds import Kind
from evo.learners.offpolicy import check_shared
from evo.learners.spec import COUNT, POSITIVE, EnvShape, Interval, LearnerContext, Named, Reach, Values, setting

AUTO = Values(("auto",))


def entropy_settings(target_update_interval: bool = True) -> tuple:
    """The coefficient and its target, the target networks' update interval (CrossQ has no target
    networks: ``target_update_interval`` False), and gSDE."""
    return (
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
        *(
            (
                setting(
                    "target_update_interval",
                    int,
                    1,
                    "gradient steps between target-network updates",
                    why_fixed="not tuned by evo (tau sets how fast the targets follow)",
                    domain=COUNT,
                ),
            )
            if target_update_interval
            else ()
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


def check(context: LearnerContext, problems: list[str]) -> None:
    """The rules of a maximum-entropy actor-critic (SAC, TQC, CrossQ): the off-policy ones and the entropy's."""
    check_shared(context.settings, context.space, problems)
    check_entropy(context.settings, context.space, context.shape, problems)


def check_entropy(
    settings: dict[str, Any], space: Mapping[str, Kind], shape: EnvShape | None, problems: list[str]
) -> None:
    """'auto' resolved for the records; a target entropy explored needs a learned coefficient."""
    if settings["target_entropy"] == "auto" and shape is not None:
        settings["target_entropy"] = -float(shape.action_dims)  # SB3's 'auto', resolved here for the records
    if "target_entropy" in space and not str(settings["ent_coef"]).startswith("auto"):
        problems.append(
            f"search_space.target_entropy: the entropy coefficient is fixed at {settings['ent_coef']}, so no target "
            "entropy is used; set ent_coef: auto, or explore something else"
        )
