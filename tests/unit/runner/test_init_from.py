"""``--init-from SOURCE`` (evo/config/source.py, evo/sb3/source.py, MemberFactory.new): a run's members start
from an SB3 zip or a run's member, in one process (tests/support.py:run_in_process).

- A stock SB3 PPO agent's zip: before any training every member plays exactly as the agent (the same actions
  on the same episodes, the same returns), holds its optimizer's moments, and takes its hyperparameters; the
  run then trains (the weights move), config.yaml and the lineage record the zip's digest.
- A run's member (``RUN:MEMBER``): a new member's whole flat state (weights and optimizer state) is the
  member file's, bit for bit, and its hyperparameters are the member's.
- What does not fit is refused with its fix: a DQN agent in a PPO run, a CartPole agent in Pendulum, A2C's
  optimizer in PPO, another network; ``--initial-hparams source`` without a source.
The refusal's exit status on every rank, and a run from an export under mpiexec: tests/e2e/test_init_from.py.
"""

import json
import pickle

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml
from stable_baselines3 import A2C, DQN, PPO

from evo.config import ConfigError, parse_config
from evo.core.kinds import kind_from_spec
from evo.main import accepted_source
from evo.rundir.checkpoint import load_payload
from evo.runner.members import AROUND, InitialHparams
from evo.runner.session import member_factory
from evo.sb3.flat import is_bound
from evo.tools.saved import choose, open_run
from tests.support import TINY_CARTPOLE, budget, read_lineage, run_in_process, write_hyperparams

SOURCE_LR = 7e-4


@pytest.fixture(scope="module")
def zips(tmp_path_factory):
    """Zips of stock SB3 agents, each trained a little (so that their optimizers hold moments)."""
    folder = tmp_path_factory.mktemp("zips")
    made = {}
    for name, algorithm, env, kwargs in (
        ("ppo", PPO, "CartPole-v1", {"n_steps": 64, "batch_size": 64, "n_epochs": 2, "learning_rate": SOURCE_LR}),
        ("ppo-wide", PPO, "CartPole-v1", {"n_steps": 64, "policy_kwargs": {"net_arch": [32]}}),
        ("a2c", A2C, "CartPole-v1", {"n_steps": 8}),
        ("dqn", DQN, "CartPole-v1", {"learning_starts": 0, "buffer_size": 1000}),
        ("pendulum", PPO, "Pendulum-v1", {"n_steps": 64, "batch_size": 64, "n_epochs": 1}),
    ):
        model = algorithm("MlpPolicy", env, seed=1, device="cpu", **kwargs)
        model.learn(128)
        model.save(folder / f"{name}.zip")
        made[name] = (folder / f"{name}.zip", model)
    return made


def config_of(tmp_path, source, *extra, env="CartPole-v1", members=3, accept=True):
    """The config of a run from ``source`` (``accept``: as start-up accepts it, the source checked to fit)."""
    tmp_path.mkdir(exist_ok=True)
    tiny = write_hyperparams(tmp_path, TINY_CARTPOLE.replace("CartPole-v1", env))
    argv = ["--env-id", env, "--conf-file", str(tiny), *budget(members, 2, 128), "--tb-writer", "False"]
    argv += ["--run-dir", str(tmp_path / "run"), "--init-from", str(source), *extra]
    config = parse_config(argv, world_size=1)
    return accepted_source(config) if accept else config


def refusal(config) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        accepted_source(config)
    return refused.value.problems


def episodes(policy, seed: int, count: int = 3) -> tuple[list[float], list[int]]:
    """``count`` CartPole episodes from ``seed`` played by ``policy`` (deterministic): returns and actions."""
    env, returns, actions = gym.make("CartPole-v1"), [], []
    for episode in range(count):
        obs, _ = env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            action = policy.predict(obs, deterministic=True)[0]
            actions.append(int(action))
            obs, reward, terminated, truncated, _ = env.step(action)
            total, done = total + reward, terminated or truncated
        returns.append(total)
    return returns, actions


def test_a_zip_agent_starts_every_member_then_the_run_trains(tmp_path, zips):
    path, agent = zips["ppo"]
    config = config_of(tmp_path, path)
    assert config.initial_hparams == "source"  # the default with --init-from
    factory = member_factory(config)
    observations = torch.as_tensor(np.random.default_rng(0).normal(size=(64, 4)), dtype=torch.float32)
    theirs = agent.policy.get_distribution(observations).distribution.logits
    start = {}
    for member_id in range(config.num_agents):
        member = factory.new(member_id)
        assert is_bound(member.model, member.buffer)  # the loaded optimizer state is the flat state's again
        start[member_id] = member.pack().copy()
        assert episodes(member.model, seed=11) == episodes(agent, seed=11)
        assert torch.equal(member.model.policy.get_distribution(observations).distribution.logits, theirs)
        ours, source = member.model.policy.optimizer.state_dict(), agent.policy.optimizer.state_dict()
        for index, state in source["state"].items():
            assert torch.equal(ours["state"][index]["exp_avg_sq"], state["exp_avg_sq"])
        assert member.hparams["learning_rate"] == pytest.approx(SOURCE_LR)
        assert member.model.policy.optimizer.param_groups[0]["lr"] == pytest.approx(SOURCE_LR)
        member.close()

    assert run_in_process(list(config.command)) == 0
    saved = yaml.safe_load((config.run_dir / "config.yaml").read_text())
    assert saved["init_source"]["sha256"] == config.init_source.sha256 and saved["init_source"]["kind"] == "zip"
    first = read_lineage(config.run_dir)[0]
    assert (first["event"], first["sha256"], first["path"]) == ("init", config.init_source.sha256, str(path))
    last = open_run(config.run_dir).checkpoints[0]
    assert last.generation == 2
    for member_id, state in start.items():  # trained: every member's state moved from the source's
        assert not np.array_equal(load_payload(last.member_path(member_id))["state"].numpy(), state)


def test_a_run_member_starts_the_members_bit_for_bit(tmp_path, zips):
    source_run = tmp_path / "source"
    tiny = write_hyperparams(tmp_path)
    argv = ["--env-id", "CartPole-v1", "--conf-file", str(tiny), *budget(2, 1, 128), "--tb-writer", "False"]
    assert run_in_process([*argv, "--run-dir", str(source_run), "--seed", "3"]) == 0
    chosen = choose(open_run(source_run), "1")
    payload = load_payload(chosen.path)

    config = config_of(tmp_path, f"{source_run}:1", "--initial-hparams", "around-source", "--seed", "4")
    assert (config.init_source.member, config.init_source.generation) == (1, chosen.generation)
    factory = member_factory(config)
    first, second = factory.new(0), factory.new(1)
    assert np.array_equal(first.pack(), payload["state"].numpy())  # weights and optimizer state, bit for bit
    assert np.array_equal(second.pack(), payload["state"].numpy())
    assert first.hparams == payload["hparams"]  # member 0 at the source's values; the others drawn around them
    assert second.hparams != payload["hparams"]
    first.close()
    second.close()
    # the asynchronous driver's new members start from it too; its lineage keeps the source's line
    assert run_in_process([*config.command, "--asynchronous", "--run-dir", str(tmp_path / "asynchronous")]) == 0
    first_line = read_lineage(tmp_path / "asynchronous")[0]
    assert (first_line["event"], first_line["kind"], first_line["member"]) == ("init", "run", 1)


def test_what_does_not_fit_is_refused_with_its_fix(tmp_path, zips):
    refusals = {
        "dqn": ("the source is a DQN agent (its policy is DQNPolicy)", "--algo dqn"),
        "a2c": ("its optimizer policy.optimizer keeps", "another optimizer"),
        "ppo-wide": ("its network is not this run's", "net_arch"),
    }
    for name, said in refusals.items():
        problems = refusal(config_of(tmp_path / name, zips[name][0], accept=False))
        assert len(problems) == 1 and all(part in problems[0] for part in said), problems
    pendulum = refusal(config_of(tmp_path / "pendulum", zips["ppo"][0], env="Pendulum-v1", accept=False))
    assert len(pendulum) == 2 and "its observations are Box" in pendulum[0] and "its actions are" in pendulum[1]
    with pytest.raises(ConfigError, match="give --init-from SOURCE too"):
        parse_config(["--initial-hparams", "source", "--run-dir", str(tmp_path / "none")], world_size=1)
    with pytest.raises(ConfigError, match="no such file or directory"):
        config_of(tmp_path, tmp_path / "missing.zip")
    (tmp_path / "not.zip").write_text("x")
    with pytest.raises(ConfigError, match="not a model zip"):
        config_of(tmp_path, tmp_path / "not.zip")


def test_the_source_values_start_within_the_space_and_draws_stay_around_them():
    space = {
        "learning_rate": kind_from_spec({"low": 1e-5, "high": 1e-3, "scale": "log"}),
        "gamma": kind_from_spec({"low": 0.9, "high": 0.999, "scale": "horizon"}),
    }
    initial = InitialHparams(space, {"learning_rate": 3e-4, "gamma": 0.99}, how="around-source", seed=2)
    source = {"learning_rate": 5e-3, "clip_range": 0.3}  # above the range; no gamma
    assert initial.of(0, source) == {"learning_rate": 1e-3, "gamma": 0.99}
    for member in range(1, 40):
        drawn = initial.of(member, source)
        for name, value in drawn.items():
            centre = space[name].to_unit(initial.of(0, source)[name])
            assert abs(space[name].to_unit(value) - centre) <= AROUND + 1e-9
        assert drawn == initial.of(member, source)  # its own stream: the same draw again
    layers = {**space, "pi_layers": kind_from_spec({"low": 1, "high": 8, "type": "int"})}
    network = InitialHparams(layers, {"learning_rate": 3e-4, "gamma": 0.99, "pi_layers": 2}, "around-source", 2,
                             network=frozenset({"pi_layers"}))  # fmt: skip
    assert {network.of(member, {"pi_layers": 5})["pi_layers"] for member in range(40)} == {5}  # the source's network
    same = InitialHparams(space, {"learning_rate": 3e-4, "gamma": 0.99}, how="source")
    assert {same.of(member, source)["learning_rate"] for member in range(5)} == {1e-3}
    assert json.dumps(initial.of(3, None)) == json.dumps({"learning_rate": 3e-4, "gamma": 0.99})


def test_an_exports_normalisation_statistics_come_with_it(tmp_path):
    """An evo export of a run that normalises (zoo's layout: ``<env>/vecnormalize.pkl`` beside ``<env>.zip``):
    a member started from the zip takes its statistics, so it sees the observations as the exported agent did."""
    from evo.tools import export as export_tool

    normalized = "Pendulum-v1:\n  n_envs: 2\n  n_steps: 64\n  n_minibatches: 2\n  n_epochs: 2\n  normalize: true\n"
    tiny = write_hyperparams(tmp_path, normalized)
    argv = ["--env-id", "Pendulum-v1", "--conf-file", str(tiny), *budget(2, 1, 128), "--tb-writer", "False"]
    assert run_in_process([*argv, "--run-dir", str(tmp_path / "source")]) == 0
    assert export_tool.main([str(tmp_path / "source"), "--out", str(tmp_path / "export"), "--member", "0"]) == 0
    experiment = tmp_path / "export" / "ppo" / "Pendulum-v1_1"
    with (experiment / "Pendulum-v1" / "vecnormalize.pkl").open("rb") as handle:
        saved = pickle.load(handle)
    config = accepted_source(parse_config([*argv, "--run-dir", str(tmp_path / "run"), "--init-from",
                                           str(experiment / "Pendulum-v1.zip")], world_size=1))  # fmt: skip
    member = member_factory(config).new(0)
    try:
        assert np.array_equal(member.normalizer.obs_rms.mean, saved.obs_rms.mean)
        assert np.array_equal(member.normalizer.obs_rms.var, saved.obs_rms.var)
        assert np.array_equal(member.normalizer.ret_rms.var, saved.ret_rms.var)
        assert not np.all(saved.obs_rms.var == 1.0)  # statistics the source had gathered, not a fresh start's
    finally:
        member.close()


def test_a_sac_zip_brings_its_entropy_coefficient_and_both_optimizers(tmp_path):
    """SAC keeps a tensor outside its state_dicts (``log_ent_coef``) and three optimizers (actor, critic, entropy):
    a member started from a stock SAC zip holds all of it, and acts as the zip's agent does."""
    from stable_baselines3 import SAC

    from tests.offpolicy_runs import tiny

    agent = SAC("MlpPolicy", "Pendulum-v1", learning_starts=50, batch_size=32, buffer_size=4000, seed=2,
                device="cpu", policy_kwargs={"net_arch": [64, 64]})  # fmt: skip
    agent.learn(200)
    agent.save(tmp_path / "sac.zip")
    argv = [*tiny("sac"), "--num-agents", "1", "--total-generations", "1", "--tb-writer", "False"]
    argv += ["--run-dir", str(tmp_path / "run"), "--init-from", str(tmp_path / "sac.zip")]
    member = member_factory(accepted_source(parse_config(argv, world_size=1))).new(0)
    try:
        assert torch.equal(member.model.log_ent_coef.detach(), agent.log_ent_coef.detach())
        assert is_bound(member.model, member.buffer)
        for name in ("actor", "critic", "ent_coef_optimizer"):
            ours = getattr(member.model, name)
            ours = ours.optimizer if name != "ent_coef_optimizer" else ours
            theirs = getattr(agent, name).optimizer if name != "ent_coef_optimizer" else agent.ent_coef_optimizer
            for index, state in theirs.state_dict()["state"].items():
                assert torch.equal(ours.state_dict()["state"][index]["exp_avg"], state["exp_avg"]), name
        observations = np.random.default_rng(1).uniform(-1, 1, size=(16, 3)).astype(np.float32)
        assert np.array_equal(member.model.predict(observations, deterministic=True)[0],
                              agent.predict(observations, deterministic=True)[0])  # fmt: skip
    finally:
        member.close()


def test_a_source_that_changed_since_start_up_is_not_read(tmp_path, zips):
    """Each rank reads the file itself: one whose digest is not the one start-up recorded stops the run, naming it,
    rather than starting members from another agent than config.yaml says."""
    source = tmp_path / "agent.zip"
    source.write_bytes(zips["ppo"][0].read_bytes())
    config = config_of(tmp_path / "config", source)
    with source.open("ab") as handle:
        handle.write(b"\0")
    with pytest.raises(RuntimeError, match="agent.zip changed since the run started"):
        member_factory(config).new(0)


def test_a_source_whose_network_is_in_the_search_space_starts_every_member_with_its_network(tmp_path):
    """A run whose search space holds the architecture (``pi_layers`` ...): its member is checked against a member
    built as member 0 starts (the source's architecture, not the YAML's), and ``around-source`` draws no other
    network for the rest, so every member takes the source's weights."""
    space = (
        "Pendulum-v1:\n  n_envs: 2\n  n_steps: 64\n  n_minibatches: 2\n  n_epochs: 2\n  search_space:\n"
        "    learning_rate: {low: 1.0e-4, high: 1.0e-3, scale: log}\n    pi_layers: {low: 1, high: 3, type: int}\n"
        "    pi_width: {choices: [16, 24, 32, 40, 48, 56, 64]}\n    vf_layers: {low: 1, high: 3, type: int}\n"
    )
    argv = ["--env-id", "Pendulum-v1", "--hyperparams", str(write_hyperparams(tmp_path, space)), "--tb-writer", "False"]
    assert run_in_process([*argv, *budget(2, 1, 128), "--run-dir", str(tmp_path / "source")]) == 0
    source = load_payload(choose(open_run(tmp_path / "source"), "0").path)
    argv += [*budget(8, 1, 128), "--init-from", f"{tmp_path / 'source'}:0", "--initial-hparams", "around-source"]
    factory = member_factory(accepted_source(parse_config([*argv, "--run-dir", str(tmp_path / "run")], world_size=1)))
    drawn = set()
    for member_id in range(8):
        member = factory.new(member_id)
        try:
            assert np.array_equal(member.pack(), source["state"].numpy())
            assert all(
                member.hparams[name] == source["hparams"][name] for name in ("pi_layers", "pi_width", "vf_layers")
            )
            drawn.add(member.hparams["learning_rate"])
        finally:
            member.close()
    assert len(drawn) > 1  # the rest was drawn around the source's values (two may meet at a bound)
