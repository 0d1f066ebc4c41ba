"""Which hyperparameters explain a run's scores (python -m evo.tools.importance, by its main in this process):
the PBT paper's toy started where only h0 can improve Q, with a dummy hyperparameter that Q̂ never reads, ranks
h0 first and the dummy last, near zero; a point is a member's generation, each hyperparameter on its search
space's scale, the weights it started from beside them; a run with nothing to rank, and a missing Optuna, are
refused with nothing written. The toy's own runs: tests/unit/test_toy_runs.py."""

import json
import sys

import pytest

import evo.toy
from evo.rundir.history import load_run
from evo.tools import importance as importance_tool
from evo.tools.importance import START, points_of
from tests.support import need_optuna

PNG = b"\x89PNG\r\n\x1a\n"


def tool(capsys, *argv) -> tuple[int, str, str]:
    status = importance_tool.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_the_toys_one_real_hyperparameter_first_and_the_dummy_last(tmp_path, capsys):
    """From θ = [0.9, 0] only h0 can improve Q (θ1 is at its optimum): h1 is inert, though the paper's
    starting h = [1, 0] or [0, 1] ties it to h0 in the first generations; the dummy is inert and tied to
    nothing. 32 workers, 20 generations, a small step so that Q keeps rising through the run (over seeds
    0-11 and forest seeds 0-1 h0 came first and the dummy last every time, the dummy at 0.014 at most)."""
    need_optuna()
    run_dir = tmp_path / "toy"
    toy = ["--workers", "32", "--steps", "80", "--lr", "0.01", "--theta0", "0.9", "0", "--dummy", "--seeds", "0"]
    assert evo.toy.main([*toy, "--out", str(tmp_path / "toy.png"), "--run-dir", str(run_dir)]) == 0
    assert f"the PBT variant's records (seed 0): {run_dir}" in capsys.readouterr().out
    history = load_run(run_dir)  # the toy's records are a run's
    assert history.names == ("h0", "h1", "dummy") and len(history.rows) == 32 * 20
    assert (run_dir / "command.txt").read_text() == "python pbt_toy.py " + " ".join(
        toy
    ) + f" --out {tmp_path / 'toy.png'} --run-dir {run_dir}\n"
    assert evo.toy.main([*toy, "--out", str(tmp_path / "again.png"), "--run-dir", str(run_dir)]) == 2
    assert "--run-dir" in capsys.readouterr().err  # never over an earlier run's records

    plots = run_dir / "plots"
    plots.mkdir()
    elsewhere = tmp_path / "elsewhere.png"
    elsewhere.write_bytes(b"not the plot")
    (plots / "importance.png").symlink_to(elsewhere)  # a link planted at the plot's name
    status, out, err = tool(capsys, run_dir, "--json", tmp_path / "importance.json")
    assert status == 0, err
    found = json.loads((tmp_path / "importance.json").read_text())
    assert found["order"] == ["h0", "h1", "dummy"]
    values = found["importance"]
    assert values["h0"] > 0.3
    assert values["dummy"] < 0.05 and values["dummy"] < values["h0"] / 20
    assert found["points"] == 32 * 20 and found["left_out"] == 0 and 0 < found["start"] < 1
    assert found["scales"] == {"h0": "linear", "h1": "linear", "dummy": "linear"}
    table = out.splitlines()
    ranked = [line.split("|")[2].strip() for line in table if line.startswith("| ") and line[2].isdigit()]
    assert ranked == ["h0", "h1", "dummy"]
    assert any(START in line for line in table)
    written = plots / "importance.png"
    assert not written.is_symlink() and written.read_bytes().startswith(PNG)  # replaced, never written through
    assert elsewhere.read_bytes() == b"not the plot"


def write_run(run_dir, rows, space=None):
    """A run's config.yaml and population.csv, as evo writes them: ``rows`` of (generation, member, score,
    donor, learning_rate, n_epochs, aug_type, clip_range)."""
    run_dir.mkdir()
    space = space or {
        "learning_rate": "{low: 1.0e-05, high: 0.01, scale: log, kind: float, choices: []}",
        "n_epochs": "{kind: choice, choices: [3, 5, 10]}",
        "aug_type": "{kind: categorical, choices: [crop, flip]}",
        "clip_range": "{low: 0.1, high: 0.3, scale: linear, kind: float, choices: []}",
    }
    entries = "".join(f"    {name}: {entry}\n" for name, entry in space.items())
    (run_dir / "config.yaml").write_text(f"env_id: CartPole-v1\nagent:\n  algo: ppo\n  search_space:\n{entries}")
    header = "generation,member,rank,env_steps,score,donor,learning_rate,n_epochs,aug_type,clip_range,"
    lines = [header + "score_train,score_test,score_train_stale"]
    for generation, member, score, donor, *hparams in rows:
        cells = [generation, member, 0, 100 * generation, score, donor, *hparams, score, "nan", 0]
        lines.append(",".join(str(cell) for cell in cells))
    (run_dir / "population.csv").write_text("\n".join(lines) + "\n")
    (run_dir / "lineage.jsonl").write_text("")


def test_a_point_is_a_members_generation(tmp_path):
    """Its hyperparameters on their search space's scale, its standing in the generation, and the standing of
    the weights it started from: new weights tie in generation 1, a recipient starts from its donor's."""
    run_dir = tmp_path / "run"
    write_run(
        run_dir,
        [
            (1, 0, 30.0, "", 1e-4, 5, "crop", 0.2),
            (1, 1, 10.0, "", 1e-3, 3, "flip", 0.2),
            (1, 2, 20.0, 0, 1e-5, 10, "crop", 0.2),  # copies member 0's weights at the end of generation 1
            (2, 0, 40.0, "", 1e-4, 5, "crop", 0.2),
            (2, 1, "nan", "", 1e-3, 3, "flip", 0.2),  # no score: left out
            (2, 2, 50.0, "", 1e-2, 5, "flip", 0.2),
        ],
    )
    points = points_of(load_run(run_dir))
    assert points.names == ("learning_rate", "n_epochs", "aug_type") and points.constant == ("clip_range",)
    assert points.left_out == 1 and len(points.inputs) == 5
    assert points.standings == [1.0, 0.0, 0.5, 0.0, 1.0]  # within each generation: 0 lowest, 1 highest
    assert [point[START] for point in points.inputs] == [0.5, 0.5, 0.5, 0.5, 0.5]
    first = points.inputs[0]
    assert first["learning_rate"] == pytest.approx(1 / 3)  # log(1e-4) a third of the way from log(1e-5) to log(1e-2)
    assert first["n_epochs"] == 0.5 and first["aug_type"] == "crop"  # the middle choice; a category by name
    assert points.categories == {"aug_type": ("crop", "flip")}
    assert points.scales == {
        "learning_rate": "log",
        "n_epochs": "ordered, 3 choices",
        "aug_type": "categorical, 2 choices",
        "clip_range": "linear",
    }

    donor_weaker = tmp_path / "copy"
    write_run(
        donor_weaker,
        [
            (1, 0, 30.0, "", 1e-4, 5, "crop", 0.2),
            (1, 1, 10.0, 0, 1e-3, 3, "flip", 0.2),  # the lowest copies the highest
            (1, 2, 20.0, "", 1e-5, 10, "crop", 0.1),
            (2, 0, 31.0, "", 1e-4, 5, "crop", 0.2),
            (2, 1, 32.0, "", 1e-3, 3, "flip", 0.3),
            (2, 2, 21.0, "", 1e-5, 10, "crop", 0.1),
        ],
    )
    points = points_of(load_run(donor_weaker))
    starts = [point[START] for point in points.inputs]
    assert starts[3:] == [0.75, 0.75, 0.0]  # members 0 and 1 both began generation 2 with member 0's weights
    assert points.inputs[3]["clip_range"] == pytest.approx(0.5) and "clip_range" in points.names


def test_nothing_to_rank_and_a_missing_optuna_are_refused_with_nothing_written(tmp_path, capsys, monkeypatch):
    status, out, err = tool(capsys, tmp_path / "nowhere")
    assert status == 2 and "population.csv not found" in err and out == ""

    alone = tmp_path / "alone"
    write_run(alone, [(1, 0, 30.0, "", 1e-4, 5, "crop", 0.2), (2, 0, 31.0, "", 1e-4, 5, "crop", 0.2)])
    status, _, err = tool(capsys, alone)
    assert status == 2 and "no generation has two members with a score" in err

    fixed = tmp_path / "fixed"
    write_run(fixed, [(1, m, 10.0 + m, "", 1e-4, 5, "crop", 0.2) for m in range(3)])
    status, _, err = tool(capsys, fixed)
    assert status == 2 and "no explored hyperparameter took two values" in err
    assert "learning_rate, n_epochs, aug_type, clip_range" in err

    varied = tmp_path / "varied"
    write_run(varied, [(1, m, 10.0 + m, "", 10.0 ** -(m + 2), 5, "crop", 0.2) for m in range(3)])
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna raises ImportError, as where it is absent
    status, out, err = tool(capsys, varied, "--json", tmp_path / "importance.json")
    assert status == 2 and out == ""
    assert "needs Optuna, the importance extra: make install EXTRAS=importance" in err
    assert err.count("\n") == 1  # one line

    blocked = tmp_path / "a file"
    blocked.write_text("")
    status, out, err = tool(capsys, varied, "--out", tmp_path / "plots", "--json", blocked / "importance.json")
    assert status == 2 and out == ""
    assert f"--json {blocked / 'importance.json'}: {blocked} is not a folder" in err  # checked before --out is made
    status, _, err = tool(capsys, varied, "--out", blocked / "plots")
    assert status == 2 and f"--out {blocked / 'plots'}: {blocked} is not a folder" in err
    for run_dir in (alone, fixed, varied):
        assert not (run_dir / "plots").exists()
    assert not (tmp_path / "importance.json").exists() and not (tmp_path / "plots").exists()
