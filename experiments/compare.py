"""Did PBT help? PBT (truncation), PBT-WTA, PB2, random search and one default PPO agent,
on the same env-step budget per member, over several seeds.

    python experiments/compare.py                 # or: make compare  (~30 min on 2 cores)
    python experiments/compare.py --seeds 0 --envs CartPole-v1 --generations 4   # a quick look

Every run is a real evo run under mpiexec (``runs/compare/runs/<env>/<method>-seed<N>``):

============  ===================================================================
pbt           ``pbt_rl_truct.py``: truncation, perturb/resample explore
pbt-wta       ``pbt_rl_wta.py``: winner takes all
pb2           ``pbt_rl_truct.py --explore pb2``
random        ``pbt_rl_truct.py --strategy none``: the same population, no exploit/explore
single        one agent with the env's default (tuned) hyperparameters, ``--num-agents 1``
============  ===================================================================

All are scored the same way: ``--eval-episodes`` deterministic episodes per member and
generation, which also drive selection (``--select-on test``). The script writes
``results.json`` (one record per run), ``results.md`` (the table: final best and median
score, total env steps until the population's best reached the env's reward threshold,
wall time) and ``compare.png`` (best score vs the population's total env steps). Finished
runs are kept: run it again after an interruption (Ctrl-C or SIGTERM stop the runs in
progress) and it continues with the missing ones; an interrupted run resumes from its
checkpoint, and its wall time then counts only the part after the resume.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from evo.launch import available_cores, find_mpiexec, is_open_mpi, launch_problems  # noqa: E402
from evo.rundir.history import load_run  # noqa: E402

METHODS = {
    "pbt": ("pbt_rl_truct.py", []),
    "pbt-wta": ("pbt_rl_wta.py", []),
    "pb2": ("pbt_rl_truct.py", ["--explore", "pb2"]),
    "random": ("pbt_rl_truct.py", ["--strategy", "none"]),
    "single": ("pbt_rl_truct.py", ["--strategy", "none", "--num-agents", "1", "--initial-hparams", "defaults"]),
}
ENVS = ("CartPole-v1", "Acrobot-v1")


@dataclass(frozen=True)
class Job:
    env_id: str
    method: str
    seed: int
    ranks: int
    command: tuple[str, ...]
    run_dir: Path

    @property
    def name(self) -> str:
        return f"{self.env_id} {self.method} seed {self.seed}"


@dataclass
class Result:
    """One run's numbers, from its population.csv (``curve``: total env steps, best score)."""

    env_id: str
    method: str
    seed: int
    members: int
    final_best: float
    final_median: float
    steps_to_threshold: int | None
    wall_s: float
    curve: list[tuple[int, float]]


def reward_threshold(env_id: str) -> float | None:
    """The env's own "solved" score, from its gymnasium registration."""
    import gymnasium

    return gymnasium.spec(env_id).reward_threshold


def jobs_for(args: argparse.Namespace, runs: Path) -> list[Job]:
    jobs = []
    for seed in args.seeds:  # seed outermost: an interrupted study still has every method
        for env_id in args.envs:
            for method in args.methods:
                script, extra = METHODS[method]
                single = method == "single"
                ranks = 1 if single else args.ranks
                flags = [
                    "--env-id",
                    env_id,
                    "--total-generations",
                    str(args.generations),
                    "--agent-training-steps",
                    str(args.steps),
                    "--eval-episodes",
                    str(args.eval_episodes),
                    "--select-on",
                    "test",
                    "--seed",
                    str(seed),
                    *([] if single else ["--num-agents", str(args.members)]),
                    *extra,
                ]
                run_dir = runs / env_id / f"{method}-seed{seed}"
                jobs.append(Job(env_id, method, seed, ranks, (script, *flags, "--run-dir", str(run_dir)), run_dir))
    return jobs


def is_finished(job: Job, generations: int) -> bool:
    try:
        history = load_run(job.run_dir)
    except Exception:
        return False
    return max(history.generations) >= generations and (job.run_dir / "wall_s").is_file()


@dataclass
class Running:
    process: subprocess.Popen
    log: object
    started: float


def start(job: Job, mpiexec: str, logs: Path) -> Running:
    """Launch one run (resumed if a checkpoint of it exists, else from scratch)."""
    command = list(job.command)
    if job.run_dir.exists():
        if any((job.run_dir / "checkpoints").glob("gen_*/manifest.json")):
            command.append("--resume")
        else:
            shutil.rmtree(job.run_dir)  # stopped before its first checkpoint: nothing to keep
    logs.mkdir(parents=True, exist_ok=True)
    log = (logs / f"{job.env_id}-{job.method}-seed{job.seed}.log").open("a")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    argv = [mpiexec, "-n", str(job.ranks), "--oversubscribe", sys.executable, *command]
    process = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    return Running(process, log, time.perf_counter())


def run_all(jobs: list[Job], cores: int, mpiexec: str, logs: Path, generations: int) -> list[str]:
    """Run the unfinished jobs, at most ``cores`` ranks at a time; returns the failures."""
    pending = [job for job in jobs if not is_finished(job, generations)]
    done = len(jobs) - len(pending)
    if done:
        print(f"{done} of {len(jobs)} runs already finished; running the other {len(pending)}", flush=True)
    running: dict[Job, Running] = {}
    failures = []
    try:
        _loop(pending, running, failures, done, len(jobs), cores, mpiexec, logs)
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


def _loop(pending, running, failures, done, total, cores, mpiexec, logs) -> None:
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
            result = summarise(job, reward_threshold(job.env_id))
            print(
                f"[{done}/{total}] {job.name}: best {result.final_best:.1f}, median {result.final_median:.1f}, "
                f"{wall:.0f} s",
                flush=True,
            )


def summarise(job: Job, threshold: float | None) -> Result:
    """The numbers of one finished run."""
    history = load_run(job.run_dir)
    members = len(history.members)
    curve, reached = [], None
    for generation in history.generations:
        rows = [history.row(generation, m) for m in history.members if history.has(generation, m)]
        scores = [row.score for row in rows if row.score == row.score]
        total = sum(row.env_steps for row in rows)
        best = max(scores) if scores else float("nan")
        curve.append((total, best))
        if reached is None and threshold is not None and best >= threshold:
            reached = total
    last = [history.row(history.generations[-1], m).score for m in history.members]
    wall_file = job.run_dir / "wall_s"
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
    )


def _mean_std(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def table(results: list[Result], envs, methods) -> str:
    """The markdown table, one row per env and method (mean ± std over seeds)."""
    lines = [
        "| env | method | members | seeds | final best | final median | total env steps to threshold "
        "(median of the seeds that reached it) | reached | wall time (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for env_id in envs:
        threshold = reward_threshold(env_id)
        label = env_id if threshold is None else f"{env_id} (≥ {threshold:g})"
        for method in methods:
            rows = [r for r in results if r.env_id == env_id and r.method == method]
            if not rows:
                continue
            reached = [r.steps_to_threshold for r in rows if r.steps_to_threshold is not None]
            steps = f"{statistics.median(reached):,.0f}" if reached else "—"
            lines.append(
                f"| {label} | {method} | {rows[0].members} | {len(rows)} | "
                f"{_mean_std([r.final_best for r in rows])} | {_mean_std([r.final_median for r in rows])} | "
                f"{steps} | {len(reached)}/{len(rows)} | {statistics.mean(r.wall_s for r in rows):.0f} |"
            )
    return "\n".join(lines) + "\n"


def plot(results: list[Result], envs, methods, path: Path) -> None:
    """Best score vs the population's total env steps: mean over seeds, min–max band."""
    import numpy as np

    from evo.plot import DPI, plt  # matplotlib, headless

    figure, axes = plt.subplots(1, len(envs), figsize=(6.5 * len(envs), 4.5), squeeze=False)
    colours = dict(zip(METHODS, plt.get_cmap("tab10").colors, strict=False))
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
        threshold = reward_threshold(env_id)
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
    parser.add_argument("--envs", nargs="+", default=list(ENVS), help="gymnasium ids")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--members", type=int, default=4, help="population size of the PBT, PB2 and random runs")
    parser.add_argument("--ranks", type=int, default=2, help="MPI ranks per population run")
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--steps", type=int, default=4096, help="env steps per member per generation")
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "compare", help="where runs and results go")
    parser.add_argument("--cores", type=int, default=available_cores(), help="ranks running at once")
    parser.add_argument("--report-only", action="store_true", help="only rebuild the table and plot")
    args = parser.parse_args(argv)
    problems = []
    for env_id in args.envs:
        try:
            reward_threshold(env_id)
        except Exception as error:
            problems.append(f"--envs {env_id}: not a gymnasium id ({error})")
    if args.members < 2 or args.members % args.ranks:
        problems.append(f"--members {args.members}: use a multiple of --ranks {args.ranks}, at least 2")
    for flag in ("ranks", "generations", "steps", "eval_episodes", "cores"):
        if getattr(args, flag) < 1:
            problems.append(f"--{flag.replace('_', '-')} {getattr(args, flag)}: must be at least 1")
    if problems:
        parser.error("; ".join(problems))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    runs = args.out / "runs"
    jobs = jobs_for(args, runs)
    failures = []
    if not args.report_only:
        mpiexec = find_mpiexec()
        if mpiexec is None:
            print("compare: error: no mpiexec found; `make install` puts one in .venv/bin", file=sys.stderr)
            return 2
        problems = launch_problems(args.ranks, True, os.environ, os.getuid(), args.cores, is_open_mpi(mpiexec))
        if problems:
            print("compare: error: cannot start MPI:\n  - " + "\n  - ".join(problems), file=sys.stderr)
            return 2
        print(
            f"{len(jobs)} runs: {', '.join(args.methods)} on {', '.join(args.envs)}, seeds {args.seeds}; "
            f"{args.generations} generations x {args.steps} env steps per member; runs in {runs}",
            flush=True,
        )
        started = time.perf_counter()
        signal.signal(signal.SIGTERM, _interrupt)  # like Ctrl-C: stop the runs, keep what is done
        try:
            failures = run_all(jobs, args.cores, mpiexec, args.out / "logs", args.generations)
        except KeyboardInterrupt:
            return 130
        print(f"all runs done in {time.perf_counter() - started:.0f} s", flush=True)
    results = [summarise(job, reward_threshold(job.env_id)) for job in jobs if is_finished(job, args.generations)]
    if not results:
        print("compare: no finished runs to report", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")
    markdown = table(results, args.envs, args.methods)
    (args.out / "results.md").write_text(markdown)
    plot(results, args.envs, args.methods, args.out / "compare.png")
    print(markdown)
    print(f"wrote {args.out / 'results.md'}, {args.out / 'results.json'} and {args.out / 'compare.png'}")
    if failures:
        print("failed runs:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
