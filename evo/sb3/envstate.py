"""A member's training envs as plain data, so that a checkpoint carries the episodes in
progress and a resumed member continues them instead of restarting every env at once.

Why: recreated envs all start an episode at the resume, so their episode ends fall together;
when episodes are long against a generation, whole generations then finish no episode, and a
member that has just copied another has nothing of its own to be scored by.

Only plain data is saved (numbers, strings, arrays as tensors, lists and dicts of them, a
NumPy generator's state), so the checkpoint still loads with ``torch.load(weights_only=True)``
and nothing in it is executed; no env object is pickled. Supported: gymnasium envs in SB3's
``DummyVecEnv`` (under ``VecNormalize`` too) whose every layer holds only such data besides
its spaces and spec (the classic-control tasks, CartPole among them), under SB3's VecFrameStack
(its stacked frames) and VecTransposeImage too; and ale-py's Atari games, whose emulator
(``AtariEnv.ale``) is saved as the bytes of ``cloneState(include_rng=True)``: the console's RAM,
the frame and the random generator of its sticky actions, so that a restored game repeats the
same frames for the same actions. Others (MuJoCo's simulator state, Procgen's C++ games) are not
captured: :func:`capture` returns None and a resumed member starts fresh episodes, as before.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.vec_env import (
    DummyVecEnv,
    VecEnv,
    VecEnvWrapper,
    VecFrameStack,
    VecNormalize,
    VecTransposeImage,
)

FORMAT = 1
MODEL_FIELDS = ("_last_obs", "_last_episode_starts", "_last_original_obs")
STATIC = (gym.spaces.Space, gym.envs.registration.EnvSpec)
"""Attributes rebuilt identically with the env, neither saved nor a reason to give up."""
REBUILT = frozenset({"_action_set"})
"""Attributes by name rebuilt identically with the env: an Atari game's legal actions (ale-py's enums)."""
EMULATOR = "ale"
"""ale-py's ``AtariEnv`` attribute holding the emulator, saved by its own state's bytes."""


class Unsupported(Exception):
    """The env holds state that is not plain data."""


def to_plain(value: Any) -> Any:
    """``value`` as data ``torch.load(weights_only=True)`` reads back; Unsupported otherwise."""
    if isinstance(value, np.generic):  # before float: np.float64 is a float
        if value.dtype.kind not in "biuf":
            raise Unsupported(f"scalar of {value.dtype}")
        return {"__scalar__": to_plain(np.asarray(value).reshape(1))}
    if value is None or isinstance(value, (bool, str, float)):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else {"__int__": str(value)}
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf" or value.dtype in (np.uint16, np.uint32, np.uint64):
            raise Unsupported(f"array of {value.dtype}")
        return {"__array__": torch.from_numpy(np.ascontiguousarray(value).copy())}
    if isinstance(value, np.random.Generator):
        return {"__generator__": to_plain(value.bit_generator.state)}
    if isinstance(value, (list, tuple)):
        items = [to_plain(item) for item in value]
        return {"__tuple__": items} if isinstance(value, tuple) else items
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise Unsupported("a dict with keys that are not strings")
        return {"__dict__": {key: to_plain(item) for key, item in value.items()}}
    raise Unsupported(type(value).__name__)


def from_plain(value: Any, current: Any = None) -> Any:
    """The inverse of :func:`to_plain`; a generator's state goes into ``current``'s generator."""
    if isinstance(value, list):
        return [from_plain(item) for item in value]
    if not isinstance(value, dict):
        return value
    if "__int__" in value:
        return int(value["__int__"])
    if "__scalar__" in value:
        return from_plain(value["__scalar__"])[0]
    if "__array__" in value:
        return value["__array__"].numpy().copy()
    if "__tuple__" in value:
        return tuple(from_plain(item) for item in value["__tuple__"])
    if "__emulator__" in value:
        return emulator(current, value["__emulator__"])
    if "__generator__" in value:
        state = from_plain(value["__generator__"])
        generator = current if isinstance(current, np.random.Generator) else np.random.default_rng()
        generator.bit_generator.state = state
        return generator
    return {key: from_plain(item) for key, item in value["__dict__"].items()}


def layers(env: gym.Env) -> list[gym.Env]:
    """An env's wrappers, outermost first, then the env itself."""
    chain = [env]
    while isinstance(chain[-1], gym.Wrapper):
        chain.append(chain[-1].env)
    return chain


def layer_state(layer: Any) -> dict:
    """``{"class": its class, "state": its attributes}``, the wrapped env and the static ones left out (an
    emulator: its state's bytes)."""
    state = {}
    for name, value in vars(layer).items():
        if name == "env" or name in REBUILT or isinstance(value, STATIC):
            continue
        if name == EMULATOR and hasattr(value, "cloneState"):
            state[name] = {
                "__emulator__": to_plain(np.frombuffer(value.cloneState(include_rng=True).__getstate__(), np.uint8))
            }
            continue
        state[name] = to_plain(value)
    return {"class": type(layer).__qualname__, "state": state}


def emulator(current: Any, saved: Any) -> Any:
    """``current`` (an ale-py emulator) put back into the state whose bytes ``saved`` holds."""
    from ale_py import ALEState

    state = ALEState.__new__(ALEState)
    state.__setstate__(from_plain(saved).tobytes())
    current.restoreState(state)
    return current


def vec_envs(venv: VecEnv) -> tuple[VecNormalize | None, VecFrameStack | None, DummyVecEnv]:
    """The VecNormalize and VecFrameStack around ``venv``'s DummyVecEnv (None where there is none), and it;
    Unsupported for any other wrapper (VecTransposeImage, which holds nothing, is passed)."""
    normalizer = stack = None
    layer = venv
    while isinstance(layer, VecEnvWrapper):
        if isinstance(layer, VecNormalize):
            normalizer = layer
        elif isinstance(layer, VecFrameStack):
            stack = layer
        elif not isinstance(layer, VecTransposeImage):
            raise Unsupported(type(layer).__name__)
        layer = layer.venv
    if not isinstance(layer, DummyVecEnv):
        raise Unsupported(type(layer).__name__)
    return normalizer, stack, layer


def capture(model) -> dict | None:
    """The model's training envs and its last observations as plain data; None if the envs
    hold state that is not plain data (a resumed member then starts fresh episodes)."""
    try:
        normalizer, stack, inner = vec_envs(model.env)
        return {
            "format": FORMAT,
            "envs": [[layer_state(layer) for layer in layers(env)] for env in inner.envs],
            "normalizer": {
                name: to_plain(value)
                for name, value in vars(normalizer).items()
                if name in ("returns", "old_obs", "old_reward")  # the last two exist after a first step
            }
            if normalizer is not None
            else None,
            "model": {name: to_plain(getattr(model, name, None)) for name in MODEL_FIELDS},
            **({"frames": to_plain(stack.stacked_obs.stacked_obs)} if stack is not None else {}),
        }
    except Unsupported:
        return None


def restore(model, saved: dict) -> bool:
    """Put ``saved`` (from :func:`capture`) back into ``model``'s envs; False (nothing
    changed) if they do not match it: another number of envs or another wrapper chain.
    Attributes an env creates lazily (its generator, before its first reset) are set too."""
    normalizer, stack, inner = vec_envs(model.env)
    if len(saved["envs"]) != len(inner.envs) or (saved["normalizer"] is None) != (normalizer is None):
        return False
    if ("frames" in saved) != (stack is not None):
        return False
    chains = [layers(env) for env in inner.envs]
    for chain, states in zip(chains, saved["envs"], strict=True):
        if [type(layer).__qualname__ for layer in chain] != [state["class"] for state in states]:
            return False
    for chain, states in zip(chains, saved["envs"], strict=True):
        for layer, state in zip(chain, states, strict=True):
            for name, value in state["state"].items():
                setattr(layer, name, from_plain(value, getattr(layer, name, None)))
    if normalizer is not None:
        for name, value in saved["normalizer"].items():
            setattr(normalizer, name, from_plain(value))
    if stack is not None:
        stack.stacked_obs.stacked_obs = from_plain(saved["frames"])
    for name, value in saved["model"].items():
        setattr(model, name, from_plain(value))
    return True
