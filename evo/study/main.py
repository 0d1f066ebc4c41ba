"""``evo-study STUDY.yml``: run a study (or continue it), list its runs for a SLURM array, or report.

    evo-study experiments/studies/horizon.yml              # run what is missing, then report
    evo-study my-study.yml --list                          # index, ranks and command of every run (to paste)
    evo-study my-study.yml --job $SLURM_ARRAY_TASK_ID      # one run (of a SLURM array)
    evo-study my-study.yml --report-only                   # the report from the finished runs
    evo-study my-study.yml --report-only --runs other/runs # ... of runs kept elsewhere (same layout)

A bare name (``horizon``) is a built-in study file, ``experiments/studies/<name>.yml`` of a checkout.
The report goes to the study's ``out`` folder: ``results.md`` (the verdict and every table),
``results.json`` (one record per run), ``report.json`` (every number of the report: the
re-evaluated points, the comparisons and verdicts, the floors, the time), ``compare.png`` and, with
fresh episodes, ``anytime.png``. Exit status: 0, 1 when a run failed or nothing is finished to
report, 2 on a study that cannot run (every problem listed with its fix), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from evo.study.jobs import CHECKOUT, Job, has_result, is_finished, jobs_for, listing, mismatch
from evo.study.spec import Study, StudyError, load_study, with_overrides

logger = logging.getLogger(__name__)

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
BUILT_IN = CHECKOUT / "experiments" / "studies"
PACKAGE = Path(__file__).resolve().parent.parent
"""evo's code, whose modules the report loads only when the runs are done (hours later, perhaps after a
``git pull``)."""


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evo-study",
        description="Did PBT help on your task? Run a study file's methods over seeds on the same budget, "
        "re-evaluate the selected agents on fresh episodes and report paired comparisons.",
        epilog="The study file's format, every key: docs/studies.md; what the report holds: docs/results.md.",
    )
    parser.add_argument("study", help="a study file (YAML), or a built-in study's name (experiments/studies/)")
    what = parser.add_argument_group("what to do (default: run what is missing, then report)")
    what.add_argument(
        "--list", action="store_true", help="print the runs (index, ranks, a command to paste: cd, mpiexec) and exit"
    )
    what.add_argument("--job", type=int, help="run only run N of --list (a SLURM array's task), no report")
    what.add_argument("--report-only", action="store_true", help="only build the report from the finished runs")
    where = parser.add_argument_group("where")
    where.add_argument("--out", type=Path, help="the study's folder (default: the file's out)")
    where.add_argument("--runs", type=Path, help="read and write the runs here (default: OUT/runs, or runs_in's)")
    where.add_argument("--cores", type=int, help="ranks running at once (default: the cores this process may use)")
    change = parser.add_argument_group("a smaller or other study (default: the file's)")
    change.add_argument("--envs", nargs="+", help="only these of its envs")
    change.add_argument("--methods", nargs="+", help="only these of its methods")
    change.add_argument("--seeds", nargs="+", type=int, help="these seeds")
    change.add_argument("--members", type=int, help="population size of the population methods")
    change.add_argument("--ranks", type=int, help="MPI ranks per population run")
    change.add_argument("--generations", type=int, help="generations, for every env")
    change.add_argument("--steps", type=int, help="env steps per member and generation, for every env")
    change.add_argument("--eval-episodes", type=int, help="selection episodes per member and generation")
    return parser


def study_file(name: str) -> Path:
    """The file ``name`` names: a path, else a built-in study of that name."""
    path = Path(name)
    if path.suffix in (".yml", ".yaml") or path.exists():
        return path
    built_in = BUILT_IN / f"{name}.yml"
    return built_in if built_in.is_file() else path


def built_in_names() -> list[str]:
    return sorted(path.stem for path in BUILT_IN.glob("*.yml")) if BUILT_IN.is_dir() else []


def load(args: argparse.Namespace) -> Study:
    """The study file with the command line's changes; StudyError lists every problem."""
    path = study_file(args.study)
    if not path.exists():  # one that is not a file (a folder, /dev/zero) is refused saying what it is
        known = built_in_names()
        raise StudyError(
            [f"no such study file; give a path to a YAML file{' or one of ' + ', '.join(known) if known else ''}"],
            args.study,
        )
    study = load_study(path)
    study = with_overrides(
        study, args.envs, args.methods, args.seeds, args.members, args.ranks, args.generations, args.steps,
        args.eval_episodes, args.out,
    )  # fmt: skip
    study = replace(study, out=study.out.absolute(), runs_in=study.runs_in.absolute() if study.runs_in else None)
    problems = env_problems(study)
    if args.cores is not None and args.cores < 1:
        problems.append(f"--cores {args.cores}: must be at least 1")
    if problems:
        raise StudyError(problems, str(path))
    return study


def env_problems(study: Study) -> list[str]:
    """Envs that cannot be made here (an unknown id, a module that does not import, a missing extra)."""
    from evo.config.envnames import unknown_env_message

    found = []
    for env_id in study.envs:
        message = unknown_env_message(env_id)
        if message is not None:
            found.append(f"envs: {message.removeprefix('--env-id ')}")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if "" not in sys.path and str(Path.cwd()) not in sys.path:  # the evo-study command, not python -m:
        sys.path.insert(0, str(Path.cwd()))  # a module:Env of this folder imports here, as in the runs
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        study = load(args)
    except StudyError as error:
        print(f"evo-study: error: {error.listed()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    runs = args.runs if args.runs is not None else study.runs
    jobs = jobs_for(study, runs)
    if args.job is not None and not 0 <= args.job < len(jobs):
        print(f"evo-study: error: --job {args.job}: this study has runs 0 to {len(jobs) - 1} (see --list)",
              file=sys.stderr)  # fmt: skip
        return EXIT_BAD_INPUT
    if args.list:
        from evo.launch import find_mpiexec

        sys.stdout.write(listing(jobs, Path.cwd(), find_mpiexec()))
        return 0
    foreign = {job.name: found for job in jobs if (found := mismatch(job))}
    if foreign and not args.report_only:
        lines = [f"{job}: {', '.join(found)}" for job, found in foreign.items()]
        print("evo-study: error: these run directories hold runs made with other settings; move them away or "
              "restore the study:\n  - " + "\n  - ".join(lines), file=sys.stderr)  # fmt: skip
        return EXIT_BAD_INPUT
    failures: list[str] = []
    if not args.report_only:
        code = code_on_disk(PACKAGE)
        outcome = run(study, [jobs[args.job]] if args.job is not None else jobs, args.cores, args.job is None)
        if isinstance(outcome, int):
            return outcome
        failures = outcome
        if args.job is not None:
            return 1 if failures else 0
        if code_on_disk(PACKAGE) != code:  # half its modules loaded, the rest changed: report with the new code
            print("evo's code changed while the runs trained; the report is made by a new process with it",
                  flush=True)  # fmt: skip
            argv = list(sys.argv[1:] if argv is None else argv)
            status = subprocess.run([sys.executable, "-m", "evo.study", *argv, "--report-only"]).returncode
            return report_status(status != 0, failures)
    from evo.study.reporting import write_report

    if any(has_result(job) for job in jobs) and (problem := out_problem(study.out)) is not None:
        print(f"evo-study: error: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not write_report(study, jobs, foreign):
        print("evo-study: no finished runs to report", file=sys.stderr)
        return 1
    return report_status(False, failures)


def out_problem(out: Path) -> str | None:
    """Make the study's folder (its runs' logs, launches and report go there) before a run starts or a
    report is made: None, or why it cannot be made, with the fix."""
    fix = "give an --out (or the study file's out:) where you may create a folder"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        return f"out {out}: is a file, not a folder; {fix}"
    except OSError as error:
        return f"out {out}: cannot create the study's folder ({error.strerror or error}); {fix}"
    if not os.access(out, os.W_OK | os.X_OK):
        return f"out {out}: the study's folder is not writable; {fix}"
    return None


def report_status(report_failed: bool, failures: Sequence[str]) -> int:
    """The exit status once the report is made (or not): 1 when it failed or a run failed (named)."""
    if failures:
        print("failed runs:\n  " + "\n  ".join(failures), file=sys.stderr)
    return 1 if report_failed or failures else 0


def code_on_disk(package: Path) -> list[tuple[str, int, int]]:
    """Every module of ``package`` as it is on disk: its path, size and modification time."""
    found = []
    for path in package.rglob("*.py"):
        try:
            stat = path.stat()
        except FileNotFoundError:  # removed while this looked (a checkout under way): not there
            continue
        found.append((str(path.relative_to(package)), stat.st_size, stat.st_mtime_ns))
    return sorted(found)


def run(study: Study, jobs: list[Job], cores: int | None, whole: bool = True) -> int | list[str]:
    """Run the jobs that are not finished: the failures, or an exit status. The ``whole`` study's runs are
    run under the study's lock (one ``--job`` of a SLURM array runs beside the others, without it)."""
    from evo.launch import available_cores, find_mpiexec, is_open_mpi, launch_problems
    from evo.study.jobs import zoo_python
    from evo.study.running import StudyBusy, run_all, study_lock

    cores = cores or available_cores()
    mpiexec = find_mpiexec()
    if mpiexec is None:
        print("evo-study: error: no mpiexec found; `make install` puts one in .venv/bin", file=sys.stderr)
        return EXIT_BAD_INPUT
    problems = launch_problems(study.ranks, True, os.environ, os.getuid(), cores, is_open_mpi(mpiexec))
    problems += config_problems([job for job in jobs if not is_finished(job)])
    if any(not job.mpi for job in jobs if not is_finished(job)) and not zoo_python().is_file():
        problems.append(f"no {zoo_python()} for the rl_zoo3 cross-check; `make zoo-venv` builds it")
    if not problems and (problem := out_problem(study.out)) is not None:  # made only for a study that can run
        problems.append(problem)
    if problems:
        print("evo-study: error: cannot start the runs:\n  - " + "\n  - ".join(problems), file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        lock = study_lock(study.out) if whole else None
    except StudyBusy as busy:
        print(f"evo-study: error: {busy}", file=sys.stderr)
        return EXIT_BAD_INPUT
    budgets = ", ".join(f"{env} {b.generations} x {b.steps}" for env, b in study.budgets.items() if env in study.envs)
    print(
        f"{study.name}: {len(jobs)} runs: {', '.join(study.methods)} on {', '.join(study.envs)}, seeds "
        f"{list(study.seeds)}; generations x env steps per member: {budgets}; runs in {jobs[0].run_dir.parent.parent}",
        flush=True,
    )
    started = time.perf_counter()
    try:
        failures = run_all(jobs, cores, mpiexec, study.out, Path.cwd(), _done_line)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        if lock is not None:
            lock.release()
    print(f"all runs done in {time.perf_counter() - started:.0f} s", flush=True)
    return failures


def config_problems(jobs: Sequence[Job]) -> list[str]:
    """What evo would refuse in the runs' flags, checked before any run starts (one run per env and
    method: the seeds change only --seed and --run-dir)."""
    from evo.config import ConfigError, parse_config
    from evo.study.spec import ENTRIES

    found, seen = [], set()
    for job in [job for job in jobs if job.mpi]:
        if (job.env_id, job.method) in seen:
            continue
        seen.add((job.env_id, job.method))
        strategy, transport = ENTRIES[job.command[0]]
        try:
            parse_config(list(job.command[1:]), strategy=strategy, transport=transport, world_size=job.ranks,
                         prog=job.command[0], check_run_dir=False)  # fmt: skip
        except ConfigError as error:
            found += [f"{job.env_id} {job.method}: {problem}" for problem in error.problems]
        except SystemExit:
            found.append(f"{job.env_id} {job.method}: its flags are not {job.command[0]}'s (its message above)")
    return found


def _done_line(job: Job, wall: float) -> str:
    """What a finished run found (its selection scores)."""
    from evo.study.records import summarise

    if not has_result(job):
        return f"done, {wall:.0f} s"
    result = summarise(job, None)
    if math.isnan(result.final_best):
        return f"fresh mean {result.fresh_selected:.1f}, {wall:.0f} s"
    return f"best {result.final_best:.1f}, median {result.final_median:.1f}, {wall:.0f} s"
