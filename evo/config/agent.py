"""The PPO settings of a run (:class:`AgentSettings`) from the merged YAML settings and the flags. Pure."""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from typing import Any

from evo.config.resolved import AgentSettings
from evo.core.space import EXPLORED, EXTRA, ParamSpace, typed

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
    rollout = n_envs * max(n_steps, 1)
    batch_size = _batch_size(settings, rollout, problems)
    search_space = _search_space(settings.get("search_space", {}), ranges, problems)
    extra = _extra_space(settings, settings.get("search_space", {}), rollout, batch_size, problems)
    for name, param in extra.items():
        defaults[name] = _extra_default(name, settings, rollout, batch_size)
        if param.discrete and defaults[name] != param.clip(defaults[name]):
            where = f"the choices {list(param.choices)}" if param.kind == "choice" else f"[{param.low}, {param.high}]"
            shown = "none (no early stop)" if defaults[name] == math.inf else defaults[name]
            problems.append(
                f"search_space.{name}: the default {name} {shown} is not in {where}; add it, or set {name} "
                "in the YAML to one of them (members start from it with --initial-hparams defaults)"
            )
    return AgentSettings(
        policy=_policy(settings.get("policy", "mlp"), env_id, game, problems),
        n_envs=n_envs,
        n_steps=n_steps,
        batch_size=batch_size,
        n_epochs=settings.get("n_epochs", 10),
        max_grad_norm=settings.get("max_grad_norm", 0.5),
        normalize_advantage=settings.get("normalize_advantage", True),
        policy_kwargs=settings.get("policy_kwargs", {}),
        defaults=defaults,
        search_space={**search_space, **extra},
        target_kl=settings.get("target_kl"),
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
    """The YAML's search space for the six, with the bounds given on the command line (which
    replace choices too)."""
    space: dict[str, ParamSpace] = {}
    for name in EXPLORED:
        entry = dict(raw_space.get(name, {}))
        bounds = ranges.get(name)
        if bounds is not None:
            if bounds[0] >= bounds[1]:
                continue  # reported by the flag's own check
            entry.pop("choices", None)
            entry.update(low=bounds[0], high=bounds[1])
        if entry.get("type", "float") != "float":
            problems.append(f"search_space.{name} takes real values; type: int is for the counts (n_epochs ...)")
            continue
        if "choices" in entry:
            param = ParamSpace.categorical(entry["choices"])
        elif "low" not in entry or "high" not in entry:
            problems.append(f"search_space.{name} needs both low and high, or choices (got {entry or 'nothing'})")
            continue
        else:
            param = ParamSpace(entry["low"], entry["high"], entry.get("scale", "linear"))
        found = param.problems(name)
        problems += found
        if not found:
            space[name] = param
    return space


def _extra_default(name: str, settings: dict[str, Any], rollout: int, batch_size: int) -> float | int:
    """The value an explored count or limit has when PBT does not sample it (target_kl: inf, no early stop)."""
    if name == "n_minibatches":
        return math.ceil(rollout / batch_size)
    if name == "batch_size":
        return batch_size
    fallback = {"n_epochs": 10, "max_grad_norm": 0.5, "target_kl": math.inf}[name]
    return typed(name, settings.get(name, fallback))


def _extra_space(
    settings: dict[str, Any], raw_space: dict[str, Any], rollout: int, batch_size: int, problems: list[str]
) -> dict[str, ParamSpace]:
    """The counts and limits the search space adds to the six (:data:`evo.core.space.EXTRA`),
    checked against what PPO can run: batch sizes within the rollout, at least one epoch."""
    if "batch_size" in raw_space and "n_minibatches" in raw_space:
        problems.append(
            "search_space gives both batch_size and n_minibatches; they say the same thing (n_minibatches = "
            "n_envs * n_steps / batch_size): explore one of them"
        )
    limits = {
        "n_epochs": (1, math.inf, "at least 1"),
        "batch_size": (2, rollout, f"between 2 and n_envs * n_steps = {rollout}"),
        "n_minibatches": (1, rollout // 2, f"between 1 and n_envs * n_steps / 2 = {rollout // 2}"),
        "max_grad_norm": (0, math.inf, "positive"),
        "target_kl": (0, math.inf, "positive (null in choices: no early stop)"),
    }
    space: dict[str, ParamSpace] = {}
    for name in EXTRA:
        if name not in raw_space:
            continue
        entry = raw_space[name]
        if "choices" in entry:
            param = ParamSpace.categorical(entry["choices"])
        elif "low" in entry and "high" in entry:
            param = ParamSpace(entry["low"], entry["high"], entry.get("scale", "linear"), entry.get("type", "float"))
        else:
            problems.append(f"search_space.{name} needs both low and high, or choices (got {entry or 'nothing'})")
            continue
        found = param.problems(name)
        low, high, rule = limits[name]
        if not found and not (param.low > 0 and low <= param.low and param.high <= high):
            found.append(f"search_space.{name} is [{param.low}, {param.high}]; every value must be {rule}")
        problems += found
        if not found:
            space[name] = param
    return space
