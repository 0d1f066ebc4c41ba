"""What start-up learns from a probe env: the env parameters it has, and the info keys it reports. Pure
apart from making the env (gymnasium only, as evo.config.envnames does to read its spaces).

- **Env parameters** (``env.<attribute>`` in a search space, evo.core.envparams): the env must have each
  attribute (on the env or one of its wrappers, as gymnasium's ``get_wrapper_attr`` finds it), and it
  must not be a method; its value then is the parameter's default (``--initial-hparams defaults``).
  Procgen games take none: their C++ env fixes its settings when it is built.
- **The objective** (``--objective info:<key>``): episodes of a probe env, random actions from a fixed
  seed, :data:`PROBE_STEPS` steps in all, must end at least once with each key in their info as a
  finite number: a key they never report so is refused. One that some of them report is not (an env
  may report a key only in some episodes: those are the ones scored), and the probe stops at the first
  episode's end once each key has been seen. With no episode ended within those steps the probe proves
  nothing; the run then checks at its first generation (evo.core.objective.unreported).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evo.config.envnames import Wrappers, make_env_once, procgen_game, unknown_env_message
from evo.core.envparams import attribute
from evo.core.objective import Objective

PROBE_STEPS = 2000
"""The most steps the objective's probe episodes take, all together."""
PROCGEN_PARAMETERS = (
    "Procgen games take no env parameters: procgen's C++ env fixes its settings (the game, its distribution mode "
    "and levels) when it is built, and has no attribute a step reads; drop {names} from the search space"
)


def _registered(env_id: str) -> str:
    return env_id.split(":", 1)[1] if ":" in env_id else env_id


def _class_of(env) -> str:
    unwrapped = type(env.unwrapped)
    return f"{unwrapped.__qualname__} ({unwrapped.__module__})"


def env_parameters(
    env_id: str, env_kwargs: Mapping[str, Any], names: Sequence[str], problems: list[str], wrappers: Wrappers = ()
) -> dict[str, Any]:
    """The value the env has for each env parameter of ``names`` (its default), each problem appended
    (an attribute the env lacks, with the env's class; a method; a Procgen game). An env that cannot
    be made is left to the env id's and ``--env-kwargs``' own checks."""
    if not names:
        return {}
    if procgen_game(env_id) is not None:
        problems.append(f"search_space: {PROCGEN_PARAMETERS.format(names=', '.join(names))}")
        return {}
    if unknown_env_message(env_id) is not None:
        return {}
    try:
        env = make_env_once(_registered(env_id), dict(env_kwargs), wrappers)
    except Exception:  # a user's env may raise anything; reported by the --env-kwargs check
        return {}
    found = {}
    try:
        for name in names:
            wanted = attribute(name)
            if not env.has_wrapper_attr(wanted):
                problems.append(
                    f"search_space.{name}: the env {env_id} (its class {_class_of(env)}) has no attribute {wanted!r}; "
                    "an env parameter is an attribute the env reads as it steps (a reward weight, a curriculum "
                    "setting): give one it has, or add it to the env"
                )
                continue
            value = env.get_wrapper_attr(wanted)
            if callable(value):
                problems.append(
                    f"search_space.{name}: {wanted!r} of the env {env_id} (its class {_class_of(env)}) is a method, "
                    "not a value; an env parameter is a number or a name the env reads as it steps"
                )
                continue
            found[name] = _plain(value)
    finally:
        env.close()
    return found


def _plain(value: Any) -> Any:
    """A value config.yaml can hold (a numpy scalar as its number); None for anything else."""
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        value = value.item()
    return value if isinstance(value, (bool, int, float, str)) else None


def objective_problems(
    env_id: str, env_kwargs: Mapping[str, Any], objective: Objective, wrappers: Wrappers = ()
) -> list[str]:
    """Why the env cannot give ``objective``'s info keys: a Procgen game (its adapter reports none), or
    probe episodes that ended without a key as a finite number, every one of them (naming the keys they
    did report)."""
    keys = objective.info_keys
    if not keys:
        return []
    if procgen_game(env_id) is not None:
        return [
            f"--objective {objective.text}: evo's Procgen env passes no info on at an episode's end, so there is "
            "no key to read; use --objective return"
        ]
    if unknown_env_message(env_id) is not None:
        return []
    try:
        env = make_env_once(_registered(env_id), dict(env_kwargs), wrappers)
    except Exception:  # reported by the env's own checks
        return []
    try:
        probe = _episodes(env, keys)
    finally:
        env.close()
    missing = [key for key in keys if key not in probe.finite]
    if not probe.episodes or not missing:
        return []
    named = ", ".join(repr(key) for key in missing)
    unfit = [key for key in missing if key in probe.nonfinite]
    reported = ", ".join(sorted(str(key) for key in probe.reported if key not in unfit)) or "no key at all"
    how = f" (only as NaN or ±inf: {', '.join(repr(key) for key in unfit)})" if unfit else ""
    ran = f"{probe.episodes} episode{'s' if probe.episodes > 1 else ''}"
    return [
        f"--objective {objective.text}: none of the {ran} of {env_id} the probe played ({probe.steps} steps of random "
        f"actions) ended with {named} in its info as a finite number{how}; the keys they reported: {reported}. Give "
        f"one of those, or make the env put {named} in info at the end of every episode (an env that reports it in "
        "only some episodes is scored on those)"
    ]


@dataclass
class _Probe:
    """What the probe episodes showed: how many ended, the steps taken, every info key their ends
    reported, and of the keys looked for those reported as a finite number and those only NaN or ±inf."""

    episodes: int = 0
    steps: int = 0
    reported: set = field(default_factory=set)
    finite: set[str] = field(default_factory=set)
    nonfinite: set[str] = field(default_factory=set)


def _episodes(env, keys: Sequence[str]) -> _Probe:
    """Random actions from a fixed seed, episode after episode, until each of ``keys`` has ended an
    episode as a finite number or :data:`PROBE_STEPS` steps are taken."""
    probe = _Probe()
    env.action_space.seed(0)
    env.reset(seed=0)
    while probe.steps < PROBE_STEPS:
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        probe.steps += 1
        if not (terminated or truncated):
            continue
        probe.episodes += 1
        probe.reported |= set(info)
        for key in keys:
            if key in info:
                (probe.finite if _finite(info[key]) else probe.nonfinite).add(key)
        if all(key in probe.finite for key in keys):
            break
        env.reset()
    return probe


def _finite(value: Any) -> bool:
    """Whether an info value is a finite number (a value that is no number is left to the run's own check)."""
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return True
