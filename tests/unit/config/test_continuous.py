"""Continuous control: rl-baselines3-zoo's tuned settings resolve (normalisation included), the
new YAML keys are checked, and the MuJoCo extra is named when missing. That the keys reach SB3:
tests/unit/sb3/test_continuous.py."""

import sys

import pytest
import yaml

from evo.config import ConfigError, builtin_hyperparams, parse_config
from evo.config.envnames import PROCGEN_GAMES
from tests.unit.continuous import MUJOCO, NO_NORMALIZE, parse

CONTINUOUS = ["Pendulum-v1", "MountainCarContinuous-v0", "HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5"]


def problems(argv, tmp_path):
    """The problems parse_config reports (no skip: a missing extra is one of them)."""
    with pytest.raises(ConfigError) as caught:
        parse_config([*argv, "--run-dir", str(tmp_path / "run")])
    return caught.value.problems


def env_blocks():
    data = yaml.safe_load(builtin_hyperparams("ppo").read_text())
    return [name for name in data if name != "default" and not name.startswith("procgen") and name not in PROCGEN_GAMES]


def test_every_continuous_env_has_a_block():
    assert set(CONTINUOUS) <= set(env_blocks())


@pytest.mark.parametrize("env_id", CONTINUOUS)
def test_every_continuous_env_has_a_budget(tmp_path, env_id):
    config = parse(["--env-id", env_id, *NO_NORMALIZE], tmp_path)
    assert config.total_generations * config.agent_training_steps >= 2e4
    assert config.agent_training_steps >= config.agent.unit_steps


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Acrobot-v1", *CONTINUOUS])
def test_each_default_lies_in_its_search_space(tmp_path, env_id):
    """A member started from the defaults (--initial-hparams defaults) must be a point PBT can reach."""
    agent = parse(["--env-id", env_id, *NO_NORMALIZE], tmp_path).agent
    for name, value in agent.defaults.items():
        space = agent.search_space[name]
        assert space.low <= value <= space.high, f"{env_id}: {name} {value} outside [{space.low}, {space.high}]"


def test_pendulum_gets_zoo_s_tuned_settings(tmp_path):
    config = parse(["--env-id", "Pendulum-v1"], tmp_path)
    agent = config.agent
    settings = agent.settings
    assert (agent.n_envs, settings["n_steps"], settings["batch_size"], settings["n_epochs"]) == (4, 1024, 64, 10)
    assert (settings["use_sde"], settings["sde_sample_freq"], agent.normalizes) == (True, 4, False)
    assert agent.defaults == {
        "learning_rate": 1e-3,
        "ent_coef": 0.0,
        "clip_range": 0.2,
        "gamma": 0.9,
        "gae_lambda": 0.95,
        "vf_coef": 0.5,
    }


def test_mujoco_blocks_are_zoo_s_v3_settings(tmp_path):
    cheetah = parse(["--env-id", "HalfCheetah-v5", *NO_NORMALIZE], tmp_path / "c").agent
    settings = cheetah.settings
    assert (cheetah.n_envs, settings["n_steps"], settings["batch_size"], settings["n_epochs"]) == (1, 512, 64, 20)
    assert cheetah.defaults["learning_rate"] == 2.0633e-5 and cheetah.defaults["gamma"] == 0.98
    assert cheetah.policy_kwargs == {
        "log_std_init": -2.0,
        "ortho_init": False,
        "activation_fn": "relu",
        "net_arch": {"pi": [256, 256], "vf": [256, 256]},
    }
    hopper = parse(["--env-id", "Hopper-v5", *NO_NORMALIZE], tmp_path / "h").agent
    settings = hopper.settings
    assert (settings["batch_size"], settings["n_epochs"], settings["max_grad_norm"]) == (32, 5, 0.7)
    assert hopper.policy_kwargs == cheetah.policy_kwargs
    walker = parse(["--env-id", "Walker2d-v5", *NO_NORMALIZE], tmp_path / "w").agent
    assert walker.policy_kwargs == {"net_arch": [64, 64], "activation_fn": "tanh"}  # SB3's own
    ant = parse(["--env-id", "Ant-v5", *NO_NORMALIZE], tmp_path / "a").agent
    assert (ant.settings["n_steps"], ant.settings["batch_size"], ant.defaults["learning_rate"]) == (2048, 64, 3e-4)


@pytest.mark.parametrize("env_id", ["MountainCarContinuous-v0", *MUJOCO])
def test_zoo_s_normalised_blocks_resolve_with_normalisation(tmp_path, env_id):
    agent = parse(["--env-id", env_id], tmp_path).agent
    assert agent.normalize == {"norm_obs": True, "norm_reward": True} and agent.normalizes
    assert parse(["--env-id", env_id, *NO_NORMALIZE], tmp_path / "off").agent.normalizes is False


def test_normalize_takes_a_bool_or_zoo_s_mapping(tmp_path):
    config = parse(["--env-id", "Pendulum-v1"], tmp_path / "a")
    assert config.agent.normalize == {"norm_obs": False, "norm_reward": False}
    config = parse(["--env-id", "Pendulum-v1", "--hyperparams", "normalize:{norm_reward: false}"], tmp_path / "b")
    assert config.agent.normalize == {"norm_obs": True, "norm_reward": False}
    assert parse(["--hyperparams", "normalize:true"], tmp_path / "c").agent.normalize == {
        "norm_obs": True,
        "norm_reward": True,
    }
    (problem,) = problems(["--hyperparams", "normalize:3"], tmp_path)
    assert problem == "--hyperparams.normalize must be bool or mapping, got 3 (int)"
    found = problems(["--hyperparams", "normalize:{norm_ob: false}"], tmp_path)
    assert "--hyperparams.normalize: unknown key 'norm_ob'; did you mean 'norm_obs'?" in found


def test_procgen_images_are_not_observation_normalised(tmp_path):
    (problem,) = problems(["--env-id", "bigfish", "--hyperparams", "normalize:true"], tmp_path)
    assert "observation normalisation is for vector observations" in problem
    assert "normalize:{norm_obs: false, norm_reward: true}" in problem
    rewards_only = parse(["--env-id", "bigfish", "--hyperparams", "normalize:{norm_obs: false}"], tmp_path / "r")
    assert rewards_only.agent.normalize == {"norm_obs": False, "norm_reward": True}


@pytest.mark.parametrize(
    "override, expected",
    [
        ("policy_kwargs:{net_arch: {pi: [8]}}", "net_arch must be a list of positive layer sizes"),
        ("policy_kwargs:{net_arch: {pi: [8], vf: [0]}}", "or {pi: [...], vf: [...]}"),
        ("policy_kwargs:{log_std_init: minus}", "policy_kwargs.log_std_init must be float, got 'minus'"),
        ("use_sde:maybe", "use_sde must be bool, got 'maybe'"),
        ("sde_sample_freq:0", "sde_sample_freq (--hyperparams) is 0; it must be >= 1 or -1"),
        ("sde_sample_freq:2.5", "sde_sample_freq must be int, got 2.5"),
    ],
)
def test_new_keys_are_checked(tmp_path, override, expected):
    (problem,) = problems(["--env-id", "Pendulum-v1", "--hyperparams", override], tmp_path)
    assert expected in problem


def test_missing_mujoco_extra_names_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco", None)  # `import mujoco` now raises ImportError
    (problem,) = problems(["--env-id", "HalfCheetah-v5", *NO_NORMALIZE], tmp_path)
    assert "is a MuJoCo task" in problem
    assert "make install EXTRAS=mujoco" in problem and "pip install 'evo[mujoco]'" in problem
    parse(["--env-id", "Pendulum-v1"], tmp_path / "classic")  # classic control needs no extra


def test_a_run_recorded_before_these_settings_resumes_as_it_ran(tmp_path):
    """config.yaml of a run started before --env-kwargs, gSDE and normalize existed: it made its
    envs with no kwargs and trained without either, and resumes so; --env-kwargs stays FIXED."""
    run_dir = tmp_path / "run"
    started = parse_config(["--run-dir", str(run_dir)]).to_dict()
    for record in (started, started["cli"]):
        del record["env_kwargs"]
    for key in ("use_sde", "sde_sample_freq", "normalize"):
        del started["agent"][key]
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(started))
    resumed = parse_config(["--resume", "--run-dir", str(run_dir)])
    assert resumed.env_kwargs == {} and resumed.agent.settings["use_sde"] is False
    with pytest.raises(ConfigError) as caught:
        parse_config(["--resume", "--run-dir", str(run_dir), "--env-kwargs", "sutton_barto_reward:true"])
    assert "env_kwargs was {} in this run, the command gives {'sutton_barto_reward': True}" in str(caught.value)


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_gsde_on_discrete_actions_is_refused_at_start_up(tmp_path, algo):
    """Both on-policy learners share the rule (evo/learners/onpolicy.py); SB3 would fail deep inside its
    policy's constructor instead."""
    (problem,) = problems(["--algo", algo, "--env-id", "CartPole-v1", "--hyperparams", "use_sde:true"], tmp_path)
    assert problem == "use_sde: gSDE explores continuous actions, and this env's are Discrete; set use_sde: false"
    parse(["--algo", algo, "--env-id", "Pendulum-v1", "--hyperparams", "use_sde:true"], tmp_path / "box")
