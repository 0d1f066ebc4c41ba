"""A member's policy as an ONNX model (``evo-export --format onnx``, evo/tools/export.py), with the
observation preprocessing it expects stated beside it, and checked by onnxruntime against the torch policy
on observations recorded from the member's own envs.

The graph is the policy's action head on an observation as the policy receives it (after the env's frame
stack, normalisation and channel transposition, all stated in the JSON; SB3's own preprocessing, an image's
scaling to [0, 1] and a discrete observation's one-hot, is inside the graph):

- actor-critic policies (PPO, A2C, TRPO): ``logits`` (a discrete action space) or ``mean`` (a Box: the
  Gaussian's mean), and ``action``, the deterministic action (argmax, or the mean);
- DQN and QR-DQN: ``q_values`` (QR-DQN's: the mean of its quantiles) and ``action``, their argmax;
- SAC, TQC, CrossQ, TD3, DDPG: ``action``, the actor's deterministic action in [-1, 1], which the env gets
  rescaled to its bounds (the JSON's ``postprocessing``).

What to re-check when SB3 changes: ``ActorCriticPolicy.get_distribution``'s path (extract_features,
mlp_extractor.forward_actor, action_net), ``QNetwork.forward``, ``QuantileNetwork.forward`` and each
off-policy policy's ``_predict``.
"""

from __future__ import annotations

from evo.sb3 import _quiet  # noqa: F401  (before SB3)

# isort: split

import io
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.preprocessing import is_image_space
from stable_baselines3.common.vec_env import VecTransposeImage, unwrap_vec_wrapper
from torch import nn

OPSET = 17
RECORDED = 32
"""Observations recorded from the member's envs for the check (and written with the model's JSON's check)."""
TOLERANCE = 1e-4
"""The largest difference between onnxruntime's outputs and torch's that the check accepts (float rounding)."""


class ActionHead(nn.Module):
    """The policy's action head as the module docstring lists it: ``forward(obs)`` gives the outputs
    :attr:`names` names, in that order."""

    def __init__(self, policy: nn.Module):
        super().__init__()
        self.policy = policy
        self.discrete = isinstance(policy.action_space, spaces.Discrete)
        if isinstance(policy, ActorCriticPolicy):
            self.kind, self.names = "actor-critic", ["logits" if self.discrete else "mean", "action"]
        elif hasattr(policy, "q_net") or hasattr(policy, "quantile_net"):
            self.kind, self.names = "q", ["q_values", "action"]
        else:
            self.kind, self.names = "actor", ["action"]

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        policy = self.policy
        if self.kind == "actor-critic":
            features = policy.extract_features(obs, policy.pi_features_extractor)
            head = policy.action_net(policy.mlp_extractor.forward_actor(features))
            return head, head.argmax(dim=1) if self.discrete else head
        if self.kind == "q":
            q_values = policy.q_net(obs) if hasattr(policy, "q_net") else policy.quantile_net(obs).mean(dim=1)
            return q_values, q_values.argmax(dim=1)
        return (policy._predict(obs, deterministic=True),)


def onnx_problems(policy: nn.Module) -> list[str]:
    """Why ``policy`` cannot be written as ONNX here (a Dict observation, an action space other than
    Discrete and Box)."""
    problems = []
    if not isinstance(policy.observation_space, (spaces.Box, spaces.Discrete)):
        problems.append(
            f"its observations are {type(policy.observation_space).__name__}: ONNX export takes Box or Discrete"
        )
    if not isinstance(policy.action_space, (spaces.Box, spaces.Discrete)):
        problems.append(f"its actions are {type(policy.action_space).__name__}: ONNX export takes Box or Discrete")
    return problems


def observation_input(policy: nn.Module, obs: np.ndarray) -> torch.Tensor:
    """``obs`` (as the policy receives them, a batch) as the graph's input tensor: the space's dtype."""
    return torch.as_tensor(np.asarray(obs, dtype=input_dtype(policy)))


def input_dtype(policy: nn.Module) -> np.dtype:
    space = policy.observation_space
    return np.dtype(np.int64) if isinstance(space, spaces.Discrete) else np.dtype(space.dtype)


def torch_outputs(head: ActionHead, obs: np.ndarray) -> list[np.ndarray]:
    """``head``'s outputs on ``obs`` in torch, as numpy arrays."""
    with torch.no_grad():
        return [out.numpy() for out in head(observation_input(head.policy, obs))]


def record_observations(member, count: int = RECORDED) -> np.ndarray:
    """``count`` observations as the member's policy receives them, from its own training envs (reset, then
    stepped by its deterministic actions; the normalisation statistics not updated): what the check compares on."""
    env, normalizer = member.model.env, member.normalizer
    training = normalizer.training if normalizer is not None else None
    if normalizer is not None:
        normalizer.training = False
    try:
        obs = env.reset()
        recorded = []
        while sum(len(batch) for batch in recorded) < count:
            recorded.append(np.asarray(obs))
            actions, _ = member.model.predict(obs, deterministic=True)
            obs, _, _, _ = env.step(actions)
    finally:
        if normalizer is not None:
            normalizer.training = training
    return np.concatenate(recorded)[:count]


def preprocessing(member) -> dict[str, Any]:
    """What the env's observations go through before the graph, in order: zoo's env wrappers (an Atari game's
    AtariWrapper), the frame stack, the normalisation, the channel transposition (each None where the member
    has none); and the graph's input."""
    policy, agent = member.model.policy, member.agent
    space = policy.observation_space
    steps: dict[str, Any] = {"frame_stack": None, "normalize": None, "transpose": None}
    if agent.frame_stack and agent.frame_stack > 1:
        steps["frame_stack"] = {
            "frames": int(agent.frame_stack),
            "axis": "last (an image's channels), the oldest frame first (SB3's VecFrameStack)",
        }
    normalizer = member.normalizer
    if normalizer is not None and normalizer.norm_obs:
        steps["normalize"] = {
            "mean": np.asarray(normalizer.obs_rms.mean, dtype=np.float64).tolist(),
            "var": np.asarray(normalizer.obs_rms.var, dtype=np.float64).tolist(),
            "epsilon": float(normalizer.epsilon),
            "clip_obs": float(normalizer.clip_obs),
            "formula": "clip((obs - mean) / sqrt(var + epsilon), -clip_obs, clip_obs), as float32",
        }
    transposed = unwrap_vec_wrapper(member.model.env, VecTransposeImage) is not None
    if transposed:
        steps["transpose"] = {"from": "HWC", "to": "CHW", "numpy": "obs.transpose(0, 3, 1, 2)"}
    return {
        **steps,
        "input": {
            "name": "obs",
            "dtype": str(input_dtype(policy)),
            "shape": [None, *([] if isinstance(space, spaces.Discrete) else [int(n) for n in space.shape])],
            "channel_order": "CHW" if is_image_space(space, check_channels=False) else None,
            "inside_the_graph": (
                "the image's scaling to [0, 1] (x / 255)"
                if is_image_space(space, check_channels=False)
                else "one-hot of the observation"
                if isinstance(space, spaces.Discrete)
                else "none (the values as given, as float32)"
            ),
        },
    }


def action_space(policy: nn.Module, head: ActionHead) -> dict[str, Any]:
    """The action space, and what turns the graph's ``action`` into the env's action."""
    space = policy.action_space
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "postprocessing": "none: action is the env's"}
    described = {"type": "Box", "low": space.low.tolist(), "high": space.high.tolist()}
    if head.kind == "actor" or getattr(policy, "squash_output", False):
        described["postprocessing"] = "low + (action + 1) / 2 * (high - low)"
    else:
        described["postprocessing"] = "clip(action, low, high)"
    return described


def to_onnx(policy: nn.Module, sample: np.ndarray) -> tuple[ActionHead, bytes]:
    """``policy``'s :class:`ActionHead` (in evaluation mode) and its ONNX model, traced on ``sample`` (a batch
    of observations as the policy receives them), the batch size free."""
    policy.set_training_mode(False)
    head = ActionHead(policy).eval()
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # torch's notes on the TorchScript-based exporter, which this uses
        warnings.simplefilter("ignore")
        torch.onnx.export(
            head,
            (observation_input(policy, sample),),
            buffer,
            input_names=["obs"],
            output_names=head.names,
            dynamic_axes={name: {0: "batch"} for name in ["obs", *head.names]},
            opset_version=OPSET,
            dynamo=False,
        )
    return head, buffer.getvalue()


def export_onnx(member, model_path: Path, description_path: Path, about: dict[str, Any]) -> dict:
    """Write ``member``'s policy to ``model_path`` as ONNX and its description (``about``: the algorithm, env
    and env wrappers; the preprocessing, outputs, action space, the check) to ``description_path`` as JSON; the
    check: onnxruntime's outputs on :data:`RECORDED` observations from the member's envs against torch's,
    refused beyond :data:`TOLERANCE`. Returns the description."""
    import onnxruntime

    policy = member.model.policy
    recorded = record_observations(member)
    head, model = to_onnx(policy, recorded[:1])
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    ours = torch_outputs(head, recorded)
    theirs = session.run(head.names, {"obs": np.asarray(recorded, dtype=input_dtype(policy))})
    differences = {
        name: float(np.max(np.abs(a.astype(np.float64) - b)))
        for name, a, b in zip(head.names, theirs, ours, strict=True)
    }
    if max(differences.values()) > TOLERANCE:
        raise ValueError(f"onnxruntime's outputs differ from the torch policy's by {differences} (> {TOLERANCE})")
    description = {
        **about,
        "preprocessing": preprocessing(member),
        "outputs": {name: str(tuple(out.shape[1:])) for name, out in zip(head.names, ours, strict=True)},
        "action_space": action_space(policy, head),
        "check": {
            "observations": len(recorded),
            "max_abs_difference": differences,
            "actions_equal": bool(np.array_equal(theirs[-1], ours[-1])),
            "onnxruntime": onnxruntime.__version__,
        },
    }
    model_path.write_bytes(model)
    description_path.write_text(json.dumps(description, indent=2) + "\n")
    return description
