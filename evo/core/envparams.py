"""Environment parameters in a search space: entries named ``env.<attribute>`` (pure).

Sample Factory's ``RewardShapingInterface`` and DexPBT's mutable env parameters put reward weights and
curriculum settings into the population's search. Here a search space entry ``env.<name>`` (of any
kind) is an attribute of the env: each member's value is set on every one of its envs, training and
evaluation, when it is built, after each explore and at each exploit (evo/sb3/envs.py
``set_env_param``). It is explored, recorded, checkpointed, resumed and replayed like a learner's
hyperparameter, in a column of its own after the learner's (sorted by name).
"""

from __future__ import annotations

from collections.abc import Iterable

ENV_PREFIX = "env."


def is_env_param(name: str) -> bool:
    """Whether a search space's entry ``name`` is an env parameter (``env.<attribute>``)."""
    return isinstance(name, str) and name.startswith(ENV_PREFIX)


def attribute(name: str) -> str:
    """The env's attribute an entry sets: ``env.bonus_weight`` -> ``bonus_weight``."""
    return name[len(ENV_PREFIX) :]


def env_params(names: Iterable[str]) -> tuple[str, ...]:
    """The env parameters among ``names``, in the records' order (by name)."""
    return tuple(sorted(name for name in set(names) if is_env_param(name)))


def name_problem(name: str) -> str | None:
    """Why ``env.<attribute>`` cannot name an attribute: none given, or not a public identifier."""
    wanted = attribute(name)
    if not wanted.isidentifier() or wanted.startswith("_"):
        return (
            f"search_space.{name}: {wanted!r} is not an env attribute's name; give env.<name> with a public "
            "attribute of the env (letters, digits and _, not starting with _), e.g. env.bonus_weight"
        )
    return None
