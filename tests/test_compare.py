"""experiments/compare.py: the study's bookkeeping (pure) and a tiny real study under mpiexec."""

import json
import subprocess
import sys

import pytest

from evo.config import parse_config
from evo.run import initial_hparams
from experiments.compare import Job, reward_threshold, summarise, table
from tests.conftest import ROOT, mpi_env
from tests.test_e2e import EXPLORED, read_population


def test_thresholds_come_from_gymnasium():
    assert reward_threshold("CartPole-v1") == 475 and reward_threshold("Acrobot-v1") == -100


def test_initial_hparams_defaults_are_the_yaml_values():
    config = parse_config(["--env-id", "CartPole-v1", "--initial-hparams", "defaults"], world_size=2)
    for member in (0, 1):
        assert initial_hparams(config, member) == {name: config.agent.defaults[name] for name in EXPLORED}
    sampled = parse_config(["--env-id", "CartPole-v1"], world_size=2)
    assert initial_hparams(sampled, 0) != initial_hparams(sampled, 1)


def write_run(run_dir, scores_by_generation, steps=100):
    run_dir.mkdir(parents=True)
    header = "generation,member,rank,env_steps,score,donor," + ",".join(EXPLORED) + ",score_train,score_test\n"
    lines = [header]
    for generation, scores in enumerate(scores_by_generation, start=1):
        for member, score in enumerate(scores):
            lines.append(f"{generation},{member},0,{steps * generation},{score},," + ",".join(["0.5"] * 6) + ",,\n")
    (run_dir / "population.csv").write_text("".join(lines))
    (run_dir / "wall_s").write_text("12.5\n")


def test_summary_and_table(tmp_path):
    write_run(tmp_path / "a", [[10, 480, 20], [30, 470, 40], [500, 490, 60]])
    write_run(tmp_path / "b", [[10, 20, 30], [40, 50, 60], [70, 80, 90]])
    a = summarise(Job("CartPole-v1", "pbt", 0, 2, (), tmp_path / "a"), 475)
    assert (a.final_best, a.final_median, a.members, a.wall_s) == (500, 490, 3, 12.5)
    assert a.steps_to_threshold == 300  # the population's total env steps when its best first reached 475
    assert a.curve == [(300, 480), (600, 470), (900, 500)]
    b = summarise(Job("CartPole-v1", "pbt", 1, 2, (), tmp_path / "b"), 475)
    assert b.steps_to_threshold is None
    markdown = table([a, b], ["CartPole-v1"], ["pbt", "single"])
    row = markdown.splitlines()[2]
    assert row.startswith("| CartPole-v1 (≥ 475) | pbt | 3 | 2 | 295.0 ± 289.9 | 285.0 ± 289.9 | 300 | 1/2 |")
    assert "single" not in markdown  # no runs, no row


def run_compare(out, *extra):
    command = [
        sys.executable,
        "experiments/compare.py",
        "--envs",
        "CartPole-v1",
        "--methods",
        "pbt",
        "single",
        "--seeds",
        "0",
        "--generations",
        "2",
        "--steps",
        "512",
        "--eval-episodes",
        "2",
        "--out",
        str(out),
        *extra,
    ]
    return subprocess.run(command, cwd=ROOT, env=mpi_env(), capture_output=True, text=True, timeout=300)


@pytest.mark.e2e
def test_a_tiny_study_runs_reports_and_continues(tmp_path):
    out = tmp_path / "compare"
    result = run_compare(out)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    records = json.loads((out / "results.json").read_text())
    assert sorted(r["method"] for r in records) == ["pbt", "single"]
    by_method = {r["method"]: r for r in records}
    assert by_method["pbt"]["members"] == 2 * 2 and by_method["single"]["members"] == 1
    assert [steps for steps, _ in by_method["pbt"]["curve"]][-1] == 4 * by_method["single"]["curve"][-1][0]
    markdown = (out / "results.md").read_text()
    assert "| CartPole-v1 (≥ 475) | pbt | 4 | 1 |" in markdown and "| single | 1 | 1 |" in markdown
    assert (out / "compare.png").stat().st_size > 20_000
    # the single agent is plain PPO: the YAML's hyperparameters, never changed
    single = read_population(out / "runs" / "CartPole-v1" / "single-seed0")
    config = parse_config(["--env-id", "CartPole-v1"], world_size=1)
    assert all({k: float(row[k]) for k in EXPLORED} == config.agent.defaults for row in single)
    # run again: nothing is redone, the report is rebuilt
    again = run_compare(out)
    assert again.returncode == 0 and "2 of 2 runs already finished; running the other 0" in again.stdout
    assert json.loads((out / "results.json").read_text()) == records


def test_bad_input_is_refused_before_any_run(tmp_path):
    result = run_compare(tmp_path / "c", "--members", "3")
    assert result.returncode == 2 and "--members 3: use a multiple of --ranks 2" in result.stderr
    assert not (tmp_path / "c").exists()


@pytest.mark.e2e
def test_an_interrupted_study_stops_its_runs_and_continues_from_their_checkpoints(tmp_path):
    import signal
    import time

    out = tmp_path / "compare"
    command = [sys.executable, "experiments/compare.py", "--envs", "CartPole-v1", "--methods", "pbt", "--seeds", "0"]
    command += ["--generations", "6", "--steps", "512", "--eval-episodes", "2", "--out", str(out)]
    study = subprocess.Popen(
        command, cwd=ROOT, env=mpi_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    run_dir = out / "runs" / "CartPole-v1" / "pbt-seed0"
    deadline = time.monotonic() + 120
    while not list((run_dir / "checkpoints").glob("gen_00000[1-9]/manifest.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    study.send_signal(signal.SIGTERM)
    output, _ = study.communicate(timeout=60)
    assert study.returncode == 130, output
    assert "run the same command again to continue" in output
    stopped = subprocess.run(["pgrep", "-f", str(run_dir)], capture_output=True, text=True)
    assert stopped.stdout == ""  # no rank of the run is left behind
    generations_before = len(read_population(run_dir)) // 4
    assert 1 <= generations_before < 6

    again = subprocess.run(command, cwd=ROOT, env=mpi_env(), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    log = (out / "logs" / "CartPole-v1-pbt-seed0.log").read_text()
    assert "resumed from" in log
    assert [int(r["generation"]) for r in read_population(run_dir)][::4] == [1, 2, 3, 4, 5, 6]
