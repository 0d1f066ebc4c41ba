"""experiments/compare.py: the study's bookkeeping (pure), its jobs, and the stock SB3 agent of its
"sb3-default" method built in-process. The tiny real studies under mpiexec are in
tests/e2e/test_compare.py."""

import json
import math
from dataclasses import replace

from evo.config import parse_config
from evo.runner.session import member_factory
from evo.tools.saved import evaluation_seed
from experiments.compare import (
    METHODS,
    MIXED_SPACE,
    STUDIES,
    Job,
    Result,
    best_within,
    comparisons,
    fresh_table,
    jobs_for,
    lineage_counts,
    parse_args,
    reward_threshold,
    stages_table,
    summarise,
    table,
)
from tests.support import PPO_SIX, ROOT, need_mujoco


def test_thresholds_come_from_gymnasium():
    assert reward_threshold("CartPole-v1") == 475 and reward_threshold("Acrobot-v1") == -100


def test_initial_hparams_defaults_are_the_yaml_values():
    config = parse_config(["--env-id", "CartPole-v1", "--initial-hparams", "defaults"], world_size=2)
    for member in (0, 1):
        assert member_factory(config).initial.of(member) == {name: config.agent.defaults[name] for name in PPO_SIX}
    sampled = parse_config(["--env-id", "CartPole-v1"], world_size=2)
    assert member_factory(sampled).initial.of(0) != member_factory(sampled).initial.of(1)


def write_run(run_dir, scores_by_generation, steps=100):
    run_dir.mkdir(parents=True)
    header = "generation,member,rank,env_steps,score,donor," + ",".join(PPO_SIX) + ",score_train,score_test\n"
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
    # t-intervals over seeds: pbt's -316.7 +- t(0.975, 2) 4.303 x 76.4 / sqrt(3) = 189.7
    assert "| 3 | -316.7 [-506.4, -126.9] |" in rows["pbt"]
    # the differences -50, -10, +20: mean -13.3, sd 35.1 -> half-width 87.2
    assert "| -13.3 [-100.6, 73.9] |" in rows["random"]


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
    assert len(jobs) == 5 * (2 * 6 + 1)  # seeds x (envs x evo's methods + rl_zoo3's on Pendulum)
    for job in [job for job in jobs if job.mpi]:
        flags = list(job.command)
        budget = STUDIES["continuous"].budgets[job.env_id]
        # every agent trains a member's env steps, but zoo-total: a whole population's
        per_generation = budget.steps * (4 if job.method == "zoo-total" else 1)
        assert flags[flags.index("--agent-training-steps") + 1] == str(per_generation)
        assert flags[flags.index("--total-generations") + 1] == str(budget.generations) == str(job.generations)
        single = METHODS[job.method].single
        assert job.ranks == (1 if single else 2)
        # population methods share the mixed space (HalfCheetah's with the wider learning rate);
        # single agents keep their YAML's values
        space = [flag for flag in flags if flag.startswith("search_space:")]
        assert space == [MIXED_SPACE[1]] if job.env_id == "Pendulum-v1" and not single else True
        assert bool(space) == (not single)
        assert ("--initial-hparams" in flags) == single
    zoo = [job for job in jobs if not job.mpi]
    assert {(job.env_id, job.method) for job in zoo} == {("Pendulum-v1", "rl-zoo3")}
    for job in zoo:
        flags = list(job.command)
        assert flags[flags.index("--steps") + 1] == str(10 * 8192)  # a member's env steps
        assert flags[flags.index("--eval-seed") + 1] == str(evaluation_seed(job.seed))  # evo-evaluate's episodes
    sb3 = [job for job in jobs if job.method == "sb3-default"]
    assert all("experiments/sb3-defaults.yml" in job.command for job in sb3)
    assert reward_threshold("Pendulum-v1", args.study) == -200 and reward_threshold("Pendulum-v1") is None


def test_the_continuous_studys_halfcheetah_population_searches_the_wider_learning_rate(tmp_path):
    """HalfCheetah's population methods: the mixed space with the wider learning rate and n_epochs, as the
    run's own config reads it (which needs the MuJoCo extra)."""
    need_mujoco()
    args = parse_args(["--study", "continuous", "--envs", "HalfCheetah-v5", "--out", str(tmp_path)])
    population = [job for job in jobs_for(args, tmp_path / "runs") if job.mpi and not METHODS[job.method].single]
    assert {job.method for job in population} == {"pbt", "pb2", "random"}
    for job in population:
        config = parse_config(list(job.command)[1:], world_size=2, check_run_dir=False)
        rate = config.agent.search_space["learning_rate"]
        assert (rate.low, rate.high) == (2.0e-6, 2.0e-3) and "n_epochs" in config.agent.search_space


def test_the_procgen_study_trains_selects_and_reports_on_disjoint_levels(tmp_path):
    args = parse_args(["--study", "procgen", "--out", str(tmp_path)])
    jobs = jobs_for(args, tmp_path / "runs")
    assert len(jobs) == 3 * 4 and reward_threshold("starpilot", args.study) is None
    for job in jobs:
        flags = list(job.command)
        value = {flag: flags[flags.index(flag) + 1] for flag in ("--num-levels", "--start-level", "--eval-start-level")}
        assert value == {"--num-levels": "200", "--start-level": "0", "--eval-start-level": "200"}
        assert flags[flags.index("--eval-num-levels") + 1] == "100" and "--select-on" in flags
        assert flags[flags.index("--num-agents") + 1] == ("1" if METHODS[job.method].single else "4")
        config = parse_config(list(flags[1:]), world_size=job.ranks, check_run_dir=False)
        train = range(config.start_level, config.start_level + config.num_levels)
        select = range(config.eval_start_level, config.eval_start_level + config.eval_num_levels)
        test = range(args.study.test_levels[0], sum(args.study.test_levels))
        assert not set(train) & set(select) and not set(select) & set(test) and not set(train) & set(test)
        assert "aug_type" in config.agent.search_space or job.method == "paper-default"
    default = parse_config(list(jobs[3].command[1:]), world_size=1, check_run_dir=False)
    assert jobs[3].method == "paper-default" and default.num_agents == 1 and default.initial_hparams == "defaults"


def test_procgen_runs_are_reported_by_their_reevaluation_on_the_test_levels(tmp_path):
    study = STUDIES["procgen"]
    runs = {}
    for seed, (selection, returns) in enumerate(
        [
            ([5.0, 9.0, 7.0], {0: [1.0, 3.0], 1: [4.0, 4.0], 2: [8.0, 8.0]}),
            ([6.0, 2.0, 1.0], {0: [5.0], 1: [1.0], 2: [2.0]}),
        ]
    ):
        run_dir = tmp_path / f"pbt-{seed}"
        write_run(run_dir, [selection])
        how = {"tool": "evo-evaluate", "episodes": 20, "envs": 8, "levels": list(study.test_levels)}
        kept = {"member": 2, "generation": 1, "returns": [6.0]} if seed == 0 else None
        saved = {"how": how, "members": returns, "best_ever": kept}
        (run_dir / "reevaluation.json").write_text(json.dumps(saved))
        runs[seed] = summarise(Job("starpilot", "pbt", seed, 2, (), run_dir), None, study)
    # seed 0: member 1 has the best selection score (9) and scores 4 on the test levels, not member 2's 8
    assert (runs[0].fresh_selected_member, runs[0].fresh_selected, runs[0].fresh_median) == (1, 4.0, 4.0)
    assert (runs[0].fresh_best_ever_member, runs[0].fresh_best_ever) == (2, 6.0)
    assert (runs[1].fresh_selected_member, runs[1].fresh_selected, runs[1].fresh_median) == (0, 5.0, 2.0)
    assert math.isnan(runs[1].fresh_best_ever)  # kept none
    random = [
        replace(runs[0], method="random", fresh_selected=2.0),
        replace(runs[1], method="random", fresh_selected=2.0),
    ]
    markdown = fresh_table([*runs.values(), *random], ["starpilot"], ["pbt", "random"], study)
    rows = {line.split(" | ")[1]: line for line in markdown.splitlines() if line.startswith("| starpilot")}
    # pbt: 4 and 5, mean 4.5, t(0.975, 1) = 12.706 times 0.707 / sqrt(2) = 6.35; kept best on one seed only
    assert "| 2 | 4.5 [-1.9, 10.9] | — |" in rows["pbt"] and rows["random"].endswith("| — | — | — |")
    assert "| 2.5 [-3.9, 8.9] | 2 / 0 of 2 | 0.500 |" in rows["pbt"]  # minus random's 2, same seed


def test_sb3_defaults_file_gives_a_stock_sb3_ppo():
    """The study's "sb3-default" agent, built by evo, has every setting of a plain
    PPO("MlpPolicy", env) (SB3's own defaults, read from SB3, not from our file)."""
    import inspect

    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO as StockPPO

    from evo.runner.session import member_factory

    flags = ["--env-id", "Pendulum-v1", "--num-agents", "1", "--agent-training-steps", "2048"]
    flags += ["--initial-hparams", "defaults", "--conf-file", str(ROOT / "experiments" / "sb3-defaults.yml")]
    config = parse_config(flags, world_size=1)
    member = member_factory(config).make(0, member_factory(config).initial.of(0), tensorboard=False)
    ours = member.model
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


def test_the_bgpbt_study_shares_the_continuous_studys_pbt_and_pb2_runs_and_adds_bg_pbt(tmp_path):
    from experiments.compare import runs_dir

    args = parse_args(["--study", "bgpbt"])
    continuous = parse_args(["--study", "continuous", "--envs", "HalfCheetah-v5"])
    assert runs_dir(args) == runs_dir(continuous)
    jobs = {(job.method, job.seed): job for job in jobs_for(args, runs_dir(args))}
    shared = {(job.method, job.seed): job for job in jobs_for(continuous, runs_dir(continuous))}
    assert sorted(jobs) == sorted((m, s) for m in ("pbt", "pb2", "bgpbt", "bgpbt-long") for s in range(5))
    for key in [k for k in jobs if not k[0].startswith("bgpbt")]:
        assert jobs[key] == shared[key]  # the same command and run directory: run once


def test_the_bgpbt_studys_runs_have_one_stage_that_fits_their_budget():
    """Each BG-PBT run's config as the run reads it (HalfCheetah: needs the MuJoCo extra)."""
    from experiments.compare import runs_dir

    need_mujoco()
    args = parse_args(["--study", "bgpbt"])
    jobs = {(job.method, job.seed): job for job in jobs_for(args, runs_dir(args))}
    for seed in range(5):
        flags = list(jobs[("bgpbt", seed)].command)
        config = parse_config(flags[1:], world_size=2, check_run_dir=False)
        assert config.explore == "casmo" and config.max_distillations == 1 and config.stage_students == 8
        assert config.total_generations == 8 and config.agent_training_steps == 6144
        space = config.agent.search_space
        assert {"pi_layers", "pi_width", "vf_layers", "vf_width", "n_epochs"} <= set(space)
        assert (space["learning_rate"].low, space["learning_rate"].high) == (2.0e-6, 2.0e-3)
        # its stage fits: due after generation 4 at the latest, one rung, then PBT to generation 8
        assert config.stage_steps == 4 * 6144 and config.stage_distillation_steps == 6144
        # with BG-PBT's proportions: the stage after 2 generations, distilled as long in one rung of 7
        # generations, so each member's line has the same env steps
        long = parse_config(list(jobs[("bgpbt-long", seed)].command)[1:], world_size=2, check_run_dir=False)
        assert (long.stage_steps, long.stage_distillation_steps, long.total_generations) == (2 * 6144, 2 * 6144, 7)
        assert long.stage_steps + long.stage_distillation_steps + 4 * 6144 == 8 * 6144
        assert jobs[("bgpbt-long", seed)].generations == 7


def test_a_method_without_selection_scores_is_left_out_of_their_tables():
    """The rl_zoo3 cross-check has fresh returns only: "—" in the mean ± std table, no row of NaNs
    (nor a p of 0) among the selection scores' paired comparisons."""
    from experiments.compare import _mean_std, comparisons

    assert _mean_std([math.nan, math.nan]) == "—" and _mean_std([1.0, math.nan, 3.0]) == "2.0 ± 1.4"
    nan = math.nan
    results = [
        Result("Pendulum-v1", "pbt", seed, 4, -100.0 - seed, -200.0, None, 1.0, [], -150.0, 0, 1, nan)
        for seed in range(3)
    ] + [Result("Pendulum-v1", "rl-zoo3", seed, 1, nan, nan, None, 1.0, [], nan, 0, 0, nan) for seed in range(3)]
    text = comparisons(results, ["Pendulum-v1"], ["pbt", "rl-zoo3"], "pbt")
    assert "| pbt |" in text and "rl-zoo3" not in text


def test_a_run_with_a_stage_reports_it_and_counts_its_env_steps_once(tmp_path):
    """2 members of 100 env steps a generation; a stage after generation 1 (3 students, teacher 0,
    50 env steps each in one rung, generation 2); students 4 and 2 take members 0 and 1's places."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    header = "generation,member,rank,env_steps,score,donor,stage,teacher," + ",".join(PPO_SIX) + ",score_train\n"
    rows = [(1, 0, 100, 5.0, 0, ""), (1, 1, 100, 3.0, 0, "")]
    rows += [(2, s, 150, 10.0 * s, 1, "0") for s in (2, 3, 4)]
    rows += [(3, 0, 250, 45.0, 1, ""), (3, 1, 250, 30.0, 1, "")]
    lines = [f"{g},{m},0,{steps},{score},,{stage},{teacher}," + ",".join(["0.5"] * 6) + ",\n"
             for g, m, steps, score, stage, teacher in rows]  # fmt: skip
    (run_dir / "population.csv").write_text(header + "".join(lines))
    reason = "the stage has trained 100 env steps per member (at most 100)"
    lineage = [
        {"event": "student", "stage": 1, "generation": 1, "member": s, "teacher": 0, "how": how, "reason": reason}
        for s, how in ((2, "bo"), (3, "random"), (4, "random"))
    ]
    lineage.append({"event": "rung", "stage": 1, "generation": 2, "kept": [4, 2], "dropped": [3],
                    "scores": {"2": 20.0, "3": 30.0, "4": 40.0}})  # fmt: skip
    lineage += [
        {"event": "survivor", "stage": 1, "generation": 2, "member": m, "student": s, "teacher": 0, "env_steps": 150}
        for m, s in ((0, 4), (1, 2))
    ]
    (run_dir / "lineage.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lineage))
    result = summarise(Job("Pendulum-v1", "bgpbt", 0, 2, (), run_dir), None)
    assert result.members == 2  # the students are not members
    assert [total for total, _ in result.curve] == [200, 350, 550]  # every env step once
    assert result.curve[1][1] == 40.0  # the rung's best is a student's
    assert result.stages == [
        {
            "stage": 1,
            "after_generation": 1,
            "reason": reason,
            "best_before": 5.0,
            "teachers": [0],
            "students": 3,
            "rung_best": [40.0],
            "survivors_how": ["random", "bo"],
            "best_after": 45.0,
            "student_env_steps": 150,
        }
    ]
    row = stages_table([result]).splitlines()[-1]
    assert (
        row == "| Pendulum-v1 | bgpbt | 0 | 1 (stage steps) | 0 | 5.0 | 40.0 | random, bo | 45.0 | 45.0 | 150 (27.3%) |"
    )  # noqa: E501
    assert stages_table([replace(result, stages=[])]) == ""
