"""The tools on a run with two objectives and env parameters, made in this process (issue 38): evo-export
--front writes every member of the final first front (its config.yml naming the wrapper that sets its env
parameters on the env zoo's enjoy builds, written beside it: issue 57), evo-plot draws the front, evo-evaluate
reports the objective on fresh episodes of envs that run with each member's env parameters, and a member's
replayed schedule sets them on a single agent's envs."""

import json
import subprocess
import sys

import pytest
import yaml

from evo.core.schedule import hparams_at
from evo.rundir import checkpoint as ckpt
from evo.rundir.history import load_run
from evo.tools import evaluate as evaluate_tool
from evo.tools import export as export_tool
from evo.tools.plot import plot_run
from evo.tools.replay import write_schedule
from tests.support import ROOT, TINY_DEFAULT, budget, read_population, run_in_process

ENV = ["--env-id", "tests.objective_env:Objectives-v0"]
SPACE = "  search_space:\n    env.weight: {low: 0.05, high: 0.95}\n    env.cost: {low: 0.05, high: 0.95}\n"


def flags(tmp_path, run_dir, *extra):
    hp = tmp_path / "objectives.yml"
    hp.write_text(TINY_DEFAULT + SPACE)
    return [*ENV, "--hyperparams", str(hp), "--tb-writer", "False", "--seed", "4", "--run-dir", str(run_dir), *extra]


@pytest.fixture(scope="module")
def fronts(tmp_path_factory):
    """A run of 4 members, 3 generations, ranked by merit (up) and cost (down)."""
    root = tmp_path_factory.mktemp("fronts")
    run_dir = root / "run"
    argv = flags(root, run_dir, *budget(4, 3, 128), "--objective", "info:merit,info:cost:min")
    assert run_in_process(argv, "wta", "collective") == 0
    return root, run_dir


def test_export_front_writes_every_member_of_the_final_first_front(fronts, tmp_path, capsys):
    _, run_dir = fronts
    assert export_tool.main([str(run_dir), "--front", "--out", str(tmp_path / "logs")]) == 0
    out = capsys.readouterr().out
    front = json.loads((run_dir / "front.json").read_text())["front"]
    history = load_run(run_dir)
    last = history.at(history.generations[-1])
    assert [entry["member"] for entry in front] == [row.member for row in history.first_front(last)]
    folders = sorted((tmp_path / "logs" / "ppo").iterdir())
    assert len(folders) == len(front)  # winner-takes-all: no member of the first front copied anybody
    for entry, folder in zip(front, folders, strict=True):
        assert f"member {entry['member']} of generation 3 (info:merit" in out and str(folder) in out
        config = dict(yaml.unsafe_load((folder / "Objectives-v0" / "config.yml").read_text()))
        row = history.row(3, entry["member"])
        attrs = {"cost": row.hparams["env.cost"], "weight": row.hparams["env.weight"]}
        assert config["env_wrapper"] == [{"evo_env_params.SetEnvParams": {"attrs": attrs}}]
        assert "env_params" not in config  # a key zoo's enjoy never read
        assert set_by_the_export(folder, tmp_path) == attrs
        assert (folder / "Objectives-v0.zip").is_file() and (folder / "best_model.zip").is_file()
        # each one's play line (issue 54: --front printed none), its module as --gym-packages
        exp_id = folder.name.rsplit("_", 1)[1]
        assert f"--env Objectives-v0 --gym-packages tests.objective_env -f {tmp_path / 'logs'} --exp-id {exp_id}" in out
        assert f"PYTHONPATH={folder}:$PYTHONPATH python -m rl_zoo3.enjoy" in out  # where enjoy imports the wrapper


SET_BY_THE_EXPORT = """
import importlib, json, sys
import gymnasium as gym
import yaml
folder, config = sys.argv[1], sys.argv[2]
sys.path.insert(0, folder)  # the experiment folder on PYTHONPATH, as the play line puts it
import tests.objective_env  # registers the env (imports gymnasium and numpy only)
wrappers = yaml.unsafe_load(open(config))["env_wrapper"]
fresh = gym.make("Objectives-v0")
env = gym.make("Objectives-v0")
for entry in wrappers:  # as rl_zoo3.utils.get_wrapper_class builds them
    (path, kwargs), = entry.items()
    module, name = path.rsplit(".", 1)
    env = getattr(importlib.import_module(module), name)(env, **kwargs)
before, after = vars(fresh.unwrapped), vars(env.unwrapped)
print(json.dumps({key: value for key, value in after.items() if key not in before or before[key] != value}))
"""
"""Run with evo unimportable (tests/without.py): applies an export's env_wrapper list to a fresh env as zoo's enjoy
does and prints the env attributes that differ from an unwrapped fresh env's, with their values."""


def set_by_the_export(folder, tmp_path) -> dict:
    """The env attributes the export's wrappers set on a fresh env, read back, where evo cannot be imported."""
    script = tmp_path / "set_by_the_export.py"
    script.write_text(SET_BY_THE_EXPORT)
    config = folder / "Objectives-v0" / "config.yml"
    result = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "without.py"), "evo", str(script), str(folder), str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "evo_env_params: Objectives-v0 runs with the member's env parameters: cost=" in result.stdout
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_export_front_is_refused_for_one_objective_and_beside_member(fronts, tmp_path, capsys):
    root, run_dir = fronts
    single = root / "single"
    assert run_in_process(flags(root, single, *budget(2, 1, 128), "--objective", "info:merit")) == 0
    assert export_tool.main([str(single), "--front", "--out", str(tmp_path / "logs")]) == 2
    assert "ranked its members by one objective (info:merit), so it has no Pareto front" in capsys.readouterr().err
    assert export_tool.main([str(run_dir), "--front", "--member", "1", "--out", str(tmp_path / "logs")]) == 2
    assert "--front --member: --front exports the final first front" in capsys.readouterr().err
    assert not (tmp_path / "logs").exists()


def test_plot_draws_the_front(fronts, tmp_path):
    _, run_dir = fronts
    written = plot_run(run_dir, tmp_path / "plots")
    assert set(written) == {"scores", "hparams", "lineage", "front"}
    assert written["front"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate_reports_the_objective_on_envs_with_each_member_s_env_parameters(fronts, tmp_path, capsys):
    _, run_dir = fronts
    out = tmp_path / "fresh.json"
    assert evaluate_tool.main([str(run_dir), "--episodes", "3", "--json", str(out)]) == 0
    assert "info:merit" in capsys.readouterr().out.splitlines()[1]
    evaluated = json.loads(out.read_text())["members"]
    checkpoint = ckpt.latest(run_dir)[0]
    for entry in evaluated[:4]:  # the members of the last checkpoint, with their values after its exploits
        hparams = ckpt.load_payload(checkpoint.member_path(entry["member"]))["hparams"]
        assert entry["objectives"]["info:merit"] == pytest.approx([1 - hparams["env.weight"]] * 3)
        assert entry["objectives"]["info:cost"] == pytest.approx([hparams["env.cost"]] * 3)
        assert entry["returns"] == pytest.approx([4 * hparams["env.weight"]] * 3, abs=1e-5)
    assert evaluate_tool.main([str(run_dir), "--episodes", "1", "--member", "0", "--objective", "info:weight"]) == 0
    assert "info:weight" in capsys.readouterr().out


def test_a_replayed_schedule_sets_the_env_parameters_on_the_single_agent(fronts, tmp_path):
    root, run_dir = fronts
    path, document = write_schedule(run_dir, member=0, out=tmp_path / "schedule.yml")
    assert all("env.weight" in entry["hparams"] for entry in document["schedule"])
    replay = tmp_path / "replay"
    argv = flags(root, replay, *budget(1, 3, 128), "--schedule", str(path), "--objective", "info:weight:min")
    assert run_in_process(argv) == 0
    schedule = [(entry["env_steps"], entry["hparams"]) for entry in document["schedule"]]
    rows = read_population(replay)
    assert len(rows) == 3
    for row in rows:  # each generation ran with the schedule's value of its start, in the envs as recorded
        started = int(row["env_steps"]) - 128
        assert float(row["env.weight"]) == pytest.approx(hparams_at(schedule, started)["env.weight"])
        assert float(row["info:weight"]) == pytest.approx(float(row["env.weight"]))
