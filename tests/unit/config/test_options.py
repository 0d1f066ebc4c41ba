"""The option declarations (the fields of Config, evo/config/resolved.py): every rule walks all options. Pure."""

import argparse
import dataclasses
import datetime as dt
import importlib.util
import re
import typing
import zipfile
from pathlib import Path

import pytest
import yaml

from evo.config import Config, ConfigError, declare, parse_config
from evo.config import precision as config_precision
from evo.config.declare import DERIVED, FIXED, OPTION, OWN, RESTORED, declared
from evo.config.options import (
    GROUPS,
    OPTION_BY_NAME,
    OPTIONS,
    TAKEN_FROM_RUN,
    Resume,
    build_parser,
    explicit_flags,
    option_problems,
    restore_options,
    saved_options,
)
from evo.config.resume import FIXED_ON_RESUME, resume_differences
from evo.tracking import TRACKERS
from tests.support import PPO_SIX

NOW = dt.datetime(2026, 1, 2, 3, 4, 5)


def test_every_option_has_a_resume_class_and_a_flag_of_its_own():
    for option in OPTIONS:
        assert isinstance(option.resume, Resume), f"{option.flag_name} has no resume class"
        assert option.help, f"{option.flag_name} has no help"
    assert len({option.name for option in OPTIONS}) == len(OPTIONS)
    assert len({option.flag_name for option in OPTIONS}) == len(OPTIONS)


def test_every_parser_action_is_a_declared_option():
    actions = [action for action in build_parser()._actions if action.dest != "help"]
    for action in actions:
        assert action.dest in OPTION_BY_NAME, f"{action.option_strings} is not declared in OPTIONS"
        assert action.option_strings == [OPTION_BY_NAME[action.dest].flag_name]
    assert {action.dest for action in actions} == set(OPTION_BY_NAME)


def test_every_config_field_is_declared_as_an_option_or_derived():
    for field in dataclasses.fields(Config):
        kinds = [kind for kind in (OPTION, DERIVED) if kind in field.metadata]
        assert len(kinds) == 1, f"Config.{field.name} has {kinds or 'no'} declaration; use option() or derived()"
        if DERIVED in field.metadata:
            assert field.metadata[DERIVED], f"Config.{field.name}: derived() must say where it comes from"
    options = [field.name for field in dataclasses.fields(Config) if OPTION in field.metadata]
    assert [option.field_name for option in OPTIONS] == options, "OPTIONS is Config's option fields, in order"


def test_a_field_declared_with_neither_or_both_is_refused():
    """The check Config passes at import time, on throwaway dataclasses."""

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Plain:
        seed: int = declare.option("base seed", FIXED, group="population", default=0)
        plain: int = 0

    with pytest.raises(TypeError, match=r"Plain\.plain is declared with neither option\(\) nor derived\(\)"):
        declared(Plain)

    both = dataclasses.field(metadata={OPTION: OPTIONS[0], DERIVED: "the MPI job"})
    Both = dataclasses.make_dataclass("Both", [("twice", int, both)], frozen=True, kw_only=True)
    with pytest.raises(TypeError, match=r"Both\.twice is declared with both option\(\) and derived\(\)"):
        declared(Both)

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Fine:
        seed: int = declare.option("base seed", FIXED, group="population", default=0)
        world_size: int = declare.derived("the MPI job")

    assert declared(Fine) is Fine


def test_each_option_s_parser_type_is_its_field_s_type():
    """``type=`` stays explicit (the parser's converter of one token); it must agree with the
    annotation, the resolved value's type: int for ``int | None``, float for ``tuple[float, ...]``."""
    hints = typing.get_type_hints(Config)
    for option in OPTIONS:
        if option.type in (int, float, Path):
            annotation = hints[option.field_name]
            found = {annotation, *typing.get_args(annotation)}
            found |= {item for kind in list(found) for item in typing.get_args(kind)}
            assert option.type in found, f"{option.flag_name}: type={option.type.__name__}, field is {annotation}"
        elif option.type is not None:  # str2bool
            assert hints[option.field_name] is bool, option.flag_name


def test_an_option_s_field_default_is_its_default_as_config_holds_it():
    for field in dataclasses.fields(Config):
        if OPTION in field.metadata:
            declaration = field.metadata[OPTION]
            if field.default is dataclasses.MISSING:
                assert declaration.default is None, field.name
            else:
                expected = tuple(declaration.default) if isinstance(declaration.default, list) else declaration.default
                assert field.default == expected, field.name


def help_sections(text: str) -> dict[str, dict[str, str]]:
    """``--help``'s sections by title ('options', then each group's), each ``{flag: its entry on one line}``."""
    sections = {}
    for block in text.split("\n\n"):
        title, _, body = block.partition("\n")
        if title.endswith(":") and not title.startswith(("usage", " ")):
            entries = ("\n" + body).split("\n  -")[1:]
            sections[title[:-1]] = {"-" + entry.split()[0].rstrip(","): " ".join(entry.split()) for entry in entries}
    return sections


def test_every_option_is_in_a_group_of_help_and_every_group_has_options():
    for option in OPTIONS:
        assert option.group in GROUPS, f"{option.flag_name} is in group {option.group!r}, not one of {list(GROUPS)}"
    assert [key for key in GROUPS if any(option.group == key for option in OPTIONS)] == list(GROUPS)
    assert len(set(GROUPS.values())) == len(GROUPS), "two groups of one title"


def test_an_option_in_a_group_help_does_not_have_is_refused():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Lost:
        seed: int = declare.option("base seed", FIXED, group="nowhere", default=0)

    with pytest.raises(TypeError, match=r"Lost\.seed is declared in group 'nowhere', which --help does not have"):
        declare.options_of(Lost, GROUPS)
    assert [option.name for option in declare.options_of(Lost, {"nowhere": "Nowhere"})] == ["seed"]


def test_help_shows_every_flag_in_its_group_with_its_default_written_once():
    text = build_parser("evo").format_help()
    sections = help_sections(text)
    assert list(sections) == ["options", *GROUPS.values()]  # -h alone outside the groups
    assert list(sections["options"]) == ["-h"]
    assert sum(len(entries) for entries in sections.values()) == len(OPTIONS) + 1
    assert "(default: None)" not in text
    for option in OPTIONS:
        entry = sections[GROUPS[option.group]].get(option.flag_name)
        assert entry is not None, f"{option.flag_name} is not in --help's group {GROUPS[option.group]!r}"
        said = re.findall(r"\bdefault\b", entry, re.IGNORECASE)
        assert len(said) <= 1, f"{option.flag_name} writes its default {len(said)} times: {entry}"
        declared = option.help() if callable(option.help) else option.help
        if option.action in declare.SWITCHES or option.default is None or declare.STATES_DEFAULT.search(declared):
            assert option.help_text == declared, option.flag_name  # nothing to add, or said in its own words
        else:
            shown = " ".join(map(str, option.default)) if isinstance(option.default, list) else option.default
            assert option.help_text == f"{declared} (default: {shown})", option.flag_name
            assert "(default:" in entry, entry


def test_a_switch_shows_no_default_and_a_help_that_states_one_gets_no_second():
    switch = declare.Option("resume", "continue the run", OWN, "checkpoints", default=False, action="store_true")
    assert switch.help_text == "continue the run"
    stated = declare.Option("eval_num_levels", "levels (default 0: all of them)", RESTORED, "procgen", default=0)
    assert stated.help_text == "levels (default 0: all of them)"
    listed = declare.Option("perturb_factors", "factors", RESTORED, "selection", default=[0.8, 1.2])
    assert listed.help_text == "factors (default: 0.8 1.2)"
    resolved = declare.Option("num_agents", "population size", FIXED, "population")  # None: resolved elsewhere
    assert resolved.help_text == "population size"
    written = declare.Option("explore", lambda: "how; 100% of them", RESTORED, "selection", default="perturb")
    parser = argparse.ArgumentParser()
    written.add_to(parser)
    assert "how; 100% of them (default: perturb)" in " ".join(parser.format_help().split())


def test_explicit_flags_finds_every_declared_flag_in_both_spellings():
    for option in OPTIONS:
        assert explicit_flags([option.flag_name, "1"]) == {option.name}
        assert explicit_flags([f"{option.flag_name}=1"]) == {option.name}
    assert explicit_flags(["--seed", "3", "--not-a-flag", "-5", "value"]) == {"seed"}


def test_the_resume_classes_of_the_issue():
    fixed = {o.name for o in OPTIONS if o.resume is Resume.FIXED}
    own = {o.name for o in OPTIONS if o.resume is Resume.OWN}
    assert fixed == {
        "asynchronous",
        "env_id",
        "algo",
        "env_kwargs",
        "num_agents",
        "strategy",
        "seed",
        "eval_episodes",
        "eval_actions",  # the selection scores' meaning follows from it
        "distribution_mode",
        "num_levels",
        "start_level",
        "students",  # a stage's students' member ids follow from it
        "objective",  # population.csv's columns follow from it
        "init_from",  # what the members started from: the run's record of it stays true
    }
    assert own == {"resume", "run_dir", "log_level", "cpu_tuning"}
    assert set(FIXED_ON_RESUME) == {OPTION_BY_NAME[name].field_name for name in fixed} | {"agent"}


def test_restore_takes_every_option_of_the_run_and_nothing_else():
    """Walks the declarations: a marker saved for every option comes back exactly for the
    options of classes RESTORED and FIXED, unless the command line gives the flag again."""
    defaults = build_parser().parse_args([])
    saved = {option.name: f"from-the-run-{option.name}" for option in OPTIONS}
    args = argparse.Namespace(**vars(defaults))
    restore_options(args, saved, given={"seed"})
    for option in OPTIONS:
        value = getattr(args, option.name)
        if option.resume is Resume.OWN or option.name == "seed":
            assert value == getattr(defaults, option.name), option.flag_name
        else:
            assert str(value) == saved[option.name] or value == [saved[option.name]], option.flag_name


def test_a_run_saves_every_option_it_restores(tmp_path):
    config = parse_config(["--run-dir", str(tmp_path / "run")], now=NOW)
    assert set(config.cli) == {option.name for option in TAKEN_FROM_RUN}
    assert yaml.safe_load(yaml.safe_dump(config.cli)) == config.cli


def examples(tmp_path):
    """A valid value other than the default, with the flags it needs, for every option of the run."""
    conf = tmp_path / "hp.yml"
    conf.write_text("CartPole-v1:\n  n_epochs: 3\n")
    schedule = tmp_path / "schedule.yml"
    hparams = {"learning_rate": 1e-3, "ent_coef": 0.0, "clip_range": 0.2, "gamma": 0.99, "gae_lambda": 0.95}
    entry = {"env_steps": 0, "hparams": {**hparams, "vf_coef": 0.5}}
    schedule.write_text(yaml.safe_dump({"env_id": "CartPole-v1", "schedule": [entry]}))
    bigfish = ["--env-id", "bigfish"]
    agent_zip = tmp_path / "agent.zip"  # what start-up's parse reads of a model zip: its two members' names
    with zipfile.ZipFile(agent_zip, "w") as archive:
        archive.writestr("data", "{}")
        archive.writestr("policy.pth", b"")
    sac = ["--algo", "sac", "--env-id", "Pendulum-v1"]  # the replay-buffer options are refused for PPO
    return {
        "env_id": ["--env-id", "Acrobot-v1"],
        "algo": sac,
        "env_kwargs": ["--env-kwargs", "sutton_barto_reward:true"],
        "num_agents": ["--num-agents", "2"],
        "total_generations": ["--total-generations", "3"],
        "agent_training_steps": ["--agent-training-steps", "1000"],
        "strategy": ["--strategy", "none"],
        "explore": ["--explore", "pb2"],
        "truncation_fraction": ["--truncation-fraction", "0.5"],
        "perturb_factors": ["--perturb-factors", "0.5", "2"],
        "resample_probability": ["--resample-probability", "0.5"],
        "ties": ["--ties", "copy"],
        "exploit_test": ["--exploit-test", "welch"],
        "exploit_alpha": ["--exploit-alpha", "0.01"],
        "eval_episodes": ["--eval-episodes", "3"],
        "eval_actions": ["--eval-actions", "sampled", "--eval-episodes", "3"],
        "score_window": ["--score-window", "50"],
        "final_eval": ["--final-eval", "10"],
        "final_top": ["--final-top", "1", "--final-eval", "10"],
        "initial_hparams": ["--initial-hparams", "defaults"],
        "init_from": ["--init-from", str(agent_zip)],
        "seed": ["--seed", "7"],
        "exp_name": ["--exp-name", "other"],
        "tb_writer": ["--tb-writer", "False"],
        "tracker": ["--tracker", next((name for name in TRACKERS if importlib.util.find_spec(name)), "mlflow")],
        "torch_threads": ["--torch-threads", "2"],
        "conf_file": ["--conf-file", str(conf)],
        "hyperparams": ["--hyperparams", "n_epochs:4", "learning_rate:5e-4"],
        "learning_rate_range": ["--learning-rate-range", "1e-4", "1e-3"],
        "gamma_range": ["--gamma-range", "0.9", "0.99"],
        "num_envs": ["--num-envs", "2"],
        "param_set": ["--param-set", "easy-200", *bigfish],
        "select_on": ["--select-on", "test", "--eval-episodes", "3"],
        "objective": ["--objective", "return:min"],
        "eval_start_level": ["--eval-start-level", "1000", *bigfish],
        "eval_num_levels": ["--eval-num-levels", "100", *bigfish],
        "distribution_mode": ["--distribution-mode", "hard", *bigfish],
        "num_levels": ["--num-levels", "200", *bigfish],
        "start_level": ["--start-level", "5", *bigfish],
        "schedule": ["--schedule", str(schedule)],
        "checkpoint_every": ["--checkpoint-every", "2"],
        "keep_checkpoints": ["--keep-checkpoints", "3"],
        "max_member_failures": ["--max-member-failures", "0"],
        "step_timeout": ["--step-timeout", "120"],
        "device": ["--device", "auto"],
        "stall_timeout": ["--stall-timeout", "900"],
        "asynchronous": ["--asynchronous"],
        "precision": ["--precision", "bf16"],
        "progress_interval": ["--progress-interval", "5"],
        "exploit_buffer": ["--exploit-buffer", "copy", *sac],
        "checkpoint_buffers": ["--no-checkpoint-buffers", *sac],
        "max_distillations": [
            "--max-distillations",
            "2",
            "--hyperparams",
            "search_space:{pi_layers: {low: 1, high: 3, type: int}}",
        ],
        "patience": ["--patience", "5"],
        "stage_steps": ["--stage-steps", "10000"],
        "students": ["--students", "9"],
        "distillation_steps": ["--distillation-steps", "5000"],
    }


@pytest.mark.parametrize("option", TAKEN_FROM_RUN, ids=lambda option: option.flag_name)
def test_resume_without_the_flag_gives_back_the_run_s_value(tmp_path, monkeypatch, option):
    """For every option of the run (walking the declarations): start with a non-default
    value, save config.yaml as a run does, resume without the flag: the same value."""
    cpuinfo = tmp_path / "cpuinfo"  # --precision bf16 on any processor: one with native bfloat16
    cpuinfo.write_text("flags\t\t: avx2 avx512f avx512_bf16\n")
    monkeypatch.setattr(config_precision, "CPUINFO", cpuinfo)
    found = examples(tmp_path)
    assert option.name in found, f"give {option.flag_name} a non-default example in examples()"
    if option.name == "tracker":
        pytest.importorskip(found["tracker"][1], reason="neither tracker's extra (wandb, mlflow) is installed")
    run_dir = tmp_path / "run"
    started = parse_config([*found[option.name], "--run-dir", str(run_dir)], now=NOW)
    default = parse_config(["--run-dir", str(tmp_path / "default")], now=NOW)
    assert started.cli[option.name] != default.cli[option.name], "the example must not be the default"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(started.to_dict(), sort_keys=False))

    resumed = parse_config(["--resume", "--run-dir", str(run_dir)], now=NOW)
    assert resumed.cli == started.cli
    assert resumed.agent == started.agent
    assert getattr(resumed, option.field_name) == getattr(started, option.field_name)
    assert resumed.run_id == started.run_id


def test_a_run_recorded_before_eval_actions_resumes_with_argmax_evaluation_and_keeps_it(tmp_path):
    run_dir = tmp_path / "run"
    started = parse_config(["--eval-episodes", "3", "--run-dir", str(run_dir)], now=NOW).to_dict()
    del started["eval_actions"], started["cli"]["eval_actions"]  # as that version wrote it
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(started))
    assert parse_config(["--resume", "--run-dir", str(run_dir)], now=NOW).eval_actions == "deterministic"
    with pytest.raises(ConfigError, match=r"eval_actions was 'deterministic' in this run, the command gives 'sampled'"):
        parse_config(["--resume", "--run-dir", str(run_dir), "--eval-actions", "sampled"], now=NOW)


def test_a_fixed_option_given_again_with_another_value_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    started = parse_config(["--seed", "3", "--run-dir", str(run_dir)], now=NOW)
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(started.to_dict()))
    with pytest.raises(ConfigError) as caught:
        parse_config(["--resume", "--run-dir", str(run_dir), "--seed", "4"], now=NOW)
    assert caught.value.problems == [
        "--resume: seed was 3 in this run, the command gives 4; a run resumes with the same value "
        "(drop the flag to keep it)"
    ]
    for option in OPTIONS:  # every FIXED option's field is compared on resume
        if option.resume is Resume.FIXED:
            other = {**started.to_dict(), option.field_name: "another value"}
            assert resume_differences(started.to_dict(), other), option.flag_name
    resumed = parse_config(["--resume", "--run-dir", str(run_dir), "--seed", "3", "--checkpoint-every", "5"])
    assert (resumed.seed, resumed.checkpoint_every) == (3, 5)  # a RESTORED option may change


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--seed", "-1"], "--seed -1: must be >= 0"),
        (["--torch-threads", "0"], "--torch-threads 0: must be at least 1"),
        (["--checkpoint-every", "0"], "--checkpoint-every 0: must be at least 1 (generations)"),
        (["--keep-checkpoints", "0"], "--keep-checkpoints 0: keep at least 1"),
        (["--max-member-failures", "-1"], "--max-member-failures -1: must be >= 0 (0: the first failure ends the job)"),
        (["--resample-probability", "1.5"], "--resample-probability 1.5: must be in [0, 1]"),
        (["--perturb-factors", "0.8", "-1"], "--perturb-factors [0.8, -1.0]: every factor must be a positive number"),
        (["--eval-episodes", "-1"], "--eval-episodes -1: use 0 (training episodes) or a positive count"),
        (["--num-envs", "0"], "--num-envs 0: must be at least 1"),
        (["--num-agents", "0"], "--num-agents 0: the population needs at least one member"),
        (
            ["--param-set", "esay"],
            "--param-set 'esay' is not one of easy, easy-200, hard, hard-500, autorl; did you mean 'easy'?",
        ),
    ],
)
def test_each_option_checks_its_own_value(tmp_path, argv, message):
    option = OPTION_BY_NAME[explicit_flags(argv).pop()]
    args = build_parser().parse_args(argv)
    assert option.problem(getattr(args, option.name)) == message  # the declaration alone
    assert option_problems(args) == [message]
    with pytest.raises(ConfigError) as caught:
        parse_config([*argv, "--run-dir", str(tmp_path / "run")], now=NOW)
    assert message in caught.value.problems  # (--num-envs 0 also makes the batch size impossible)


def test_option_problems_are_collected_together(tmp_path):
    argv = ["--seed", "-1", "--torch-threads", "0", "--keep-checkpoints", "0", "--run-dir", str(tmp_path / "run")]
    with pytest.raises(ConfigError) as caught:
        parse_config(argv, now=NOW)
    assert len(caught.value.problems) == 3


def test_defaults_pass_every_option_check():
    assert option_problems(build_parser().parse_args([])) == []


def test_saved_values_are_plain_and_restore_as_argparse_makes_them(tmp_path):
    args = build_parser().parse_args(["--schedule", "s.yml", "--perturb-factors", "0.5", "2"])
    saved = yaml.safe_load(yaml.safe_dump(saved_options(args)))
    assert saved["schedule"] == "s.yml" and saved["perturb_factors"] == [0.5, 2.0]
    back = build_parser().parse_args([])
    restore_options(back, saved, given=set())
    assert back.schedule == args.schedule and back.perturb_factors == args.perturb_factors
    # a run recorded before --hyperparams took key:value saved one file name
    assert OPTION_BY_NAME["hyperparams"].restored("old.yml") == ["old.yml"]


def test_explored_names_are_the_agent_defaults_keys(tmp_path):
    config = parse_config(["--run-dir", str(tmp_path / "run")], now=NOW)
    assert set(config.agent.defaults) == set(PPO_SIX)
