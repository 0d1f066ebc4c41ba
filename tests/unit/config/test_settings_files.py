"""The YAML files evo reads as settings: an empty --conf-file and a key given twice (PyYAML's safe_load keeps
the last one without a word) are refused with a clear message; the built-in files give no key twice. Pure."""

import pytest

from evo.config import ConfigError, parse_config
from evo.config.hyperparams import DuplicateKey, builtin_hyperparams, load_hyperparams_file, load_yaml
from evo.learners import algos


def only(argv, tmp_path) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config([*argv, "--run-dir", str(tmp_path / "run")])
    (problem,) = caught.value.problems
    return problem


def test_an_empty_conf_file_is_refused(tmp_path):
    conf = tmp_path / "empty.yml"
    conf.write_text("# nothing here yet\n")
    problem = only(["--conf-file", str(conf)], tmp_path)
    assert problem.startswith(f"--conf-file {conf} is empty")
    assert "'default' or 'CartPole-v1'" in problem


def test_a_key_given_twice_in_a_conf_file_is_refused(tmp_path):
    conf = tmp_path / "twice.yml"
    conf.write_text("CartPole-v1:\n  gamma: 0.9\n  n_epochs: 4\n  gamma: 0.95\n")
    problem = only(["--conf-file", str(conf)], tmp_path)
    assert problem.startswith(f"--conf-file {conf}: 'gamma' is given twice in one mapping (lines 2 and 4)")
    assert "keep one" in problem


def test_a_key_given_twice_in_a_flow_mapping_or_on_the_command_line_is_refused(tmp_path):
    problem = only(["--hyperparams", "search_space:{gamma: {low: 0.9, high: 0.99, low: 0.95}}"], tmp_path)
    assert "'low' is given twice" in problem
    problem = only(["--hyperparams", "gamma:0.9", "gamma:0.95"], tmp_path)
    assert problem.startswith("--hyperparams gamma is given twice (0.9 and 0.95)")


def test_the_builtin_files_have_no_key_twice():
    for algo in algos():
        found: list[str] = []
        assert load_hyperparams_file(builtin_hyperparams(algo), found) and not found, (algo, found)


def test_a_merge_key_may_be_overridden_once():
    """sac.yml's MuJoCo blocks take zoo's block with ``<<: *zoo_mujoco`` and replace a key of it."""
    assert load_yaml("a: &zoo {gamma: 0.99, tau: 0.01}\nb:\n  <<: *zoo\n  gamma: 0.999\n")["b"] == {
        "gamma": 0.999,
        "tau": 0.01,
    }
    with pytest.raises(DuplicateKey):
        load_yaml("b:\n  <<: {tau: 0.01}\n  gamma: 0.999\n  gamma: 0.9\n")


def test_a_key_given_twice_in_a_schedule_is_refused(tmp_path):
    schedule = tmp_path / "schedule.yml"
    schedule.write_text("schedule:\n- env_steps: 0\n  hparams: {gamma: 0.9}\n  env_steps: 100\n")
    problem = only(["--schedule", str(schedule), "--num-agents", "1"], tmp_path)
    assert problem == f"--schedule {schedule}: 'env_steps' is given twice in one mapping (lines 2 and 4); keep one"
