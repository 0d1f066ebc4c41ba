"""``--algo``: the learner's settings come from its YAML (evo/hyperparams/<algo>.yml) and are
checked against its declaration (evo/learners) and the env's action space; bad input is refused
with the fix, every problem at once. Through parse_config (pure: no MPI, no torch)."""

import pytest
import yaml

from evo.config import ConfigError, parse_config
from evo.config import precision as config_precision
from evo.core.kinds import Additive, Choice, Horizon, Integer, LogFloat
from evo.learners import learner_spec
from tests.support import PPO_SIX, started_run

SAC_PENDULUM = ["--algo", "sac", "--env-id", "Pendulum-v1"]
SAC_EXPLORED = ("learning_rate", "gamma", "tau", "batch_size", "train_freq", "target_entropy")
"""sac.yml's search space for Pendulum-v1, in SAC's declaration order (evo/learners/sac.py)."""
# /proc/cpuinfo of a processor with native bfloat16 (Intel Sapphire Rapids): bf16 passes the
# processor's check, so what refuses it is the learner
BF16_CPU = "processor\t: 0\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"


def parse(argv, tmp_path, name="run"):
    return parse_config([*argv, "--run-dir", str(tmp_path / name)])


def problems(argv, tmp_path):
    with pytest.raises(ConfigError) as caught:
        parse(argv, tmp_path)
    return caught.value.problems


# --- SAC's settings --------------------------------------------------------------------------------


def test_ppo_is_the_default_learner(tmp_path):
    config = parse([], tmp_path)
    assert (config.algo, config.agent.algo, config.agent.spec.name) == ("ppo", "ppo", "ppo")
    assert config.explored_names == tuple(PPO_SIX)


def test_sac_on_pendulum_resolves_sac_yml(tmp_path):
    config = parse(SAC_PENDULUM, tmp_path)
    agent, spec = config.agent, learner_spec("sac")
    assert (config.algo, agent.algo, agent.spec) == ("sac", "sac", spec)
    assert agent.search_space == {
        "learning_rate": LogFloat(1e-5, 2e-3),
        "gamma": Horizon(0.97, 0.9999),
        "tau": LogFloat(0.001, 0.08),
        "batch_size": Choice([32, 64, 128, 256, 512, 1024]),
        "train_freq": Integer(1, 10),
        "target_entropy": Additive(-2.0, 0.0),
    }
    # the explored names in SAC's declaration order, whatever order the YAML gives them in
    assert tuple(agent.search_space) == config.explored_names == SAC_EXPLORED
    assert spec.record_order(list(reversed(SAC_EXPLORED))) == SAC_EXPLORED
    # 'auto' is -dim(A): Pendulum's torque is one action dimension
    assert agent.settings["target_entropy"] == -1.0
    assert agent.defaults == {
        "learning_rate": 1e-3,  # Pendulum-v1's block over the default block
        "gamma": 0.99,
        "tau": 0.005,
        "batch_size": 256,
        "train_freq": 1,
        "target_entropy": -1.0,
    }
    settings = agent.settings
    assert set(settings) == set(spec.by_name)  # SAC's settings, and no PPO ones
    assert (settings["gradient_steps"], settings["ent_coef"], settings["buffer_size"]) == (-1, "auto", 1_000_000)
    assert (settings["learning_starts"], settings["target_update_interval"]) == (100, 1)  # the declared defaults
    assert (agent.policy, agent.n_envs, agent.unit_steps, agent.normalizes) == ("mlp", 1, 1, False)
    assert (config.total_generations, config.agent_training_steps) == (10, 2000)
    assert (config.exploit_buffer, config.checkpoint_buffers, config.precision) == ("own", True, "fp32")
    plain = yaml.safe_load(yaml.safe_dump(config.to_dict()))["agent"]
    assert (plain["algo"], plain["target_entropy"], plain["ent_coef"]) == ("sac", -1.0, "auto")
    assert plain["search_space"]["target_entropy"]["scale"] == "additive"
    assert plain["search_space"]["batch_size"]["choices"] == [32, 64, 128, 256, 512, 1024]


def test_learning_rate_range_reaches_sac_s_space(tmp_path):
    config = parse([*SAC_PENDULUM, "--learning-rate-range", "1e-4", "1e-3", "--gamma-range", "0.95", "0.999"], tmp_path)
    space = config.agent.search_space
    assert space["learning_rate"] == LogFloat(1e-4, 1e-3)  # the bounds of the flag on sac.yml's scale
    assert space["gamma"] == Horizon(0.95, 0.999)
    assert space["tau"] == LogFloat(0.001, 0.08)  # the rest as sac.yml gives it
    assert tuple(space) == SAC_EXPLORED
    assert config.learning_rate_range == (1e-4, 1e-3)


# --- refused, with the fix ----------------------------------------------------------------------------


def test_an_unknown_algo_is_refused_naming_the_learners_and_the_closest(tmp_path):
    """--algo also takes a learner of your own (package.module:ClassName), so its own check refuses a name
    that is neither, with every built-in learner and the closest one (tests/unit/learners/test_own_learner.py)."""
    (problem,) = problems(["--algo", "ppo2"], tmp_path)
    assert problem.startswith("--algo ppo2: no such learner; did you mean 'ppo'? use one of ppo, a2c,")
    assert "sac" in problem and "package.module:ClassName" in problem


def test_a_setting_of_another_learner_is_refused_naming_it(tmp_path):
    (problem,) = problems([*SAC_PENDULUM, "--hyperparams", "n_epochs:4"], tmp_path)
    assert problem.startswith(
        "--hyperparams: 'n_epochs' is a setting of PPO (--algo ppo), not of SAC; drop it, or train with --algo ppo. "
        "SAC's settings: learning_rate, gamma, tau,"
    )
    (problem,) = problems(["--hyperparams", "tau:0.01"], tmp_path)
    assert problem.startswith("--hyperparams: 'tau' is a setting of ")  # every off-policy learner's
    assert (
        "DDPG (--algo ddpg), DQN (--algo dqn), QR-DQN (--algo qrdqn), SAC (--algo sac), TD3 (--algo td3) and TQC "
        "(--algo tqc), not of PPO" in problem  # CrossQ has no target networks
    )
    assert "not of PPO; drop it, or train with --algo ddpg. PPO's settings: learning_rate, ent_coef," in problem
    # in a YAML file's block, and in a search space, alike
    path = tmp_path / "hp.yml"
    path.write_text("Pendulum-v1:\n  n_epochs: 4\n  search_space:\n    clip_range: {low: 0.1, high: 0.3}\n")
    found = problems([*SAC_PENDULUM, "--conf-file", str(path)], tmp_path)
    assert len(found) == 2
    assert f"{path}[Pendulum-v1]: 'n_epochs' is a setting of PPO (--algo ppo), not of SAC" in found[0]
    assert f"{path}[Pendulum-v1].search_space: 'clip_range' is a setting of PPO (--algo ppo), not of SAC" in found[1]


def test_an_action_space_the_learner_cannot_act_in_is_refused(tmp_path):
    (problem,) = problems(["--algo", "sac", "--env-id", "CartPole-v1"], tmp_path)
    assert problem == (
        "--algo sac: SAC acts in Box action spaces, and CartPole-v1 has a Discrete action space; use --algo "
        "ppo, a2c, dqn or qrdqn"
    )
    assert parse(["--algo", "ppo", "--env-id", "Pendulum-v1"], tmp_path).algo == "ppo"  # PPO acts in Box too


def test_replay_buffer_options_are_refused_for_ppo_and_taken_by_sac(tmp_path):
    assert problems(["--exploit-buffer", "copy", "--no-checkpoint-buffers"], tmp_path) == [
        "--exploit-buffer copy: PPO learns from its own fresh rollouts and has no replay buffer to copy; drop the "
        "flag (it is for --algo crossq, ddpg, dqn, qrdqn, sac, td3 or tqc)",
        "--no-checkpoint-buffers: PPO has no replay buffer to leave out of checkpoints; drop the flag",
    ]
    config = parse([*SAC_PENDULUM, "--exploit-buffer", "copy", "--no-checkpoint-buffers"], tmp_path)
    assert (config.exploit_buffer, config.checkpoint_buffers) == ("copy", False)
    assert (config.cli["exploit_buffer"], config.cli["checkpoint_buffers"]) == ("copy", False)  # saved for --resume


def test_bf16_is_refused_for_sac(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(BF16_CPU)
    monkeypatch.setattr(config_precision, "CPUINFO", cpuinfo)
    assert parse(["--env-id", "Pendulum-v1", "--precision", "bf16"], tmp_path, "ppo").precision == "bf16"
    (problem,) = problems([*SAC_PENDULUM, "--precision", "bf16"], tmp_path)
    assert problem == (
        "--precision bf16: SAC runs in fp32 only (its networks have no mixed-precision policy here); "
        "use --precision fp32"
    )
    (problem,) = problems([*SAC_PENDULUM, "--hyperparams", "precision:bf16"], tmp_path)  # from the YAML too
    assert "SAC runs in fp32 only" in problem
    assert parse([*SAC_PENDULUM, "--precision", "fp32"], tmp_path, "fp32").precision == "fp32"


def test_a_setting_that_cannot_be_tuned_is_refused_with_the_reason(tmp_path):
    space = "search_space:{buffer_size: {low: 1000, high: 100000, type: int}}"
    (problem,) = problems([*SAC_PENDULUM, "--hyperparams", space], tmp_path)
    assert problem == (
        "--hyperparams.search_space.buffer_size: buffer_size cannot be explored: it sizes the replay buffer, "
        "allocated once when the member is built"
    )
    (problem,) = problems([*SAC_PENDULUM, "--hyperparams", "search_space:{ent_coef: {low: 0.01, high: 0.2}}"], tmp_path)
    assert "ent_coef cannot be explored: with 'auto' it is learned" in problem and "tune target_entropy" in problem


def test_every_problem_is_reported_at_once(tmp_path):
    found = problems(
        ["--algo", "sac", "--env-id", "CartPole-v1", "--hyperparams", "n_epochs:4", "--exploit-buffer", "copy"]
        + ["--seed", "-1", "--learning-rate-range", "1e-3", "1e-4"],
        tmp_path,
    )
    assert len(found) == 4, found
    text = "\n".join(found)
    assert "--seed -1: must be >= 0" in text
    assert "--learning-rate-range 0.001 0.0001: the range is reversed" in text
    assert "'n_epochs' is a setting of PPO (--algo ppo), not of SAC" in text
    assert "CartPole-v1 has a Discrete action space; use --algo ppo, a2c, dqn or qrdqn" in text


# --- resume ------------------------------------------------------------------------------------------


def test_algo_is_fixed_on_resume(tmp_path):
    started, run_dir = started_run(tmp_path, SAC_PENDULUM)
    resumed = parse_config(["--resume", "--run-dir", str(run_dir)])
    assert (resumed.algo, resumed.agent.algo, resumed.cli["algo"]) == ("sac", "sac", "sac")
    assert resumed.agent == started.agent and resumed.agent.settings["target_entropy"] == -1.0
    assert resumed.explored_names == SAC_EXPLORED
    assert parse_config(["--resume", "--run-dir", str(run_dir), "--algo", "sac"]).agent == started.agent
    with pytest.raises(ConfigError) as caught:
        parse_config(["--resume", "--run-dir", str(run_dir), "--algo", "ppo"])
    assert (
        "--resume: algo was 'sac' in this run, the command gives 'ppo'; a run resumes with the same value "
        "(drop the flag to keep it)"
    ) in caught.value.problems


def before_algo(plain):
    """config.yaml as evo wrote it before --algo existed (before the learners were declared): no
    algo, exploit_buffer or checkpoint_buffers (in the config or under cli); the agent's explored
    values under ``defaults``, no n_minibatches, the other settings flat. Exactly what that
    version wrote for the same command (checked against it when this test was written)."""
    for record in (plain, plain["cli"]):
        for name in ("algo", "exploit_buffer", "checkpoint_buffers"):
            del record[name]
    agent = plain["agent"]
    del agent["algo"], agent["n_minibatches"]
    agent["defaults"] = {name: agent.pop(name) for name in PPO_SIX}
    return plain


def test_a_run_recorded_before_algo_resumes_as_ppo(tmp_path):
    started, run_dir = started_run(tmp_path, [], record=before_algo)
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert "algo" not in saved and "algo" not in saved["cli"] and "defaults" in saved["agent"]
    resumed = parse_config(["--resume", "--run-dir", str(run_dir)])
    assert (resumed.algo, resumed.agent.algo) == ("ppo", "ppo")
    assert resumed.agent == started.agent
    assert resumed.agent.settings["n_minibatches"] == started.agent.settings["n_minibatches"] == 4
    assert parse_config(["--resume", "--run-dir", str(run_dir), "--algo", "ppo"]).algo == "ppo"
