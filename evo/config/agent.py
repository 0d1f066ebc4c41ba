"""The PPO settings of a run (:class:`AgentSettings`) from the merged YAML settings and the flags. Pure."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from evo.config.resolved import AgentSettings
from evo.core.space import EXPLORED, ParamSpace

POLICIES = ("mlp", "impala", "nature")
POLICY_ALIASES = {"mlppolicy": "mlp", "cnnpolicy": "nature", "impalacnn": "impala"}


def build_agent(
    settings: dict[str, Any],
    env_id: str,
    game: str | None,
    num_envs: int | None,
    ranges: dict[str, Sequence[float] | None],
    problems: list[str],
) -> AgentSettings:
    """``settings`` (merged YAML layers) with ``--num-envs`` and the search ranges of the flags
    (``ranges``: explored name -> (low, high) or None), checked."""
    n_envs = num_envs if num_envs is not None else settings.get("n_envs", 1)
    n_steps = settings.get("n_steps", 0)
    if n_steps < 1:
        problems.append(f"n_steps {n_steps}: must be a positive whole number")
    if settings.get("n_epochs", 1) < 1:
        problems.append(f"n_epochs {settings['n_epochs']}: must be a positive whole number")
    microbatch_size = settings.get("microbatch_size") or 0
    if microbatch_size < 0:
        problems.append(
            f"microbatch_size {microbatch_size}: must be a positive number of samples, or 0 to back-propagate "
            "each minibatch whole"
        )
    defaults = {name: settings.get(name) for name in EXPLORED}
    problems += [f"{name} has no default value in the YAML" for name, value in defaults.items() if value is None]
    return AgentSettings(
        policy=_policy(settings.get("policy", "mlp"), env_id, game, problems),
        n_envs=n_envs,
        n_steps=n_steps,
        batch_size=_batch_size(settings, n_envs * max(n_steps, 1), problems),
        n_epochs=settings.get("n_epochs", 10),
        max_grad_norm=settings.get("max_grad_norm", 0.5),
        normalize_advantage=settings.get("normalize_advantage", True),
        policy_kwargs=settings.get("policy_kwargs", {}),
        defaults=defaults,
        search_space=_search_space(settings.get("search_space", {}), ranges, problems),
        microbatch_size=microbatch_size,
        use_sde=settings.get("use_sde", False),
        sde_sample_freq=settings.get("sde_sample_freq", -1),
        normalize=_normalize(settings, env_id, game, problems),
    )


def _normalize(settings: dict[str, Any], env_id: str, game: str | None, problems: list[str]) -> dict[str, bool]:
    """The YAML's ``normalize`` (SB3's VecNormalize, whose statistics travel with a member).
    Observations are normalised for vector observations only, as rl-baselines3-zoo does: a
    Procgen game's images are scaled by the CNN policy."""
    normalize = settings.get("normalize", {"norm_obs": False, "norm_reward": False})
    if game and normalize["norm_obs"]:
        problems.append(
            f"normalize {normalize} for {env_id}: observation normalisation is for vector observations, "
            "not Procgen's images (the CNN policy scales them); use normalize:{norm_obs: false, norm_reward: true} "
            "to normalise rewards only"
        )
    return normalize


def _batch_size(settings: dict[str, Any], rollout: int, problems: list[str]) -> int:
    """batch_size as given, or the rollout split into n_minibatches."""
    rollout = max(1, rollout)
    if "batch_size" in settings:
        batch_size = settings["batch_size"]
    else:
        minibatches = settings.get("n_minibatches", 1)
        if minibatches < 1:
            problems.append(f"n_minibatches {minibatches}: must be a positive whole number")
            minibatches = 1
        batch_size = rollout // minibatches
    if not (2 <= batch_size <= rollout):
        problems.append(
            f"batch_size {batch_size}: must be between 2 and n_envs * n_steps = {rollout}; "
            "set batch_size or n_minibatches in the YAML"
        )
    return batch_size


def _policy(name: str, env_id: str, game: str | None, problems: list[str]) -> str:
    policy = POLICY_ALIASES.get(name.lower(), name.lower())
    if policy not in POLICIES:
        close = difflib.get_close_matches(policy, POLICIES, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        problems.append(f"policy {policy!r} is unknown; use one of {', '.join(POLICIES)}{hint}")
    elif game and policy == "mlp":
        problems.append(f"policy 'mlp' cannot read Procgen's images ({game}); use 'impala' or 'nature'")
    elif not game and policy != "mlp":
        problems.append(f"policy {policy!r} is a CNN for image observations; use 'mlp' for {env_id}")
    return policy


def _search_space(
    raw_space: dict[str, Any], ranges: dict[str, Sequence[float] | None], problems: list[str]
) -> dict[str, ParamSpace]:
    """The YAML's search space, with the bounds given on the command line."""
    space: dict[str, ParamSpace] = {}
    for name in EXPLORED:
        entry = dict(raw_space.get(name, {}))
        bounds = ranges.get(name)
        if bounds is not None:
            if bounds[0] >= bounds[1]:
                continue  # reported by the flag's own check
            entry.update(low=bounds[0], high=bounds[1])
        if "low" not in entry or "high" not in entry:
            problems.append(f"search_space.{name} needs both low and high (got {entry or 'nothing'})")
            continue
        param = ParamSpace(entry["low"], entry["high"], entry.get("scale", "linear"))
        found = param.problems(name)
        problems += found
        if not found:
            space[name] = param
    return space
