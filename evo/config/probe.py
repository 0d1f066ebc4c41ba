"""What start-up learns from a probe env: the env parameters it has, and the info keys it reports. Pure
apart from making the env (gymnasium only, as evo.config.envnames does to read its spaces).

- **Env parameters** (``env.<attribute>`` in a search space, evo.core.envparams): the env must have each
  attribute (on the env or one of its wrappers, as gymnasium's ``get_wrapper_attr`` finds it), and it
  must not be a method; its value then is the parameter's default (``--initial-hparams defaults``).
  Procgen games take none: their C++ env fixes its settings when it is built.
- **The objective** (``--objective info:<key>``): one episode of a probe env, random actions from a
  fixed seed, must end with every key in its info. An episode that does not end within
  :data:`PROBE_STEPS` steps proves nothing; the run then checks at its first generation
  (evo.core.objective.unreported).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evo.config.envnames import make_env_once, procgen_game, unknown_env_message
from evo.core.envparams import attribute
from evo.core.objective import Objective

PROBE_STEPS = 2000
"""The most steps the objective's probe episode takes (fewer when the env's time limit says so)."""
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
    env_id: str, env_kwargs: Mapping[str, Any], names: Sequence[str], problems: list[str]
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
        env = make_env_once(_registered(env_id), dict(env_kwargs))
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


def objective_problems(env_id: str, env_kwargs: Mapping[str, Any], objective: Objective) -> list[str]:
    """Why the env cannot give ``objective``'s info keys: a Procgen game (its adapter reports none), or one
    probe episode that ended without them (naming the keys it did report)."""
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
        env = make_env_once(_registered(env_id), dict(env_kwargs))
    except Exception:  # reported by the env's own checks
        return []
    try:
        ended, info, steps = _one_episode(env)
    finally:
        env.close()
    if not ended:
        return []
    missing = [key for key in keys if key not in info]
    if not missing:
        return []
    reported = ", ".join(sorted(map(str, info))) or "no key at all"
    named = ", ".join(repr(key) for key in missing)
    return [
        f"--objective {objective.text}: one episode of {env_id} ({steps} steps of random actions) ended without "
        f"{named} in its info; the keys it reported: {reported}. Give one of those, or make the env put {named} in "
        "info at the end of every episode"
    ]


def _one_episode(env) -> tuple[bool, dict, int]:
    """Random actions from a fixed seed until the episode ends: whether it ended within the probe's
    steps, the last step's info and the steps taken."""
    limit = PROBE_STEPS
    if env.spec is not None and env.spec.max_episode_steps:
        limit = min(limit, int(env.spec.max_episode_steps))
    env.action_space.seed(0)
    _, info = env.reset(seed=0)
    for step in range(1, limit + 1):
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        if terminated or truncated:
            return True, dict(info), step
    return False, dict(info), limit
