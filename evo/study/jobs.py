"""A study's runs as jobs: one (env, method, seed) each, with its command and run directory
(``<runs>/<env>/<method>-seed<k>``), seed outermost (the order they are started in, but that a one-rank
run takes a free core ahead of its turn, so a study of 2-rank populations and 1-rank agents on 2 cores
runs most of its single agents early); which are finished; whether a run directory was made by this
study; the listing a SLURM array reads (pure, apart from reading run directories).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from evo.core.names import file_name
from evo.study.spec import Method, Study, flag_value

CHECKOUT = Path(__file__).resolve().parents[2]
"""The folder above the evo package: in a checkout, the repository (its entry scripts, experiments/)."""
ZOO_SCRIPT = "experiments/zoo_crosscheck.py"
ZOO_RESULT = "fresh.json"
"""The rl_zoo3 cross-check's returns on the study's fresh episodes (experiments/zoo_crosscheck.py)."""
WALL = "wall_s"
"""A finished run's wall time in seconds (every launch of it added up), written by the study."""


def zoo_python() -> Path:
    """The evo-less virtualenv's Python the rl_zoo3 cross-check runs in (``make zoo-venv`` builds it;
    ``ZOO_VENV`` names another)."""
    return Path(os.environ.get("ZOO_VENV", CHECKOUT / ".venv-zoo")) / "bin" / "python"


@dataclass(frozen=True)
class Job:
    """One run of the study: ``command`` is the entry script (or, for the rl_zoo3 cross-check, the
    whole command) and its flags, ``--run-dir`` last."""

    env_id: str
    method: str
    seed: int
    ranks: int
    command: tuple[str, ...]
    run_dir: Path
    generations: int = 0
    mpi: bool = True
    members: int = 1
    steps: int = 0
    """Env steps per member and generation."""
    eval_episodes: int = 0

    @property
    def name(self) -> str:
        return f"{self.env_id} {self.method} seed {self.seed}"

    @property
    def log_name(self) -> str:
        return f"{file_name(self.env_id)}-{self.method}-seed{self.seed}.log"


def render(value) -> str:
    """A value as evo's ``--hyperparams key:value`` reads it (YAML flow style, one line)."""
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10**9)
    return text.strip().removesuffix("...").strip()


def hyperparams_flags(study: Study, env_id: str, method: Method) -> tuple[str, ...]:
    """``--hyperparams key:value ...``: the study's settings for the env, the method's, and a
    population's search space; nothing when there are none."""
    settings = {**study.hyperparams.get(env_id, {}), **method.hyperparams}
    pairs = [f"{key}:{render(value)}" for key, value in settings.items()]
    space = study.method_space(env_id, method) if not method.single else {}
    if space:
        pairs.append(f"search_space:{render(space)}")
    return ("--hyperparams", *pairs) if pairs else ()


def jobs_for(study: Study, runs: Path | None = None) -> list[Job]:
    """Every job of the study, seed outermost, then env, then method."""
    runs = study.runs if runs is None else runs
    jobs = []
    for seed in study.seeds:
        for env_id in study.envs:
            for method in study.methods.values():
                if method.runs_on(env_id):
                    run_dir = env_runs(runs, env_id) / f"{method.name}-seed{seed}"
                    jobs.append(job_for(study, env_id, method, seed, run_dir))
    return jobs


def env_runs(runs: Path, env_id: str) -> Path:
    """The folder of an env's runs: ``runs/<env>`` with the env id as a file name (``ALE_Pong-v5``,
    ``module_EnvId``, as the entry scripts name run directories); a study begun before that named it
    ``runs/<env id>`` (``ALE/Pong-v5`` two levels deep, ``module:EnvId`` with its colon), and goes on there."""
    before = runs / env_id
    return before if before != runs / file_name(env_id) and before.is_dir() else runs / file_name(env_id)


def job_for(study: Study, env_id: str, method: Method, seed: int, run_dir: Path) -> Job:
    budget = study.budget(env_id, method)
    if not method.mpi:
        return zoo_job(study, env_id, method, seed, run_dir)
    members = 1 if method.single else study.members
    flags = [
        "--env-id", env_id, "--total-generations", str(budget.generations), "--agent-training-steps",
        str(budget.steps), "--eval-episodes", str(budget.eval_episodes), "--select-on", "test", "--seed", str(seed),
        "--num-agents", str(members), *hyperparams_flags(study, env_id, method), *study.flags,
        *keep_flags(study, env_id, method), *method.own_flags,
    ]  # fmt: skip
    command = (method.script, *flags, "--run-dir", str(run_dir))
    ranks = 1 if method.single else study.ranks
    return Job(env_id, method.name, seed, ranks, command, run_dir, budget.generations, True, members,
               budget.steps, budget.eval_episodes)  # fmt: skip


def keep_flags(study: Study, env_id: str, method: Method) -> tuple[str, ...]:
    """``--keep-checkpoints`` enough for the earliest fraction re-evaluated, unless the study gives it;
    every checkpoint for a method with BG-PBT's stages, whose generations are not known before the run
    (the report plays each stage's teacher and best student at its two ends)."""
    if study.fresh is None or "--keep-checkpoints" in study.flags + method.flags:
        return ()
    generations = study.budget(env_id, method).generations
    if "--max-distillations" in study.flags + method.flags:
        return ("--keep-checkpoints", str(generations))
    earliest = min(study.generation_at(env_id, method, f) for f in study.fresh.at)
    return ("--keep-checkpoints", str(generations - earliest + 1)) if earliest < generations else ()


def zoo_job(study: Study, env_id: str, method: Method, seed: int, run_dir: Path) -> Job:
    """The rl_zoo3 cross-check: a member's env steps, played on the fresh episodes evo-evaluate plays
    for the same seed (the same envs: its seed, its number of envs); the study's learner (:func:`zoo_algo_flags`),
    then the method's ``flags``, which are the cross-check's own (``--algo NAME``, ``--hyperparams KEY:VALUE
    ...``: experiments/zoo_crosscheck.py)."""
    from evo.study.fresh import ENVS
    from evo.tools.saved import evaluation_seed

    budget = study.budget(env_id, method)
    episodes = study.fresh.episodes if study.fresh else 20
    algo = flag_value(study.flags, "--algo")
    command = (
        str(zoo_python()), ZOO_SCRIPT, "--env", env_id, "--steps", str(budget.generations * budget.steps),
        "--seed", str(seed), "--eval-seed", str(evaluation_seed(seed)), "--episodes", str(episodes),
        "--envs", str(min(episodes, ENVS)), *zoo_algo_flags(algo), *method.flags, "--run-dir", str(run_dir),
    )  # fmt: skip
    return Job(env_id, method.name, seed, 1, command, run_dir, budget.generations, False, 1, budget.steps, 0)


def zoo_algo_flags(algo: str | None) -> tuple[str, ...]:
    """The study's ``--algo`` for rl_zoo3's train, where it names one of evo's learners by zoo's name (a
    ``module:Class`` of the user's has none: the method's ``flags`` name zoo's, as ``[--algo, trpo]``)."""
    return ("--algo", algo) if algo and algo.isidentifier() else ()


def listing(jobs: Sequence[Job], cwd: Path, mpiexec: str | None) -> str:
    """One line per job, as a SLURM array reads it: index, ranks, and the run's command as a user can paste it
    into a shell (:func:`pasteable`)."""
    lines = [f"{index}\t{job.ranks}\t{pasteable(job, cwd, mpiexec)}" for index, job in enumerate(jobs)]
    return "\n".join(lines) + ("\n" if lines else "")


def pasteable(job: Job, cwd: Path, mpiexec: str | None) -> str:
    """The command the study starts for ``job`` (:func:`launch_argv`), as one shell line: from the folder the
    study runs in (``cwd``: its flags' relative paths), with that folder on PYTHONPATH where the env id or
    ``--algo`` names a module of the user's (every rank imports it, as the study's runs do)."""
    from evo.config.imports import named_module

    line = f"cd {shlex.quote(str(cwd))} && "
    if any(named_module(name) for name in (job.env_id, flag_value(job.command, "--algo")) if name):
        line += f"PYTHONPATH={shlex.quote(study_pythonpath(cwd))} "
    return line + shlex.join(launch_argv(job, mpiexec or "mpiexec"))


def study_pythonpath(cwd: Path) -> str:
    """The runs' PYTHONPATH: the study's folder first (a ``module:Env`` id's module there imports on every
    rank), then the study's own."""
    return os.pathsep.join(p for p in (str(cwd), os.environ.get("PYTHONPATH", "")) if p)


def launch_argv(job: Job, mpiexec: str) -> list[str]:
    """The process the study starts for ``job``: an evo run under ``mpiexec -n RANKS --oversubscribe`` (the
    study places its runs on the cores itself), the rl_zoo3 cross-check as it is."""
    command = python_command(job, CHECKOUT)
    return [mpiexec, "-n", str(job.ranks), "--oversubscribe", *command] if job.mpi else command


def last_generation(run_dir: Path) -> int:
    """The last generation population.csv records (0: none)."""
    path = run_dir / "population.csv"
    if not path.is_file():
        return 0
    lines = path.read_text().splitlines()[1:]
    return max((int(line.split(",", 1)[0]) for line in lines if line.strip()), default=0)


def has_result(job: Job) -> bool:
    """Whether the run's records hold its whole budget (what a report can use)."""
    if not job.mpi:
        return (job.run_dir / ZOO_RESULT).is_file() and (job.run_dir / WALL).is_file()
    return last_generation(job.run_dir) >= job.generations and (job.run_dir / WALL).is_file()


def is_finished(job: Job) -> bool:
    """Whether nothing is left to run: its records hold its whole budget, and a cross-check's returns
    were played on as many envs as the study's re-evaluation (else only the playing is done again)."""
    if not has_result(job):
        return False
    if job.mpi:
        return True
    played = json.loads((job.run_dir / ZOO_RESULT).read_text())
    return played.get("envs", 1) == int(flag_value(job.command, "--envs"))


def mismatch(job: Job) -> list[str]:
    """How the run directory's config differs from the job (empty: it is this job's run, or there is no
    config yet): the env, seed, population, budget and scoring a study must not mix."""
    path = job.run_dir / "config.yaml"
    if not job.mpi or not path.is_file():
        return []
    try:
        saved = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError:
        return [f"{path} is not YAML"]
    expected = {
        "env_id": job.env_id, "seed": job.seed, "num_agents": job.members, "agent_training_steps": job.steps,
        "total_generations": job.generations, "eval_episodes": job.eval_episodes,
    }  # fmt: skip
    return [
        f"{key} {saved[key]} (the study's: {value})"
        for key, value in expected.items()
        if key in saved and saved[key] != value
    ]


def python_command(job: Job, scripts: Path) -> list[str]:
    """The process to start for ``job`` (under mpiexec when it is an evo run): the entry script from
    ``scripts`` (the repository), else evo's console script beside this Python."""
    if not job.mpi:  # the cross-check's script is the repository's, wherever the study runs
        python, script, *flags = job.command
        beside = scripts / script
        return [python, str(beside) if beside.is_file() else script, *flags]
    script = scripts / job.command[0]
    if script.is_file():
        return [sys.executable, str(script), *job.command[1:]]
    console = {"pbt_rl_truct.py": "evo-truct", "pbt_rl_wta.py": "evo-wta"}[job.command[0]]
    return [str(Path(sys.executable).parent / console), *job.command[1:]]
