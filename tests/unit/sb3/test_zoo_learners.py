"""What every learner of issue 39 (A2C, DQN, DDPG; sb3-contrib's QR-DQN, TQC, CrossQ) must do with its
state, proven on real members (real SB3, no MPI job), one parametrised body for all: the flat state is
exactly what the algorithm names as its state (``_get_torch_save_params``: every network, target network,
optimizer state of whatever optimizer, and the algorithm's own tensors), each of them a view of the
member's buffer; an exploit copies it bit for bit while the recipient keeps its own hyperparameters (and
its replay buffer); a checkpointed member (plain tensors, loaded with weights_only=True) trains on exactly
as the uninterrupted one, its replay buffer and counters included. What each learner's settings do to
its update is proven in its own file (test_a2c.py, ...)."""

import io

import numpy as np
import pytest
import torch

from evo.config import parse_config
from evo.rundir import checkpoint as ckpt
from evo.sb3.flat import named_state, offsets, state_tensors
from evo.sb3.rng import rng_state, set_rng_state
from tests.support import member_of
from tests.unit.sb3.offpolicy import checkpoint_payload_of, replay_of, same_replay

SMALL = "policy_kwargs:{net_arch: [16, 16]}"
Q10 = "policy_kwargs:{net_arch: [16, 16], n_quantiles: 10}"
OFF_POLICY = ["learning_starts:40", "batch_size:32", "buffer_size:500", "train_freq:4", "gradient_steps:2"]
CONFIGS = {
    "a2c": ["--env-id", "CartPole-v1", "--hyperparams", "n_envs:2", "n_steps:8", SMALL],
    "dqn": ["--env-id", "CartPole-v1", "--hyperparams", *OFF_POLICY, "target_update_interval:20", SMALL],
    "qrdqn": ["--env-id", "CartPole-v1", "--hyperparams", *OFF_POLICY, "target_update_interval:20", Q10],
    "ddpg": ["--env-id", "Pendulum-v1", "--hyperparams", *OFF_POLICY, "noise_type:ornstein-uhlenbeck", SMALL],
    "tqc": [
        "--env-id",
        "Pendulum-v1",
        "--hyperparams",
        *OFF_POLICY,
        "policy_kwargs:{net_arch: [16, 16], n_quantiles: 5}",
    ],
    "crossq": ["--env-id", "Pendulum-v1", "--hyperparams", *OFF_POLICY, SMALL],
}
"""Each learner on a tiny budget: its env and settings."""
NEW = {
    "a2c": {"learning_rate": 2e-3, "gamma": 0.95, "ent_coef": 0.01, "vf_coef": 0.7},
    "dqn": {"learning_rate": 2e-3, "gamma": 0.95, "exploration_final_eps": 0.1, "target_update_interval": 12},
    "qrdqn": {"learning_rate": 2e-3, "gamma": 0.95, "exploration_final_eps": 0.1, "max_grad_norm": 5.0},
    "ddpg": {"learning_rate": 2e-3, "tau": 0.05, "noise_std": 0.3},
    "tqc": {"learning_rate": 2e-3, "target_entropy": -0.3, "top_quantiles_to_drop_per_net": 1},
    "crossq": {"learning_rate": 2e-3, "target_entropy": -0.3, "policy_delay": 7},
}
"""New values a recipient takes at an exploit (none its donor's)."""


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def config_of(algo: str):
    return parse_config(["--algo", algo, *CONFIGS[algo]], check_run_dir=False)


def train_alike(steps: int, *members) -> None:
    rng = rng_state()
    for member in members:
        set_rng_state(rng)
        member.train(steps)


def named_tensors(model) -> list[torch.Tensor]:
    """Every tensor the algorithm names as its state, read from its own lists (each once)."""
    modules, optimizers, variables = named_state(model)
    found = {}
    for module in modules:
        found.update({id(t): t for t in [*module.parameters(), *module.buffers()]})
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            for param in group["params"]:
                found.update({id(t): t for t in optimizer.state[param].values()})
    for name in variables:
        tensor = model
        for part in name.split("."):
            tensor = getattr(tensor, part)
        found[id(tensor)] = tensor
    return list(found.values())


@pytest.mark.parametrize("algo", list(CONFIGS))
def test_the_flat_state_is_exactly_what_the_algorithm_names_as_its_state(algo):
    member = member_of(config_of(algo), 0)
    model = member.model
    expected = named_tensors(model)
    tensors = state_tensors(model)
    assert {id(t) for t in tensors} == {id(t) for t in expected} and len(tensors) == len(expected)
    assert member.buffer.size == offsets(tensors)[1]
    start, end = member.buffer.ctypes.data, member.buffer.ctypes.data + member.buffer.nbytes
    assert all(start <= t.data_ptr() < end for t in tensors)  # each a view of the buffer
    assert all(optimizer.state for optimizer in named_state(model)[1])  # state created up front
    member.train(60)  # the updates work in place on the views
    assert member.pack() is member.buffer
    assert {id(t) for t in state_tensors(model)} == {id(t) for t in tensors}
    member.close()


@pytest.mark.parametrize("algo", list(CONFIGS))
def test_an_exploit_copies_the_state_bit_exactly_and_the_recipient_keeps_its_values(algo):
    config = config_of(algo)
    donor, recipient = member_of(config, 0), member_of(config, 1)
    donor.train(80)
    recipient.train(48)
    assert donor.pack().tobytes() != recipient.pack().tobytes()
    own_replay = replay_of(recipient) if config.agent.spec.replay else None
    new = {**recipient.hparams, **NEW[algo]}
    donors = donor.effective_hparams(list(NEW[algo]))
    assert all(donors[name] != value for name, value in NEW[algo].items())

    recipient.load({name: array.copy() for name, array in donor.exploit_state().items()}, new)

    assert recipient.pack().tobytes() == donor.pack().tobytes()
    for mine, theirs in zip(state_tensors(recipient.model), state_tensors(donor.model), strict=True):
        assert mine.dtype == theirs.dtype and torch.equal(mine, theirs)
    assert recipient.hparams == new and recipient.effective_hparams() == pytest.approx(new)
    if own_replay is not None:
        assert same_replay(replay_of(recipient), own_replay)
    recipient.train(8)  # and trains on (a unit of its training: a rollout, a collection)
    assert recipient.env_steps == 48 + config.agent.spec.planned_steps(8, config.agent.settings, config.agent.n_envs)


@pytest.mark.parametrize("algo", list(CONFIGS))
def test_a_checkpointed_member_trains_on_bit_exactly(algo, tmp_path):
    config = config_of(algo)
    member = member_of(config, 0, NEW[algo])
    member.train(72)
    member.scores += [12.5]
    path = tmp_path / "member_0.pt"
    ckpt.atomic_write(path, ckpt.dump_payload(checkpoint_payload_of(member, "run-z", 2)))
    raw = torch.load(io.BytesIO(path.read_bytes()), map_location="cpu", weights_only=True)
    assert (raw["algo"], raw["generation"]) == (algo, 2)

    resumed = member_of(config, 0, env_seed=4321)  # fresh envs and the YAML's values, as on --resume
    assert resumed.restore(ckpt.load_payload(path)) is None
    assert resumed.pack().tobytes() == member.pack().tobytes()
    assert resumed.hparams == member.hparams and resumed.effective_hparams() == member.effective_hparams()
    assert (resumed.env_steps, resumed.model._n_updates, resumed.scores) == (
        member.env_steps,
        member.model._n_updates,
        [12.5],
    )
    if config.agent.spec.replay:
        assert same_replay(replay_of(resumed), replay_of(member))

    train_alike(96, member, resumed)
    assert resumed.pack().tobytes() == member.pack().tobytes()
    assert resumed.model._n_updates == member.model._n_updates > 0
    assert [e["r"] for e in resumed.model.ep_info_buffer] == [e["r"] for e in member.model.ep_info_buffer]
    if config.agent.spec.replay:
        assert same_replay(replay_of(resumed), replay_of(member))
    assert np.array_equal(resumed.model._last_obs, member.model._last_obs)


HYPERPARAMETERS = ("lr", "betas", "eps", "weight_decay", "amsgrad", "alpha", "momentum", "centered", "maximize")
"""What an optimizer's param group holds that changes its update (not its implementation flags)."""


def optimizer_settings(model) -> dict[str, tuple[str, list[dict]]]:
    """Every optimizer of the model by where it sits: its class (evo's eager twins as the torch class they
    are) and each param group's hyperparameters."""
    from evo.sb3.optimizer import stock_optimizer

    found = {}
    for where in ("policy.optimizer", "actor.optimizer", "critic.optimizer", "ent_coef_optimizer"):
        optimizer = model
        for part in where.split("."):
            optimizer = getattr(optimizer, part, None)
        if optimizer is not None:
            groups = [{k: group[k] for k in HYPERPARAMETERS if k in group} for group in optimizer.param_groups]
            found[where] = (stock_optimizer(type(optimizer)).__name__, groups)
    return found


@pytest.mark.parametrize("algo", list(CONFIGS))
def test_the_optimizers_are_built_as_the_stock_algorithm_builds_them(algo):
    """The learning table (docs/results.md) found evo's QR-DQN behind rl_zoo3's on CartPole: sb3-contrib gives its
    Adam eps 0.01 / batch_size, but only where no optimizer class is given, and evo gives its eager Adam, so evo's
    had torch's 1e-8. Each learner's optimizers against the stock class built from the same settings: the
    same kinds, the same hyperparameters in every param group."""
    from evo.sb3.stock import stock_class

    member = member_of(config_of(algo), 0)
    values = {**member.agent.settings, **member.hparams}
    kwargs = {k: v for k, v in member.policy_kwargs().items() if k in ("net_arch", "n_quantiles")}
    stock = stock_class(member.algorithm)(
        "MlpPolicy", member.model.env, policy_kwargs=kwargs, **member.constructor_arguments(values)
    )
    ours = optimizer_settings(member.model)
    assert ours and ours == optimizer_settings(stock)
    member.close()
