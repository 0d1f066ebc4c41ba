"""Every learner of the learning table (docs/results.md, "Every learner against rl_zoo3") trains as the stock SB3 or
sb3-contrib class trains, bit for bit: a member trained for three generations, scored on its evaluation episodes
after each, against the stock class given the member's start (its weights, its env as it was, the same random
streams) and one ``learn()`` of the same env steps, as rl_zoo3's train calls it.

What evo changes on the way is all in the comparison: a ``learn()`` per generation with scoring episodes between
(ε of DQN and QR-DQN over the member's whole training), the state as views of one flat buffer, evo's eager Adam
and RMSprop, the entropy coefficient's optimizer, TD3's and DDPG's noise objects, the replay buffer's handling. The
stock model is given the member's memory layout (its state bound to a flat buffer as evo binds a member's,
starting at the same place in a cache line): evo's buffer lays float32 tensors back to back, not at 64-byte
boundaries, and the CPU kernels round a product of misaligned rows differently in the last bit (CrossQ's action at
its 106th env step differed by 6e-8 without it), from which two otherwise equal runs drift apart as two seeds do.
PPO runs SB3's own update here (``microbatch_size`` 0, as in the table's CartPole runs); its microbatched update
adds the same gradients in another order, a rounding difference tests/unit/sb3/test_ppo.py bounds."""

import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from evo.config import parse_config
from evo.sb3.flat import bind_flat
from evo.sb3.learner import constructor_parameters
from evo.sb3.rng import rng_state, set_rng_state
from evo.sb3.stock import stock_class
from tests.support import ROOT, member_of
from tests.unit.sb3.offpolicy import replay_of, same_replay

NETS = "policy_kwargs:{net_arch: [16, 16]}"
OFF_POLICY = ["learning_starts:40", "batch_size:32", "buffer_size:500", "train_freq:4", "gradient_steps:2"]
CONFIGS = {
    "ppo": ["--env-id", "CartPole-v1", "--hyperparams", "n_envs:2", "n_steps:8", "batch_size:8", "n_epochs:2", NETS],
    "a2c": ["--env-id", "CartPole-v1", "--hyperparams", "n_envs:2", "n_steps:8", NETS],
    "dqn": ["--env-id", "CartPole-v1", "--hyperparams", *OFF_POLICY, "target_update_interval:20", NETS],
    "qrdqn": [
        "--env-id",
        "CartPole-v1",
        "--hyperparams",
        *OFF_POLICY,
        "target_update_interval:20",
        "policy_kwargs:{net_arch: [16, 16], n_quantiles: 10}",
    ],
    "trpo_learner:TRPOLearner": [
        "--env-id",
        "CartPole-v1",
        "--hyperparams",
        "n_envs:2",
        "n_steps:32",
        "batch_size:32",
        NETS,
    ],
    "sac": ["--env-id", "Pendulum-v1", "--hyperparams", *OFF_POLICY, NETS],
    "td3": ["--env-id", "Pendulum-v1", "--hyperparams", *OFF_POLICY, NETS],
    "ddpg": ["--env-id", "Pendulum-v1", "--hyperparams", *OFF_POLICY, "noise_type:ornstein-uhlenbeck", NETS],
    "tqc": [
        "--env-id",
        "Pendulum-v1",
        "--hyperparams",
        *OFF_POLICY,
        "policy_kwargs:{net_arch: [16, 16], n_quantiles: 5}",
    ],
    "crossq": ["--env-id", "Pendulum-v1", "--hyperparams", *OFF_POLICY, "policy_delay:2", NETS],
}
"""The learning table's learners on a tiny budget (their envs there; CrossQ with zoo's Pendulum policy_delay)."""
GENERATIONS, STEPS = 3, 64


@pytest.fixture(autouse=True)
def one_thread_and_the_examples(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "docs" / "examples"))  # the TRPO example, as PYTHONPATH=docs/examples
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def stock_twin(member):
    """The stock class built from the member's settings, at the member's start: its weights and entropy
    coefficient, a copy of its envs (their states and pending seeds), its noise, its memory layout."""
    model = member.model
    cls = stock_class(member.algorithm)
    values = {**member.agent.settings, **member.hparams}
    accepted = constructor_parameters(cls)
    arguments = {name: value for name, value in member.constructor_arguments(values).items() if name in accepted}
    if getattr(model, "action_noise", None) is not None:
        arguments["action_noise"] = copy.deepcopy(model.action_noise)
    given = member.agent.settings.get("policy_kwargs") or {}  # the YAML's; evo's own optimizer choices are not
    policy_kwargs = {k: v for k, v in member.policy_kwargs().items() if k in given or not k.startswith("optimizer_")}
    stock = cls(member.policy_name(), copy.deepcopy(model.env), policy_kwargs=policy_kwargs, **arguments)
    assert type(stock) is cls
    stock.policy.load_state_dict(model.policy.state_dict())
    if getattr(model, "log_ent_coef", None) is not None:
        with torch.no_grad():
            stock.log_ent_coef.copy_(model.log_ent_coef)
    bind_flat(stock, aligned_as(member.buffer), keep=True)
    return stock


def aligned_as(buffer: np.ndarray) -> np.ndarray:
    """A zeroed float32 buffer of ``buffer``'s size whose start lies where ``buffer``'s does within a 64-byte cache
    line (two allocations need not), so that each tensor bound to it is aligned as the member's."""
    room = np.zeros(buffer.size + 16, dtype=np.float32)
    shift = (buffer.ctypes.data - room.ctypes.data) % 64 // room.itemsize
    flat = room[shift : shift + buffer.size]
    assert flat.ctypes.data % 64 == buffer.ctypes.data % 64
    return flat


@pytest.mark.parametrize("algo", list(CONFIGS))
def test_a_member_trains_as_the_stock_class_bit_for_bit_across_generations_and_their_scoring(algo):
    argv = ["--algo", algo, *CONFIGS[algo], "--total-generations", str(GENERATIONS)]
    config = parse_config([*argv, "--agent-training-steps", str(STEPS), "--eval-episodes", "1"], check_run_dir=False)
    member = member_of(config, 0)
    stock = stock_twin(member)
    start = rng_state()
    stock.learn(GENERATIONS * STEPS)
    after = rng_state()

    set_rng_state(start)
    for _ in range(GENERATIONS):
        member.train(STEPS)
        assert np.isfinite(member.evaluate().score_test)  # the scoring episodes between generations

    model = member.model
    assert (model.num_timesteps, model._n_updates) == (stock.num_timesteps, stock._n_updates)
    assert stock._n_updates > 0
    ours, theirs = model.policy.state_dict(), stock.policy.state_dict()
    assert all(torch.equal(ours[name], theirs[name]) for name in theirs), [
        name for name in theirs if not torch.equal(ours[name], theirs[name])
    ]
    for name in ("actor", "critic", "policy"):
        optimizer = getattr(getattr(model, name, None), "optimizer", None)
        if optimizer is not None:
            stock_state = getattr(stock, name).optimizer.state_dict()["state"]
            for index, state in optimizer.state_dict()["state"].items():
                assert all(
                    torch.equal(torch.as_tensor(v), torch.as_tensor(stock_state[index][k])) for k, v in state.items()
                )
    if config.agent.spec.replay:
        assert same_replay(replay_of(member), replay_of(SimpleNamespace(model=stock)))
    assert [e["r"] for e in model.ep_info_buffer] == [e["r"] for e in stock.ep_info_buffer]
    assert np.array_equal(model._last_obs, stock._last_obs)
    now = rng_state()  # the scoring episodes drew nothing from the streams training draws from
    assert torch.equal(now["torch"], after["torch"]) and torch.equal(now["numpy_keys"], after["numpy_keys"])
    assert now["numpy_position"] == after["numpy_position"] and now["python"] == after["python"]
    member.close()
