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


NOT_A_SETTINGS_FILE = {
    "dev-zero": ("/dev/zero", "not a regular file (a character device); give a YAML settings file"),
    "fifo": ("fifo.yml", "not a regular file (a named pipe); give a YAML settings file"),
    "directory": ("folder", "not a regular file (a directory); give a YAML settings file"),
    "too-large": ("large.yml", "larger than a settings file can be (over 1,000,000 bytes); give a YAML settings file"),
    "not-utf8": (
        "latin1.yml",
        "not UTF-8 text (the byte at offset 32 cannot be decoded); save it as UTF-8, or give a YAML settings file",
    ),
    "missing": ("missing.yml", "cannot read the file (No such file or directory)"),
}


def not_a_settings_file(tmp_path, name: str):
    """The file of case ``name`` of NOT_A_SETTINGS_FILE, made in ``tmp_path``."""
    import os

    path = tmp_path / NOT_A_SETTINGS_FILE[name][0]
    if name == "fifo":
        os.mkfifo(path)  # opened for reading, it would wait for a writer
    elif name == "directory":
        path.mkdir()
    elif name == "too-large":
        path.write_text("CartPole-v1: {n_steps: 64}\n" + "#" * 1_000_000 + "\n")
    elif name == "not-utf8":
        path.write_bytes("CartPole-v1:\n  n_steps: 64 # café\n".encode("latin-1"))
    return path if name != "dev-zero" else NOT_A_SETTINGS_FILE[name][0]


@pytest.mark.parametrize("name", sorted(NOT_A_SETTINGS_FILE))
@pytest.mark.parametrize("flag", ["--conf-file", "--hyperparams"])
def test_a_file_that_is_not_a_settings_file_is_refused_before_it_is_read(tmp_path, name, flag):
    """Issue 54 N11: --conf-file /dev/zero read until MemoryError, a named pipe waited for ever, a file in
    Latin-1 ended in a UnicodeDecodeError traceback. Each is one problem naming the file and the fix; a
    decoding error says the byte offset, never the file's text."""
    path = not_a_settings_file(tmp_path, name)
    problem = only([flag, str(path)], tmp_path)
    assert problem == f"{flag} {path}: {NOT_A_SETTINGS_FILE[name][1]}"
    assert "café" not in problem and "caf" not in problem
