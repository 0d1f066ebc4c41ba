"""The study's report from its finished runs: each run's fresh returns made (or read from their
caches), its numbers gathered, the floors played, and the files written (``results.md``,
``results.json``, ``report.json``, ``compare.png``, ``anytime.png``)."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from evo.rundir.checkpoint import atomic_write
from evo.rundir.jsontext import dumps
from evo.study import report
from evo.study.fresh import FreshReturns, NoFloors, floors, floors_path, reevaluated
from evo.study.jobs import Job, has_result
from evo.study.records import (
    Run,
    points,
    reward_threshold,
    stage_generations,
    summarise,
    timing,
    zoo_points,
    zoo_result,
)
from evo.study.report import FloorValues
from evo.study.running import read_launches
from evo.study.spec import Study, flag_value

logger = logging.getLogger(__name__)


def deterministic(study: Study, env_id: str) -> bool:
    """Whether the study's fresh episodes play the env with the most likely action (evo-evaluate's rule)."""
    from evo.tools.evaluate import deterministic_actions

    return deterministic_actions(study.fresh.actions if study.fresh else "deterministic", env_id)


def levels(study: Study, env_id: str) -> tuple[int, int] | None:
    """The fresh episodes' levels: the study's, for a Procgen game."""
    from evo.config.envnames import procgen_game

    return study.fresh.levels if study.fresh and procgen_game(env_id) else None


def fresh_returns(study: Study, job: Job, stages: Sequence[tuple[int, int]] = ()) -> dict[int, FreshReturns]:
    """The run's fresh returns at each fraction of the study, and at both ends of each of its BG-PBT
    ``stages`` (:func:`evo.study.records.stage_generations`), by generation (made where not cached; a
    checkpoint that cannot be played, one not kept included, is left out with a warning)."""
    from evo.tools.saved import SavedRunError

    found = {}
    if study.fresh is None:
        return found
    wanted = {round(fraction * job.generations) for fraction in study.fresh.at}
    for generation in sorted(wanted | {g for stage in stages for g in stage}):
        checkpoint = None if generation == job.generations else generation
        try:
            found[generation] = reevaluated(
                job.run_dir, study.fresh.episodes, levels(study, job.env_id), deterministic(study, job.env_id),
                checkpoint, job.seed,
            )  # fmt: skip
        except SavedRunError as error:
            logger.warning("%s: no fresh returns at generation %d: %s", job.name, generation, error)
    return found


def collect(study: Study, job: Job, threshold: float | None) -> Run:
    """Everything the report needs of one finished run."""
    from evo.rundir.history import load_run

    if not job.mpi:
        return Run(job, zoo_result(job), zoo_points(job), timing(job))
    history = load_run(job.run_dir)
    fresh = fresh_returns(study, job, stage_generations(history))
    result = summarise(job, threshold, fresh)
    fractions = study.fresh.at if study.fresh else ()
    measure = "return" if history.objective.default else history.objective.terms[0].text
    return Run(job, result, points(job, history, fresh, fractions), timing(job), measure)


def wants_floors(study: Study, env_id: str) -> bool:
    from evo.config.envnames import procgen_game

    if study.fresh is None:
        return False
    return study.fresh.floors if study.fresh.floors is not None else procgen_game(env_id) is not None


def collect_floors(study: Study, runs: Sequence[Run]) -> dict[str, dict[int, FloorValues]]:
    """``{env: {seed: floors}}`` for every env that has floors, on each seed's fresh episodes (an env whose
    action space has none: left out, with a warning; the report is written without them)."""
    found: dict[str, dict[int, FloorValues]] = {}
    for env_id in [env for env in study.envs if wants_floors(study, env)]:
        for run in runs:
            if run.job.env_id != env_id or not run.job.mpi or run.job.seed in found.get(env_id, {}):
                continue
            path = floors_path(study.out, env_id, run.job.seed)
            try:
                played = floors(run.job.run_dir, study.fresh.episodes, levels(study, env_id), path)
            except NoFloors as none:
                logger.warning("%s", none)
                break
            found.setdefault(env_id, {})[run.job.seed] = report.floor_values(played.random, played.constant)
    return found


def selection_actions(runs: Sequence[Run]) -> str:
    """A line naming how the runs' selection episodes chose their actions (``--eval-actions`` in their
    commands; '' where no run played selection episodes)."""
    by_kind: dict[str, list[str]] = {}
    for run in runs:
        if not run.job.mpi or not run.job.eval_episodes:
            continue
        kind = flag_value(run.job.command, "--eval-actions") or "deterministic"
        if run.job.method not in by_kind.setdefault(kind, []):
            by_kind[kind].append(run.job.method)
    words = {
        "deterministic": "the policy's most likely action (argmax, or the mean; `--eval-actions deterministic`)",
        "sampled": "actions sampled from the policy (`--eval-actions sampled`)",
    }
    if len(by_kind) == 1:
        return f"The selection episodes played {words[next(iter(by_kind))]}.\n"
    return "".join(
        f"The selection episodes of {', '.join(methods)} played {words[kind]}.\n" for kind, methods in by_kind.items()
    )


def markdown(study: Study, runs: Sequence[Run], floor_values, thresholds, foreign: Mapping) -> str:
    """results.md: the verdicts first, then every table."""
    results = [r.result for r in runs]
    methods = list(study.methods)
    fresh = study.fresh is not None
    text = f"# {study.name}\n\n"
    planned = len(study.seeds)
    if study.comparisons:
        text += "Declared comparisons:\n\n" + report.verdicts(runs, study.judged, study.primary, planned, fresh)
        text += "\n"
    if foreign:
        text += (
            "**Runs made with other settings than the study's** (reported anyway): "
            + "; ".join(f"{job}: {', '.join(found)}" for job, found in foreign.items())
            + "\n\n"
        )
    text += report.table(results, study.envs, methods, thresholds)
    text += "\n" + report.comparisons(results, study.envs, methods, study.reference)
    text += selection_actions(runs)
    if fresh:
        envs = [env for env in study.envs if any(r.env_id == env for r in results)]
        for env_id in envs:  # one fresh table per way of playing (Procgen samples, the rest not)
            text += "\n" + report.fresh_table(
                results, [env_id], methods, study.reference, study.fresh.episodes, levels(study, env_id),
                deterministic(study, env_id), floor_values,
            )  # fmt: skip
        text += "\nAt each re-evaluated point, by the total env steps all members had used then:\n\n"
        text += report.anytime_table(runs, study.envs, methods)
        text += "\nSelection bias of the selected member (its selection score minus its fresh score):\n\n"
        text += report.selection_bias_table(runs, study.envs, methods)
    if study.comparisons:
        text += "\nThe declared comparisons seed by seed:\n\n" + report.per_seed_table(runs, study.judged, fresh)
    if floor_values and (above := report.floor_table(runs, floor_values)):
        text += "\nAbove the floor (the higher of the uniform-random policy and the best constant action):\n\n"
        text += report.floor_summary(runs, floor_values, study.envs, methods) + "\n" + above
    if stages := report.stages_table(results):
        text += "\n" + stages
    text += "\n" + report.timing_text(runs, read_launches(study.out))
    return text


def measure_words(runs: Sequence[Run], env_id: str, comparison, fresh: bool) -> str | None:
    """report.json's ``measure`` of a comparison: ``fresh`` (returns), ``fresh <term>`` (the runs' own
    objective), ``selection score``, or None where the two sides' runs measure different things."""
    if not fresh:
        return "selection score"
    measure = report.measure_of(runs, env_id, comparison)
    return None if measure is None else "fresh" if measure == "return" else f"fresh {measure}"


def report_json(study: Study, runs: Sequence[Run], floor_values, foreign: Mapping) -> dict:
    """Every number of the report, for plots and for docs that quote it."""
    fresh = study.fresh is not None
    comparisons = []
    labelled = report.several_envs(study.judged)
    for comparison, env_id in study.judged:
        family = report.family_size(comparison, study.primary, study.judged)
        pair = report.compared(runs, env_id, comparison, fresh)
        correction = None
        if family > 1 and pair.n > 1:
            confidence, low, high = report.corrected(pair, family)
            correction = {"comparisons": family, "confidence": confidence, "low": low, "high": high}
        comparisons.append(
            {
                "env_id": env_id, "a": comparison.a, "b": comparison.b, "at": comparison.at,
                "primary": comparison == study.primary, "measure": measure_words(runs, env_id, comparison, fresh),
                "seeds": pair.seeds, "differences": pair.differences, "mean": pair.mean, "low": pair.low,
                "high": pair.high, "wins": pair.wins, "losses": pair.losses, "p_sign_flip": pair.p,
                "correction": correction,
                "verdict": report.verdict(
                    comparison, pair, len(study.seeds), fresh, env_id if labelled else "", family,
                    report.measure_of(runs, env_id, comparison),
                ),
            }
        )  # fmt: skip
    return {
        "study": study.name,
        "source": where_ran(study.source),
        "seeds_planned": list(study.seeds),
        "actions": {env: "deterministic" if deterministic(study, env) else "sampled" for env in study.envs}
        if fresh
        else None,
        "comparisons": comparisons,
        "points": [
            {"env_id": r.job.env_id, "method": r.job.method, "seed": r.job.seed, **_point(p)}
            for r in runs
            for p in r.points
        ],
        "floors": {env: {str(seed): value for seed, value in by_seed.items()} for env, by_seed in floor_values.items()},
        "timing": [
            {"env_id": r.job.env_id, "method": r.job.method, "seed": r.job.seed, **vars(r.timing)} for r in runs
        ],
        "launches": read_launches(study.out),
        "other_settings": dict(foreign),
    }


def where_ran(source: Path | None) -> str | None:
    """The study file as report.json names it: relative to the folder evo-study ran in (``../x.yml`` where it
    lies outside), never the machine's absolute path."""
    if source is None:
        return None
    return Path(os.path.relpath(Path(source).absolute(), Path.cwd())).as_posix()


def _point(point) -> dict:
    return {
        "fraction": point.fraction, "generation": point.generation, "total_env_steps": point.total_env_steps,
        "selected_member": point.selected_member, "selection_score": point.selection_score,
        "selected": point.selected, "selected_se": point.selected_se, "selection_bias": point.selection_bias,
        "median": point.median, "median_uncopied": point.median_uncopied, "copied": list(point.copied),
        "members": {str(m): v for m, v in point.members.items()},
    }  # fmt: skip


def results_json(runs: Sequence[Run]) -> bytes:
    """results.json's bytes: each run's record (its stages' where any run has them)."""
    with_stages = any(run.result.stages for run in runs)
    return (dumps([run.result.record(with_stages) for run in runs], indent=1) + "\n").encode()


def write_report(study: Study, jobs: Sequence[Job], foreign: Mapping | None = None) -> list[Run]:
    """The report of the finished runs (none finished: nothing written, an empty list)."""
    from evo.study.plot import plot, plot_anytime

    finished = [job for job in jobs if has_result(job)]
    if not finished:
        return []
    thresholds = {env: reward_threshold(env, study.thresholds) for env in study.envs}
    runs = [collect(study, job, thresholds[job.env_id]) for job in finished]
    floor_values = collect_floors(study, runs)
    out = Path(study.out)
    out.mkdir(parents=True, exist_ok=True)
    results = [run.result for run in runs]
    atomic_write(out / "results.json", results_json(runs))
    text = markdown(study, runs, floor_values, thresholds, foreign or {})
    atomic_write(out / "results.md", text.encode())
    dump(out / "report.json", report_json(study, runs, floor_values, foreign or {}))
    plot(results, study.envs, list(study.methods), out / "compare.png", thresholds)
    written = ["results.md", "results.json", "report.json", "compare.png"]
    if study.fresh is not None:
        lines = {
            env: {"uniform-random policy": _mean(v, "random"), "best constant action": _mean(v, "constant")}
            for env, v in floor_values.items()
        }
        plot_anytime(runs, study.envs, list(study.methods), out / "anytime.png", lines)
        written.append("anytime.png")
    print(text)
    print("wrote " + ", ".join(str(out / name) for name in written))
    return runs


def _mean(by_seed: Mapping[int, FloorValues], field: str) -> float:
    values = [getattr(v, field) for v in by_seed.values() if getattr(v, field) is not None]
    return sum(values) / len(values) if values else math.nan


def to_json(value):
    """``report.json``'s values: dataclasses as dicts, NaN as null."""
    if hasattr(value, "__dataclass_fields__"):
        return to_json(asdict(value))
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dump(path: Path, value) -> None:
    atomic_write(path, (dumps(to_json(value), indent=1) + "\n").encode())
