"""``precision: bf16`` where it runs: the same learning as float32 (SB3 models built in-process).

A float32 and a bfloat16 member get the same weights and the same rollout, and the first
update's gradients are compared; the whole runs are in tests/e2e/test_precision_runs.py, the
refusal without native bfloat16 in tests/unit/config/test_precision.py.
"""

import copy

import numpy as np
import pytest
import torch

from evo.config import parse_config
from evo.config.precision import cpu_flags, native_bf16
from evo.runner.session import member_factory
from evo.sb3.precision import torch_bf16_support

needs_bf16 = pytest.mark.skipif(
    not (native_bf16(cpu_flags()) and torch_bf16_support()[0]), reason="this processor has no native bfloat16"
)


# --- the same learning: one update's gradient ------------------------------------------------------

CARTPOLE = "CartPole-v1:\n  n_envs: 4\n  n_steps: 64\n  n_minibatches: 1\n  n_epochs: 1\n  microbatch_size: 0\n"
# IMPALA through evo's microbatched train(): 1024 samples in pieces of 256. A rollout long enough
# for bigfish to pay rewards (8 with this seed): on an all-zero-reward batch of a fresh network the
# value targets are the network's own values, the loss is a difference of nearly equal numbers and
# its gradient mostly rounding, in either precision (cosine 0.88 between them on 64 such samples)
BIGFISH = "procgen:\n  n_envs: 4\n  n_steps: 256\n  n_minibatches: 1\n  n_epochs: 1\n  microbatch_size: 256\n"


def members(tmp_path, block: str):
    """A float32 and a bfloat16 member with the same weights."""
    path = tmp_path / "hp.yml"
    path.write_text(block)
    env = "bigfish" if block.startswith("procgen") else "CartPole-v1"
    built = {}
    for precision in ("fp32", "bf16"):
        config = parse_config(
            ["--env-id", env, "--hyperparams", str(path), "--precision", precision], check_run_dir=False
        )
        built[precision] = member_factory(config).make(0, config.agent.defaults, tensorboard=False)
    fp32, bf16 = built["fp32"], built["bf16"]
    bf16.load({"weights": fp32.pack().copy()}, fp32.hparams)
    return fp32, bf16


def collect(member):
    """One rollout of ``member``, not trained on: its buffer as collected, the observation after
    it and whether that one starts an episode."""
    model, collected = member.model, {}
    train = model.train
    model.train = lambda: collected.setdefault("buffer", copy.deepcopy(model.rollout_buffer))
    member.train(model.n_steps * model.n_envs)
    model.train = train
    return collected["buffer"], model._last_obs, model._last_episode_starts


def relabel(model, experience) -> None:
    """Give ``model`` the rollout's observations, actions, rewards and episode starts, with the
    values, log-probabilities, returns and advantages its own forward gives them (what its own
    rollout of these steps would have stored)."""
    source, last_obs, last_starts = experience
    buffer = copy.deepcopy(source)
    policy = model.policy
    with torch.no_grad():
        observations = torch.as_tensor(buffer.observations.reshape(-1, *buffer.obs_shape))
        values, log_prob, _ = policy.evaluate_actions(observations, torch.as_tensor(buffer.actions.reshape(-1)))
        buffer.values[:] = values.numpy().reshape(buffer.values.shape)
        buffer.log_probs[:] = log_prob.numpy().reshape(buffer.log_probs.shape)
        last_values = policy.predict_values(policy.obs_to_tensor(last_obs)[0])
    buffer.compute_returns_and_advantage(last_values, last_starts)
    model.rollout_buffer = buffer


def first_gradient(model) -> np.ndarray:
    """The gradient of the first optimizer step of ``model.train()`` on its rollout buffer."""
    gradients = []
    step = model.policy.optimizer.step

    def recording_step(*args, **kwargs):
        gradients.append(torch.cat([p.grad.flatten() for p in model.policy.parameters()]).numpy().copy())
        return step(*args, **kwargs)

    model.policy.optimizer.step = recording_step
    model.train()
    model.policy.optimizer.step = step
    return gradients[0]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@needs_bf16
@pytest.mark.parametrize("block", [CARTPOLE, BIGFISH], ids=["cartpole-mlp", "bigfish-impala"])
def test_bf16_gives_float32_s_first_gradient(tmp_path, block):
    """Same weights, same batch (the float32 member's rollout, labelled by each member's own
    forward): cosine similarity >= 0.99 between the two first gradients, and they differ (the
    bfloat16 one really was computed in bfloat16)."""
    fp32, bf16 = members(tmp_path, block)
    experience = collect(fp32)
    relabel(fp32.model, experience)
    relabel(bf16.model, experience)
    reference, mixed = first_gradient(fp32.model), first_gradient(bf16.model)
    assert cosine(mixed, reference) >= 0.99
    assert not np.allclose(mixed, reference, rtol=1e-4, atol=0)
    # float32 master weights and Adam state: one flat float32 buffer, the same size in both
    assert bf16.pack().dtype == np.float32 and bf16.pack().size == fp32.pack().size
    assert {p.dtype for p in bf16.model.policy.parameters()} == {torch.float32}
    fp32.close()
    bf16.close()


@needs_bf16
def test_which_ops_run_in_bfloat16(tmp_path):
    """The convolutions and the extractor's layers in bfloat16; the heads, the values the rollout
    buffer stores and the log-probabilities of the ratio in float32."""
    fp32, bf16 = members(tmp_path, "procgen:\n  n_envs: 2\n  n_steps: 32\n  n_minibatches: 1\n  n_epochs: 1\n")
    policy = bf16.model.policy
    seen = {}
    for name, module in policy.named_modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
            module.register_forward_hook(lambda m, i, out, name=name: seen.__setitem__(name, out.dtype))
    observations = torch.as_tensor(np.stack([policy.observation_space.sample() for _ in range(4)]))
    actions = torch.zeros(4, dtype=torch.long)
    with torch.no_grad():
        values, log_prob, entropy = policy.evaluate_actions(observations, actions)
        reference = fp32.model.policy.evaluate_actions(observations, actions)
    assert seen["features_extractor.cnn.0.conv"] == torch.bfloat16
    assert seen["features_extractor.linear.0"] == torch.bfloat16
    assert seen["action_net"] == seen["value_net"] == torch.float32
    assert values.dtype == log_prob.dtype == entropy.dtype == torch.float32
    assert torch.allclose(log_prob, reference[1], atol=0.05) and not torch.equal(log_prob, reference[1])

    bf16.train(64)  # a rollout in bfloat16: SB3's buffer holds float32 values and log-probabilities
    buffer = bf16.model.rollout_buffer
    assert buffer.values.dtype == buffer.log_probs.dtype == buffer.advantages.dtype == np.float32
    fp32.close()
    bf16.close()
