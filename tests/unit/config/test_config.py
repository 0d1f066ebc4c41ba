"""Config parsing and validation (pure: no MPI, no torch)."""

import datetime as dt

import pytest

from evo.config import ConfigError, parse_config, str2bool

NOW = dt.datetime(2026, 1, 2, 3, 4, 5)


def parse(argv, tmp_path, **kwargs):
    argv = list(argv)
    if "--run-dir" not in argv:
        argv += ["--run-dir", str(tmp_path / "run")]
    return parse_config(argv, now=NOW, **kwargs)


def problems(argv, tmp_path, **kwargs):
    with pytest.raises(ConfigError) as caught:
        parse(argv, tmp_path, **kwargs)
    return caught.value.problems


def test_defaults_resolve_for_cartpole(tmp_path):
    config = parse([], tmp_path, world_size=4)
    assert config.env_id == "CartPole-v1"
    assert config.num_agents == 4 and config.members_per_rank == 1
    assert config.total_generations == 12 and config.agent_training_steps == 4096
    assert config.agent.policy == "mlp"
    assert config.agent.settings["batch_size"] == config.agent.unit_steps // 4
    assert set(config.agent.search_space) == {
        "learning_rate",
        "ent_coef",
        "clip_range",
        "gamma",
        "gae_lambda",
        "vf_coef",
    }
    assert config.truncation_fraction == 0.25 and config.tb_writer is True


def test_procgen_gets_the_paper_settings_and_impala(tmp_path):
    for env_id in ("bigfish", "procgen:bigfish", "procgen-bigfish-v0"):
        config = parse(["--env-id", env_id], tmp_path, world_size=2)
        agent = config.agent
        assert config.procgen_game == "bigfish"
        settings = agent.settings
        assert (agent.policy, agent.n_envs, settings["n_steps"], settings["n_epochs"]) == ("impala", 64, 256, 3)
        assert settings["batch_size"] == 64 * 256 // 8
        assert agent.defaults == {
            "learning_rate": 5e-4,
            "ent_coef": 0.01,
            "clip_range": 0.2,
            "gamma": 0.999,
            "gae_lambda": 0.95,
            "vf_coef": 0.5,
        }
        assert agent.policy_kwargs["net_arch"] == [] and agent.policy_kwargs["features_dim"] == 256


def test_num_agents_multiple_of_world_size(tmp_path):
    config = parse(["--num-agents", "8"], tmp_path, world_size=2)
    assert config.members_per_rank == 4
    assert list(config.members_of(1)) == [4, 5, 6, 7] and config.owner(5) == 1
    (problem,) = problems(["--num-agents", "5"], tmp_path, world_size=2)
    assert "--num-agents 5 is not a multiple of the 2 MPI ranks" in problem
    assert "--num-agents 4 or 6" in problem


def test_every_problem_is_reported_at_once(tmp_path):
    found = problems(
        [
            "--env-id",
            "CartPol-v1",
            "--total-generations",
            "0",
            "--agent-training-steps",
            "-5",
            "--truncation-fraction",
            "0.7",
            "--gamma-range",
            "0.99",
            "0.9",
            "--learning-rate-range",
            "1e-3",
            "1e-3",
        ],
        tmp_path,
    )
    text = "\n".join(found)
    assert "Did you mean 'CartPole-v1'" in text
    assert "--total-generations 0: must be a positive whole number" in text
    assert "--agent-training-steps -5: must be a positive whole number" in text
    assert "--truncation-fraction 0.7: must be in (0, 0.5]" in text
    assert "--gamma-range 0.99 0.9: the range is reversed" in text
    assert "--learning-rate-range 0.001 0.001: the range is empty" in text


@pytest.mark.parametrize("fraction, ok", [("0", False), ("0.5", True), ("0.51", False), ("0.01", True)])
def test_truncation_fraction_bounds(tmp_path, fraction, ok):
    if ok:
        assert parse(["--truncation-fraction", fraction], tmp_path).truncation_fraction == float(fraction)
    else:
        assert "--truncation-fraction" in problems(["--truncation-fraction", fraction], tmp_path)[0]


def test_unknown_flag_gets_a_suggestion(tmp_path):
    (problem,) = problems(["--total-generation", "3"], tmp_path)
    assert "unknown option --total-generation; did you mean --total-generations?" in problem


def test_procgen_typo_suggests_the_game(tmp_path):
    (problem,) = problems(["--env-id", "bigfsh"], tmp_path)
    assert "'bigfish'" in problem


@pytest.mark.parametrize(
    "text, value", [("False", False), ("false", False), ("0", False), ("True", True), ("yes", True)]
)
def test_tb_writer_accepts_evo_spelling(tmp_path, text, value):
    assert str2bool(text) is value
    assert parse(["--tb-writer", text], tmp_path).tb_writer is value
    assert parse(["--tb-writer"], tmp_path).tb_writer is True


def test_evo_range_flags_set_the_search_space(tmp_path):
    config = parse(["--learning-rate-range", "1e-4", "1e-3", "--gamma-range", "0.9", "0.99"], tmp_path)
    assert (config.agent.search_space["learning_rate"].low, config.agent.search_space["learning_rate"].high) == (
        1e-4,
        1e-3,
    )
    assert config.agent.search_space["gamma"].high == 0.99


def test_hyperparams_file_layers_and_coerces(tmp_path):
    path = tmp_path / "hp.yml"
    path.write_text(
        "default:\n  n_epochs: 3\n"
        "CartPole-v1:\n  n_steps: 64\n  batch_size: 32\n  learning_rate: 3e-4\n"
        "  search_space:\n    learning_rate: {low: 1e-5, high: 1e-3, scale: log}\n"
    )
    config = parse(["--hyperparams", str(path)], tmp_path)
    agent = config.agent
    assert (agent.settings["n_epochs"], agent.settings["n_steps"], agent.settings["batch_size"]) == (3, 64, 32)
    assert agent.defaults["learning_rate"] == 3e-4  # PyYAML reads 3e-4 as a string
    assert agent.search_space["learning_rate"].high == 1e-3
    assert agent.search_space["gamma"].low == 0.95  # untouched entries come from ppo.yml


def test_bad_yaml_files_are_named(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("CartPole-v1: [n_steps: 64\n")
    assert "invalid YAML" in problems(["--hyperparams", str(broken)], tmp_path)[0]
    missing = tmp_path / "missing.yml"
    assert f"--hyperparams {missing}: cannot read the file" in problems(["--hyperparams", str(missing)], tmp_path)[0]


def test_yaml_unknown_keys_and_types(tmp_path):
    path = tmp_path / "hp.yml"
    path.write_text(
        "CartPole-v1:\n  n_step: 64\n  n_epochs: many\n  normalize_advantage: 3\n"
        "  search_space:\n    gama: {low: 0.9, high: 0.99}\n    clip_range: {low: 0.3, high: 0.1}\n"
    )
    text = "\n".join(problems(["--hyperparams", str(path)], tmp_path))
    assert "unknown key 'n_step'; did you mean 'n_steps'?" in text
    assert "n_epochs must be int, got 'many'" in text
    assert "normalize_advantage must be bool, got 3" in text
    assert "unknown key 'gama'; did you mean 'gamma'?" in text
    assert f"search_space.clip_range ({path}[CartPole-v1]) is [0.3, 0.1]: the range is reversed" in text


def test_yaml_that_does_not_apply_is_refused(tmp_path):
    path = tmp_path / "hp.yml"
    path.write_text("Pendulum-v1:\n  n_steps: 64\n")
    assert "no block applies to 'CartPole-v1'" in problems(["--hyperparams", str(path)], tmp_path)[0]


def test_a_file_that_is_not_a_settings_file_is_refused_without_quoting_its_lines(tmp_path):
    """Issue 54 N12: --conf-file given a file of other lines (/etc/shadow's shape: each line a YAML key of no
    value) is refused naming the file and the fix, and quotes none of its lines; a real settings file of other
    envs' blocks still has its block names listed."""
    secret = "root:$y$j9T$hashhashhash:20228:0:99999:7:::"
    shadow = tmp_path / "shadow"
    shadow.write_text(f"{secret}\ndaemon:*:20228:0:99999:7:::\n")
    (problem,) = problems(["--conf-file", str(shadow)], tmp_path)
    assert problem.startswith(f"--conf-file {shadow}: no block applies to 'CartPole-v1'")
    assert "hashhash" not in problem and "20228" not in problem and "daemon" not in problem
    assert "no settings block" in problem and "'default'" in problem
    broken = tmp_path / "group"
    broken.write_text("users:x:100:\nsecret:x:101:alice\nnot yaml at all\n\tHOME = .\n")
    (problem,) = problems(["--conf-file", str(broken)], tmp_path)
    assert problem.startswith(f"--conf-file {broken}: invalid YAML: ") and "at line 3, column 1" in problem
    assert "alice" not in problem and "HOME" not in problem and "users" not in problem
    many = tmp_path / "many.yml"
    many.write_text("".join(f"Env{i}-v0:\n  n_steps: 64\n" for i in range(12)))
    (problem,) = problems(["--conf-file", str(many)], tmp_path)
    assert "its blocks are Env0-v0, Env1-v0" in problem and "Env7-v0 and 4 more" in problem


def test_existing_run_dir_is_refused(tmp_path):
    (tmp_path / "run").mkdir()  # empty, it would be taken over (tests/unit/rundir/test_unstarted.py)
    (tmp_path / "run" / "notes.txt").write_text("mine")
    (problem,) = problems([], tmp_path)
    assert "already exists; evo will not overwrite a run" in problem


def test_default_run_dir_names_script_env_and_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = parse_config([], prog="pbt_rl_wta.py", now=NOW)
    assert str(config.run_dir) == "runs/pbt_rl_wta-CartPole-v1-20260102-030405"


def test_cnn_policy_for_vector_observations_is_refused(tmp_path):
    path = tmp_path / "hp.yml"
    path.write_text("CartPole-v1:\n  policy: impala\n")
    assert "use 'mlp' for CartPole-v1" in problems(["--hyperparams", str(path)], tmp_path)[0]


def test_config_round_trips_to_plain_data(tmp_path):
    import yaml

    config = parse(["--env-id", "bigfish"], tmp_path, world_size=2)
    plain = yaml.safe_load(yaml.safe_dump(config.to_dict()))
    assert plain["agent"]["search_space"]["gamma"]["scale"] == "horizon"
    assert plain["run_dir"] == str(tmp_path / "run")


def test_strategy_none_is_the_control_on_every_script(tmp_path):
    for strategy in ("wta", "truncation"):
        config = parse(["--strategy", "none"], tmp_path, strategy=strategy)
        assert config.strategy == "none"
        assert parse([], tmp_path, strategy=strategy).strategy == strategy
    (problem,) = problems(["--strategy", "wta"], tmp_path, strategy="truncation")
    assert "--strategy wta" in problem and "pbt_rl_wta.py" in problem and "'none'" in problem


@pytest.mark.parametrize(
    "name, envs, mode, levels",
    [("easy", 64, "easy", 0), ("easy-200", 128, "easy", 200), ("hard", 256, "hard", 0), ("hard-500", 512, "hard", 500)],
)
def test_procgen_param_sets_by_name(tmp_path, name, envs, mode, levels):
    config = parse(["--env-id", "bigfish", "--param-set", name], tmp_path)
    assert config.agent.n_envs == envs and config.agent.settings["n_steps"] == 256
    # 8 minibatches per epoch, as in train-procgen-pytorch
    assert config.agent.settings["batch_size"] == envs * 256 // 8
    assert (config.distribution_mode, config.num_levels) == (mode, levels)
    assert config.agent.defaults["gamma"] == 0.999 and config.agent.defaults["learning_rate"] == 5e-4
    assert config.agent_training_steps % (envs * 256) == 0


def test_param_set_yields_to_explicit_flags_and_is_checked(tmp_path):
    config = parse(["--env-id", "bigfish", "--param-set", "easy-200", "--num-levels", "50"], tmp_path)
    assert (config.distribution_mode, config.num_levels, config.agent.n_envs) == ("easy", 50, 128)
    (problem,) = problems(["--env-id", "bigfish", "--param-set", "hard500"], tmp_path)
    assert "did you mean 'hard-500'?" in problem
    (problem,) = problems(["--env-id", "CartPole-v1", "--param-set", "easy"], tmp_path)
    assert "not a Procgen game" in problem


def test_evaluation_levels_are_held_out_and_checked(tmp_path):
    config = parse(["--env-id", "bigfish", "--num-levels", "200", "--start-level", "10"], tmp_path)
    assert (config.eval_start_level, config.eval_num_levels, config.select_on) == (210, 0, "train")
    config = parse(
        [
            "--env-id",
            "bigfish",
            "--num-levels",
            "200",
            "--eval-start-level",
            "500",
            "--eval-num-levels",
            "100",
            "--eval-episodes",
            "5",
            "--select-on",
            "test",
        ],
        tmp_path,
    )
    assert (config.eval_start_level, config.eval_num_levels, config.select_on) == (500, 100, "test")
    (problem,) = problems(
        ["--env-id", "bigfish", "--num-levels", "200", "--eval-start-level", "150", "--eval-num-levels", "100"],
        tmp_path,
    )
    assert "overlap the training levels [0, 200)" in problem and "--eval-start-level 200" in problem
    (problem,) = problems(["--select-on", "test"], tmp_path)
    assert "--eval-episodes" in problem
    (problem,) = problems(["--env-id", "CartPole-v1", "--eval-num-levels", "5"], tmp_path)
    assert "CartPole-v1 has none" in problem


def test_hyperparams_overrides_reach_the_agent(tmp_path):
    config = parse(
        [
            "--hyperparams",
            "learning_rate:5e-4",
            "n_epochs:4",
            "normalize_advantage:false",
            "policy_kwargs:{net_arch: [32, 32]}",
        ],
        tmp_path,
    )
    default = parse([], tmp_path / "other")
    assert config.agent.defaults["learning_rate"] == 5e-4 != default.agent.defaults["learning_rate"]
    assert (config.agent.settings["n_epochs"], config.agent.settings["normalize_advantage"]) == (4, False)
    assert config.agent.policy_kwargs["net_arch"] == [32, 32]
    assert config.hyperparams["learning_rate"] == 5e-4  # coerced: PyYAML reads 5e-4 as a string
    assert config.conf_file is None


def test_hyperparams_override_keys_and_values_are_checked(tmp_path):
    (problem,) = problems(["--hyperparams", "learning_rat:1e-3"], tmp_path)
    assert problem == "--hyperparams: unknown key 'learning_rat'; did you mean 'learning_rate'?"
    (problem,) = problems(["--hyperparams", "n_epochs:many"], tmp_path)
    assert problem == "--hyperparams.n_epochs must be int, got 'many' (str)"
    (problem,) = problems(["--hyperparams", "normalize_advantage:3"], tmp_path)
    assert "normalize_advantage must be bool, got 3" in problem
    (problem,) = problems(["--hyperparams", "n_epochs:4", "n_steps=64"], tmp_path)
    assert problem.startswith("--hyperparams n_steps=64: expected key:value (e.g. learning_rate:1e-3")
    (problem,) = problems(["--hyperparams", "policy_kwargs:{net_arch: [32"], tmp_path)
    assert "is not a YAML value" in problem
    (problem,) = problems(["--hyperparams", "policy_kwargs:{net_arc: [32]}"], tmp_path)
    assert "unknown key 'net_arc'; did you mean 'net_arch'?" in problem


def test_conf_file_is_layered_like_hyperparams_file_and_named_in_messages(tmp_path):
    path = tmp_path / "hp.yml"
    path.write_text("CartPole-v1:\n  n_steps: 64\n  n_epochs: 3\n")
    for flag in ("--conf-file", "--hyperparams"):
        config = parse([flag, str(path)], tmp_path)
        assert (config.agent.settings["n_steps"], config.agent.settings["n_epochs"]) == (64, 3)
        assert config.conf_file == path and config.hyperparams == {}
    missing = tmp_path / "missing.yml"
    assert f"--conf-file {missing}: cannot read the file" in problems(["--conf-file", str(missing)], tmp_path)[0]
    other = tmp_path / "other.yml"
    other.write_text("Pendulum-v1:\n  n_steps: 64\n")
    (problem,) = problems(["--conf-file", str(other)], tmp_path)
    assert problem.startswith(f"--conf-file {other}: no block applies to 'CartPole-v1'")


def test_overrides_are_layered_over_the_conf_file(tmp_path):
    path = tmp_path / "hp.yml"
    path.write_text("default:\n  n_epochs: 2\nCartPole-v1:\n  n_steps: 64\n  n_epochs: 3\n  batch_size: 32\n")
    config = parse(["--conf-file", str(path), "--hyperparams", "n_epochs:5", "n_minibatches:4"], tmp_path)
    assert (config.agent.settings["n_steps"], config.agent.settings["n_epochs"]) == (64, 5)  # file, then the overrides
    # n_minibatches replaces the file's batch_size
    assert config.agent.settings["batch_size"] == config.agent.unit_steps // 4
    (problem,) = problems(["--conf-file", str(path), "--hyperparams", str(path)], tmp_path)
    assert "both name a YAML file" in problem


def test_resume_keeps_conf_file_and_overrides_and_refuses_other_ppo_settings(tmp_path):
    import yaml

    path = tmp_path / "hp.yml"
    path.write_text("CartPole-v1:\n  n_steps: 64\n")
    run_dir = tmp_path / "run"
    started = parse(["--conf-file", str(path), "--hyperparams", "n_epochs:4", "learning_rate:5e-4"], tmp_path)
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(started.to_dict()))
    resumed = parse_config(["--resume", "--run-dir", str(run_dir)])
    assert resumed.agent == started.agent
    assert resumed.agent.settings["n_epochs"] == 4 and resumed.agent.settings["n_steps"] == 64
    assert (resumed.conf_file, resumed.hyperparams) == (path, started.hyperparams)
    with pytest.raises(ConfigError) as caught:
        parse_config(["--resume", "--run-dir", str(run_dir), "--hyperparams", "n_epochs:5", "learning_rate:5e-4"])
    (problem,) = caught.value.problems
    assert "the PPO settings differ from the run's (n_epochs: 4 -> 5)" in problem
    again = parse_config(["--resume", "--run-dir", str(run_dir), "--hyperparams", "learning_rate:5e-4", "n_epochs:4"])
    assert again.agent == started.agent  # the same overrides given again


def test_param_set_step_alone(tmp_path):
    from evo.config import apply_param_set, build_parser

    args = build_parser().parse_args(["--env-id", "bigfish", "--param-set", "hard-500", "--num-levels", "7"])
    found = []
    assert apply_param_set(args, {"env_id", "param_set", "num_levels"}, "bigfish", found) == "hard-500"
    assert (args.distribution_mode, args.num_levels, found) == ("hard", 7, [])
    args = build_parser().parse_args(["--param-set", "easy"])
    assert apply_param_set(args, {"param_set"}, None, found) is None and "not a Procgen game" in found[0]


def test_cross_option_checks_alone():
    from evo.config import build_parser, cross_option_checks
    from evo.learners import learner_spec

    args = build_parser().parse_args(["--num-agents", "6", "--total-generations", "3"])
    found = []
    resolved = cross_option_checks(args, learner_spec("ppo"), {"agent_training_steps": 100}, None, 4, found)
    assert (resolved["num_agents"], resolved["total_generations"], resolved["agent_training_steps"]) == (6, 3, 100)
    assert found == [
        "--num-agents 6 is not a multiple of the 4 MPI ranks: every rank must hold the same number of members. "
        "Use --num-agents 4 or 8, or run with mpiexec -n N where N divides 6."
    ]


def test_asynchronous_runs_on_the_point_to_point_scripts_only_and_with_what_it_can_follow(tmp_path):
    for strategy in ("truncation", "wta"):
        config = parse_config(["--asynchronous", "--run-dir", str(tmp_path / strategy)], strategy=strategy)
        assert config.asynchronous and config.checkpoint_every == 1
    schedule = tmp_path / "schedule.yml"
    with pytest.raises(ConfigError) as refused:
        parse_config(
            [
                "--asynchronous",
                "--checkpoint-every",
                "3",
                "--schedule",
                str(schedule),
                "--run-dir",
                str(tmp_path / "c"),
            ],
            transport="collective",
        )
    said = str(refused.value)
    assert "run pbt_rl_truct.py --asynchronous (truncation) or pbt_rl_wta.py --asynchronous" in said
    assert "--checkpoint-every 3 --asynchronous: an asynchronous run checkpoints every member" in said
    assert "--schedule FILE --asynchronous: a replayed schedule trains one agent" in said


def test_pb2_refuses_named_choices_and_names_the_papers_explorers():
    # TD3's built-in space explores noise_type by name; its batch_size is an ordered choice
    with pytest.raises(ConfigError) as refused:
        parse_config(["--algo", "td3", "--env-id", "Pendulum-v1", "--explore", "pb2"], world_size=2)
    (problem,) = refused.value.problems
    assert "--explore pb2 with named choices in the search space (noise_type: ['normal', 'ornstein-uhlenbeck'])" in (
        problem
    )
    assert "PB2's GP needs values with an order; use --explore pb2-rand, pb2-mult or pb2-mix" in problem
    assert "pb2-rand keeps or redraws each at random" in problem and "batch_size" not in problem
    for explorer in ("pb2-mix", "pb2-mult", "pb2-rand", "perturb"):
        config = parse_config(["--algo", "td3", "--env-id", "Pendulum-v1", "--explore", explorer], world_size=2)
        assert config.explore == explorer
    # ordered choices alone stay PB2's, as GP inputs on their index scale
    ordered = ["--explore", "pb2", "--hyperparams", "search_space:{n_epochs: {choices: [3, 5, 10]}}"]
    assert parse_config(ordered, world_size=2).explore == "pb2"
    for explorer in ("pb2-mix", "pb2-rand"):  # and the paper's explorers run asynchronously too
        config = parse_config(["--explore", explorer, "--asynchronous"], world_size=2)
        assert config.asynchronous and config.explore == explorer


ARCH_SPACE = (
    "search_space:{learning_rate: {low: 1.0e-4, high: 1.0e-3, scale: log}, pi_layers: {low: 1, high: 3, type: int}}"
)


def test_stages_resolve_bg_pbts_defaults(tmp_path):
    config = parse(["--env-id", "Pendulum-v1", "--max-distillations", "2", "--hyperparams", ARCH_SPACE], tmp_path,
                   world_size=4)  # fmt: skip
    assert (config.max_distillations, config.patience, config.stage_steps) == (2, 20, None)
    assert config.stage_students == 12 and config.stage_distillation_steps == 4 * config.agent_training_steps
    assert parse([], tmp_path, world_size=2).max_distillations == 0


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--asynchronous", "--hyperparams", ARCH_SPACE], "BG-PBT refuses asynchronous runs"),
        (
            ["--algo", "sac"],
            "SAC would need a distillation of its critics and its replay buffer, not built; use --algo ppo",
        ),
        ([], "the search space has none of pi_layers, pi_width, vf_layers, vf_width"),
        (["--students", "3", "--hyperparams", ARCH_SPACE], "--students 3: a stage needs at least as many students"),
        (["--patience", "0", "--hyperparams", ARCH_SPACE], "--patience 0: must be at least 1"),
    ],
)
def test_stages_refuse_what_they_cannot_run_naming_the_fix(tmp_path, argv, said):
    found = problems(["--env-id", "Pendulum-v1", "--max-distillations", "1", *argv], tmp_path, world_size=4)
    assert any(said in problem for problem in found), found


def test_a_hyperparams_value_longer_than_a_file_name_is_read_as_key_value(tmp_path):
    """One ``--hyperparams`` token is first tried as a file: one longer than a file name may be
    (ENAMETOOLONG) is a key:value, not an OSError."""
    names = ", ".join(f"{n}: {{low: 1, high: 5, type: int}}" for n in ("pi_layers", "vf_layers"))
    long = "search_space:{" + names + ", learning_rate: {low: 1.0e-5, high: 1.0e-3, scale: log}" + " " * 200 + "}"
    assert len(long) > 255
    config = parse(["--env-id", "Pendulum-v1", "--hyperparams", long], tmp_path, world_size=2)
    assert {"pi_layers", "vf_layers", "learning_rate"} <= set(config.agent.search_space)
