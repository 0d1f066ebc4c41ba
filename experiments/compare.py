"""Did PBT help? Population methods against random search and single PPO agents on the same
env-step budget per member, over several seeds. Three studies:

    python experiments/compare.py                      # or: make compare  (~30 min on 2 cores)
    python experiments/compare.py --study continuous   # or: make compare-continuous  (~2 h)
    python experiments/compare.py --study ties         # the tie rule where ties happen (~15 min)
    python experiments/compare.py --study bgpbt        # BG-PBT against PBT and PB2 on HalfCheetah-v5
    python experiments/compare.py --study sac          # SAC: PBT vs zoo's tuned agent on Pendulum-v1
    python experiments/compare.py --seeds 0 --envs CartPole-v1 --generations 4   # a quick look

``classic`` is CartPole-v1 and Acrobot-v1 with pbt, pbt-wta, pb2, random and single.
``continuous`` is Pendulum-v1 and HalfCheetah-v5 (the mujoco extra) with pbt, pb2, random
(all over the mixed space: the six floats and ``n_epochs`` from {5, 10, 20}), zoo's tuned
single agent and SB3's default single agent, 5 seeds. ``ties`` runs winner-takes-all and
truncation under both tie rules (``--ties explore``, evo's default, and ``--ties copy``) on
Acrobot-v1, where whole populations fail alike.

Every run is a real evo run under mpiexec (``<out>/runs/<env>/<method>-seed<N>``):

=================  ==============================================================================
pbt                ``pbt_rl_truct.py``: truncation, perturb/resample explore
pbt-ties-copy      the same with ``--ties copy``: a recipient that ties its donor copies it anyway
pbt-wta            ``pbt_rl_wta.py``: winner takes all
pbt-wta-ties-copy  the same with ``--ties copy``
pb2                ``pbt_rl_truct.py --explore pb2`` (PB2-Mix when the space has choices)
random             ``pbt_rl_truct.py --strategy none``: the same population, no exploit/explore
single, zoo        one agent with the env's YAML hyperparameters (zoo's tuned ones for continuous
                   control), ``--num-agents 1 --initial-hparams defaults``
sb3-default        one agent with SB3's own PPO defaults (``experiments/sb3-defaults.yml``)
bgpbt              ``pbt_rl_truct.py --explore casmo --max-distillations 1``: BG-PBT, the architecture
                   in the space, one stage of 8 students distilled for a generation's env steps
bgpbt-long         the same with BG-PBT's proportions: the stage after 2 generations, distilled as long
=================  ==============================================================================

All are scored the same way: ``--eval-episodes`` deterministic episodes per member and
generation, which also drive selection (``--select-on test``). The script writes
``results.json`` (one record per run), ``results.md`` (the tables: final best and median score,
the best score when the population had used as many env steps in all as one agent (equal total
compute rather than equal steps per member), area under the best-score curve, total env steps
until the population's best reached the threshold, wall time, ties and copies; then per env a
bootstrap confidence interval per method and a paired comparison of every method with the
study's reference over seeds) and ``compare.png`` (best score vs the population's total env
steps, mean and min–max band over seeds). Finished runs are kept: run it again after an
interruption (Ctrl-C or SIGTERM stop the runs in progress) and it continues with the missing
ones; an interrupted run resumes from its checkpoint, and its wall time then counts only the
part after the resume.

On a cluster each (method, seed) run is one job: ``--list`` prints the jobs with their
indices, ``--job N`` runs just job N (in a SLURM array: ``--job $SLURM_ARRAY_TASK_ID``), and
``--report-only`` builds the tables from the finished runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from evo.launch import available_cores, find_mpiexec, is_open_mpi, launch_problems  # noqa: E402
from evo.rundir.history import load_run  # noqa: E402
from experiments.stats import (  # noqa: E402
    area_under_curve,
    sign_flip_p,
    smallest_p,
    t_interval,
)
from experiments.zoo_crosscheck import RESULT as ZOO_RESULT  # noqa: E402

ZOO_PYTHON = Path(os.environ.get("ZOO_VENV", ROOT / ".venv-zoo")) / "bin" / "python"
"""The evo-less virtualenv the rl_zoo3 cross-check runs in (``make zoo-venv`` builds it)."""


@dataclass(frozen=True)
class Method:
    """How one method runs: the entry script, its flags, and whether it is one agent (one
    rank, no population) or a population over the study's search space."""

    script: str
    flags: tuple[str, ...] = ()
    single: bool = False
    total: bool = False
    """A single agent given a whole population's env steps (``--members`` times a member's)."""
    envs: tuple[str, ...] = ()
    """Only on these envs (empty: every env of the study)."""
    generations: int | None = None
    """Instead of the study's generations (a run whose rung trains two generations' env steps in one)."""
    zoo: bool = False
    """Not an evo run: ``script`` runs in the evo-less virtualenv (rl_zoo3's own train, then played on
    the study's fresh episodes), with ``--env/--steps/--seed/--eval-seed/--episodes/--run-dir``."""


DEFAULTS = ("--strategy", "none", "--initial-hparams", "defaults")
# BG-PBT at the continuous study's HalfCheetah budget (8 generations of 6144 env steps, 4 members): one
# stage, due after 4 generations (or 2 without a new best), 8 students distilled for one generation's
# env steps and cut to 4 in one rung (generation 5 or earlier), then PBT with Casmo to the end
BGPBT_STAGES = (
    "--max-distillations", "1", "--stage-steps", str(4 * 6144), "--patience", "2",
    "--students", "8", "--distillation-steps", "6144",
)  # fmt: skip
# The same with BG-PBT's own proportions (its code distils 30M env steps after at most 40M): the stage after
# 2 generations, distilled for as long (2 generations' env steps in its one rung), so 7 generations give
# each member's line the same 49,152 env steps
BGPBT_LONG_STAGES = (
    "--max-distillations", "1", "--stage-steps", str(2 * 6144), "--patience", "2",
    "--students", "8", "--distillation-steps", str(2 * 6144),
)  # fmt: skip
METHODS = {
    "pbt": Method("pbt_rl_truct.py"),
    "pbt-ties-copy": Method("pbt_rl_truct.py", ("--ties", "copy")),
    "pbt-wta": Method("pbt_rl_wta.py"),
    "pbt-wta-ties-copy": Method("pbt_rl_wta.py", ("--ties", "copy")),
    "pb2": Method("pbt_rl_truct.py", ("--explore", "pb2")),
    "pb2-mix": Method("pbt_rl_truct.py", ("--explore", "pb2-mix")),
    "random": Method("pbt_rl_truct.py", ("--strategy", "none")),
    "paper-default": Method("pbt_rl_truct.py", DEFAULTS, single=True),
    "single": Method("pbt_rl_truct.py", DEFAULTS, single=True),
    "zoo": Method("pbt_rl_truct.py", DEFAULTS, single=True),
    "zoo-total": Method("pbt_rl_truct.py", DEFAULTS, single=True, total=True),
    "rl-zoo3": Method("experiments/zoo_crosscheck.py", single=True, envs=("Pendulum-v1",), zoo=True),
    "bgpbt": Method("pbt_rl_truct.py", ("--explore", "casmo", *BGPBT_STAGES)),
    "bgpbt-long": Method("pbt_rl_truct.py", ("--explore", "casmo", *BGPBT_LONG_STAGES), generations=7),
    "sb3-default": Method("pbt_rl_truct.py", (*DEFAULTS, "--conf-file", "experiments/sb3-defaults.yml"), single=True),
}


@dataclass(frozen=True)
class Budget:
    """Per member: generations x env steps, scored on eval_episodes episodes each generation."""

    generations: int
    steps: int
    eval_episodes: int


@dataclass(frozen=True)
class Study:
    envs: tuple[str, ...]
    methods: tuple[str, ...]
    seeds: tuple[int, ...]
    budgets: dict[str, Budget]
    out: str
    reference: str = "pbt"  # the method the paired comparisons are made against
    space_flags: tuple[str, ...] = ()  # given to every population method
    env_space_flags: dict[str, tuple[str, ...]] = field(default_factory=dict)  # instead of space_flags, per env
    flags: tuple[str, ...] = ()  # given to every run (the learner, say)
    thresholds: dict[str, float] = field(default_factory=dict)  # over gymnasium's own
    fresh: bool = False
    """Re-evaluate every member of each run's last checkpoint, and its kept best, on fresh
    deterministic episodes (evo-evaluate, experiments/reevaluate.py) and report those returns."""
    test_levels: tuple[int, int] | None = None
    """Procgen: (first level, count) of the levels of the fresh episodes, disjoint from the
    training and the selection levels."""
    test_episodes: int = 20
    runs_in: str | None = None
    """Another study's ``out`` whose runs directory this one shares: the runs of methods both have
    (same commands) are run once."""
    method_space_flags: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    """Per method and env, instead of the env's space flags (BG-PBT's space with the architecture)."""


# A categorical next to the six floats: PB2 over a mixed space, and the same space for PBT and
# random search. Zoo's values (10 on Pendulum, 20 on HalfCheetah) are among the choices.
MIXED_SPACE = ("--hyperparams", "search_space:{n_epochs: {choices: [5, 10, 20]}}")
# HalfCheetah: the learning rate's range widened upwards from zoo's x/÷ 10 (2e-6 .. 2e-4) to 2e-3: in the
# study's first version random search's best members all sat at 6e-5 .. 1.8e-4, near the top.
HALFCHEETAH_SPACE = (
    "--hyperparams",
    "search_space:{n_epochs: {choices: [5, 10, 20]}, learning_rate: {low: 2.0e-6, high: 2.0e-3, scale: log}}",
)
# Procgen: the Procgen AutoRL paper's space and settings (--param-set autorl: DrAC, entropy, learning
# rate, clip range, aug_coef, aug_type) with SB3's NatureCNN, on three disjoint level ranges: train on
# levels 0-199, select on 200-299 (10 deterministic episodes per member and generation), report on
# 20 fresh episodes of levels 10000-10999 from every member of the last checkpoint.
# BG-PBT: the same space with the networks' depth and width, its ranges (1-5 layers of 32-256 units)
BGPBT_SPACE = (
    "--hyperparams",
    HALFCHEETAH_SPACE[1][:-1] + ", pi_layers: {low: 1, high: 5, type: int}, pi_width: {choices: [32, 64, 128, 256]}, "
    "vf_layers: {low: 1, high: 5, type: int}, vf_width: {choices: [32, 64, 128, 256]}}",
)
PROCGEN_LEVELS = (
    "--param-set", "autorl", "--hyperparams", "policy:nature",
    "--num-levels", "200", "--start-level", "0", "--eval-start-level", "200", "--eval-num-levels", "100",
)  # fmt: skip
STUDIES = {
    "classic": Study(
        envs=("CartPole-v1", "Acrobot-v1"),
        methods=("pbt", "pbt-wta", "pb2", "random", "single"),
        seeds=(0, 1, 2),
        budgets={"CartPole-v1": Budget(8, 4096, 5), "Acrobot-v1": Budget(8, 4096, 5)},
        out="compare",
    ),
    "continuous": Study(
        envs=("Pendulum-v1", "HalfCheetah-v5"),
        methods=("pbt", "pb2", "random", "zoo", "zoo-total", "rl-zoo3", "sb3-default"),
        seeds=(0, 1, 2, 3, 4),
        # Pendulum: zoo's 1e5 steps; HalfCheetah: 49k of zoo's 1e6 steps, what two hours allow
        budgets={"Pendulum-v1": Budget(10, 8192, 5), "HalfCheetah-v5": Budget(8, 6144, 3)},
        out="compare-continuous",
        space_flags=MIXED_SPACE,
        env_space_flags={"HalfCheetah-v5": HALFCHEETAH_SPACE},
        fresh=True,
        # Pendulum has no threshold in gymnasium; HalfCheetah's 4800 is for 1e6 steps and more
        thresholds={"Pendulum-v1": -200.0, "HalfCheetah-v5": 1000.0},
    ),
    "bgpbt": Study(
        envs=("HalfCheetah-v5",),
        methods=("pbt", "pb2", "bgpbt", "bgpbt-long"),
        seeds=(0, 1, 2, 3, 4),  # the continuous study's five: its pbt and pb2 runs are shared
        budgets={"HalfCheetah-v5": Budget(8, 6144, 3)},  # the continuous study's
        out="compare-bgpbt",
        runs_in="compare-continuous",  # its pbt and pb2 runs are these
        env_space_flags={"HalfCheetah-v5": HALFCHEETAH_SPACE},
        method_space_flags={m: {"HalfCheetah-v5": BGPBT_SPACE} for m in ("bgpbt", "bgpbt-long")},
        fresh=True,
        thresholds={"HalfCheetah-v5": 1000.0},
    ),
    # The longer horizon (issue 40, item 2): PBT against random search over the same space (the same initial
    # draws) and one zoo agent given the population's total env steps, 8 seeds, 4x the continuous study's
    # budget per member (32 generations of 6144: 196,608 env steps, 786,432 in all); every checkpoint kept
    # so that 25 %, 50 % and 100 % of the budget (generations 8, 16, 32) are re-evaluated on fresh episodes.
    # Primary comparison, declared before the runs (docs/results.md): pbt - zoo-total at 100 %.
    "horizon": Study(
        envs=("HalfCheetah-v5",),
        methods=("pbt", "random", "zoo-total"),
        seeds=tuple(range(8)),
        budgets={"HalfCheetah-v5": Budget(32, 6144, 3)},
        out="compare-horizon",
        reference="pbt",
        env_space_flags={"HalfCheetah-v5": HALFCHEETAH_SPACE},
        flags=("--keep-checkpoints", "33"),
        fresh=True,
        thresholds={"HalfCheetah-v5": 1000.0},
    ),
    "sac": Study(
        envs=("Pendulum-v1",),
        methods=("pbt", "zoo"),
        seeds=(0, 1, 2),
        # zoo's budget for its tuned SAC on Pendulum: 20,000 env steps (per member here)
        budgets={"Pendulum-v1": Budget(10, 2000, 5)},
        out="compare-sac",
        flags=("--algo", "sac"),
        thresholds={"Pendulum-v1": -200.0},
    ),
    "procgen": Study(
        envs=("starpilot",),  # the pilot's choice: its curve moves within the budget (docs/results.md)
        methods=("pbt", "pb2-mix", "random", "paper-default"),
        seeds=(0, 1, 2),
        budgets={"starpilot": Budget(6, 32768, 10)},  # 196,608 env steps per member
        out="compare-procgen",
        reference="random",
        flags=PROCGEN_LEVELS,
        fresh=True,
        test_levels=(10_000, 1_000),
    ),
    "ties": Study(
        envs=("Acrobot-v1",),
        methods=("pbt-wta", "pbt-wta-ties-copy", "pbt", "pbt-ties-copy"),
        seeds=(0, 1, 2, 3, 4),
        budgets={"Acrobot-v1": Budget(8, 4096, 5)},
        out="compare-ties",
        reference="pbt-wta",
    ),
}


@dataclass(frozen=True)
class Job:
    env_id: str
    method: str
    seed: int
    ranks: int
    command: tuple[str, ...]
    run_dir: Path
    generations: int = 0
    mpi: bool = True
    """An evo run under mpiexec; else ``command`` runs as it is (the rl_zoo3 cross-check)."""

    @property
    def name(self) -> str:
        return f"{self.env_id} {self.method} seed {self.seed}"


@dataclass
class Result:
    """One run's numbers, from its population.csv (``curve``: total env steps, best score)
    and lineage.jsonl (``ties``: recipients whose score equalled their donor's; ``copies``:
    weight copies)."""

    env_id: str
    method: str
    seed: int
    members: int
    final_best: float
    final_median: float
    steps_to_threshold: int | None
    wall_s: float
    curve: list[tuple[int, float]]
    auc: float = math.nan
    ties: int = 0
    copies: int = 0
    equal_total: float = math.nan  # the best score when the population had used one agent's total env steps
    # with the study's fresh episodes (Study.fresh): the mean returns there of
    fresh_selected: float = math.nan  # the member the last selection score ranks first
    fresh_median: float = math.nan  # the median member of the last checkpoint
    fresh_best_ever: float = math.nan  # the kept best (the highest selection score of the run)
    fresh_selected_member: int = -1
    fresh_best_ever_member: int = -1
    stages: list[dict] = field(default_factory=list)  # a run with --max-distillations: stage_facts


def reward_threshold(env_id: str, study: Study | None = None) -> float | None:
    """The study's threshold for the env, else the env's own "solved" score from its
    gymnasium registration (None if it has none)."""
    import gymnasium

    from evo.config.envnames import procgen_game

    if study is not None and env_id in study.thresholds:
        return study.thresholds[env_id]
    if procgen_game(env_id):
        return None
    return gymnasium.spec(env_id).reward_threshold


def budget_of(args: argparse.Namespace, env_id: str) -> Budget:
    """The study's budget for the env, with --generations/--steps/--eval-episodes over it."""
    base = args.study.budgets.get(env_id, Budget(8, 4096, 5))
    return Budget(
        args.generations or base.generations, args.steps or base.steps, args.eval_episodes or base.eval_episodes
    )


def jobs_for(args: argparse.Namespace, runs: Path) -> list[Job]:
    jobs = []
    for seed in args.seeds:  # seed outermost: an interrupted study still has every method
        for env_id in args.envs:
            budget = budget_of(args, env_id)
            for method in args.methods:
                spec = METHODS[method]
                if spec.envs and env_id not in spec.envs:
                    continue
                run_dir = runs / env_id / f"{method}-seed{seed}"
                if spec.zoo:
                    jobs.append(zoo_job(args, env_id, method, seed, budget, run_dir))
                    continue
                ranks = 1 if spec.single else args.ranks
                generations = spec.generations or budget.generations
                steps = budget.steps * args.members if spec.total else budget.steps
                space = args.study.env_space_flags.get(env_id, args.study.space_flags)
                space = args.study.method_space_flags.get(method, {}).get(env_id, space)
                flags = [
                    "--env-id",
                    env_id,
                    "--total-generations",
                    str(generations),
                    "--agent-training-steps",
                    str(steps),
                    "--eval-episodes",
                    str(budget.eval_episodes),
                    "--select-on",
                    "test",
                    "--seed",
                    str(seed),
                    *(["--num-agents", "1"] if spec.single else ["--num-agents", str(args.members)]),
                    *([] if spec.single else space),
                    *args.study.flags,
                    *spec.flags,
                ]
                command = (spec.script, *flags, "--run-dir", str(run_dir))
                jobs.append(Job(env_id, method, seed, ranks, command, run_dir, generations))
    return jobs


def zoo_job(args: argparse.Namespace, env_id: str, method: str, seed: int, budget: Budget, run_dir: Path) -> Job:
    """The rl_zoo3 cross-check of ``env_id`` and ``seed``: a member's env steps, the fresh episodes of
    evo-evaluate for the same seed."""
    from evo.tools.saved import evaluation_seed

    command = (
        str(ZOO_PYTHON), METHODS[method].script, "--env", env_id, "--steps", str(budget.generations * budget.steps),
        "--seed", str(seed), "--eval-seed", str(evaluation_seed(seed)),
        "--episodes", str(args.study.test_episodes), "--run-dir", str(run_dir),
    )  # fmt: skip
    return Job(env_id, method, seed, 1, command, run_dir, budget.generations, mpi=False)


def is_finished(job: Job) -> bool:
    if not job.mpi:
        return (job.run_dir / ZOO_RESULT).is_file() and (job.run_dir / "wall_s").is_file()
    try:
        history = load_run(job.run_dir)
    except Exception:
        return False
    return max(history.generations) >= job.generations and (job.run_dir / "wall_s").is_file()


@dataclass
class Running:
    process: subprocess.Popen
    log: object
    started: float


def start(job: Job, mpiexec: str, logs: Path) -> Running:
    """Launch one run (resumed if a checkpoint of it exists, else from scratch)."""
    command = list(job.command)
    if job.mpi and job.run_dir.exists():
        if any((job.run_dir / "checkpoints").glob("gen_*/manifest.json")):
            command.append("--resume")
        else:
            shutil.rmtree(job.run_dir)  # stopped before its first checkpoint: nothing to keep
    logs.mkdir(parents=True, exist_ok=True)
    log = (logs / f"{job.env_id}-{job.method}-seed{job.seed}.log").open("a")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    argv = [mpiexec, "-n", str(job.ranks), "--oversubscribe", sys.executable, *command] if job.mpi else command
    process = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    return Running(process, log, time.perf_counter())


def run_all(jobs: list[Job], cores: int, mpiexec: str, logs: Path, study: Study) -> list[str]:
    """Run the unfinished jobs, at most ``cores`` ranks at a time; returns the failures."""
    pending = [job for job in jobs if not is_finished(job)]
    done = len(jobs) - len(pending)
    if done:
        print(f"{done} of {len(jobs)} runs already finished; running the other {len(pending)}", flush=True)
    running: dict[Job, Running] = {}
    failures = []
    try:
        _loop(pending, running, failures, done, len(jobs), cores, mpiexec, logs, study)
    except KeyboardInterrupt:
        print("interrupted: stopping the runs in progress; run the same command again to continue", flush=True)
        raise
    finally:
        for run in running.values():  # no run outlives the study
            if run.process.poll() is None:
                run.process.terminate()
                run.process.wait()
            run.log.close()
    return failures


def _loop(pending, running, failures, done, total, cores, mpiexec, logs, study) -> None:
    while pending or running:
        busy = sum(job.ranks for job in running)
        for job in list(pending):  # in order, but a one-rank run may fill a free core
            if busy == 0 or busy + job.ranks <= cores:
                running[job] = start(job, mpiexec, logs)
                pending.remove(job)
                busy += job.ranks
        time.sleep(0.5)
        for job, run in list(running.items()):
            status = run.process.poll()
            if status is None:
                continue
            run.log.close()
            del running[job]
            done += 1
            wall = time.perf_counter() - run.started
            if status != 0:
                failures.append(f"{job.name}: exit status {status}, see {run.log.name}")
                print(f"[{done}/{total}] {job.name}: FAILED (exit {status}), log {run.log.name}", flush=True)
                continue
            (job.run_dir / "wall_s").write_text(f"{wall:.1f}\n")
            result = summarise(job, reward_threshold(job.env_id, study))
            print(
                f"[{done}/{total}] {job.name}: best {result.final_best:.1f}, median {result.final_median:.1f}, "
                f"{wall:.0f} s",
                flush=True,
            )


def summarise(job: Job, threshold: float | None, study: Study | None = None) -> Result:
    """The numbers of one finished run (with the study's fresh episodes: re-evaluated there)."""
    if not job.mpi:
        return zoo_result(job)
    history = load_run(job.run_dir)
    final_members = [m for m in history.members if history.has(history.generations[-1], m)]
    members = len(final_members)  # a run with stages also has its students' rows
    curve, reached, total = [], None, 0
    for generation in history.generations:
        rows = [history.row(generation, m) for m in history.members if history.has(generation, m)]
        scores = [row.score for row in rows if row.score == row.score]
        # the env steps every learner trained so far: a stage's students' distillation counts too
        total += sum(row.env_steps - history.started_at(row) for row in rows)
        best = max(scores) if scores else float("nan")
        curve.append((total, best))
        if reached is None and threshold is not None and best >= threshold:
            reached = total
    last = [history.row(history.generations[-1], m).score for m in final_members]
    wall_file = job.run_dir / "wall_s"
    ties, copies = lineage_counts(job.run_dir / "lineage.jsonl")
    tested = {}
    if study is not None and study.fresh:
        from experiments.reevaluate import reevaluated

        fresh = reevaluated(job.run_dir, study.test_episodes, study.test_levels)
        final = {m: history.row(history.generations[-1], m).score for m in final_members}
        selected = max(sorted(final), key=lambda m: final[m])  # the member the selection score ranks first
        means = [statistics.mean(fresh.members[m]) for m in sorted(fresh.members)]
        tested = {
            "fresh_selected": statistics.mean(fresh.members[selected]),
            "fresh_median": statistics.median(means),
            "fresh_selected_member": selected,
        }
        if fresh.best_ever is not None:
            tested["fresh_best_ever"] = statistics.mean(fresh.best_ever)
            tested["fresh_best_ever_member"] = fresh.best_ever_member
    return Result(
        job.env_id,
        job.method,
        job.seed,
        members,
        final_best=max(last),
        final_median=statistics.median(last),
        steps_to_threshold=reached,
        wall_s=float(wall_file.read_text()) if wall_file.is_file() else float("nan"),
        curve=curve,
        auc=area_under_curve(curve),
        ties=ties,
        copies=copies,
        equal_total=best_within(curve, curve[-1][0] / members) if curve else math.nan,
        stages=stage_facts(history),
        **tested,
    )


def stage_facts(history) -> list[dict]:
    """Per BG-PBT stage of a run (none without ``--max-distillations``), from its records (a
    :class:`evo.rundir.history.RunHistory`): after which generation and why it started, the members'
    best score then, its teachers, each rung's best student, how each survivor was proposed (kept,
    bo, random), the members' best in the generation after the stage and the env steps its students
    trained."""
    planned = [e for e in history.lineage if e.get("event") == "student"]
    if not planned:
        return []
    best: dict[int, float] = {}
    for row in history.rows:
        if row.teacher is None:  # a member's row (a student's has its teacher)
            best[row.generation] = max(best.get(row.generation, -math.inf), row.score)
    facts = []
    for stage in sorted({e["stage"] for e in planned}):
        students = {e["member"]: e for e in planned if e["stage"] == stage}
        first = next(iter(students.values()))
        rungs = [e for e in history.lineage if e.get("event") == "rung" and e["stage"] == stage]
        survivors = [e for e in history.lineage if e.get("event") == "survivor" and e["stage"] == stage]
        ended = rungs[-1]["generation"] if rungs else None
        trained = [row.env_steps - history.started_at(row) for row in history.rows if row.member in students]
        facts.append(
            {
                "stage": stage,
                "after_generation": first["generation"],
                "reason": first["reason"],
                "best_before": best.get(first["generation"], math.nan),
                "teachers": sorted({e["teacher"] for e in students.values()}),
                "students": len(students),
                "rung_best": [max(v for v in e["scores"].values() if v is not None) for e in rungs],
                "survivors_how": [students[e["student"]]["how"] for e in survivors],
                "best_after": best.get(ended + 1, math.nan) if ended is not None else math.nan,
                "student_env_steps": sum(trained),
            }
        )
    return facts


def stages_table(results: list[Result]) -> str:
    """One row per stage of each run that had stages (empty without any)."""
    staged = [r for r in results if r.stages]
    if not staged:
        return ""
    lines = [
        "BG-PBT's stages (selection scores): the members' best when the stage started, each rung's best "
        "student, how the survivors were proposed, the members' best in the generation after the stage and "
        "at the end; the env steps the students trained, and their share of the run's total.\n",
        "| env | method | seed | stage after generation (why) | teachers | best before | best student per rung "
        "| survivors | best the generation after | final best | students' env steps |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(staged, key=lambda r: (r.env_id, r.method, r.seed)):
        total = r.curve[-1][0] if r.curve else 0
        for f in r.stages:
            why = "patience" if "improved" in f["reason"] else "stage steps"
            share = f["student_env_steps"] / total if total else math.nan
            lines.append(
                f"| {r.env_id} | {r.method} | {r.seed} | {f['after_generation']} ({why}) | "
                f"{', '.join(map(str, f['teachers']))} | {f['best_before']:.1f} | "
                f"{', '.join(f'{b:.1f}' for b in f['rung_best'])} | {', '.join(f['survivors_how'])} | "
                f"{f['best_after']:.1f} | {r.final_best:.1f} | {f['student_env_steps']:,} ({share:.1%}) |"
            )
    return "\n".join(lines) + "\n"


def zoo_result(job: Job) -> Result:
    """The rl_zoo3 cross-check's numbers: only its fresh returns (zoo records no selection score)."""
    fresh = statistics.mean(json.loads((job.run_dir / ZOO_RESULT).read_text())["returns"])
    nan = math.nan
    wall = float((job.run_dir / "wall_s").read_text())
    return Result(job.env_id, job.method, job.seed, 1, nan, nan, None, wall, [], nan, 0, 0, nan, fresh, fresh)


def best_within(curve: list[tuple[int, float]], total_steps: float) -> float:
    """The best score of the last generation that ended within ``total_steps`` env steps of all
    members together (NaN if the first ended later): with a population's final total divided
    by its size, what the population had when it had used as many env steps as one agent."""
    within = [best for total, best in curve if total <= total_steps]
    return within[-1] if within else math.nan


def lineage_counts(path: Path) -> tuple[int, int]:
    """(recipients whose score equalled their donor's, weight copies) in a run's lineage; a
    tie kept under ``--ties explore`` is written with the recipient as its own donor."""
    ties = copies = 0
    if not path.is_file():
        return 0, 0
    for line in path.read_text().splitlines():
        exploit = json.loads(line)
        if "event" in exploit:  # a failed member's restart, a stage's student, rung or survivor: no exploit
            continue
        ties += exploit["recipient_score"] == exploit["donor_score"]
        copies += exploit["recipient"] != exploit["donor"]
    return ties, copies


def _mean_std(values: list[float]) -> str:
    """Mean ± standard deviation of the values measured ("—" if none is: the rl_zoo3 cross-check has
    no selection scores)."""
    values = [v for v in values if v == v]
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def _label(env_id: str, study: Study | None) -> str:
    threshold = reward_threshold(env_id, study)
    return env_id if threshold is None else f"{env_id} (≥ {threshold:g})"


def table(results: list[Result], envs, methods, study: Study | None = None) -> str:
    """The markdown table, one row per env and method (mean ± std over seeds)."""
    lines = [
        "| env | method | members | seeds | final best | final median | best at one agent's total env steps | "
        "area under best curve | total env steps to threshold (median of the seeds that reached it) | reached | "
        "wall time (s) | ties / copies per run |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for env_id in envs:
        for method in methods:
            rows = [r for r in results if r.env_id == env_id and r.method == method]
            if not rows:
                continue
            reached = [r.steps_to_threshold for r in rows if r.steps_to_threshold is not None]
            steps = f"{statistics.median(reached):,.0f}" if reached else "—"
            lines.append(
                f"| {_label(env_id, study)} | {method} | {rows[0].members} | {len(rows)} | "
                f"{_mean_std([r.final_best for r in rows])} | {_mean_std([r.final_median for r in rows])} | "
                f"{_mean_std([r.equal_total for r in rows])} | {_mean_std([r.auc for r in rows])} | "
                f"{steps} | {len(reached)}/{len(rows)} | "
                f"{statistics.mean(r.wall_s for r in rows):.0f} | "
                f"{statistics.mean(r.ties for r in rows):.1f} / {statistics.mean(r.copies for r in rows):.1f} |"
            )
    return "\n".join(lines) + "\n"


def _ci(mean: float, low: float, high: float) -> str:
    return f"{mean:.1f} [{low:.1f}, {high:.1f}]"


def method_rows(results: list[Result], envs, methods):
    """Per env and method that ran: (env, method, its results by seed, the env's results by (method, seed))."""
    for env_id in envs:
        runs = {(r.method, r.seed): r for r in results if r.env_id == env_id}
        for method in methods:
            rows = [r for (m, _), r in sorted(runs.items()) if m == method]
            if rows:
                yield env_id, method, rows, runs


def comparisons(results: list[Result], envs, methods, reference: str) -> str:
    """Per env and method: the final best selection score and the area under the best curve with
    95 % t-intervals over seeds, and the paired difference from ``reference`` over the seeds both
    ran (mean, t-interval, wins/losses, the sign-flip test's p)."""
    lines = [
        f"| env | method | seeds | final best, mean [95 % CI] | area under best curve [95 % CI] | "
        f"final best minus {reference}'s, same seed [95 % CI] | better / worse than {reference} | p (sign flip) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for env_id, method, rows, runs in method_rows(results, envs, methods):
        if all(math.isnan(r.final_best) for r in rows):
            continue  # no selection score (the rl_zoo3 cross-check): only in the fresh table
        best = _ci(*t_interval([r.final_best for r in rows]))
        auc = _ci(*t_interval([r.auc for r in rows]))
        paired = [(r.final_best, runs[(reference, r.seed)].final_best) for r in rows if (reference, r.seed) in runs]
        if method == reference or not paired:
            versus = "—", "—", "—"
        else:
            differences = [a - b for a, b in paired]
            versus = _ci(*t_interval(differences)), _wins(differences), f"{sign_flip_p(differences):.3f}"
        lines.append(f"| {env_id} | {method} | {len(rows)} | {best} | {auc} | " + " | ".join(versus) + " |")
    seeds = len({r.seed for r in results})
    note = (
        f"\nSelection scores (the scores that chose the members, so biased upwards). With {seeds} paired seeds the "
        f"two-sided sign-flip test cannot give p below {smallest_p(seeds):.3f}; intervals are Student's t over seeds "
        "(percentile bootstraps over 3-5 seeds cover the mean far less often than 95 %).\n"
    )
    return "\n".join(lines) + "\n" + note


def _wins(differences: list[float]) -> str:
    return f"{sum(d > 0 for d in differences)} / {sum(d < 0 for d in differences)} of {len(differences)}"


def fresh_table(results: list[Result], envs, methods, study: Study) -> str:
    """The numbers to report: the selected member, the kept best and the population's median,
    re-evaluated on fresh episodes, mean and t-interval over seeds, and paired with the reference."""
    where = "on seeds no run used"
    if study.test_levels is not None:
        start, count = study.test_levels
        where = f"of levels {start}-{start + count - 1} (never trained or selected on)"
    lines = [
        f"Re-evaluated on {study.test_episodes} fresh deterministic episodes {where}; mean [95 % t-interval] "
        'over seeds; "kept best": the weights behind the run\'s highest selection score (— where the run kept '
        "none).\n",
        f"| env | method | seeds | selected member | kept best | population median | selected minus "
        f"{study.reference}'s, same seed | better / worse than {study.reference} | p (sign flip) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for env_id, method, rows, runs in method_rows(results, envs, methods):
        paired = [
            r.fresh_selected - runs[(study.reference, r.seed)].fresh_selected
            for r in rows
            if (study.reference, r.seed) in runs
        ]
        versus = ("—", "—", "—")
        if method != study.reference and paired:
            versus = _ci(*t_interval(paired)), _wins(paired), f"{sign_flip_p(paired):.3f}"
        kept = [r.fresh_best_ever for r in rows if r.fresh_best_ever == r.fresh_best_ever]
        lines.append(
            f"| {env_id} | {method} | {len(rows)} | {_ci(*t_interval([r.fresh_selected for r in rows]))} | "
            f"{_ci(*t_interval(kept)) if len(kept) == len(rows) else '—'} | "
            f"{_ci(*t_interval([r.fresh_median for r in rows]))} | " + " | ".join(versus) + " |"
        )
    return "\n".join(lines) + "\n"


def plot(results: list[Result], envs, methods, path: Path, study: Study | None = None) -> None:
    """Best score vs the population's total env steps: mean over seeds, min–max band."""
    from evo.tools.plot import DPI, plt  # matplotlib, headless

    figure, axes = plt.subplots(1, len(envs), figsize=(6.5 * len(envs), 4.5), squeeze=False)
    palette = plt.get_cmap("tab10").colors  # a colour per method of this study
    colours = {method: palette[i % len(palette)] for i, method in enumerate(methods)}
    for ax, env_id in zip(axes[0], envs, strict=False):
        for method in methods:
            runs = [r for r in results if r.env_id == env_id and r.method == method]
            if not runs:
                continue
            length = min(len(r.curve) for r in runs)
            steps = np.array([total for total, _ in runs[0].curve[:length]])
            best = np.array([[r.curve[i][1] for i in range(length)] for r in runs])
            ax.plot(steps, best.mean(axis=0), marker="o", ms=3, color=colours[method], label=f"{method} ({len(runs)})")
            ax.fill_between(steps, best.min(axis=0), best.max(axis=0), color=colours[method], alpha=0.15)
        threshold = reward_threshold(env_id, study)
        if threshold is not None:
            ax.axhline(threshold, color="grey", linestyle=":", linewidth=1)
        ax.set_title(env_id)
        ax.set_xlabel("total env steps (all members)")
        ax.set_ylabel("best member's evaluation score")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, title="method (seeds)", title_fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="experiments/compare.py", description=__doc__.split("\n\n")[0].replace("\n", " ")
    )
    parser.add_argument("--study", choices=list(STUDIES), default="classic", help="which study (default: classic)")
    parser.add_argument("--envs", nargs="+", help="gymnasium ids (default: the study's)")
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), help="(default: the study's)")
    parser.add_argument("--seeds", nargs="+", type=int, help="(default: the study's)")
    parser.add_argument("--members", type=int, default=4, help="population size of the PBT, PB2 and random runs")
    parser.add_argument("--ranks", type=int, default=2, help="MPI ranks per population run")
    parser.add_argument("--generations", type=int, help="for every env (default: the study's budget per env)")
    parser.add_argument("--steps", type=int, help="env steps per member per generation, for every env")
    parser.add_argument("--eval-episodes", type=int, help="for every env (default: the study's)")
    parser.add_argument("--out", type=Path, help="where runs and results go (default: runs/<the study's name>)")
    parser.add_argument("--cores", type=int, default=available_cores(), help="ranks running at once")
    parser.add_argument("--report-only", action="store_true", help="only rebuild the tables and plot")
    parser.add_argument("--list", action="store_true", help="print the jobs (index, ranks, command) and exit")
    parser.add_argument("--job", type=int, help="run only job N of --list (e.g. one job of a SLURM array)")
    args = parser.parse_args(argv)
    study = args.study = STUDIES[args.study]
    args.envs = args.envs or list(study.envs)
    args.methods = args.methods or list(study.methods)
    args.seeds = args.seeds if args.seeds is not None else list(study.seeds)
    args.out = args.out or ROOT / "runs" / study.out
    problems = _problems(args)
    if problems:
        parser.error("; ".join(problems))
    return args


def _problems(args: argparse.Namespace) -> list[str]:
    problems = []
    for env_id in args.envs:
        try:
            reward_threshold(env_id)
        except Exception as error:
            problems.append(f"--envs {env_id}: not a gymnasium id ({error})")
    if args.members < 2 or args.members % args.ranks:
        problems.append(f"--members {args.members}: use a multiple of --ranks {args.ranks}, at least 2")
    for flag in ("ranks", "generations", "steps", "eval_episodes", "cores"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            problems.append(f"--{flag.replace('_', '-')} {value}: must be at least 1")
    jobs = len(args.seeds) * len(args.envs) * len(args.methods)
    if args.job is not None and not 0 <= args.job < jobs:
        problems.append(f"--job {args.job}: this study has jobs 0 to {jobs - 1} (see --list)")
    return problems


def list_jobs(jobs: list[Job]) -> None:
    for index, job in enumerate(jobs):
        print(f"{index}\t{job.ranks}\t" + shlex.join(["python", *job.command] if job.mpi else job.command))


def run_jobs(args: argparse.Namespace, jobs: list[Job]) -> int | list[str]:
    """Run the study's unfinished jobs (or only --job N): the failures, or an exit status."""
    mpiexec = find_mpiexec()
    if mpiexec is None:
        print("compare: error: no mpiexec found; `make install` puts one in .venv/bin", file=sys.stderr)
        return 2
    problems = launch_problems(args.ranks, True, os.environ, os.getuid(), args.cores, is_open_mpi(mpiexec))
    if problems:
        print("compare: error: cannot start MPI:\n  - " + "\n  - ".join(problems), file=sys.stderr)
        return 2
    if any(not job.mpi for job in jobs) and not ZOO_PYTHON.is_file():
        print(
            f"compare: error: no {ZOO_PYTHON} for the rl_zoo3 cross-check; `make zoo-venv` builds it", file=sys.stderr
        )
        return 2
    budgets = ", ".join(f"{env} {b.generations} x {b.steps}" for env in args.envs for b in [budget_of(args, env)])
    print(
        f"{len(jobs)} runs: {', '.join(args.methods)} on {', '.join(args.envs)}, seeds {args.seeds}; "
        f"generations x env steps per member: {budgets}; runs in {runs_dir(args)}",
        flush=True,
    )
    started = time.perf_counter()
    signal.signal(signal.SIGTERM, _interrupt)  # like Ctrl-C: stop the runs, keep what is done
    try:
        failures = run_all(jobs, args.cores, mpiexec, args.out / "logs", args.study)
    except KeyboardInterrupt:
        return 130
    print(f"all runs done in {time.perf_counter() - started:.0f} s", flush=True)
    return failures


def report(args: argparse.Namespace, jobs: list[Job]) -> list[Result]:
    """results.json, results.md and compare.png from the finished runs."""
    results = [summarise(job, reward_threshold(job.env_id, args.study), args.study) for job in jobs if is_finished(job)]
    if not results:
        return results
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")
    markdown = table(results, args.envs, args.methods, args.study)
    markdown += "\n" + comparisons(results, args.envs, args.methods, args.study.reference)
    if args.study.fresh:
        markdown += "\n" + fresh_table(results, args.envs, args.methods, args.study)
    if any(r.stages for r in results):
        markdown += "\n" + stages_table(results)
    (args.out / "results.md").write_text(markdown)
    plot(results, args.envs, args.methods, args.out / "compare.png", args.study)
    print(markdown)
    print(f"wrote {args.out / 'results.md'}, {args.out / 'results.json'} and {args.out / 'compare.png'}")
    return results


def runs_dir(args: argparse.Namespace) -> Path:
    """Where the study's runs are: its own out's ``runs``, or the study it shares them with."""
    shared = args.study.runs_in
    return ROOT / "runs" / shared / "runs" if shared else args.out / "runs"


def main(argv=None) -> int:
    args = parse_args(argv)
    jobs = jobs_for(args, runs_dir(args))
    if args.list:
        list_jobs(jobs)
        return 0
    failures: list[str] = []
    if not args.report_only:
        outcome = run_jobs(args, [jobs[args.job]] if args.job is not None else jobs)
        if isinstance(outcome, int):
            return outcome
        failures = outcome
        if args.job is not None:
            return 1 if failures else 0
    if not report(args, jobs):
        print("compare: no finished runs to report", file=sys.stderr)
        return 1
    if failures:
        print("failed runs:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
