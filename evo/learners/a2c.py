"""A2C's settings (Stable-Baselines3's ``A2C``), declared once. Pure; its SB3 side is evo/sb3/a2c.py.

SB3's names and defaults. A2C updates once per rollout of ``n_steps`` env steps per env, with
RMSprop (``use_rms_prop``, SB3's default, as in the A3C paper; its ε is ``rms_prop_eps``) or Adam. At
an exploit a recipient takes the donor's policy and value networks and the optimizer's state
(RMSprop's square averages and step counts: the flat state holds any optimizer's).
"""

from __future__ import annotations

from evo.learners.onpolicy import advantage_and_sde, check_sde, gae_lambda, memory, rollout_steps
from evo.learners.spec import (
    COUNT,
    DISCOUNT,
    IMAGE_POLICIES,
    NON_NEGATIVE,
    POSITIVE,
    LearnerContext,
    LearnerSpec,
    Reach,
    setting,
)

A, LR, D = Reach.ATTRIBUTE, Reach.LEARNING_RATE, Reach.DISCOUNT

N_STEPS_FIXED = (
    "it sizes the rollout buffer (n_envs * n_steps samples) that A2C allocates once and that every generation's "
    "agent_training_steps is rounded to"
)

SETTINGS = (
    setting(
        "learning_rate",
        float,
        7e-4,
        "the optimizer's step size (RMSprop's, or Adam's without use_rms_prop)",
        LR,
        label="learning rate",
        domain=POSITIVE,
    ),
    setting("ent_coef", float, 0.0, "entropy bonus coefficient", A, label="entropy coefficient", domain=NON_NEGATIVE),
    setting("gamma", float, 0.99, "discount factor", D, label="discount γ", domain=DISCOUNT),
    gae_lambda(1.0),
    setting("vf_coef", float, 0.5, "value-loss coefficient", A, label="value-loss coefficient", domain=NON_NEGATIVE),
    setting("max_grad_norm", float, 0.5, "gradient-norm clip", A, label="gradient-norm clip", domain=POSITIVE),
    setting("n_steps", int, 5, "env steps per env per rollout, one update each", why_fixed=N_STEPS_FIXED, domain=COUNT),
    setting(
        "use_rms_prop",
        bool,
        True,
        "RMSprop (α 0.99, as SB3 and the A3C paper) instead of Adam",
        why_fixed="it chooses the optimizer, built once with the model",
    ),
    setting(
        "rms_prop_eps",
        float,
        1e-5,
        "RMSprop's ε (the denominator's stabiliser)",
        why_fixed="it is set in the optimizer when it is built",
        domain=POSITIVE,
    ),
    setting(
        "rms_prop_tf_like",
        bool,
        False,
        "RMSprop as TensorFlow computes it (SB3's RMSpropTFLike, zoo's for Atari: ε inside the square root, "
        "averages starting at 1)",
        why_fixed="it chooses the optimizer, built once with the model",
    ),
    *advantage_and_sde(False, "rollout"),
)


def check(context: LearnerContext, problems: list[str]) -> None:
    """A2C's rule across settings and the env (each value's own range is its domain, checked before):
    gSDE needs continuous actions."""
    settings, shape = context.settings, context.shape
    check_sde(settings, shape, problems)


SPEC = LearnerSpec(
    name="a2c",
    title="A2C",
    settings=SETTINGS,
    action_spaces=("Box", "Discrete", "MultiDiscrete", "MultiBinary"),
    policies=IMAGE_POLICIES,
    policy_kwargs={"ortho_init": bool, "log_std_init": float},
    default_net_arch={"pi": (64, 64), "vf": (64, 64)},
    check=check,
    steps=rollout_steps,
    memory=memory,
)
