"""evo/study/jobs.py: a study's runs as jobs (commands, run directories, budgets), the SLURM listing,
which runs are finished and whether a run directory is the study's; the built-in study files' jobs as
the runs read them; and the stock SB3 agent of the "sb3-default" method built in-process. The tiny
real studies under mpiexec are in tests/e2e/test_study.py."""

import json
import shlex
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from evo.config import parse_config
from evo.runner.session import member_factory
from evo.study.jobs import ZOO_SCRIPT, Job, has_result, is_finished, jobs_for, listing, mismatch, render
from evo.study.main import BUILT_IN
from evo.study.spec import load_study, parse_study
from evo.tools.saved import evaluation_seed
from tests.support import PPO_SIX, ROOT, need_mujoco

MIXED = {"n_epochs": {"choices": [5, 10, 20]}}
HALFCHEETAH = {**MIXED, "learning_rate": {"low": 2.0e-6, "high": 2.0e-3, "scale": "log"}}


def built_in(name: str, runs: Path | None = None):
    study = load_study(BUILT_IN / f"{name}.yml")
    return study, jobs_for(study, runs)


def flag(job: Job, name: str) -> str:
    command = list(job.command)
    return command[command.index(name) + 1]


def config_of(job: Job):
    """The run's config as the run reads its command (the env must exist here)."""
    return parse_config(list(job.command[1:]), world_size=job.ranks, check_run_dir=False)


def test_initial_hparams_defaults_are_the_yaml_values():
    config = parse_config(["--env-id", "CartPole-v1", "--initial-hparams", "defaults"], world_size=2)
    for member in (0, 1):
        assert member_factory(config).initial.of(member) == {name: config.agent.defaults[name] for name in PPO_SIX}
    sampled = parse_config(["--env-id", "CartPole-v1"], world_size=2)
    assert member_factory(sampled).initial.of(0) != member_factory(sampled).initial.of(1)


def test_the_continuous_study_runs_every_method_on_the_same_budget_per_member():
    study, jobs = built_in("continuous")
    assert len(jobs) == 5 * (2 * 6 + 1)  # seeds x (envs x evo's methods + rl_zoo3's on Pendulum)
    for job in [job for job in jobs if job.mpi]:
        budget = study.budgets[job.env_id]
        # every agent trains a member's env steps, but zoo-total: a whole population's
        per_generation = budget.steps * (4 if job.method == "zoo-total" else 1)
        assert flag(job, "--agent-training-steps") == str(per_generation) == str(job.steps)
        assert flag(job, "--total-generations") == str(budget.generations) == str(job.generations)
        single = study.methods[job.method].single
        assert job.ranks == (1 if single else 2) and job.members == (1 if single else 4)
        # population methods share the mixed space (HalfCheetah's with the wider learning rate); single
        # agents keep their YAML's values
        space = [f for f in job.command if f.startswith("search_space:")]
        assert bool(space) == (not single)
        if space:
            expected = MIXED if job.env_id == "Pendulum-v1" else HALFCHEETAH
            assert yaml.safe_load(space[0].split(":", 1)[1]) == expected
        assert ("--initial-hparams" in job.command) == single
        assert job.run_dir == study.runs / job.env_id / f"{job.method}-seed{job.seed}"
    zoo = [job for job in jobs if not job.mpi]
    assert {(job.env_id, job.method) for job in zoo} == {("Pendulum-v1", "rl-zoo3")}
    for job in zoo:
        assert flag(job, "--steps") == str(10 * 8192)  # a member's env steps
        assert flag(job, "--eval-seed") == str(evaluation_seed(job.seed))  # evo-evaluate's episodes
        assert flag(job, "--envs") == "8"  # on as many envs as evo's re-evaluation
    sb3 = [job for job in jobs if job.method == "sb3-default"]
    assert all("experiments/sb3-defaults.yml" in job.command for job in sb3)
    assert study.thresholds == {"Pendulum-v1": -200, "HalfCheetah-v5": 1000}


def test_the_continuous_studys_halfcheetah_population_searches_the_wider_learning_rate():
    """HalfCheetah's population methods: the mixed space with the wider learning rate and n_epochs, as the
    run's own config reads it (which needs the MuJoCo extra)."""
    need_mujoco()
    study, jobs = built_in("continuous")
    population = [job for job in jobs if job.env_id == "HalfCheetah-v5" and not study.methods[job.method].single]
    assert {job.method for job in population} == {"pbt", "pb2", "random"}
    for job in population:
        rate = config_of(job).agent.search_space["learning_rate"]
        assert (rate.low, rate.high) == (2.0e-6, 2.0e-3) and "n_epochs" in config_of(job).agent.search_space


def test_the_horizon_studys_runs_are_those_compare_py_started():
    """The study file writes exactly the run directories of `compare.py --study horizon` (the runs of the
    study in progress), keeps every checkpoint, and re-evaluates generations 8, 16 and 32."""
    study, jobs = built_in("horizon", Path("runs/compare-horizon/runs"))
    assert [(job.method, job.seed) for job in jobs] == [
        (m, s) for s in range(8) for m in ("pbt", "random", "zoo-total")
    ]
    for job in jobs:
        assert job.run_dir == Path(f"runs/compare-horizon/runs/HalfCheetah-v5/{job.method}-seed{job.seed}")
        assert flag(job, "--keep-checkpoints") == "33" and flag(job, "--total-generations") == "32"
        assert flag(job, "--agent-training-steps") == ("24576" if job.method == "zoo-total" else "6144")
        assert flag(job, "--eval-episodes") == "3" and flag(job, "--select-on") == "test"
        assert flag(job, "--seed") == str(job.seed)
    method = study.methods["pbt"]
    assert [study.generation_at("HalfCheetah-v5", method, f) for f in study.fresh.at] == [8, 16, 32]
    assert str(study.primary) == "pbt − zoo-total at 100 %" and [str(c) for c in study.secondary] == [
        "pbt − random at 100 %"
    ]
    commands = {job.method: job.command for job in jobs if job.seed == 0}
    assert "--strategy" not in commands["pbt"] and commands["random"][-4:-2] == ("--strategy", "none")
    assert commands["zoo-total"][-6:-2] == ("--strategy", "none", "--initial-hparams", "defaults")


def test_the_procgen_study_trains_selects_and_reports_on_disjoint_levels():
    study, jobs = built_in("procgen")
    assert len(jobs) == 3 * 4 and study.fresh.actions == "deterministic"  # as the first study ran
    for job in jobs:
        config = config_of(job)
        assert (config.num_levels, config.start_level, config.eval_start_level) == (200, 0, 200)
        assert config.eval_num_levels == 100 and config.select_on == "test" and config.agent.policy == "nature"
        assert config.num_agents == (1 if study.methods[job.method].single else 4)
        train = range(config.start_level, config.start_level + config.num_levels)
        select = range(config.eval_start_level, config.eval_start_level + config.eval_num_levels)
        test = range(study.fresh.levels[0], sum(study.fresh.levels))
        assert not set(train) & set(select) and not set(select) & set(test) and not set(train) & set(test)
        assert "aug_type" in config.agent.search_space or job.method == "paper-default"
    default = config_of(jobs[3])
    assert jobs[3].method == "paper-default" and default.num_agents == 1 and default.initial_hparams == "defaults"


def test_the_procgen_pilot_plays_one_agent_per_game_with_sampled_actions_and_keeps_its_checkpoints():
    study, jobs = built_in("procgen-pilot")
    assert [job.env_id for job in jobs] == ["starpilot", "fruitbot", "coinrun", "bigfish"]
    assert study.fresh.actions == "sampled" and study.fresh.floors is True and study.fresh.levels == (10000, 1000)
    for job in jobs:
        config = config_of(job)
        assert config.num_agents == 1 and config.initial_hparams == "defaults" and config.param_set == "autorl"
        assert config.total_generations * config.agent_training_steps == 1_572_864
        # the earliest point re-evaluated (25 %: generation 4) must still be kept at the end
        assert config.keep_checkpoints >= config.total_generations - 4 + 1


def test_the_bgpbt_study_shares_the_continuous_studys_pbt_and_pb2_runs_and_adds_bg_pbt():
    study, bgpbt = built_in("bgpbt")
    continuous, shared = built_in("continuous")
    assert study.runs == continuous.runs
    jobs = {(job.method, job.seed): job for job in bgpbt}
    shared = {(job.method, job.seed): job for job in shared if job.env_id == "HalfCheetah-v5"}
    assert sorted(jobs) == sorted((m, s) for m in ("pbt", "pb2", "bgpbt", "bgpbt-long") for s in range(5))
    for key in [k for k in jobs if not k[0].startswith("bgpbt")]:
        assert jobs[key] == shared[key]  # the same command and run directory: run once


def test_the_bgpbt_studys_runs_have_one_stage_that_fits_their_budget():
    """Each BG-PBT run's config as the run reads it (HalfCheetah: needs the MuJoCo extra)."""
    need_mujoco()
    _, bgpbt = built_in("bgpbt")
    jobs = {(job.method, job.seed): job for job in bgpbt}
    for seed in range(5):
        config = config_of(jobs[("bgpbt", seed)])
        assert config.explore == "casmo" and config.max_distillations == 1 and config.stage_students == 8
        assert config.total_generations == 8 and config.agent_training_steps == 6144
        space = config.agent.search_space
        assert {"pi_layers", "pi_width", "vf_layers", "vf_width", "n_epochs"} <= set(space)
        assert (space["learning_rate"].low, space["learning_rate"].high) == (2.0e-6, 2.0e-3)
        assert config.stage_steps == 4 * 6144 and config.stage_distillation_steps == 6144
        long = config_of(jobs[("bgpbt-long", seed)])
        assert (long.stage_steps, long.stage_distillation_steps, long.total_generations) == (2 * 6144, 2 * 6144, 7)
        assert long.stage_steps + long.stage_distillation_steps + 4 * 6144 == 8 * 6144
        assert jobs[("bgpbt-long", seed)].generations == 7
        # every checkpoint kept: the report plays each stage's teacher and best student at its two ends
        assert config.keep_checkpoints == 8 and long.keep_checkpoints == 7
        assert "--keep-checkpoints" not in jobs[("pbt", seed)].command  # fresh only at the end


def test_the_sac_and_ties_studies_run_as_they_did():
    sac, jobs = built_in("sac")
    assert all(flag(job, "--algo") == "sac" for job in jobs) and sac.fresh is not None
    _, ties = built_in("ties")
    scripts = {job.method: (job.command[0], "--ties" in job.command) for job in ties}
    assert scripts == {
        "pbt-wta": ("pbt_rl_wta.py", False), "pbt-wta-ties-copy": ("pbt_rl_wta.py", True),
        "pbt": ("pbt_rl_truct.py", False), "pbt-ties-copy": ("pbt_rl_truct.py", True),
    }  # fmt: skip


def test_a_users_study_names_its_env_methods_settings_and_budget(tmp_path):
    """A study of a user's own env (module:Env) and settings: every flag lands on the runs it is for."""
    study = parse_study(
        {
            "envs": ["mypackage.envs:Walker-v0"],
            "seeds": [3],
            "members": 6,
            "ranks": 3,
            "budget": {"default": {"generations": 5, "steps": 1000}},
            "hyperparams": {"default": {"n_steps": 250}},
            "space": {"default": {"gamma": {"low": 0.9, "high": 0.999}}},
            "methods": {
                "pb2": {},
                "mine": {"kind": "single", "hyperparams": {"learning_rate": 1e-3}, "flags": ["--precision", "bf16"]},
            },
        },
        "walker",
        out=tmp_path,
    )
    pb2, mine = jobs_for(study)
    assert pb2.ranks == 3 and flag(pb2, "--num-agents") == "6" and flag(pb2, "--explore") == "pb2"
    assert flag(pb2, "--eval-episodes") == "5"  # the default
    assert pb2.command[pb2.command.index("--hyperparams") + 1 : pb2.command.index("--hyperparams") + 3] == (
        "n_steps:250", "search_space:{gamma: {low: 0.9, high: 0.999}}",
    )  # fmt: skip
    assert mine.ranks == 1 and "search_space" not in " ".join(mine.command)
    assert "n_steps:250" in mine.command and "learning_rate:0.001" in mine.command
    assert (
        mine.command[-4:-2] == ("--precision", "bf16")
        and mine.run_dir == tmp_path / "runs" / "mypackage.envs_Walker-v0" / "mine-seed3"  # as the scripts name it
    )
    (tmp_path / "runs" / "mypackage.envs:Walker-v0").mkdir(parents=True)  # a study begun before: its folder kept
    assert jobs_for(study)[1].run_dir == tmp_path / "runs" / "mypackage.envs:Walker-v0" / "mine-seed3"
    assert render(3e-4) == "0.0003" and yaml.safe_load(render({"a": [1, 2.0e-6]})) == {"a": [1, 2.0e-6]}


def test_the_listing_is_what_a_slurm_array_reads_and_a_user_pastes(tmp_path, monkeypatch):
    """Each line: index, ranks, and the command the study starts for the run as one shell line (it printed
    `python pbt_rl_truct.py ...`: no mpiexec, and a script found only from the checkout's folder)."""
    study, jobs = built_in("continuous", tmp_path)
    folder = tmp_path / "my study"
    lines = listing(jobs, folder, "/opt/mpi/bin/mpiexec").splitlines()
    assert len(lines) == len(jobs) == 65
    index, ranks, command = lines[0].split("\t")
    words = shlex.split(command)
    assert (index, ranks) == ("0", "2")
    assert words[:3] == ["cd", str(folder), "&&"]  # where the study runs: its flags' relative paths
    assert words[3:7] == ["/opt/mpi/bin/mpiexec", "-n", "2", "--oversubscribe"]
    assert words[7:] == [sys.executable, str(ROOT / "pbt_rl_truct.py"), *jobs[0].command[1:]]
    zoo = next(line for line in lines if "rl-zoo3" in line).split("\t")
    assert zoo[1] == "1" and "mpiexec" not in zoo[2] and shlex.split(zoo[2])[4] == str(ROOT / ZOO_SCRIPT)
    assert shlex.split(listing(jobs[:1], folder, None))[5] == "mpiexec"  # none found here: the user's
    # a user's module:Env is imported on every rank from the study's folder, as the study's runs import it
    monkeypatch.setenv("PYTHONPATH", "/mine")
    mine = parse_study({"envs": ["mypackage.envs:Walker-v0"], "budget": {"default": {"generations": 1, "steps": 8}},
                        "methods": ["pbt"]}, out=tmp_path)  # fmt: skip
    words = shlex.split(listing(jobs_for(mine), folder, "mpiexec").split("\t")[2])
    assert words[3:5] == [f"PYTHONPATH={folder}:/mine", "mpiexec"]


def write_run(run_dir, scores_by_generation, steps=100, wall=12.5):
    run_dir.mkdir(parents=True)
    header = "generation,member,rank,env_steps,score,donor," + ",".join(PPO_SIX) + ",score_train,score_test\n"
    lines = [header]
    for generation, scores in enumerate(scores_by_generation, start=1):
        for member, score in enumerate(scores):
            lines.append(f"{generation},{member},0,{steps * generation},{score},," + ",".join(["0.5"] * 6) + ",,\n")
    (run_dir / "population.csv").write_text("".join(lines))
    if wall is not None:
        (run_dir / "wall_s").write_text(f"{wall}\n")


def test_a_run_is_finished_when_its_records_hold_its_budget_and_its_time(tmp_path):
    job = Job("CartPole-v1", "pbt", 0, 2, (), tmp_path / "a", generations=2)
    assert not has_result(job)
    write_run(tmp_path / "a", [[1, 2]], wall=None)
    assert not has_result(job)  # one generation of two
    write_run(tmp_path / "b", [[1, 2], [3, 4]], wall=None)
    assert not has_result(replace(job, run_dir=tmp_path / "b"))  # no wall_s: the study did not see it end
    write_run(tmp_path / "c", [[1, 2], [3, 4]])
    assert has_result(replace(job, run_dir=tmp_path / "c")) and is_finished(replace(job, run_dir=tmp_path / "c"))


def test_a_cross_check_played_on_other_envs_is_reported_but_played_again(tmp_path):
    command = ("python", "experiments/zoo_crosscheck.py", "--envs", "8", "--run-dir", str(tmp_path))
    job = Job("Pendulum-v1", "rl-zoo3", 0, 1, command, tmp_path, 10, mpi=False)
    (tmp_path / "wall_s").write_text("50\n")
    (tmp_path / "fresh.json").write_text(json.dumps({"returns": [1.0, 2.0]}))  # the first study's: one env
    assert has_result(job) and not is_finished(job)
    (tmp_path / "fresh.json").write_text(json.dumps({"returns": [1.0, 2.0], "envs": 8}))
    assert is_finished(job)


def test_a_run_directory_made_with_other_settings_is_named(tmp_path):
    job = Job("Pendulum-v1", "pbt", 1, 2, (), tmp_path, 10, True, 4, 8192, 5)
    assert mismatch(job) == []  # nothing there yet
    saved = {"env_id": "Pendulum-v1", "seed": 1, "num_agents": 4, "agent_training_steps": 8192,
             "total_generations": 10, "eval_episodes": 5, "explore": "perturb"}  # fmt: skip
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(saved))
    assert mismatch(job) == []
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(saved | {"seed": 2, "agent_training_steps": 4096}))
    assert mismatch(job) == ["seed 2 (the study's: 1)", "agent_training_steps 4096 (the study's: 8192)"]


def test_sb3_defaults_file_gives_a_stock_sb3_ppo():
    """The study's "sb3-default" agent, built by evo, has every setting of a plain
    PPO("MlpPolicy", env) (SB3's own defaults, read from SB3, not from our file)."""
    import inspect

    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO as StockPPO

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


@pytest.mark.parametrize("name", ["classic", "continuous", "bgpbt", "horizon", "sac", "procgen", "ties"])
def test_the_compare_py_wrapper_runs_the_study_file_of_its_name(name):
    from experiments.compare import translate

    assert translate(["--study", name, "--list"]) == [str(BUILT_IN / f"{name}.yml"), "--list"]
    assert translate(["--seeds", "0"]) == [str(BUILT_IN / "classic.yml"), "--seeds", "0"]  # the first study's


def test_the_learning_studys_cross_checks_train_each_learner_as_zoo_names_it():
    """experiments/studies/learning.yml: each rl_zoo3 method's own flags go to the cross-check (zoo's --algo, and
    PPO's --hyperparams for zoo's train), --run-dir last; a study's --algo (sac.yml's) reaches its rl_zoo3
    method when the method names none."""
    from evo.study.spec import Method

    study = load_study(BUILT_IN / "learning.yml")
    zoo = {(job.method, job.seed): job for job in jobs_for(study, Path("runs")) if not job.mpi}
    assert len(zoo) == 10 * 5
    assert flag(zoo[("trpo-zoo", 0)], "--algo") == "trpo" and zoo[("a2c-zoo", 0)].command[-2] == "--run-dir"
    assert flag(zoo[("a2c-zoo", 0)], "--steps") == str(49 * 10240) and flag(zoo[("sac-zoo", 1)], "--steps") == "20000"
    ppo = zoo[("ppo-zoo", 0)].command
    assert ppo[ppo.index("--hyperparams") + 1 : ppo.index("--run-dir")] == ("learning_rate:0.001", "clip_range:0.2")
    sac = replace(load_study(BUILT_IN / "sac.yml"), methods={"rl-zoo3": Method("rl-zoo3", "rl-zoo3")})
    (job,) = [job for job in jobs_for(sac, Path("runs")) if job.seed == 0]
    assert flag(job, "--algo") == "sac"
