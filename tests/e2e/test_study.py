"""evo-study under mpiexec: one real tiny study of a user's own file end to end (a user's own env, runs that
select on an objective of their own, two methods, two seeds, one generation) with its report's numbers
recomputed from the runs' records; a study killed outright
(SIGKILL) taking its mpiexec and rank with it; and the built-in continuous study through
experiments/compare.py, every method of it in one study, with rl_zoo3's own agent played on evo's 8 envs
and episodes. The study's orchestration (launches, a stop and a continuation, the SLURM listing and one job
of it, bad input) is proven in process against a stub run command in tests/unit/study/test_running.py;
the pure parts in tests/unit/study/."""

import json
import math
import statistics
import subprocess
import sys

import pytest
import yaml

from evo.config import parse_config
from evo.tools.saved import evaluation_seed
from tests.e2e.runs import a_kill_takes_the_rank_with_it
from tests.support import ROOT, TINY_DEFAULT, mpi_env, mpiexec_path, read_population, write_hyperparams

ENV = "tests.objective_env:Objectives-v0"
STUDY = """\
study: tiny
out: out
envs: [tests.objective_env:Objectives-v0]
seeds: [0, 1]
budget:
  default: {{generations: 1, steps: 256, eval_episodes: 2}}
space:
  default: {{env.weight: {{low: 0.05, high: 0.95}}}}
flags: [--conf-file, {conf}, --objective, info:merit]
methods:
  pbt: {{}}
  zoo-total: {{kind: single, total: true}}
fresh: {{episodes: 4}}
compare:
  primary: pbt - zoo-total at 1.0
"""


def study_file(tmp_path):
    conf = write_hyperparams(tmp_path, TINY_DEFAULT)
    path = tmp_path / "study.yml"
    path.write_text(STUDY.format(conf=conf))
    return path


def evo_study(tmp_path, *args, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m evo.study ARGS`` from the study's own folder, as a user runs it."""
    command = [sys.executable, "-m", "evo.study", *map(str, args)]
    env = mpi_env() | {"PYTHONPATH": str(ROOT)}
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)


def selected_fresh(run_dir) -> tuple[int, float]:
    """The member the last selection score ranks first, and its mean fresh merit (the runs' objective: its value
    at the end of each fresh episode), from the records."""
    rows = read_population(run_dir)
    last = max(int(r["generation"]) for r in rows)
    scores = {int(r["member"]): float(r["score"]) for r in rows if int(r["generation"]) == last}
    member = max(sorted(scores), key=scores.get)
    saved = json.loads((run_dir / "reevaluation.json").read_text())
    return member, statistics.mean(saved["objectives"][str(member)]["merit"])


def test_a_tiny_study_runs_and_reports_from_its_runs_records(tmp_path):
    """The one real study of a user's file under mpiexec (four runs on the user's env module, every rank importing
    it, each run selecting on ``--objective info:merit`` and re-evaluated on fresh episodes): the report's numbers,
    the objective's fresh values, recomputed from the runs' own records. Its orchestration (a finished study not
    run again, a stop and a continuation, one job of the SLURM listing, bad input) is proven against a stub run
    command in tests/unit/study/test_running.py; a stopped run's mpiexec taking its rank with it, below."""
    path = study_file(tmp_path)
    result = evo_study(tmp_path, path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    out, runs = tmp_path / "out", tmp_path / "out" / "runs" / "tests.objective_env_Objectives-v0"
    records = json.loads((out / "results.json").read_text())
    assert [(r["method"], r["seed"]) for r in records] == [("pbt", 0), ("zoo-total", 0), ("pbt", 1), ("zoo-total", 1)]
    by = {(r["method"], r["seed"]): r for r in records}
    assert by[("pbt", 0)]["members"] == 4 and by[("zoo-total", 0)]["members"] == 1
    # the same total env steps: 4 members x 256, one agent x 1024
    assert by[("pbt", 0)]["curve"][-1][0] == by[("zoo-total", 0)]["curve"][-1][0] == 1024
    zoo = read_population(runs / "zoo-total-seed0")
    config = parse_config(["--env-id", ENV, "--conf-file", str(tmp_path / "tiny.yml")], world_size=1)
    assert all(float(row["learning_rate"]) == config.agent.defaults["learning_rate"] for row in zoo)
    # every method of a seed played the same fresh episodes: evo-evaluate's seed of the study's seed
    for seed in (0, 1):
        hows = [
            json.loads((runs / f"{m}-seed{seed}" / "reevaluation.json").read_text())["how"]
            for m in ("pbt", "zoo-total")
        ]
        assert {h["seed"] for h in hows} == {evaluation_seed(seed)} and {h["episodes"] for h in hows} == {4}
    # the primary comparison recomputed from the runs' own records
    differences = [selected_fresh(runs / f"pbt-seed{s}")[1] - selected_fresh(runs / f"zoo-total-seed{s}")[1]
                   for s in (0, 1)]  # fmt: skip
    report = json.loads((out / "report.json").read_text())
    (primary,) = report["comparisons"]
    assert primary["differences"] == pytest.approx(differences, rel=1e-12) and primary["seeds"] == [0, 1]
    assert primary["measure"] == "fresh info:merit" and len(set(differences)) == 2  # PBT's draws differ by seed
    half = 12.706204736174698 * statistics.stdev(differences) / math.sqrt(2)  # t(0.975, 1)
    assert primary["high"] == pytest.approx(statistics.mean(differences) + half)
    verdict = "**Not separated**" if primary["low"] <= 0 <= primary["high"] else "is better**"
    assert verdict in primary["verdict"]
    markdown = (out / "results.md").read_text()
    assert (
        "- Primary: **pbt − zoo-total** at 100 % of the budget, fresh values of the runs' objective, info:merit "
        "(larger better) paired over 2 seeds"
    ) in markdown
    assert (out / "compare.png").stat().st_size > 20_000 and (out / "anytime.png").stat().st_size > 20_000
    # wall times from the records: one line per launch, and each run's wall_s its launches' sum
    launches = [json.loads(line) for line in (out / "launches.jsonl").read_text().splitlines()]
    assert len(launches) == 4 and all(entry["status"] == 0 for entry in launches)
    for entry in launches:
        wall = float((tmp_path / entry["run_dir"] / "wall_s").read_text())
        assert wall == pytest.approx(entry["seconds"], abs=0.1)


STUDY_PROCESS = """\
import signal, sys
from pathlib import Path
from evo.study.jobs import Job
from evo.study.running import start
folder = Path(sys.argv[1])
job = Job("CartPole-v1", "pbt", 0, 1, (str(folder / "rank.py"), str(folder / "pid")), folder / "run")
start(job, sys.argv[2], folder / "logs", folder)
signal.pause()
"""


def test_a_study_killed_outright_leaves_no_run_behind(tmp_path):
    """SIGKILL (or the OOM killer) gives the study no chance to stop its runs; the kernel's death signal
    does: mpiexec gets SIGTERM when the study process dies and stops its rank (one that only waits)."""
    a_kill_takes_the_rank_with_it([sys.executable, "-c", STUDY_PROCESS, str(tmp_path), mpiexec_path()], tmp_path)


CONTINUOUS = ["pbt", "pb2", "random", "zoo", "zoo-total", "rl-zoo3", "sb3-default"]


@pytest.fixture(scope="module")
def continuous(tmp_path_factory):
    """The built-in continuous study through experiments/compare.py, every method of it on Pendulum (evo's
    and rl_zoo3's own train in the evo-less virtualenv), 1 seed, 1 generation of one rollout (4096 env
    steps: a whole rollout of every method), 2 members; its folder."""
    from tests.e2e.runs import zoo_venv_python

    zoo_venv_python()  # where the study looks for it: .venv-zoo (built if missing)
    out = tmp_path_factory.mktemp("continuous") / "study"
    command = [
        sys.executable, "experiments/compare.py", "--study", "continuous", "--envs", "Pendulum-v1", "--seeds", "0",
        "--generations", "1", "--steps", "4096", "--eval-episodes", "1", "--members", "2", "--out", str(out),
        "--methods", *CONTINUOUS,
    ]  # fmt: skip
    study = subprocess.run(command, cwd=ROOT, env=mpi_env(), capture_output=True, text=True, timeout=600)
    assert study.returncode == 0, study.stdout[-2000:] + study.stderr[-3000:]
    return out


def test_a_tiny_continuous_study_keeps_its_books(continuous):
    """Every evo method of the built-in continuous study on Pendulum: the table's numbers are those of the
    runs' own records. (One job run alone, as on a cluster, not run again: tests/unit/study/test_running.py;
    the continuous study's listing: tests/unit/study/test_jobs.py.) The study takes about 35 s: seven runs,
    each re-evaluated on 20 episodes."""
    out = continuous
    records = {r["method"]: r for r in json.loads((out / "results.json").read_text())}
    assert set(records) == set(CONTINUOUS)
    for method, record in records.items():
        if method == "rl-zoo3":  # not an evo run: the next test
            continue
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


def test_the_continuous_study_plays_rl_zoo3s_own_agent_on_evos_envs_and_episodes(continuous, tmp_path):
    """The continuous study's zoo agent re-evaluated on 20 fresh episodes over 8 envs (evo-evaluate's seed
    for the study's seed), rl_zoo3's own train in the evo-less virtualenv played on those same envs and
    episodes, both in the fresh table; and the same episodes proven: evo's zoo agent, exported and played by
    scripts/zoo_play.py over 8 envs in that virtualenv, returns what evo's re-evaluation measured, episode
    for episode."""
    from evo.tools import export as export_tool
    from tests.e2e.runs import zoo_venv_python

    out = continuous
    runs = out / "runs" / "Pendulum-v1"
    ours = json.loads((runs / "zoo-seed0" / "reevaluation.json").read_text())
    theirs = json.loads((runs / "rl-zoo3-seed0" / "fresh.json").read_text())
    assert ours["how"]["seed"] == theirs["eval_seed"] == evaluation_seed(0)
    assert ours["how"]["envs"] == theirs["envs"] == 8 and theirs["steps"] == 4096
    assert len(ours["members"]["0"]) == len(theirs["returns"]) == 20
    assert (runs / "rl-zoo3-seed0" / "zoo" / "ppo" / "Pendulum-v1_1" / "Pendulum-v1.zip").is_file()
    records = {r["method"]: r for r in json.loads((out / "results.json").read_text())}
    assert records["zoo"]["fresh_selected"] == pytest.approx(sum(ours["members"]["0"]) / 20, rel=1e-12)
    assert records["rl-zoo3"]["fresh_selected"] == pytest.approx(sum(theirs["returns"]) / 20, rel=1e-12)
    rows = [line for line in (out / "results.md").read_text().splitlines() if line.startswith("| Pendulum-v1 |")]
    fresh = [line for line in rows if line.count("|") == 10]  # the fresh table's rows
    assert [line.split(" | ")[1] for line in fresh] == CONTINUOUS
    # the episodes are the same: evo's agent through stock SB3 on 8 envs of the same seed
    assert export_tool.main([str(runs / "zoo-seed0"), "--out", str(tmp_path / "export"), "--member", "0"]) == 0
    experiment = tmp_path / "export" / "ppo" / "Pendulum-v1_1"
    stats = experiment / "Pendulum-v1" / "vecnormalize.pkl"
    zoo_python = zoo_venv_python()
    play = [str(zoo_python), str(ROOT / "scripts" / "zoo_play.py"), str(experiment / "Pendulum-v1.zip"), "ppo",
            "Pendulum-v1", str(evaluation_seed(0)), "20", str(stats) if stats.is_file() else "", "", "8"]  # fmt: skip
    played = subprocess.run(play, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert played.returncode == 0, played.stderr[-3000:]
    returns = json.loads(played.stdout.strip().splitlines()[-1])["returns"]
    assert returns == pytest.approx(ours["members"]["0"], abs=1e-4)
    assert yaml.safe_load((runs / "zoo-seed0" / "config.yaml").read_text())["seed"] == 0
