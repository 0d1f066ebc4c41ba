"""evo/study/main.py: a study whose code changed on disk while its runs trained makes its report in a
new process (the report's modules load only at the end: half old, half new, they failed with an
AttributeError), and its exit status still names a failed run."""

import os

import evo.study.main as study_main
import evo.study.reporting
from tests.support import ROOT

STUDY = """\
study: tiny
out: out
envs: [CartPole-v1]
seeds: [0]
budget:
  default: {generations: 1, steps: 64}
methods:
  pbt: {}
"""


def test_what_is_on_disk_is_every_modules_path_size_and_time(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    (tmp_path / "notes.txt").write_text("not code\n")
    before = study_main.code_on_disk(tmp_path)
    assert [name for name, _, _ in before] == ["a.py", "sub/b.py"]
    assert study_main.code_on_disk(tmp_path) == before
    (tmp_path / "notes.txt").write_text("still not code\n")
    assert study_main.code_on_disk(tmp_path) == before
    (tmp_path / "sub" / "b.py").write_text("y = 3\n")  # same size, later
    os.utime(tmp_path / "sub" / "b.py", ns=(before[1][2] + 1_000_000, before[1][2] + 1_000_000))
    assert study_main.code_on_disk(tmp_path) != before


def study_with_code(tmp_path, monkeypatch, failures):
    """A study file whose runs (not started: ``run`` stands in for them) change the code under
    ``tmp_path/package``; the process's output after main() returns its status."""
    (tmp_path / "study.yml").write_text(STUDY)
    package = tmp_path / "package"
    package.mkdir()
    (package / "module.py").write_text("x = 1\n")
    monkeypatch.setattr(study_main, "PACKAGE", package)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))

    def runs_while_the_code_changes(study, jobs, cores, whole):
        (package / "module.py").write_text("x = 22\n")
        return failures

    monkeypatch.setattr(study_main, "run", runs_while_the_code_changes)
    reports = []
    monkeypatch.setattr(evo.study.reporting, "write_report", lambda *args: reports.append(args))
    return reports


def test_a_study_whose_code_changed_reports_in_a_new_process(tmp_path, monkeypatch, capfd):
    reports = study_with_code(tmp_path, monkeypatch, failures=[])
    assert study_main.main([str(tmp_path / "study.yml")]) == 1  # the new process found nothing to report
    out, err = capfd.readouterr()
    assert "evo's code changed while the runs trained; the report is made by a new process with it" in out
    assert reports == [] and err.count("evo-study: no finished runs to report") == 1  # the new process's


def test_a_failed_run_is_named_when_the_report_is_made_in_a_new_process(tmp_path, monkeypatch, capfd):
    reports = study_with_code(tmp_path, monkeypatch, failures=["CartPole-v1 pbt seed 0: exit status 1, see it"])
    assert study_main.main([str(tmp_path / "study.yml")]) == 1
    assert reports == [] and "failed runs:\n  CartPole-v1 pbt seed 0: exit status 1" in capfd.readouterr().err


def test_unchanged_code_reports_in_this_process(tmp_path, monkeypatch, capfd):
    reports = study_with_code(tmp_path, monkeypatch, failures=[])
    monkeypatch.setattr(study_main, "code_on_disk", lambda package: [("module.py", 6, 0)])
    assert study_main.main([str(tmp_path / "study.yml")]) == 1  # the stand-in report finds nothing
    out, err = capfd.readouterr()
    assert "evo's code changed" not in out and len(reports) == 1


def test_a_studys_own_env_module_imports_from_the_folder_it_runs_in(tmp_path, monkeypatch, capsys):
    """The evo-study command (whose sys.path holds its script's folder, not the working one) refused a study's
    module:Env of the current folder as a module that does not import; its runs had the folder on PYTHONPATH."""
    import sys

    (tmp_path / "my_study_envs.py").write_text(
        "import gymnasium as gym\n"
        "gym.register('StudyLocal-v0', entry_point='gymnasium.envs.classic_control.cartpole:CartPoleEnv')\n"
    )
    (tmp_path / "local.yml").write_text(
        "study: local\nout: out\nenvs: [my_study_envs:StudyLocal-v0]\nseeds: [0]\n"
        "budget: {default: {generations: 1, steps: 64}}\nmethods: {pbt: {}}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert study_main.main(["local.yml", "--list"]) == 0, capsys.readouterr().err
    assert "my_study_envs:StudyLocal-v0" in capsys.readouterr().out
