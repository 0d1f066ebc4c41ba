"""TD3's declaration (evo/learners/td3.py) and its YAML (evo/hyperparams/td3.yml), through parse_config:
``--algo td3`` resolves rl-baselines3-zoo's tuned settings and the search space in TD3's declaration
order, TD3's own names belong to TD3 alone, and bad input is refused with the fix, every problem at
once. Pure: no MPI, no torch."""

import numpy as np
import pytest
import yaml

from evo.config import ConfigError, builtin_hyperparams, parse_config
from evo.core.kinds import Categorical, Choice, Float, Horizon, Integer, LogFloat
from evo.learners import Reach, algos, learner_spec
from tests.support import ROOT, need_mujoco, started_run

TD3_PENDULUM = ["--algo", "td3", "--env-id", "Pendulum-v1"]
TD3_EXPLORED = (
    *("learning_rate", "gamma", "tau", "batch_size", "train_freq"),
    *("policy_delay", "target_policy_noise", "noise_type", "noise_std"),
)
"""td3.yml's search space, in TD3's declaration order (evo/learners/td3.py)."""
TD3_OWN = ("policy_delay", "target_policy_noise", "target_noise_clip", "noise_type", "noise_std")
NOISE_TYPES = ["normal", "ornstein-uhlenbeck"]


def parse(argv):
    return parse_config(argv, check_run_dir=False)


def problems(argv):
    with pytest.raises(ConfigError) as caught:
        parse(argv)
    return caught.value.problems


# --- what --algo td3 resolves -------------------------------------------------------------------------------


def test_td3_on_pendulum_resolves_zoos_tuned_settings():
    config = parse(TD3_PENDULUM)
    agent, spec = config.agent, learner_spec("td3")
    assert (config.algo, agent.algo, agent.spec) == ("td3", "td3", spec)
    settings = agent.settings
    assert set(settings) == set(spec.by_name)  # TD3's settings, and no other learner's
    # Pendulum-v1's block: zoo's tuned TD3 (gamma, buffer, warm-up, network), over the default block
    assert (settings["gamma"], settings["buffer_size"], settings["learning_starts"]) == (0.98, 200_000, 10_000)
    assert agent.policy_kwargs == {"net_arch": [400, 300]}
    assert (settings["noise_type"], settings["noise_std"]) == ("normal", 0.1)
    # the default block and SB3's TD3 defaults under it
    assert (settings["learning_rate"], settings["batch_size"], settings["tau"]) == (1e-3, 256, 0.005)
    assert (settings["train_freq"], settings["gradient_steps"]) == (1, -1)
    assert (settings["policy_delay"], settings["target_policy_noise"], settings["target_noise_clip"]) == (2, 0.2, 0.5)
    assert (settings["n_steps"], settings["optimize_memory_usage"]) == (1, False)
    assert (agent.policy, agent.n_envs, agent.unit_steps, agent.normalizes) == ("mlp", 1, 1, False)
    assert (config.total_generations, config.agent_training_steps) == (10, 2000)
    assert (config.exploit_buffer, config.checkpoint_buffers, config.precision) == ("own", True, "fp32")
    assert agent.defaults == {
        "learning_rate": 1e-3,
        "gamma": 0.98,
        "tau": 0.005,
        "batch_size": 256,
        "train_freq": 1,
        "policy_delay": 2,
        "target_policy_noise": 0.2,
        "noise_type": "normal",
        "noise_std": 0.1,
    }
    assert isinstance(agent.defaults["policy_delay"], int) and isinstance(agent.defaults["batch_size"], int)


def test_the_search_space_in_declaration_order_with_noise_type_unordered():
    config = parse(TD3_PENDULUM)
    space = config.agent.search_space
    assert space == {
        "learning_rate": LogFloat(1e-5, 2e-3),
        "gamma": Horizon(0.97, 0.9999),
        "tau": LogFloat(0.001, 0.08),
        "batch_size": Choice([32, 64, 128, 256, 512, 1024]),
        "train_freq": Integer(1, 10),
        "policy_delay": Integer(1, 4),
        "target_policy_noise": Float(0.05, 0.5),
        "noise_type": Categorical(NOISE_TYPES),
        "noise_std": LogFloat(0.02, 0.5),
    }
    assert [type(kind) for kind in space.values()] == [
        *(LogFloat, Horizon, LogFloat, Choice, Integer),
        *(Integer, Float, Categorical, LogFloat),
    ]
    # the explored names in TD3's declaration order, though td3.yml lists noise_type first among TD3's own
    assert tuple(space) == config.explored_names == TD3_EXPLORED
    yaml_order = list(yaml.safe_load(builtin_hyperparams("td3").read_text())["default"]["search_space"])
    assert yaml_order != list(TD3_EXPLORED) and learner_spec("td3").record_order(yaml_order) == TD3_EXPLORED
    # noise_type: names in no order; a perturbation switches to the other, whatever the factor
    noise_type = space["noise_type"]
    assert noise_type.discrete and not isinstance(noise_type, Choice)
    rng = np.random.default_rng(0)
    for factor in (0.8, 1.2):
        assert noise_type.perturb("normal", factor, rng) == ("ornstein-uhlenbeck", "switch")
        assert noise_type.perturb("ornstein-uhlenbeck", factor, rng) == ("normal", "switch")
    assert noise_type.text("ornstein-uhlenbeck") == "ornstein-uhlenbeck"  # a name in population.csv
    assert noise_type.parse("normal") == "normal"
    # whole numbers stay whole: policy_delay is a count
    assert space["policy_delay"].discrete and not space["policy_delay"].log_axis
    # config.yaml keeps the kinds, noise_type as a categorical of names
    plain = yaml.safe_load(yaml.safe_dump(config.to_dict()))["agent"]
    assert set(plain["search_space"]) == set(TD3_EXPLORED)
    assert plain["search_space"]["noise_type"]["kind"] == "categorical"
    assert plain["search_space"]["noise_type"]["choices"] == NOISE_TYPES
    assert plain["search_space"]["policy_delay"]["kind"] == "int"
    assert (plain["algo"], plain["noise_type"], plain["noise_std"]) == ("td3", "normal", 0.1)


def test_mountain_car_explores_a_wider_ornstein_uhlenbeck_noise():
    config = parse(["--algo", "td3", "--env-id", "MountainCarContinuous-v0"])
    settings = config.agent.settings
    assert (settings["noise_type"], settings["noise_std"]) == ("ornstein-uhlenbeck", 0.5)
    assert config.agent.search_space["noise_std"] == LogFloat(0.1, 1.0)
    assert config.agent.search_space["noise_type"] == Categorical(NOISE_TYPES)  # from the default block
    assert config.agent.defaults["noise_type"] == "ornstein-uhlenbeck"


def test_the_mujoco_tasks_take_zoos_td3_blocks():
    need_mujoco()
    cheetah = parse(["--algo", "td3", "--env-id", "HalfCheetah-v5"])
    settings = cheetah.agent.settings
    assert (settings["learning_starts"], settings["noise_type"], settings["noise_std"]) == (10_000, "normal", 0.1)
    assert (settings["batch_size"], settings["gamma"], settings["buffer_size"]) == (256, 0.99, 1_000_000)
    assert cheetah.agent.policy_kwargs == {"net_arch": [400, 300]}
    assert (cheetah.total_generations, cheetah.agent_training_steps) == (40, 25_000)
    assert tuple(cheetah.agent.search_space) == TD3_EXPLORED
    swimmer = parse(["--algo", "td3", "--env-id", "Swimmer-v5"])
    assert swimmer.agent.settings["gamma"] == 0.9999 and swimmer.agent.settings["learning_starts"] == 10_000


# --- TD3's own names ------------------------------------------------------------------------------------------


OWNERS = {
    "policy_delay": ["crossq", "td3"],  # CrossQ's actor waits too
    "target_policy_noise": ["td3"],
    "target_noise_clip": ["td3"],
    "noise_type": ["ddpg", "td3"],  # zoo's exploration-noise keys: DDPG's too
    "noise_std": ["ddpg", "td3"],
}


def test_td3s_own_names_are_declared_by_td3_alone_or_with_ddpg():
    assert "td3" in algos() and set(OWNERS) == set(TD3_OWN)
    for name in TD3_OWN:
        assert [algo for algo in algos() if name in learner_spec(algo).by_name] == OWNERS[name], name
    # what every off-policy learner shares is not TD3's own
    for name in ("learning_rate", "gamma", "tau", "batch_size", "train_freq", "gradient_steps", "buffer_size"):
        assert {algo for algo in algos() if name in learner_spec(algo).by_name} >= {"sac", "td3"}, name
    spec = learner_spec("td3")
    reach = {name: spec.by_name[name].reach for name in TD3_OWN}
    assert reach == {
        "policy_delay": Reach.ATTRIBUTE,
        "target_policy_noise": Reach.ATTRIBUTE,
        "target_noise_clip": Reach.ATTRIBUTE,
        "noise_type": Reach.CUSTOM,
        "noise_std": Reach.CUSTOM,
    }
    assert spec.tunable == (
        *("learning_rate", "gamma", "tau", "batch_size", "train_freq", "gradient_steps"),
        *TD3_OWN,
        *("pi_layers", "pi_width", "qf_layers", "qf_width"),  # the networks' shape, per head of net_arch
    )
    assert spec.architecture == ("pi_layers", "pi_width", "qf_layers", "qf_width")
    assert spec.by_name["learning_rate"].default == 1e-3  # TD3's own (SAC's is 3e-4)
    assert learner_spec("sac").by_name["learning_rate"].default == 3e-4
    assert spec.replay and spec.action_spaces == ("Box",) and spec.net_arch_heads == ("pi", "qf")
    assert (ROOT / "hyperparams" / "td3.yml").resolve() == builtin_hyperparams("td3")


def test_td3s_names_are_refused_for_the_other_learners():
    (problem,) = problems(["--algo", "sac", "--env-id", "Pendulum-v1", "--hyperparams", "policy_delay:3"])
    assert problem.startswith(
        "--hyperparams: 'policy_delay' is a setting of CrossQ (--algo crossq) and TD3 (--algo td3), not of SAC; drop "
        "it, or train with --algo crossq."
    )
    (problem,) = problems(["--hyperparams", "noise_std:0.2"])
    assert problem.startswith(
        "--hyperparams: 'noise_std' is a setting of DDPG (--algo ddpg) and TD3 (--algo td3), not of PPO"
    )


# --- refused, with the fix --------------------------------------------------------------------------------------


def test_an_unknown_noise_type_is_refused_naming_the_noise_types():
    assert problems([*TD3_PENDULUM, "--hyperparams", "noise_type:pink"]) == [
        "noise_type (--hyperparams) is 'pink'; it must be one of 'normal', 'ornstein-uhlenbeck': change it (or "
        "null: off)"
    ]  # one problem: the search space's default is not said to be outside its choices as well


def test_a_noise_type_search_space_with_an_unknown_name_is_refused():
    space = "search_space:{noise_type: {choices: [normal, pink]}}"
    assert problems([*TD3_PENDULUM, "--hyperparams", space]) == [
        "search_space.noise_type (--hyperparams) has the choices ['normal', 'pink']; every value must be one of "
        "'normal', 'ornstein-uhlenbeck': drop 'pink'"
    ]
    (problem,) = problems([*TD3_PENDULUM, "--hyperparams", "search_space:{noise_type: {low: 0.1, high: 0.3}}"])
    assert problem == "--hyperparams.search_space.noise_type takes names: give choices (e.g. {choices: [a, b]})"
    (problem,) = problems([*TD3_PENDULUM, "--hyperparams", "search_space:{noise_type: {choices: [normal, 1]}}"])
    assert problem.startswith("--hyperparams.search_space.noise_type.choices must all be names")


def test_no_exploration_noise_is_refused_while_noise_type_is_explored(tmp_path):
    """null is the noise_type the declaration offers for no noise (and what the refusal of an unknown
    type suggests): given while the search space explores noise_type, TD3 refuses it with its own
    reason, not as a value of the wrong type."""
    path = tmp_path / "no-noise.yml"
    path.write_text("Pendulum-v1:\n  noise_type: null\n")
    found = problems([*TD3_PENDULUM, "--conf-file", str(path)])
    assert not any("must be str" in problem for problem in found), found
    assert found[0] == (
        "search_space.noise_type: explore it from a noise, not from none: set noise_type in the YAML to one of "
        "normal, ornstein-uhlenbeck"
    )


def test_a_policy_delay_below_one_is_refused():
    assert problems([*TD3_PENDULUM, "--hyperparams", "policy_delay:0"]) == [
        "policy_delay (--hyperparams) is 0; it must be >= 1 (critic updates per actor and target update): change "
        "it, e.g. to its default 2"
    ]  # one problem: the search space's default is not said to be outside its range as well
    (problem,) = problems([*TD3_PENDULUM, "--hyperparams", "search_space:{policy_delay: {low: 0, high: 3, type: int}}"])
    assert problem == (
        "search_space.policy_delay (--hyperparams) is [0, 3]; every value must be >= 1 (critic updates per actor "
        "and target update): keep its bounds within that range"
    )
    (problem,) = problems([*TD3_PENDULUM, "--hyperparams", "search_space:{policy_delay: {low: 1.0, high: 3.0}}"])
    assert problem.startswith("--hyperparams.search_space.policy_delay takes whole numbers: give type: int")


def test_negative_noise_is_refused():
    found = problems([*TD3_PENDULUM, "--hyperparams", "noise_std:-0.1", "target_policy_noise:-0.2"])
    assert [problem.split(";")[0] for problem in found] == [
        "target_policy_noise (--hyperparams) is -0.2",
        "noise_std (--hyperparams) is -0.1",
    ]
    assert all("it must be >= 0" in problem for problem in found)
    (problem,) = problems([*TD3_PENDULUM, "--hyperparams", "search_space:{noise_std: {low: -0.1, high: 0.5}}"])
    assert problem.startswith("search_space.noise_std (--hyperparams) is [-0.1, 0.5]; every value must be >= 0")
    (problem,) = problems([*TD3_PENDULUM, "--hyperparams", "search_space:{noise_std: {low: 0.0, high: 0.5}}"])
    assert problem == (
        "search_space.noise_std is [0.0, 0.5]; every value must be positive (a perturbation multiplies: a member at "
        "0 would stay there)"
    )


def test_td3_on_discrete_actions_is_refused():
    (problem,) = problems(["--algo", "td3", "--env-id", "CartPole-v1"])
    assert problem == (
        "--algo td3: TD3 acts in Box action spaces, and CartPole-v1 has a Discrete action space; use --algo "
        "ppo, a2c, dqn or qrdqn"
    )


def test_a_setting_of_another_learner_is_refused_naming_it():
    (problem,) = problems([*TD3_PENDULUM, "--hyperparams", "n_epochs:4"])
    assert problem.startswith(
        "--hyperparams: 'n_epochs' is a setting of PPO (--algo ppo), not of TD3; drop it, or train with --algo ppo. "
        "TD3's settings: learning_rate, gamma, tau,"
    )
    (problem,) = problems([*TD3_PENDULUM, "--hyperparams", "target_entropy:-1.0"])
    assert problem.startswith(
        "--hyperparams: 'target_entropy' is a setting of CrossQ (--algo crossq), SAC (--algo sac) and TQC (--algo "
        "tqc), not of TD3; drop it, or train with --algo crossq. TD3's settings:"
    )
    assert problem.endswith(
        "policy_delay, target_policy_noise, target_noise_clip, noise_type, noise_std, pi_layers, pi_width, qf_layers, "
        "qf_width"
    )
    (problem,) = problems([*TD3_PENDULUM, "--hyperparams", "search_space:{target_entropy: {low: -2.0, high: 0.0}}"])
    assert problem.startswith(
        "--hyperparams.search_space: 'target_entropy' is a setting of CrossQ (--algo crossq), SAC (--algo sac) and "
        "TQC (--algo tqc)"
    )


def test_a_setting_that_cannot_be_tuned_is_refused_with_the_reason():
    space = "search_space:{buffer_size: {low: 1000, high: 100000, type: int}}"
    (problem,) = problems([*TD3_PENDULUM, "--hyperparams", space])
    assert problem == (
        "--hyperparams.search_space.buffer_size: buffer_size cannot be explored: it sizes the replay buffer, "
        "allocated once when the member is built"
    )


def test_every_problem_is_reported_at_once():
    found = problems(
        ["--algo", "td3", "--env-id", "CartPole-v1", "--hyperparams", "n_epochs:4", "policy_delay:0"]
        + ["noise_type:pink", "target_entropy:-1.0"]
    )
    text = "\n".join(found)
    assert "CartPole-v1 has a Discrete action space; use --algo ppo, a2c, dqn or qrdqn" in text
    assert "'n_epochs' is a setting of PPO (--algo ppo), not of TD3" in text
    assert (
        "'target_entropy' is a setting of CrossQ (--algo crossq), SAC (--algo sac) and TQC (--algo tqc), not of TD3"
        in text
    )
    assert "policy_delay (--hyperparams) is 0; it must be >= 1" in text
    assert "noise_type (--hyperparams) is 'pink'; it must be one of 'normal', 'ornstein-uhlenbeck'" in text


# --- the replay-buffer options and resume ---------------------------------------------------------------------------


def test_replay_buffer_options_are_taken_by_td3():
    config = parse([*TD3_PENDULUM, "--exploit-buffer", "copy", "--no-checkpoint-buffers"])
    assert (config.exploit_buffer, config.checkpoint_buffers) == ("copy", False)


def test_td3_resumes_with_its_settings_and_categorical_space(tmp_path):
    started, run_dir = started_run(tmp_path, [*TD3_PENDULUM, "--hyperparams", "noise_std:0.2", "policy_delay:3"])
    resumed = parse_config(["--resume", "--run-dir", str(run_dir)])
    assert (resumed.algo, resumed.agent.algo, resumed.cli["algo"]) == ("td3", "td3", "td3")
    assert resumed.agent == started.agent and resumed.explored_names == TD3_EXPLORED
    assert resumed.agent.search_space["noise_type"] == Categorical(NOISE_TYPES)
    assert (resumed.agent.settings["noise_std"], resumed.agent.settings["policy_delay"]) == (0.2, 3)
    assert parse_config(["--resume", "--run-dir", str(run_dir), "--algo", "td3"]).agent == started.agent
    _, plain_run = started_run(tmp_path / "plain", TD3_PENDULUM)
    with pytest.raises(ConfigError) as caught:
        parse_config(["--resume", "--run-dir", str(plain_run), "--algo", "sac"])
    assert caught.value.problems == [
        "--resume: algo was 'td3' in this run, the command gives 'sac'; a run resumes with the same value "
        "(drop the flag to keep it)"
    ]


def test_a_td3_run_started_with_its_own_hyperparams_resumed_with_another_algo_is_told_only_that(tmp_path):
    """The run's --hyperparams name TD3's own settings; resumed with --algo sac, the user is told that the
    algo is fixed, not to drop settings the resume command does not give."""
    _, run_dir = started_run(tmp_path, [*TD3_PENDULUM, "--hyperparams", "noise_std:0.2"])
    with pytest.raises(ConfigError) as caught:
        parse_config(["--resume", "--run-dir", str(run_dir), "--algo", "sac"])
    assert caught.value.problems == [
        "--resume: algo was 'td3' in this run, the command gives 'sac'; a run resumes with the same value "
        "(drop the flag to keep it)"
    ]
