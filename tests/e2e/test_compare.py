"""experiments/compare.py under mpiexec: tiny real studies, their reports, an interrupted study that
continues, and bad input refused before any run. Its pure bookkeeping is tested in
tests/unit/experiments/test_compare.py."""

import json
import math
import subprocess
import sys

import pytest

from evo.config import parse_config
from tests.support import PPO_SIX, ROOT, mpi_env, read_population


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
    assert all({k: float(row[k]) for k in PPO_SIX} == config.agent.defaults for row in single)
    # run again: nothing is redone, the report is rebuilt
    again = run_compare(out)
    assert again.returncode == 0 and "2 of 2 runs already finished; running the other 0" in again.stdout
    assert json.loads((out / "results.json").read_text()) == records


def test_bad_input_is_refused_before_any_run(tmp_path):
    result = run_compare(tmp_path / "c", "--members", "3")
    assert result.returncode == 2 and "--members 3: use a multiple of --ranks 2" in result.stderr
    assert not (tmp_path / "c").exists()


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


def test_a_tiny_continuous_study_keeps_its_books(tmp_path):
    """Every evo method of the continuous study on Pendulum, 1 seed, 1 generation (the bookkeeping of
    later generations and exploits is test_a_tiny_study_runs_reports_and_continues's; rl_zoo3's own
    agent is the next test's): the table's numbers are those of the runs' own records, and one job
    run alone (as on a cluster) is not run again."""
    out = tmp_path / "study"
    common = ["--study", "continuous", "--envs", "Pendulum-v1", "--seeds", "0", "--generations", "1"]
    common += ["--steps", "4096", "--eval-episodes", "1", "--out", str(out)]  # whole rollouts of every method
    common += ["--members", "2", "--methods", "pbt", "pb2", "random", "zoo", "zoo-total", "sb3-default"]
    listed = subprocess.run(
        [sys.executable, "experiments/compare.py", *common, "--list"], cwd=ROOT, capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert [line.split("\t")[:2] for line in lines] == [["0", "2"], ["1", "2"], ["2", "2"]] + [
        ["3", "1"], ["4", "1"], ["5", "1"]
    ]  # fmt: skip
    command = [sys.executable, "experiments/compare.py", *common]
    one = subprocess.run([*command, "--job", "3"], cwd=ROOT, env=mpi_env(), capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stdout[-2000:] + one.stderr[-2000:]
    assert not (out / "results.md").exists()  # a job alone writes its run, not the report
    study = subprocess.run(command, cwd=ROOT, env=mpi_env(), capture_output=True, text=True, timeout=600)
    assert study.returncode == 0, study.stdout[-2000:] + study.stderr[-3000:]
    assert "1 of 6 runs already finished" in study.stdout
    records = {r["method"]: r for r in json.loads((out / "results.json").read_text())}
    assert set(records) == {"pbt", "pb2", "random", "zoo", "zoo-total", "sb3-default"}
    for method, record in records.items():
        rows = read_population(out / "runs" / "Pendulum-v1" / f"{method}-seed0")
        last = [float(row["score"]) for row in rows if row["generation"] == "1"]
        assert record["final_best"] == max(last) and len(last) == record["members"]
        totals = [sum(int(r["env_steps"]) for r in rows if r["generation"] == "1")]
        assert [steps for steps, _ in record["curve"]] == totals
        # the same budget per member; zoo-total: a whole population's (2 members') in one agent
        assert totals[-1] == 4096 * record["members"] * (2 if method == "zoo-total" else 1)
        fixed = method in ("random", "zoo", "zoo-total", "sb3-default")
        assert record["copies"] == 0 if fixed else record["copies"] >= 0
        assert math.isfinite(record["fresh_selected"]) and math.isfinite(record["fresh_median"])  # re-evaluated
    # population methods search the mixed space: n_epochs is a column, from the choices
    pbt_rows = read_population(out / "runs" / "Pendulum-v1" / "pbt-seed0")
    assert {row["n_epochs"] for row in pbt_rows} <= {"5", "10", "20"}
    markdown = (out / "results.md").read_text()
    assert "| Pendulum-v1 (≥ -200) | sb3-default | 1 | 1 |" in markdown
    assert "final best minus pbt's" in markdown and (out / "compare.png").stat().st_size > 20_000


def test_the_continuous_study_reports_fresh_returns_and_rl_zoo3s_own_agent(tmp_path):
    """The corrected continuous study at a tiny budget: evo's zoo agent re-evaluated on 20 fresh
    episodes (evo-evaluate's seed for the study's seed), rl_zoo3's own train in the evo-less
    virtualenv played on those same episodes, both in the fresh table."""
    from evo.tools.saved import evaluation_seed
    from tests.e2e.runs import zoo_venv_python

    zoo_venv_python()  # where compare.py looks for it: .venv-zoo
    out = tmp_path / "continuous"
    command = [
        sys.executable, "experiments/compare.py", "--study", "continuous", "--envs", "Pendulum-v1",
        "--methods", "zoo", "rl-zoo3", "--seeds", "0", "--generations", "1", "--steps", "4096",
        "--eval-episodes", "2", "--out", str(out),
    ]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, env=mpi_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    runs = out / "runs" / "Pendulum-v1"
    ours = json.loads((runs / "zoo-seed0" / "reevaluation.json").read_text())
    theirs = json.loads((runs / "rl-zoo3-seed0" / "fresh.json").read_text())
    assert ours["how"]["seed"] == theirs["eval_seed"] == evaluation_seed(0)
    assert len(ours["members"]["0"]) == len(theirs["returns"]) == 20 and theirs["steps"] == 4096
    assert (runs / "rl-zoo3-seed0" / "zoo" / "ppo" / "Pendulum-v1_1" / "Pendulum-v1.zip").is_file()
    records = {r["method"]: r for r in json.loads((out / "results.json").read_text())}
    assert records["zoo"]["fresh_selected"] == pytest.approx(sum(ours["members"]["0"]) / 20, rel=1e-12)
    assert records["rl-zoo3"]["fresh_selected"] == pytest.approx(sum(theirs["returns"]) / 20, rel=1e-12)
    rows = [line for line in (out / "results.md").read_text().splitlines() if line.startswith("| Pendulum-v1 |")]
    fresh = [line for line in rows if line.count("|") == 10]  # the fresh table's rows
    assert [line.split(" | ")[1] for line in fresh] == ["zoo", "rl-zoo3"]
