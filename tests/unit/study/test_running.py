"""evo-study's orchestration (evo/study/main.py, running.py) in this process, against a stub run command:
``mpiexec`` is a small script that records how it was started and writes a run's records (population.csv,
a checkpoint's manifest) as a real run would, without MPI or training. What is proven here: each unfinished
run started once with its command, every launch in launches.jsonl and a run's wall_s the sum of its
launches, a finished study not run again; a study stopped by SIGTERM stops its runs (exit 130), keeps each
stopped run's time, and continues them with --resume (a run stopped before its first checkpoint starts
again from nothing); a second study on the same folder refused while the first holds its lock, and a run
whose directory a live process holds neither started nor removed; the SLURM listing, one job of it alone (its
run, no report) and the report of what is finished; bad input refused before any run, every problem at once,
and an ``out`` that cannot be made refused before any run or report. tests/e2e/test_study.py runs one real tiny
study end to end, and a study killed outright (SIGKILL) taking its runs with it."""

import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

import evo.launch
import evo.study.main as study_main
from evo.rundir.lock import RunLock
from evo.study.running import PARTIAL
from tests.support import PPO_SIX, ROOT, write_hyperparams

STUDY = """\
study: tiny
out: out
envs: [CartPole-v1]
seeds: [0, 1]
budget:
  default: {{generations: {generations}, steps: 256, eval_episodes: 2}}
flags: [--conf-file, {conf}]
methods:
  pbt: {{}}
  zoo-total: {{kind: single, total: true}}
compare:
  primary: pbt - zoo-total at 1.0
"""

STUB = """\
import json, os, signal, sys, time
from pathlib import Path

# mpiexec -n RANKS --oversubscribe PYTHON SCRIPT FLAGS... --run-dir DIR [--resume]
ranks, command = int(sys.argv[2]), sys.argv[4:]
flag = lambda name: command[command.index(name) + 1]
run_dir, resume = Path(flag("--run-dir")), "--resume" in command
members, generations = int(flag("--num-agents")), int(flag("--total-generations"))
steps, seed = int(flag("--agent-training-steps")), int(flag("--seed"))
with open(os.environ["STUB_LAUNCHES"], "a") as handle:
    handle.write(json.dumps({"ranks": ranks, "command": command, "pid": os.getpid(),
                             "left": sorted(p.name for p in run_dir.iterdir()) if run_dir.exists() else None}) + "\\n")
run_dir.mkdir(parents=True, exist_ok=True)
stop = int(os.environ.get("STUB_STOP_AT", "0")) if not resume else 0  # the generation a study is stopped in
population = run_dir / "population.csv"
if not population.exists():
    population.write_text("generation,member,rank,env_steps,score,donor,@SIX@,score_train,score_test\\n")
done = max((int(line.split(",")[0]) for line in population.read_text().splitlines()[1:]), default=0)
for generation in range(done + 1, (stop or generations + 1)):
    with population.open("a") as handle:
        for member in range(members):
            score = 10 * seed + member + generation
            handle.write(f"{generation},{member},0,{steps * generation},{score},,@HALVES@,,\\n")
    checkpoint = run_dir / "checkpoints" / f"gen_{generation:06d}"
    checkpoint.mkdir(parents=True)
    (checkpoint / "manifest.json").write_text("{}")
if stop:
    (run_dir / "partial").write_text("")
    def stopped(signum, frame):
        Path(os.environ["STUB_LAUNCHES"] + ".stopped").write_text(str(os.getpid()))
        os._exit(143)
    signal.signal(signal.SIGTERM, stopped)
    os.kill(os.getppid(), signal.SIGTERM)  # the study's own process: as a user's kill or Ctrl-C
    while True:
        time.sleep(60)
""".replace("@SIX@", ",".join(PPO_SIX)).replace("@HALVES@", ",".join(["0.5"] * 6))


@pytest.fixture
def study(tmp_path, monkeypatch):
    """A tiny study file in ``tmp_path`` (the working folder), its runs started by the stub ``mpiexec``;
    ``study(generations)`` gives its path."""
    stub = tmp_path / "stub-mpiexec"
    stub.write_text(f"#!{sys.executable}\n{STUB}")
    stub.chmod(0o755)
    monkeypatch.setattr(evo.launch, "find_mpiexec", lambda: str(stub))
    monkeypatch.setattr(evo.launch, "is_open_mpi", lambda mpiexec: False)
    monkeypatch.setenv("STUB_LAUNCHES", str(tmp_path / "launched.jsonl"))
    monkeypatch.chdir(tmp_path)
    conf = write_hyperparams(tmp_path)

    def make(generations: int = 2):
        path = tmp_path / "study.yml"
        path.write_text(STUDY.format(generations=generations, conf=conf))
        return path

    return make


def launched(tmp_path) -> list[dict]:
    """What the stub was started with, in order."""
    path = tmp_path / "launched.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def launches(tmp_path) -> list[dict]:
    """The study's own record of its launches."""
    return [json.loads(line) for line in (tmp_path / "out" / "launches.jsonl").read_text().splitlines()]


def test_each_run_starts_once_records_its_launch_and_a_finished_study_is_not_run_again(study, tmp_path, capsys):
    path = study()
    assert study_main.main([str(path), "--cores", "2"]) == 0
    runs = tmp_path / "out" / "runs" / "CartPole-v1"
    started = launched(tmp_path)
    # every run once, with its ranks and its command (the entry script of the checkout, --run-dir last)
    expected = [(2, runs / f"pbt-seed{s}") for s in (0, 1)] + [(1, runs / f"zoo-total-seed{s}") for s in (0, 1)]
    assert sorted((s["ranks"], s["command"][-1]) for s in started) == sorted((n, str(d)) for n, d in expected)
    assert all(s["command"][:2] == [sys.executable, str(ROOT / "pbt_rl_truct.py")] for s in started)
    assert all(s["left"] is None for s in started)  # nothing there before: no --resume
    # wall times from the records: one line per launch, and each run's wall_s its launches' sum
    entries = launches(tmp_path)
    assert len(entries) == 4 and all(entry["status"] == 0 for entry in entries)
    for entry in entries:
        assert float((tmp_path / entry["run_dir"] / "wall_s").read_text()) == pytest.approx(entry["seconds"], abs=0.1)
        assert not (tmp_path / entry["run_dir"] / PARTIAL).exists()
    out = capsys.readouterr().out
    assert "tiny: 4 runs: pbt, zoo-total on CartPole-v1, seeds [0, 1]" in out
    done = sorted(line.split("]")[0] for line in out.splitlines() if line.startswith("["))
    assert done == ["[1/4", "[2/4", "[3/4", "[4/4"]  # a line as each run ends
    records = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [(r["method"], r["seed"]) for r in records] == [("pbt", 0), ("zoo-total", 0), ("pbt", 1), ("zoo-total", 1)]
    # run again: nothing is started, the report is rebuilt the same
    assert study_main.main([str(path)]) == 0
    assert "4 of 4 runs already finished; running the other 0" in capsys.readouterr().out
    assert len(launched(tmp_path)) == 4 and len(launches(tmp_path)) == 4
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == records


def test_an_interrupted_study_stops_its_runs_and_continues_from_their_checkpoints(study, tmp_path, monkeypatch, capsys):
    """The run writes generation 1 and its checkpoint, then its study gets SIGTERM in generation 2; run
    again, the study resumes it; its wall_s is the stopped launch's time and the second's. A link planted
    at wall_s in between (whoever may write the run directory) is replaced, never written through."""
    path = study(generations=3)
    monkeypatch.setenv("STUB_STOP_AT", "2")
    assert study_main.main([str(path), "--methods", "pbt", "--seeds", "0"]) == study_main.EXIT_INTERRUPTED == 130
    assert "run the same command again to continue" in capsys.readouterr().out
    run_dir = tmp_path / "out" / "runs" / "CartPole-v1" / "pbt-seed0"
    (first,) = launched(tmp_path)
    assert int((tmp_path / "launched.jsonl.stopped").read_text()) == first["pid"]  # the run got SIGTERM
    with pytest.raises(ProcessLookupError):  # and the study waited for it to end
        os.kill(first["pid"], 0)
    partial = float((run_dir / PARTIAL).read_text())  # the time of the launch that was stopped
    assert not (run_dir / "wall_s").exists() and partial >= 0
    assert [entry["status"] == 0 for entry in launches(tmp_path)] == [False]

    victim = tmp_path / "victim"
    victim.write_text("precious")
    (run_dir / "wall_s").symlink_to(victim)

    monkeypatch.delenv("STUB_STOP_AT")
    assert study_main.main([str(path), "--methods", "pbt", "--seeds", "0"]) == 0
    assert victim.read_text() == "precious" and not (run_dir / "wall_s").is_symlink()
    _, second = launched(tmp_path)
    assert second["command"][-2:] == [str(run_dir), "--resume"] and "partial" in second["left"]
    assert second["command"][:-1] == first["command"]
    generations = [int(line.split(",")[0]) for line in (run_dir / "population.csv").read_text().splitlines()[1:]]
    assert generations[::4] == [1, 2, 3]
    entries = launches(tmp_path)
    assert [entry["status"] == 0 for entry in entries] == [False, True]
    assert float((run_dir / "wall_s").read_text()) == pytest.approx(partial + entries[1]["seconds"], abs=0.2)
    assert not (run_dir / PARTIAL).exists()


def test_a_run_stopped_before_its_first_checkpoint_starts_again_from_nothing(study, tmp_path, monkeypatch):
    path = study()
    monkeypatch.setenv("STUB_STOP_AT", "1")
    assert study_main.main([str(path), "--methods", "pbt", "--seeds", "0"]) == 130
    run_dir = tmp_path / "out" / "runs" / "CartPole-v1" / "pbt-seed0"
    assert (run_dir / "partial").exists() and not (run_dir / "checkpoints").exists()
    monkeypatch.delenv("STUB_STOP_AT")
    assert study_main.main([str(path), "--methods", "pbt", "--seeds", "0"]) == 0
    first, second = launched(tmp_path)
    assert second["command"] == first["command"] and second["left"] is None  # no --resume, the folder removed
    assert (run_dir / "wall_s").is_file() and not (run_dir / "partial").exists()


def test_an_asynchronous_runs_ready_points_are_resumed_not_removed(study, tmp_path):
    """An asynchronous run checkpoints each member's ready points (no generation manifest): a study
    interrupted and run again removed it as one stopped before its first checkpoint."""
    path = study()
    run_dir = tmp_path / "out" / "runs" / "CartPole-v1" / "pbt-seed0"
    ready = run_dir / "checkpoints" / "members" / "member_0" / "interval_000001.json"
    ready.parent.mkdir(parents=True)
    ready.write_text("{}")
    assert study_main.main([str(path), "--methods", "pbt", "--seeds", "0"]) == 0
    (one,) = launched(tmp_path)
    assert one["command"][-2:] == [str(run_dir), "--resume"] and "checkpoints" in one["left"] and ready.is_file()


def test_a_second_study_is_refused_and_a_live_run_is_neither_started_nor_removed(study, tmp_path, capsys):
    """Issue 54 N2: a second evo-study on one study removed the first's live run directory (it had no
    checkpoint yet) and started the run again under it. Here the first study is this process's lock on the
    study's folder, then this process's lock on a run directory, as that run's rank 0 holds it."""
    path = study()
    (tmp_path / "out").mkdir()
    first = RunLock.acquire(tmp_path / "out", create=False)
    try:
        assert study_main.main([str(path)]) == study_main.EXIT_BAD_INPUT
    finally:
        first.release()
    err = capsys.readouterr().err
    assert f"the study's folder {tmp_path / 'out'} is in use by the evo-study of process {os.getpid()}" in err
    assert "Wait for it to end, or stop it" in err and not launched(tmp_path)

    run_dir = tmp_path / "out" / "runs" / "CartPole-v1" / "pbt-seed0"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("a live run's, before its first checkpoint\n")
    live = RunLock.acquire(run_dir, create=False)
    try:
        for job in ([], ["--job", "0"]):  # the whole study, and the run alone as a SLURM array's task
            assert study_main.main([str(path), "--methods", "pbt", "--seeds", "0", *job]) == 1
            busy = f"CartPole-v1 pbt seed 0: not started: its run directory {run_dir} is in use by the run of process"
            assert f"{busy} {os.getpid()}" in capsys.readouterr().out
            assert not launched(tmp_path) and (run_dir / "config.yaml").is_file()
    finally:
        live.release()
    assert study_main.main([str(path), "--methods", "pbt", "--seeds", "0"]) == 0  # its holder gone: run afresh
    (one,) = launched(tmp_path)
    assert one["left"] is None and not (tmp_path / "out" / "lock.json").exists()  # the study's lock released


def test_the_slurm_listing_one_job_of_it_and_the_report_after(study, tmp_path, capsys):
    path = study()
    assert study_main.main([str(path), "--list"]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [line[:2] for line in lines] == [["0", "2"], ["1", "1"], ["2", "2"], ["3", "1"]]
    command = shlex.split(lines[3][2])
    assert command[command.index("--seed") + 1] == "1"
    assert command[-1] == str(tmp_path / "out" / "runs" / "CartPole-v1" / "zoo-total-seed1")
    assert not launched(tmp_path)  # listing starts nothing
    subprocess.run(["bash", "-c", lines[3][2]], cwd="/", check=True, timeout=60)  # pasted, in another folder
    (pasted,) = launched(tmp_path)
    shutil.rmtree(tmp_path / "out" / "runs" / "CartPole-v1" / "zoo-total-seed1")
    assert study_main.main([str(path), "--job", "3"]) == 0  # as `--job $SLURM_ARRAY_TASK_ID`
    one = launched(tmp_path)[1]
    assert (one["ranks"], one["command"]) == (int(lines[3][1]), command[7:])  # the listing's run
    assert pasted | {"pid": one["pid"]} == one  # the pasted line started it alike
    assert not (tmp_path / "out" / "results.md").exists()  # a job alone writes its run, not the report
    assert study_main.main([str(path), "--report-only"]) == 0  # after the array: what is finished
    records = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [(r["method"], r["seed"]) for r in records] == [("zoo-total", 1)]
    assert "no seed has both runs yet; nothing can be said" in (tmp_path / "out" / "results.md").read_text()
    assert len(launched(tmp_path)) == 2  # the report started no run
    assert study_main.main([str(path), "--job", "4"]) == 2
    assert "--job 4: this study has runs 0 to 3 (see --list)" in capsys.readouterr().err


def test_bad_input_is_refused_before_any_run(study, tmp_path, capsys):
    path = study()
    assert study_main.main([str(path), "--members", "3", "--methods", "pbt", "rando", "--envs", "CartPol-v1"]) == 2
    err = capsys.readouterr().err
    assert "members 3: use a multiple of ranks (2)" in err and "did you mean random?" not in err
    assert "--methods rando: not in the study (pbt, zoo-total)" in err
    assert "--envs CartPol-v1: not in the study (CartPole-v1)" in err
    path.write_text(path.read_text().replace("envs: [CartPole-v1]", "envs: [CartPol-v1]"))
    assert study_main.main([str(path)]) == 2
    assert "Did you mean 'CartPole-v1'" in capsys.readouterr().err
    # what evo would refuse in a run's flags is refused before the first run starts, every problem at once
    path = study()
    text = path.read_text().replace("zoo-total: {kind: single, total: true}", "zoo-total: {kind: single, "
                                    "total: true, hyperparams: {learning_rate: -1, gamma: 1.5}}")  # fmt: skip
    path.write_text(text)
    assert study_main.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert "CartPole-v1 zoo-total: learning_rate" in err and "zoo-total: gamma" in err
    assert not (tmp_path / "out").exists() and not launched(tmp_path)


def test_an_out_that_cannot_be_made_is_refused_before_any_run_or_report(study, tmp_path, capsys):
    """Issue 54 N11: a study whose ``out`` cannot be created (here: under a file) ended one --job or a report
    in a traceback; now the whole study, one --job and --report-only each say so in one line naming out and
    the fix, exit 2, and start nothing."""
    path = study()
    (tmp_path / "a-file").write_text("")
    bad = tmp_path / "a-file" / "out"
    said = f"out {bad}: cannot create the study's folder (Not a directory); give an --out (or the study file's out:)"
    for extra in ([], ["--job", "0"]):
        assert study_main.main([str(path), "--out", str(bad), *extra]) == 2
        err = capsys.readouterr().err
        assert said in err and len([line for line in err.splitlines() if said in line]) == 1, err
    assert not launched(tmp_path)
    assert study_main.main([str(path), "--job", "1"]) == 0  # one finished run, in out/runs
    runs = tmp_path / "out" / "runs"
    assert study_main.main([str(path), "--report-only", "--out", str(bad), "--runs", str(runs)]) == 2
    assert said in capsys.readouterr().err
