"""A member's env parameters on the env that rl_zoo3's enjoy builds: the env it was tuned in.

evo-export writes this file into the experiment folder as ``evo_env_params.py`` (evo/tools/export.py) and
names its class in the export's ``config.yml`` as zoo's ``env_wrapper``, after the run's own wrappers::

    env_wrapper:
    - evo_env_params.SetEnvParams:
        attrs:
          bonus_weight: 0.31

so that enjoy run with the experiment folder on ``PYTHONPATH`` (evo-export's "play it" line says so) builds
the env with the member's values of its ``env.<attribute>`` hyperparameters, not the env's defaults.

Self-contained: it imports gymnasium and the standard library only, never evo, so it runs where evo is not
installed. It says what it set on stdout, once per env and values (enjoy's own lines go there; no logging is
set up in enjoy's process, so a logger's INFO line would be lost).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

EXPORTED_AS = "evo_env_params"
"""The module name this file has in an export (evo-export writes it there so)."""

_SAID: set[str] = set()


class SetEnvParams(gym.Wrapper):
    """Sets each of ``attrs`` (attribute name -> value) on the env it wraps, as evo sets a member's
    ``env.<attribute>`` hyperparameters on its live envs (evo.sb3.envs.set_env_param): on the outermost
    layer of the env (a wrapper or the env itself) that has the attribute, as gymnasium's
    ``set_wrapper_attr(name, value, force=False)`` does. An attribute that no layer has is refused rather
    than created where the env would never read it. Set once, when the env is built, as evo sets them
    between a member's intervals (an env that put an attribute back at its reset ran so in evo too)."""

    def __init__(self, env: gym.Env, attrs: Mapping[str, Any]):
        super().__init__(env)
        self.attrs = dict(attrs)
        for name, value in self.attrs.items():
            if not env.set_wrapper_attr(name, value, force=False):
                raise AttributeError(
                    f"attrs: {name}={value!r}: the env {describe(env)} has no attribute {name!r} to set; play the "
                    "export with the env the member was trained on, or remove the entry from config.yml's env_wrapper"
                )
        said = f"evo_env_params: {describe(env)} runs with the member's env parameters: " + ", ".join(
            f"{name}={env.get_wrapper_attr(name)!r}" for name in self.attrs
        )
        if said not in _SAID:
            _SAID.add(said)
            print(said, flush=True)


def describe(env: gym.Env) -> str:
    """The env's registered id, else its class name."""
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None else type(env.unwrapped).__name__
