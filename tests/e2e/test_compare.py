"""experiments/compare.py: the study's bookkeeping (pure) and a tiny real study under mpiexec."""

import json
import math
import subprocess
import sys

import pytest

from evo.config import parse_config
from evo.run import initial_hparams
from experiments.compare import (
    METHODS,
    MIXED_SPACE,
    STUDIES,
    Job,
    Result,
    best_within,
    comparisons,
    jobs_for,
    lineage_counts,
    parse_args,
    reward_threshold,
    summarise,
    table,
)
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
    # the area under the best curve: a's best is 480, 470, 500 at 300, 600, 900 steps -> 480.0
    assert a.auc == (480 + 470) / 2 * 300 / 600 + (470 + 500) / 2 * 300 / 600
    # one agent's total is 900 / 3 = 300 steps: a's best then was 480, b's 30
    assert (a.equal_total, b.equal_total) == (480, 30)
    assert row.startswith(
        "| CartPole-v1 (≥ 475) | pbt | 3 | 2 | 295.0 ± 289.9 | 285.0 ± 289.9 | 255.0 ± 318.2 | 270.0 ± 297.0 | 300 | "
        "1/2 |"
    )
    assert "single" not in markdown  # no runs, no row


def test_best_within_is_the_last_generation_inside_the_steps():
    curve = [(400, -900.0), (800, -300.0), (1200, -150.0), (1600, -120.0)]
    assert best_within(curve, 1600 / 4) == -900.0  # 4 members: one agent's total is the first generation's
    assert best_within(curve, 1000) == -300.0  # inside, not the nearest
    assert math.isnan(best_within(curve, 399))  # the first generation already used more
    assert best_within([(100, 7.0), (200, 9.0)], 200 / 1) == 9.0  # one agent: its final best


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


def result(method, seed, best, env_id="Pendulum-v1"):
    return Result(env_id, method, seed, 4, best, best, None, 1.0, [(1, best)], auc=best)


def test_paired_comparisons_over_seeds():
    results = [result("pbt", s, b) for s, b in enumerate([-300.0, -250.0, -400.0])]
    results += [result("random", s, b) for s, b in enumerate([-350.0, -260.0, -380.0])]
    results += [result("zoo", 0, -500.0)]  # ran one seed only: compared on that seed
    markdown = comparisons(results, ["Pendulum-v1"], ["pbt", "random", "zoo"], "pbt")
    rows = {line.split(" | ")[1]: line for line in markdown.splitlines() if line.startswith("| Pendulum-v1")}
    assert rows["pbt"].endswith("| — | — | — |")  # the reference itself
    # random minus pbt, same seed: -50, -10, +20 -> mean -13.3; better on one seed, worse on two
    assert "| -13.3 [" in rows["random"] and "| 1 / 2 of 3 |" in rows["random"]
    assert rows["random"].endswith("| 0.750 |")  # 6 of the 8 sign patterns give |mean| >= 13.3
    assert "| 1 | -500.0 [-500.0, -500.0] |" in rows["zoo"] and "| 0 / 1 of 1 | 1.000 |" in rows["zoo"]
    assert "cannot give p below 0.250" in markdown  # 3 seeds: 2 / 2^3


def test_lineage_counts_ties_under_both_rules(tmp_path):
    lines = [
        {"recipient": 1, "donor": 1, "recipient_score": -500.0, "donor_score": -500.0},  # kept (explore)
        {"recipient": 2, "donor": 0, "recipient_score": -500.0, "donor_score": -500.0},  # tie copied (copy)
        {"recipient": 3, "donor": 0, "recipient_score": -480.0, "donor_score": -100.0},  # a real exploit
        {"recipient": 4, "donor": 4, "recipient_score": None, "donor_score": None},  # NaN ties NaN
    ]
    path = tmp_path / "lineage.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert lineage_counts(path) == (3, 2)
    assert lineage_counts(tmp_path / "missing.jsonl") == (0, 0)


def test_the_continuous_study_runs_every_method_on_the_same_budget_per_member(tmp_path):
    args = parse_args(["--study", "continuous", "--out", str(tmp_path)])
    jobs = jobs_for(args, tmp_path / "runs")
    assert len(jobs) == 5 * 2 * 5  # seeds x envs x methods
    for job in jobs:
        flags = list(job.command)
        budget = STUDIES["continuous"].budgets[job.env_id]
        assert flags[flags.index("--agent-training-steps") + 1] == str(budget.steps)
        assert flags[flags.index("--total-generations") + 1] == str(budget.generations) == str(job.generations)
        single = METHODS[job.method].single
        assert job.ranks == (1 if single else 2)
        # population methods share the mixed space; single agents keep their YAML's values
        assert (MIXED_SPACE[1] in flags) == (not single)
        assert ("--initial-hparams" in flags) == single
    sb3 = [job for job in jobs if job.method == "sb3-default"]
    assert all("experiments/sb3-defaults.yml" in job.command for job in sb3)
    assert reward_threshold("Pendulum-v1", args.study) == -200 and reward_threshold("Pendulum-v1") is None


def test_sb3_defaults_file_gives_a_stock_sb3_ppo():
    """The study's "sb3-default" agent, built by evo, has every setting of a plain
    PPO("MlpPolicy", env) (SB3's own defaults, read from SB3, not from our file)."""
    import inspect

    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO as StockPPO

    from evo.run import initial_hparams
    from evo.sb3.agent import build_model

    flags = ["--env-id", "Pendulum-v1", "--num-agents", "1", "--agent-training-steps", "2048"]
    flags += ["--initial-hparams", "defaults", "--conf-file", str(ROOT / "experiments" / "sb3-defaults.yml")]
    config = parse_config(flags, world_size=1)
    ours = build_model(config, 0, initial_hparams(config, 0), None)
    stock = StockPPO("MlpPolicy", gym.make("Pendulum-v1"), device="cpu")
    defaults = {k: v.default for k, v in inspect.signature(StockPPO.__init__).parameters.items()}
    assert ours.n_envs == 1
    for name in ("n_steps", "batch_size", "n_epochs", "gamma", "gae_lambda", "ent_coef", "vf_coef"):
        assert getattr(ours, name) == getattr(stock, name) == defaults[name], name
    for name in ("max_grad_norm", "use_sde", "normalize_advantage", "target_kl"):
        assert getattr(ours, name) == getattr(stock, name), name
    assert ours.learning_rate == stock.learning_rate == defaults["learning_rate"]
    assert ours.clip_range(1.0) == stock.clip_range(1.0) == defaults["clip_range"]
    assert type(ours.env).__name__ != "VecNormalize"
    for name in ("activation_fn", "ortho_init", "log_std_init"):
        assert getattr(ours.policy, name) == getattr(stock.policy, name), name
    for net in ("policy_net", "value_net"):  # separate 64-64 tanh networks (evo's class runs bf16 when asked)
        assert str(getattr(ours.policy.mlp_extractor, net)) == str(getattr(stock.policy.mlp_extractor, net))
    assert torch.allclose(ours.policy.log_std, stock.policy.log_std)
    assert [p.shape for p in ours.policy.parameters()] == [p.shape for p in stock.policy.parameters()]


@pytest.mark.e2e
def test_a_tiny_continuous_study_keeps_its_books(tmp_path):
    """Every method of the continuous study on Pendulum, 1 seed, 2 generations: the table's
    numbers are those of the runs' own records, and one job run alone (as on a cluster) is
    not run again."""
    out = tmp_path / "study"
    common = ["--study", "continuous", "--envs", "Pendulum-v1", "--seeds", "0", "--generations", "2"]
    common += ["--steps", "4096", "--eval-episodes", "1", "--out", str(out)]  # whole rollouts of every method
    listed = subprocess.run(
        [sys.executable, "experiments/compare.py", *common, "--list"], cwd=ROOT, capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert [line.split("\t")[:2] for line in lines] == [["0", "2"], ["1", "2"], ["2", "2"], ["3", "1"], ["4", "1"]]
    command = [sys.executable, "experiments/compare.py", *common]
    one = subprocess.run([*command, "--job", "3"], cwd=ROOT, env=mpi_env(), capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stdout[-2000:] + one.stderr[-2000:]
    assert not (out / "results.md").exists()  # a job alone writes its run, not the report
    study = subprocess.run(command, cwd=ROOT, env=mpi_env(), capture_output=True, text=True, timeout=600)
    assert study.returncode == 0, study.stdout[-2000:] + study.stderr[-3000:]
    assert "1 of 5 runs already finished" in study.stdout
    records = {r["method"]: r for r in json.loads((out / "results.json").read_text())}
    assert set(records) == {"pbt", "pb2", "random", "zoo", "sb3-default"}
    for method, record in records.items():
        rows = read_population(out / "runs" / "Pendulum-v1" / f"{method}-seed0")
        last = [float(row["score"]) for row in rows if row["generation"] == "2"]
        assert record["final_best"] == max(last) and len(last) == record["members"]
        totals = [sum(int(r["env_steps"]) for r in rows if r["generation"] == g) for g in ("1", "2")]
        assert [steps for steps, _ in record["curve"]] == totals
        assert totals[-1] == 2 * 4096 * record["members"]  # the same budget per member
        assert record["copies"] == 0 if method in ("random", "zoo", "sb3-default") else record["copies"] >= 0
    # population methods search the mixed space: n_epochs is a column, from the choices
    pbt_rows = read_population(out / "runs" / "Pendulum-v1" / "pbt-seed0")
    assert {row["n_epochs"] for row in pbt_rows} <= {"5", "10", "20"}
    markdown = (out / "results.md").read_text()
    assert "| Pendulum-v1 (≥ -200) | sb3-default | 1 | 1 |" in markdown
    assert "final best minus pbt's" in markdown and (out / "compare.png").stat().st_size > 20_000
