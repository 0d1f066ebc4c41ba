"""evo-export and evo-evaluate on real tiny runs made in this process (evo.tools.saved, the tools' main): a
damaged kept best costs the kept best and nothing else, a run that never finished a generation has no
"best" to give, an asynchronous run's kept best is reached by ``--member best-ever``, and paths the tools
cannot read or write are refusals (exit 2) that name the path and the fix, never tracebacks."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import subprocess
from pathlib import Path

import pytest
from mpi4py import MPI

from evo.config import parse_config
from evo.rundir import checkpoint as ckpt
from evo.rundir.ready import best_dir, read_best
from evo.runner import driver_for
from evo.runner.session import open_session
from evo.runner.stopping import STOP_SIGNALS
from evo.tools import evaluate as evaluate_tool
from evo.tools import export as export_tool
from evo.tools.saved import SavedRunError, choose, open_run
from tests.support import budget, read_population, run_in_process, unprivileged, write_hyperparams


def tiny_flags(tmp_path: Path, run_dir: Path, *extra: str) -> list[str]:
    tiny = write_hyperparams(tmp_path)
    return ["--hyperparams", str(tiny), "--tb-writer", "False", "--seed", "3", "--run-dir", str(run_dir), *extra]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Runs made once, copied for each test that changes them (cp -a keeps the hard-linked best.pt)."""
    root = tmp_path_factory.mktemp("runs")
    runs = {
        "synchronous": run_in_process(tiny_flags(root, root / "synchronous", *budget(2, 2, 64))),
        "asynchronous": run_in_process(tiny_flags(root, root / "asynchronous", "--asynchronous", *budget(2, 2, 64))),
    }
    assert runs == {"synchronous": 0, "asynchronous": 0}
    untrained = root / "untrained"  # stopped before its first generation ended: generation 0's checkpoint only
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        session = open_session(
            parse_config(tiny_flags(root, untrained, *budget(2, 2, 64)), world_size=1), MPI.COMM_SELF, ["test"], None
        )
        session.stop.signal_name = "SIGUSR1"
        driver_for(False).load().run(session, None)
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert [p.name for p in ckpt.candidates(untrained)] == ["gen_000000"]
    return root


def copy_of(made: Path, name: str, tmp_path: Path) -> Path:
    subprocess.run(["cp", "-a", str(made / name), str(tmp_path / name)], check=True)
    return tmp_path / name


def digest(run_dir: Path) -> dict[str, str]:
    return {
        str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in run_dir.rglob("*")
        if p.is_file()
    }


def flip_a_byte(path: Path) -> None:
    """Damage ``path`` in place, its size kept (every hard link to it sees the damage)."""
    with open(path, "r+b") as handle:
        handle.seek(path.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))


def tool(capsys, main, *argv: str) -> tuple[int, str, str]:
    """A tool's main in this process: its exit status, stdout and stderr."""
    capsys.readouterr()
    status = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_a_damaged_kept_best_costs_the_kept_best_and_nothing_else(made, tmp_path, capsys):
    """Every checkpoint's best.pt is one file (a hard link): damaged, --member best-ever is refused with the
    file and why and what to give instead, while every member exports and evaluates, and evaluating the whole
    population or exporting the best warns that the kept best is left out."""
    run_dir = copy_of(made, "synchronous", tmp_path)
    for best in run_dir.glob("checkpoints/gen_*/best.pt"):
        flip_a_byte(best)
    newest = ckpt.candidates(run_dir)[0] / "best.pt"

    run = open_run(run_dir)
    assert [c.generation for c in run.checkpoints] == [2, 1]  # no checkpoint lost
    assert choose(run, "0").member == 0 and choose(run, "best").generation == 2
    with pytest.raises(SavedRunError) as refused:
        choose(run, "best-ever")
    message = str(refused.value)
    assert f"{newest}: SHA-256 does not match the manifest (damaged)" in message
    assert "--member best" in message and "member id (0, 1)" in message

    before = digest(run_dir)
    status, _, err = tool(capsys, export_tool.main, run_dir, "--member", "best-ever", "--out", tmp_path / "logs")
    assert status == 2 and str(newest) in err and "--member best" in err
    assert not (tmp_path / "logs").exists()
    status, out, err = tool(capsys, export_tool.main, run_dir, "--out", tmp_path / "logs")
    assert status == 0 and "warning" in err and str(newest) in err and "best_model.zip" in err
    assert (tmp_path / "logs" / "ppo" / "CartPole-v1_1" / "best_model.zip").is_file()
    status, _, err = tool(capsys, evaluate_tool.main, run_dir, "--member", "0", "--episodes", "1")
    assert status == 0 and err == ""
    status, _, err = tool(capsys, evaluate_tool.main, run_dir, "--episodes", "1", "--json", tmp_path / "fresh.json")
    assert status == 0 and "warning" in err and str(newest) in err
    assert [row["label"] for row in json.loads((tmp_path / "fresh.json").read_text())["members"]] == ["0", "1"]
    assert digest(run_dir) == before


def test_a_run_whose_kept_best_is_damaged_resumes_and_keeps_a_new_best(made, tmp_path, caplog):
    """--resume continues from the newest checkpoint (not from none), says the kept best is lost and which
    file, and keeps as its best the best member scored from then on."""
    run_dir = copy_of(made, "synchronous", tmp_path)
    for best in run_dir.glob("checkpoints/gen_*/best.pt"):
        flip_a_byte(best)
    with caplog.at_level(logging.WARNING, logger="evo.rundir.checkpoint"):
        assert run_in_process(["--run-dir", str(run_dir), "--resume", "--total-generations", "3"]) == 0
    assert f"{run_dir / 'checkpoints' / 'gen_000002' / 'best.pt'}: SHA-256 does not match" in caplog.text
    rows = read_population(run_dir)
    assert [int(r["generation"]) for r in rows] == [1, 1, 2, 2, 3, 3]  # generation 3 trained on generation 2's
    last, skipped = ckpt.latest(run_dir)
    assert last.generation == 3 and skipped == [] and last.best_lost is None
    third = [float(r["score"]) for r in rows if r["generation"] == "3"]
    assert (last.best["generation"], last.best["score"]) == (3, max(third))


def test_a_run_without_a_finished_generation_has_no_best_to_give(made, capsys, tmp_path):
    """Generation 0's checkpoint holds the initial population: best and best-ever are refused (exit 2),
    saying so and how to continue the run; a member named by id is given with a warning that it is untrained."""
    run_dir = made / "untrained"
    run = open_run(run_dir)
    for member in ("best", "best-ever"):
        with pytest.raises(SavedRunError) as refused:
            choose(run, member)
        message = str(refused.value)
        assert f"--member {member}: {run_dir} has no trained member yet" in message
        assert "generation 0's, the initial population" in message and "--resume" in message
    status, _, err = tool(capsys, export_tool.main, run_dir, "--out", tmp_path / "logs")
    assert status == 2 and "no trained member yet" in err and not (tmp_path / "logs").exists()
    status, _, err = tool(capsys, evaluate_tool.main, run_dir, "--member", "best-ever", "--episodes", "1")
    assert status == 2 and "no trained member yet" in err
    status, _, err = tool(capsys, export_tool.main, run_dir, "--member", "1", "--out", tmp_path / "logs")
    assert status == 0 and "warning: member 1 of generation 0 is untrained" in err and "--resume" in err
    status, _, err = tool(capsys, evaluate_tool.main, run_dir, "--episodes", "1")
    assert status == 0 and "warning: every member of generation 0 is untrained" in err


def test_best_ever_reaches_an_asynchronous_runs_kept_best(made, capsys, tmp_path):
    """checkpoints/best/ of an asynchronous run: --member best-ever chooses, exports and evaluates it as a
    synchronous run's; evaluating the population adds its row; damaged, it is refused naming the file."""
    run_dir = copy_of(made, "asynchronous", tmp_path)
    entry = read_best(run_dir)
    run = open_run(run_dir)
    kept = choose(run, "best-ever")
    assert kept.path == best_dir(run_dir) / entry["file"] and kept.label == f"best-ever ({entry['member']})"
    assert (kept.member, kept.generation, kept.score, kept.env_steps) == (
        entry["member"],
        entry["generation"],
        entry["score"],
        entry["env_steps"],
    )
    status, out, _ = tool(capsys, export_tool.main, run_dir, "--member", "best-ever", "--out", tmp_path / "logs")
    assert status == 0 and f"member best-ever ({entry['member']})" in out
    assert (tmp_path / "logs" / "ppo" / "CartPole-v1_1" / "best_model.zip").is_file()
    status, _, _ = tool(capsys, evaluate_tool.main, run_dir, "--episodes", "1", "--json", tmp_path / "fresh.json")
    labels = [row["label"] for row in json.loads((tmp_path / "fresh.json").read_text())["members"]]
    assert status == 0 and labels == ["0", "1", f"best-ever ({entry['member']})"]

    flip_a_byte(kept.path)
    with pytest.raises(SavedRunError, match=f"{kept.path}: SHA-256 does not match best.json"):
        choose(open_run(run_dir), "best-ever")
    assert choose(open_run(run_dir), "0").member == 0

    record = best_dir(run_dir) / "best.json"  # issue 54 N11: a path there was a ValueError traceback
    record.write_text(json.dumps({**entry, "file": "/etc/passwd"}))
    status, _, err = tool(capsys, export_tool.main, run_dir, "--member", "best-ever", "--out", tmp_path / "other")
    assert status == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"{record}: unreadable (file is '/etc/passwd', not the name of a file beside it" in err
    assert "give a member id (0, 1)" in err and not (tmp_path / "other").exists()


def test_a_run_directory_that_cannot_be_read_is_a_refusal(made, tmp_path, capsys):
    run_dir = copy_of(made, "synchronous", tmp_path)
    run_dir.chmod(0)
    try:
        with unprivileged():
            status, _, err = tool(capsys, evaluate_tool.main, run_dir, "--episodes", "1")
    finally:
        run_dir.chmod(0o755)
    assert status == 2 and "Permission denied" in err and str(run_dir) in err and "may read" in err
    (run_dir / "config.yaml").write_text("env_id: [unclosed\n")
    status, _, err = tool(capsys, evaluate_tool.main, run_dir, "--episodes", "1")
    assert status == 2 and f"{run_dir / 'config.yaml'}: not a run's configuration" in err


def test_outputs_that_cannot_be_written_are_refused_before_any_work(made, tmp_path, capsys):
    """--out (export) and --json (evaluate) inside a regular file: exit 2 naming the path and the fix,
    before a member is loaded."""
    run_dir = made / "synchronous"
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    status, _, err = tool(capsys, export_tool.main, run_dir, "--out", blocker / "logs")
    assert status == 2 and f"--out {blocker / 'logs'}: {blocker} is a file, not a folder" in err
    status, _, err = tool(capsys, evaluate_tool.main, run_dir, "--episodes", "1", "--json", blocker / "x.json")
    assert status == 2 and f"--json {blocker / 'x.json'}: {blocker} is a file, not a folder" in err


def test_an_export_that_fails_while_writing_is_a_refusal_and_leaves_no_half_folder(made, tmp_path, capsys, monkeypatch):
    """A full disk mid-export: exit 2 naming --out and the error, and no partial experiment folder."""

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_tool, "_write", full)
    status, _, err = tool(capsys, export_tool.main, made / "synchronous", "--out", tmp_path / "logs")
    assert status == 2 and f"--out {tmp_path / 'logs'}: the export cannot be written" in err
    assert "No space left on device" in err and list((tmp_path / "logs").rglob("*")) == []


def test_an_export_never_builds_through_a_planted_link(made, tmp_path, capsys):
    """A link planted at the name an export once built under (``.<env>_1.partial-<pid>``, beside the
    experiment folder) made it write its files into the folder the link pointed to: now the export is
    built under a name nobody knows beforehand, and the folder pointed to stays empty."""
    run = open_run(made / "synchronous")
    out = tmp_path / "logs"
    experiment = export_tool.next_experiment(out, run.config.algo, export_tool.zoo_env_name(run.config.env_id))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    experiment.parent.mkdir(parents=True)
    experiment.with_name(f".{experiment.name}.partial-{os.getpid()}").symlink_to(elsewhere)
    status, _, err = tool(capsys, export_tool.main, made / "synchronous", "--out", out)
    assert status == 0, err
    assert list(elsewhere.iterdir()) == []
    assert experiment.is_dir() and not experiment.is_symlink() and (experiment / "best_model.zip").is_file()


def test_best_at_a_checkpoint_breaks_a_tie_by_the_runs_draw_and_says_so():
    """--member best at a checkpoint whose top selection score is tied: the member the run's draw for that
    generation ranks first (the one its selection kept), named as tied; no tie, no words."""
    from evo.core.streams import tie_priorities
    from evo.tools.saved import MemberFile, best_of

    members = [MemberFile(m, 6, Path(f"member_{m}.pt"), str(m), s, 1024) for m, s in enumerate((2.0, 5.0, 5.0, 5.0))]
    taken = set()
    for seed in range(8):
        priorities = tie_priorities((seed, 6), range(4))
        best = best_of(members, seed)
        assert best.member == min((1, 2, 3), key=lambda m: priorities[m])
        others = ", ".join(str(m) for m in (1, 2, 3) if m != best.member)
        assert best.label == f"best ({best.member}, tied with {others}: the run's draw took it)"
        taken.add(best.member)
    assert len(taken) > 1  # not member 1, the lower id, every time
    untied = best_of([*members[:3], MemberFile(3, 6, Path("member_3.pt"), "3", 7.0, 1024)], 0)
    assert (untied.member, untied.label) == (3, "best (3)")
