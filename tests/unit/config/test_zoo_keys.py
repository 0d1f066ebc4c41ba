"""A zoo user's settings file runs as it is (issue 56 item 0): rl-baselines3-zoo's keys that are not evo's own
(evo/config/zoo.py) read as zoo means them, or refused saying what evo does instead; zoo's own MiniGrid entry
(FlatObsWrapper over MiniGrid's Dict observation, which SB3 cannot batch) trains under PBT in this process, its
export wrapping the env for rl_zoo3's enjoy. The wrapper's module named by a run directory is refused like an
env's (tests/unit/config/test_named_modules.py's rule)."""

import pytest
import yaml

from evo.config import ConfigError, parse_config
from evo.config.zoo import python_literal, wrappers
from tests.support import need_atari, read_population, run_in_process

ZOO_MINIGRID = """\
# rl-baselines3-zoo's hyperparams/ppo.yml entry, as zoo writes it
MiniGrid-Empty-Random-5x5-v0: &minigrid-defaults
  env_wrapper: minigrid.wrappers.FlatObsWrapper # See GH/1320#issuecomment-1421108191
  normalize: true
  n_envs: 8 # number of environment copies running in parallel
  n_timesteps: !!float 1e5
  policy: 'MlpPolicy'
  n_steps: 128 # batch size is n_steps * n_env
  batch_size: 64 # Number of training minibatches per update
  gae_lambda: 0.95 #  Factor for trade-off of bias vs variance for Generalized Advantage Estimator
  gamma: 0.99
  n_epochs: 10 #  Number of epoch when optimizing the surrogate
  ent_coef: 0.0 # Entropy coefficient for the loss calculation
  learning_rate: 2.5e-4 # The learning rate, it can be a function
  clip_range: 0.2 # Clipping parameter, it can be a function

MiniGrid-Empty-5x5-v0: *minigrid-defaults
"""
MINIGRID = "minigrid:MiniGrid-Empty-5x5-v0"


@pytest.fixture
def zoo_file(tmp_path):
    pytest.importorskip("minigrid", reason="MiniGrid is an optional extra: make install EXTRAS=minigrid")
    path = tmp_path / "ppo.yml"
    path.write_text(ZOO_MINIGRID)
    return path


def test_zoos_strings_of_python_are_read_as_literals_and_never_evaluated():
    problems = []
    assert python_literal("{'norm_obs': True, 'norm_reward': False}", "normalize", problems) == {
        "norm_obs": True,
        "norm_reward": False,
    }
    kwargs = python_literal("dict(net_arch=dict(pi=[64], vf=[64]), activation_fn=nn.ReLU)", "policy_kwargs", problems)
    assert kwargs == {"net_arch": {"pi": [64], "vf": [64]}, "activation_fn": "relu"} and not problems
    assert python_literal("dict(activation_fn=th.nn.Tanh)", "p", problems) == {"activation_fn": "tanh"}
    assert python_literal("__import__('os').system('true')", "policy_kwargs", problems) is None
    assert "__import__('os').system('true') is not a literal" in problems[-1]
    assert python_literal("dict(**x)", "p", problems) is None and "**kwargs is not a literal" in problems[-1]


def test_zoos_wrapper_forms_a_path_a_list_and_keyword_arguments():
    problems = []
    assert wrappers("minigrid.wrappers.FlatObsWrapper", "w", problems) == (("minigrid.wrappers.FlatObsWrapper", {}),)
    listed = ["a.B", {"sb3_contrib.common.wrappers.TimeFeatureWrapper": {"max_steps": 100}}, {"c.D": None}]
    assert wrappers(listed, "w", problems) == (
        ("a.B", {}),
        ("sb3_contrib.common.wrappers.TimeFeatureWrapper", {"max_steps": 100}),
        ("c.D", {}),
    )
    assert not problems
    assert wrappers(["not a path", 3], "env_wrapper", problems) == ()
    assert len(problems) == 2 and "is not a wrapper as zoo writes one" in problems[0]


def test_zoos_entry_is_read_as_zoo_means_it(zoo_file):
    config = parse_config(["--env-id", MINIGRID, "--conf-file", str(zoo_file), "--agent-training-steps", "1024"])
    agent = config.agent
    assert agent.env_wrapper == (("minigrid.wrappers.FlatObsWrapper", {}),)  # the bare id's block, as zoo keys it
    assert agent.normalize == {"norm_obs": True, "norm_reward": True} and agent.n_envs == 8
    assert agent.settings["learning_rate"] == 2.5e-4 and agent.policy == "mlp"
    # n_timesteps: each member trains 1e5 env steps: 1e5 / 1024 generations, rounded up (it was "did you mean
    # 'n_steps'?")
    assert config.total_generations == 98
    flag = parse_config(["--env-id", MINIGRID, "--conf-file", str(zoo_file), "--total-generations", "3"])
    assert flag.total_generations == 3  # the command line wins
    recorded = config.to_dict()["agent"]["env_wrapper"]
    assert recorded == [{"minigrid.wrappers.FlatObsWrapper": {}}]


def test_zoos_keys_evo_does_not_run_are_refused_saying_what_evo_does(tmp_path, zoo_file):
    path = tmp_path / "more.yml"
    entry = yaml.safe_load(ZOO_MINIGRID.replace("*minigrid-defaults", "{}"))["MiniGrid-Empty-Random-5x5-v0"]
    entry.update(
        callback="rl_zoo3.callbacks.ParallelTrainCallback",
        vec_env_wrapper="stable_baselines3.common.vec_env.VecCheckNan",
        learning_rate="lin_2.5e-4",
        policy_kwargs="dict(net_arch=[64], activation_fn=nn.GELU)",
    )
    path.write_text(yaml.safe_dump({"MiniGrid-Empty-5x5-v0": entry}))
    with pytest.raises(ConfigError) as refused:
        parse_config(["--env-id", MINIGRID, "--conf-file", str(path)])
    text = str(refused.value)
    assert ".callback is zoo's training callback, which evo does not run" in text
    assert ".vec_env_wrapper wraps zoo's VecEnv, which evo builds itself" in text
    assert ".learning_rate: 'lin_2.5e-4' is zoo's linear schedule" in text and "(learning_rate: 2.5e-4)" in text
    assert "nn.GELU is not a literal" in text  # an activation evo has not: refused, never evaluated


def test_a_wrapper_that_does_not_import_is_refused_and_an_atari_game_takes_only_zoos_own(tmp_path):
    path = tmp_path / "w.yml"
    path.write_text("CartPole-v1: {env_wrapper: no_such_package.wrappers.Flat}\n")
    with pytest.raises(ConfigError, match="env_wrapper no_such_package.wrappers.Flat: cannot import no_such_package"):
        parse_config(["--env-id", "CartPole-v1", "--conf-file", str(path)])
    need_atari()
    atari = tmp_path / "atari.yml"
    atari.write_text("atari: {env_wrapper: [stable_baselines3.common.atari_wrappers.AtariWrapper], frame_stack: 4}\n")
    config = parse_config(["--env-id", "ALE/Pong-v5", "--conf-file", str(atari)])
    assert config.agent.env_wrapper == () and config.agent.frame_stack == 4  # zoo's atari entry: evo's own anyway
    atari.write_text("atari: {env_wrapper: [{stable_baselines3.common.atari_wrappers.AtariWrapper: {noop_max: 0}}]}\n")
    with pytest.raises(ConfigError, match="evo preprocesses every Atari game with zoo's own"):
        parse_config(["--env-id", "ALE/Pong-v5", "--conf-file", str(atari)])


def test_a_wrapper_module_shipped_in_a_run_directory_is_never_imported(tmp_path):
    from evo.config.imports import shipped_module_problems

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "shipped_wrappers.py").write_text("raise SystemExit('ran')\n")
    saved = {"env_id": "CartPole-v1", "agent": {"algo": "ppo", "env_wrapper": [{"shipped_wrappers.Flat": {}}]}}
    import sys

    sys.path.insert(0, str(run_dir))
    try:
        (problem,) = shipped_module_problems(saved, {}, run_dir)
    finally:
        sys.path.remove(str(run_dir))
    assert problem.startswith("env_wrapper shipped_wrappers:Flat: its module shipped_wrappers would be imported from")


def test_zoos_minigrid_entry_trains_under_pbt_and_its_export_wraps_the_env(tmp_path, zoo_file):
    """MiniGrid's Dict observation crashed every rank; with zoo's FlatObsWrapper every env of every member is
    flat, the members exploit, config.yaml keeps the wrapper for the tools, and the export's config.yml holds it
    as zoo writes it (rl_zoo3's enjoy wraps the env the same way)."""
    from evo.tools.export import export
    from evo.tools.saved import choose, open_run

    run_dir = tmp_path / "run"
    argv = ["--env-id", MINIGRID, "--conf-file", str(zoo_file), "--num-agents", "2", "--total-generations", "2"]
    argv += ["--agent-training-steps", "64", "--hyperparams", "n_envs:2", "n_steps:32", "batch_size:32", "n_epochs:1"]
    assert run_in_process([*argv, "--tb-writer", "False", "--run-dir", str(run_dir)]) == 0
    assert sorted({(r["generation"], r["member"]) for r in read_population(run_dir)}) == [
        ("1", "0"), ("1", "1"), ("2", "0"), ("2", "1"),
    ]  # fmt: skip
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["agent"]["env_wrapper"] == [{"minigrid.wrappers.FlatObsWrapper": {}}]
    run = open_run(run_dir)
    experiment = export(run, choose(run), tmp_path / "logs")
    config = yaml.load((experiment / "MiniGrid-Empty-5x5-v0" / "config.yml").read_text(), Loader=yaml.UnsafeLoader)
    assert config["env_wrapper"] == ["minigrid.wrappers.FlatObsWrapper"]
