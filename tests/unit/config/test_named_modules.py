"""Modules imported because a name says so (evo/config/imports.py): a module shipped inside a run directory is
never imported by a tool reading the run (``python -m evo.tools.export .`` started inside it) nor by a
``--resume`` of it, for an env id's module or a learner's; a user's own module in their project folder, run
from there, still is; a module of the standard library named as an env's (a study's ``envs: [this:X]``) or a
learner's is refused without being imported. Issue 54 N7."""

import sys

import pytest
import yaml

import evo.study.main as study_main
from evo.config import ConfigError, parse_config
from evo.runner.session import open_records
from evo.tools import export as export_tool
from tests.support import user_env_module

SHIPPED = """
from pathlib import Path

Path(__file__).with_name("it-ran").write_text("imported")
raise SystemExit("the shipped module ran")
"""
"""A module a run directory could ship: it leaves a file beside itself when it runs."""

USER_MODULE = user_env_module("ConstantNamedModules-v0")
TINY = ["--hyperparams", "n_envs:1", "n_steps:32", "batch_size:32", "n_epochs:1", "--tb-writer", "False"]


def made_run(run_dir, **names):
    """A run directory's config.yaml as a run writes it, then its env id or algo (``names``) changed to
    another, as anyone who may write the directory could."""
    open_records(parse_config(["--run-dir", str(run_dir), *TINY], world_size=1))
    path = run_dir / "config.yaml"
    saved = yaml.safe_load(path.read_text())
    for key, name in names.items():
        saved[key] = saved["cli"][key] = name
        if key == "algo":
            saved["agent"]["algo"] = name
    path.write_text(yaml.safe_dump(saved, sort_keys=False))


@pytest.mark.parametrize("key, name", [("env_id", "shipped:Shipped-v0"), ("algo", "shipped:ShippedLearner")])
def test_a_module_shipped_in_a_run_directory_is_never_imported(tmp_path, monkeypatch, capsys, key, name):
    """``python -m evo.tools.export .`` inside the run directory (the folder it starts in first on sys.path,
    as python -m puts it): the module the run's config.yaml names is found there and refused, exit 2 naming
    it, the file and the fix; it never ran. A --resume of the run (the entry scripts) is refused
    the same way."""
    run_dir = tmp_path / "run"
    made_run(run_dir, **{key: name})
    (run_dir / "shipped.py").write_text(SHIPPED)
    monkeypatch.chdir(run_dir)
    monkeypatch.syspath_prepend(str(run_dir))
    monkeypatch.delitem(sys.modules, "shipped", raising=False)

    assert export_tool.main(["."]) == 2
    err = capsys.readouterr().err
    flag = "--env-id" if key == "env_id" else "--algo"
    said = f"{flag} {name}: its module shipped would be imported from {run_dir / 'shipped.py'}, inside the run"
    assert said in err and "move it out of the run directory" in err and "Traceback" not in err, err
    with pytest.raises(ConfigError, match="inside the run directory"):
        parse_config(["--run-dir", str(run_dir), "--resume"], world_size=1)
    assert not (run_dir / "it-ran").exists() and "shipped" not in sys.modules


def test_a_users_module_in_the_project_folder_is_imported_on_resume(tmp_path, monkeypatch):
    """The legitimate case: a user's env module in their project folder, a run under runs/ of it, both run
    from that folder: the resume (and so the tools) import it and go on."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "my_named_envs.py").write_text(USER_MODULE)
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    env_id = "my_named_envs:ConstantNamedModules-v0"
    run_dir = project / "runs" / "mine"
    open_records(parse_config(["--env-id", env_id, "--run-dir", str(run_dir), *TINY], world_size=1))
    assert parse_config(["--run-dir", str(run_dir), "--resume"], world_size=1).env_id == env_id


def test_a_standard_library_module_is_refused_without_being_imported(tmp_path, monkeypatch, capsys):
    """A study with ``envs: [this:X]`` ran ``this`` (it prints the Zen of Python) before refusing X; now it
    is refused as a module of the standard library, never imported. The same for a learner's module."""
    monkeypatch.delitem(sys.modules, "this", raising=False)
    study = tmp_path / "study.yml"
    study.write_text(
        "study: s\nout: out\nenvs: ['this:X']\nseeds: [0]\nbudget: {default: {generations: 1, steps: 64}}\n"
        "methods:\n  pbt: {}\n"
    )
    assert study_main.main([str(study)]) == 2
    out, err = capsys.readouterr()
    assert "this:X: this is a module of Python's standard library" in err and "Beautiful is better" not in out
    with pytest.raises(ConfigError, match="--algo this:Learner: this is a module of Python's standard library"):
        parse_config(["--algo", "this:Learner", "--run-dir", str(tmp_path / "run")], world_size=1)
    assert "this" not in sys.modules
