"""The networks' architecture as settings (``pi_layers``, ``pi_width``, ``vf_layers`` ...): resolved
from net_arch, refused where they cannot apply, and kept with the weights: a recipient of another
architecture is rebuilt to its donor's shape and becomes the donor bit for bit, on its own envs
(real SB3, real envs, no MPI)."""

import numpy as np
import pytest
import torch

from evo.config import ConfigError, parse_config
from evo.core.explorers import make_explorer
from evo.core.restart import Failure, plan_restarts
from evo.core.result import MemberResult
from evo.learners import learner_spec
from evo.sb3.flat import is_bound
from tests.support import member_of

SPACE = (
    "search_space:{pi_layers: {low: 1, high: 3, type: int}, pi_width: {choices: [32, 64]}, "
    "vf_layers: {low: 1, high: 3, type: int}, learning_rate: {low: 1.0e-4, high: 1.0e-3, scale: log}}"
)
SHAPE = ("pi_layers", "pi_width", "vf_layers")
SMALL = ["n_steps:64", "batch_size:32", "n_epochs:2"]


def config_of(algo="ppo", *hyperparams, env="Pendulum-v1"):
    return parse_config(["--algo", algo, "--env-id", env, "--hyperparams", *hyperparams], check_run_dir=False)


def hidden_sizes(module: torch.nn.Module) -> list[int]:
    return [layer.out_features for layer in module if isinstance(layer, torch.nn.Linear)]


@pytest.fixture(scope="module")
def ppo_config():
    return config_of("ppo", *SMALL, SPACE)


def test_the_dimensions_not_given_are_read_from_net_arch_and_explorers_never_see_any(ppo_config):
    agent = ppo_config.agent
    assert agent.settings["vf_width"] == 64  # Pendulum's PPO entry has no net_arch: SB3's [64, 64]
    assert agent.settings["pi_layers"] == 2 and agent.settings["pi_width"] == 64
    architecture = ["pi_layers", "pi_width", "vf_layers"]
    assert [name for name in agent.search_space if name in architecture] == architecture
    assert "learning_rate" in agent.explored_space
    assert list(agent.explored_space) == [name for name in agent.search_space if name not in architecture]
    wide = config_of("ppo", *SMALL, "policy_kwargs:{net_arch: {pi: [128, 128, 128], vf: [32]}}", "vf_layers:2")
    assert [wide.agent.settings[n] for n in ("pi_layers", "pi_width", "vf_layers", "vf_width")] == [3, 128, 2, 32]
    untouched = config_of("ppo", *SMALL)
    assert all(untouched.agent.settings[name] is None for name in learner_spec("ppo").architecture)


@pytest.mark.parametrize(
    "algo, hyperparams, said",
    [
        ("td3", ["qf_layers:3"], "set qf_width"),  # TD3's [400, 300]: two widths
        ("ppo", ["pi_layers:0"], r"pi_layers \(--hyperparams\) is 0; it must be >= 1"),
        ("ppo", ["search_space:{vf_width: {low: 0, high: 64, type: int}}"], "search_space.vf_width"),
    ],
)
def test_an_architecture_that_cannot_be_built_is_refused_with_the_fix(algo, hyperparams, said):
    with pytest.raises(ConfigError, match=said):
        config_of(algo, *hyperparams)


def test_a_cnn_policy_refuses_the_mlp_dimensions():
    with pytest.raises(ConfigError, match="shape the MLP networks of policy 'mlp'"):
        parse_config(["--env-id", "bigfish", "--hyperparams", "pi_layers:2"], check_run_dir=False)


def test_every_explorer_keeps_the_donors_architecture(ppo_config):
    start = {"learning_rate": 3e-4, "pi_layers": 3, "pi_width": 32, "vf_layers": 1}
    space = ppo_config.agent.explored_space
    for name in ("perturb", "pb2", "casmo"):
        explorer = make_explorer(name, {"learning_rate": space["learning_rate"]}, rounds=4, population=4)
        [(new, changes)] = explorer.explore(1, [start], np.random.default_rng(0))
        assert {k: new[k] for k in SHAPE} == {"pi_layers": 3, "pi_width": 32, "vf_layers": 1}
        assert [c.name for c in changes] == ["learning_rate"], name


def test_a_restarted_member_takes_its_donors_architecture(ppo_config):
    space = {"learning_rate": ppo_config.agent.explored_space["learning_rate"]}
    donors_shape = {"pi_layers": 3, "pi_width": 32, "vf_layers": 2}
    own_shape = {"pi_layers": 1, "pi_width": 64, "vf_layers": 1}
    donor = MemberResult(member=0, rank=0, env_steps=100, score=1.0, hparams={"learning_rate": 1e-4, **donors_shape})
    failed = Failure(member=1, error="boom", hparams={"learning_rate": 5e-4, **own_shape})
    [restart] = plan_restarts(2, [failed], [donor], {}, 3, space, np.random.default_rng(0), "truncation", 0.25)
    assert restart.donor == 0
    assert {k: restart.new_hparams[k] for k in SHAPE} == donors_shape
    assert restart.new_hparams["learning_rate"] != 1e-4  # drawn afresh


def members_of_two_shapes(config):
    narrow = member_of(config, 0, {"pi_layers": 1, "pi_width": 32, "vf_layers": 1})
    deep = member_of(config, 1, {"pi_layers": 3, "pi_width": 64, "vf_layers": 2})
    assert narrow.buffer.size < deep.buffer.size
    return narrow, deep


def test_a_recipient_becomes_its_donor_of_another_architecture(ppo_config):
    recipient, donor = members_of_two_shapes(ppo_config)
    donor.train(128)
    recipient.train(64)
    env, steps, last_obs = recipient.model.env, recipient.env_steps, recipient.model._last_obs.copy()
    state = donor.exploit_state()
    target = recipient.receive_buffers(tuple((n, a.dtype.str, a.shape) for n, a in state.items()))
    assert target["weights"] is not recipient.buffer  # the donor's size: a new buffer
    np.copyto(target["weights"], state["weights"])  # what MPI's Recv does
    hparams = {**donor.hparams, "learning_rate": 7e-4}
    recipient.load(target, hparams)

    assert recipient.buffer is target["weights"] and is_bound(recipient.model, recipient.buffer)
    assert np.array_equal(recipient.buffer, donor.buffer)
    policy = recipient.model.policy
    assert hidden_sizes(policy.mlp_extractor.policy_net) == [64, 64, 64]
    assert hidden_sizes(policy.mlp_extractor.value_net) == [64, 64]
    for mine, theirs in zip(policy.state_dict().values(), donor.model.policy.state_dict().values(), strict=True):
        assert torch.equal(mine, theirs)
    donor_adam, own_adam = donor.model.policy.optimizer.state_dict(), policy.optimizer.state_dict()
    for a, b in zip(donor_adam["state"].values(), own_adam["state"].values(), strict=True):
        assert all(torch.equal(a[key], b[key]) for key in ("step", "exp_avg", "exp_avg_sq"))
    assert policy.optimizer.param_groups[0]["lr"] == pytest.approx(7e-4)  # the new value reached the new optimizer
    # its own envs, counters and current observations, not the donor's
    assert recipient.model.env is env and recipient.env_steps == steps
    assert np.array_equal(recipient.model._last_obs, last_obs)
    assert recipient.effective_hparams() == pytest.approx(hparams)
    recipient.train(64)  # trains on (a rollout), the update moving the bound buffer
    assert recipient.env_steps == steps + ppo_config.agent.unit_steps and is_bound(recipient.model, recipient.buffer)
    assert not np.array_equal(recipient.buffer, donor.buffer)


def test_a_member_restored_from_a_checkpoint_of_another_architecture(ppo_config):
    built, saved = members_of_two_shapes(ppo_config)
    saved.train(128)
    built.restore({**saved.member_state(), "member": 0})
    assert np.array_equal(built.buffer, saved.buffer) and is_bound(built.model, built.buffer)
    assert hidden_sizes(built.model.policy.mlp_extractor.policy_net) == [64, 64, 64]
    assert built.env_steps == saved.env_steps and built.hparams == saved.hparams


def test_an_architecture_never_changes_without_the_weights(ppo_config):
    member = member_of(ppo_config, 0, {"pi_layers": 1})
    with pytest.raises(ValueError, match="pi_layers 2 is not its network's"):
        member.set_hparams({**member.hparams, "pi_layers": 2})


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_an_off_policy_recipient_keeps_its_replay_buffer_across_architectures(algo):
    config = config_of(
        algo,
        "learning_starts:32",
        "batch_size:32",
        "buffer_size:500",
        "search_space:{qf_layers: {low: 1, high: 3, type: int}, qf_width: {choices: [32, 64]}}",
        "pi_width:32",
        "qf_width:32",
    )
    recipient = member_of(config, 0, {"qf_layers": 1, "qf_width": 32})
    donor = member_of(config, 1, {"qf_layers": 3, "qf_width": 64})
    donor.train(64)
    recipient.train(48)
    replay = recipient.model.replay_buffer
    observations, noise = replay.observations.copy(), recipient.model.action_noise
    recipient.load({"weights": donor.pack().copy()}, donor.hparams)
    assert recipient.model.replay_buffer is replay and np.array_equal(replay.observations, observations)
    assert recipient.model.action_noise is noise  # TD3's exploration noise, with its running value
    assert hidden_sizes(recipient.model.critic.qf0) == [64, 64, 64, 1]
    assert np.array_equal(recipient.buffer, donor.buffer)
    recipient.train(16)
    assert recipient.env_steps == 64


def test_a_schedule_that_changes_an_architecture_is_refused(tmp_path):
    path = tmp_path / "schedule.yml"
    six = "learning_rate: 3.0e-4, ent_coef: 0.0, clip_range: 0.2, gamma: 0.99, gae_lambda: 0.95, vf_coef: 0.5"
    entry = "{env_steps: %d, hparams: {" + six + ", pi_layers: %d}}"  # the six Pendulum's PPO space explores
    path.write_text(f"env_id: Pendulum-v1\nalgo: ppo\nschedule: [{entry % (0, 2)}, {entry % (512, 3)}]\n")
    flags = ["--env-id", "Pendulum-v1", "--num-agents", "1", "--schedule", str(path)]
    with pytest.raises(ConfigError, match="pi_layers goes from 2 to 3; a network's architecture changes only with"):
        parse_config([*flags, "--hyperparams", *SMALL], check_run_dir=False)
    path.write_text(f"env_id: Pendulum-v1\nalgo: ppo\nschedule: [{entry % (0, 3)}, {entry % (512, 3)}]\n")
    assert parse_config([*flags, "--hyperparams", *SMALL], check_run_dir=False).schedule[1][1]["pi_layers"] == 3
