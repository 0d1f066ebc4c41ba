"""One run's numbers, from its records: population.csv (the best-score curve over the population's
total env steps, the final best and median), lineage.jsonl (ties, copies, BG-PBT's stages, who was
copied in a generation), generations.csv and ``wall_s`` (its time), and its cached fresh returns
(evo/study/fresh.py). Reads files only; the re-evaluation itself is the caller's.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from evo.core.objective import Objective, outcomes_of
from evo.rundir.history import RunHistory, copies_by_generation, load_run
from evo.study.fresh import FreshReturns
from evo.study.jobs import WALL, ZOO_RESULT, Job
from evo.study.stats import area_under_curve, standard_error, t_interval


@dataclass
class Result:
    """One run's numbers as ``results.json`` keeps them (one record per run; the first studies' fields,
    in their order). ``curve``: (the population's total env steps, its best selection score) after
    each generation; ``ties``: recipients whose score equalled their donor's; ``copies``: weight copies."""

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
    equal_total: float = math.nan
    """The best score when the population had used one agent's total env steps."""
    # with the study's fresh episodes: the mean returns there, at the end of the budget, of
    fresh_selected: float = math.nan  # the member the last selection score ranks first
    fresh_median: float = math.nan  # the median member of the last checkpoint
    fresh_best_ever: float = math.nan  # the kept best: the final pick (--final-eval), else the highest selection score
    fresh_selected_member: int = -1
    fresh_best_ever_member: int = -1
    stages: list[dict] = field(default_factory=list)
    """A run with ``--max-distillations``: :func:`stage_facts`."""

    def record(self, with_stages: bool) -> dict:
        """The record in results.json (``stages`` only in a study where some run has stages)."""
        record = asdict(self)
        if not with_stages:
            del record["stages"]
        return record


@dataclass(frozen=True)
class Point:
    """A run re-evaluated at fraction ``fraction`` of its budget (generation ``generation``): the member
    that generation's selection scores rank first, its selection score and fresh mean (with the
    standard error over its episodes), and the population's median fresh mean with and without the
    members whose weights were copied at the end of that generation (untrained copies of a top member,
    which the checkpoint holds)."""

    fraction: float
    generation: int
    total_env_steps: int
    selected_member: int
    selection_score: float
    selected: float
    selected_se: float
    median: float
    median_uncopied: float
    copied: tuple[int, ...] = ()
    members: Mapping[int, float] = field(default_factory=dict)
    returns: tuple[float, ...] = ()
    """The selected member's fresh returns, episode by episode."""
    digest: str | None = None
    """The selected member's weights digest (evo.rundir.checkpoint.member_digest; None: not recorded)."""
    tied: tuple[int, ...] = ()
    """The other members whose selection score equals the selected member's (:func:`selection_tie`): the
    selection rests on a tie, which the report says (not in results.json, which stays as committed)."""

    @property
    def selection_bias(self) -> float:
        """Selection score minus fresh score of the selected member."""
        return self.selection_score - self.selected


@dataclass(frozen=True)
class Timing:
    """A run's time from its records: ``wall_s`` (the study's measure of its launches) and the sum of
    generations.csv's generation times (training, scoring and exchange, every resume included)."""

    wall_s: float
    generations_s: float
    ranks: int


@dataclass
class Run:
    """Everything the report knows of one run."""

    job: Job
    result: Result
    points: list[Point]
    timing: Timing
    measure: str = "return"
    """What its fresh numbers and its selection scores measure: ``return``, or the first term of the run's own
    objective (``--objective``, e.g. ``info:success``; larger better), like minus like (:func:`fresh_values`)."""


def reward_threshold(env_id: str, thresholds: Mapping[str, float]) -> float | None:
    """The study's threshold for the env, else its gymnasium registration's (None if it has none)."""
    import gymnasium

    from evo.config.envnames import procgen_game, unknown_env_message

    if env_id in thresholds:
        return thresholds[env_id]
    if procgen_game(env_id):
        return None
    unknown_env_message(env_id)  # imports a module:Env id's module, which registers the env
    return gymnasium.spec(env_id.split(":", 1)[-1]).reward_threshold


def fresh_values(returns: FreshReturns, member: int, objective: Objective) -> list[float]:
    """``member``'s fresh numbers on what its run selected by, like its selection score: each fresh episode's
    return for a run of the return; with ``--objective``, the first term's value at each episode's end, larger
    better (negated for a ``min`` term), the finite ones (evo.core.objective.outcomes_of)."""
    if objective.default:
        return list(returns.members[member])
    return list(outcomes_of(objective, returns.members[member], returns.objectives.get(member, {})))


def mean_or_nan(values: Sequence[float]) -> float:
    return float(statistics.mean(values)) if values else math.nan


def summarise(job: Job, threshold: float | None, fresh: Mapping[int, FreshReturns] | None = None) -> Result:
    """The numbers of one finished run; ``fresh``: its cached fresh returns by generation (the last's
    give the fresh fields, on the run's objective: :func:`fresh_values`; the kept best's only for a run of the
    return, since its cache keeps returns alone)."""
    if not job.mpi:
        return zoo_result(job)
    history = load_run(job.run_dir)
    objective = history.objective
    last_generation = history.generations[-1]
    final_members = [m for m in history.members if history.has(last_generation, m)]
    members = len(final_members)  # a run with stages also has its students' rows
    curve, reached = best_curve(history, threshold)
    last = [history.row(last_generation, m).score for m in final_members]
    ties, copies = lineage_counts(history.lineage)
    tested = {}
    if fresh and last_generation in fresh:
        returns = fresh[last_generation]
        selected = selected_member(history, last_generation)
        means = [mean_or_nan(fresh_values(returns, m, objective)) for m in sorted(returns.members)]
        tested = {
            "fresh_selected": mean_or_nan(fresh_values(returns, selected, objective)),
            "fresh_median": statistics.median(means),
            "fresh_selected_member": selected,
        }
        picked = final_pick_member(job.run_dir, history, last_generation, returns)
        if picked is not None:  # --final-eval: the kept best is the final pick, played with the others
            tested["fresh_best_ever"] = mean_or_nan(fresh_values(returns, picked, objective))
            tested["fresh_best_ever_member"] = picked
        elif returns.best_ever is not None and objective.default:
            tested["fresh_best_ever"] = statistics.mean(returns.best_ever)
            tested["fresh_best_ever_member"] = returns.best_ever_member
    return Result(
        job.env_id,
        job.method,
        job.seed,
        members,
        final_best=max(last),
        final_median=statistics.median(last),
        steps_to_threshold=reached,
        wall_s=read_wall(job),
        curve=curve,
        auc=area_under_curve(curve),
        ties=ties,
        copies=copies,
        equal_total=best_within(curve, curve[-1][0] / members) if curve else math.nan,
        stages=stage_facts(history, fresh),
        **tested,
    )


def final_pick_member(run_dir: Path, history: RunHistory, generation: int, returns: FreshReturns) -> int | None:
    """The member a run's final pick names (``--final-eval``: final.json, evo.runner.final), if it is the member
    of ``generation`` that the records and the fresh returns have (the same env steps: the same weights, which
    ``evo-export --member best`` exports); None without a final pick, or with one made before the run was
    extended (evo.tools.saved.final_pick asks the same of a run's checkpoints; a study reads its records, which
    a committed study keeps without checkpoints). Its fresh returns are then that member's, on the episodes every
    member played."""
    from evo.rundir.final import read_final

    found = read_final(run_dir)
    if found is None:
        return None
    member = found["pick"]["member"]
    if member not in returns.members or not history.has(generation, member):
        return None
    return member if history.row(generation, member).env_steps == found["pick"].get("env_steps") else None


def best_curve(history: RunHistory, threshold: float | None) -> tuple[list[tuple[int, float]], int | None]:
    """(the population's total env steps, its best score) after each generation, and the total when
    the best first reached ``threshold`` (None: never). A stage's students' env steps count too."""
    curve, reached, total = [], None, 0
    for generation in history.generations:
        rows = [history.row(generation, m) for m in history.members if history.has(generation, m)]
        scores = [row.score for row in rows if row.score == row.score]
        total += sum(row.env_steps - history.started_at(row) for row in rows)
        best = max(scores) if scores else float("nan")
        curve.append((total, best))
        if reached is None and threshold is not None and best >= threshold:
            reached = total
    return curve, reached


def selected_member(history: RunHistory, generation: int) -> int:
    """The member whose selection score ranks first at ``generation`` (NaN last). A tie goes to the lower
    id: the study's reading of a run's records, deterministic and the same for every study committed (their
    runs broke their own ties by the id); the report says where a selection rests on a tie
    (:func:`selection_tie`), since a run's own draw (evo.core.streams.tie_priorities) may keep another."""
    scores = {m: history.row(generation, m).score for m in history.members if history.has(generation, m)}
    return max(sorted(scores), key=lambda m: -math.inf if math.isnan(scores[m]) else scores[m])


def selection_tie(history: RunHistory, generation: int, selected: int) -> tuple[int, ...]:
    """The other members whose selection score at ``generation`` equals ``selected``'s (a finite one), by id:
    which of them is "the selected member" was decided by a tie rule, not by the scores."""
    score = history.row(generation, selected).score
    if not math.isfinite(score):
        return ()
    return tuple(
        m
        for m in history.members
        if m != selected and history.has(generation, m) and history.row(generation, m).score == score
    )


def points(job: Job, history: RunHistory, fresh: Mapping[int, FreshReturns], fractions) -> list[Point]:
    """The run at each re-evaluated fraction of its budget (those whose returns ``fresh`` holds)."""
    curve, _ = best_curve(history, None)
    copies = copies_by_generation(history)
    objective = history.objective
    found = []
    for fraction in fractions:
        generation = round(fraction * job.generations)
        if generation not in fresh or not history.has(generation, selected_member(history, generation)):
            continue
        returns = fresh[generation]
        selected = selected_member(history, generation)
        values = {m: fresh_values(returns, m, objective) for m in sorted(returns.members)}
        means = {m: mean_or_nan(v) for m, v in values.items()}
        copied = tuple(sorted(m for m in copies.get(generation, {}) if m in means))
        kept = [v for m, v in means.items() if m not in copied]
        found.append(
            Point(
                fraction=fraction,
                generation=generation,
                total_env_steps=curve[history.generations.index(generation)][0],
                selected_member=selected,
                selection_score=history.row(generation, selected).score,
                selected=means[selected],
                selected_se=standard_error(values[selected]),
                median=statistics.median(means.values()),
                median_uncopied=statistics.median(kept) if kept else math.nan,
                copied=copied,
                members=means,
                returns=tuple(values[selected]),
                digest=returns.digests.get(selected),
                tied=selection_tie(history, generation, selected),
            )
        )
    return found


def zoo_points(job: Job) -> list[Point]:
    """The rl_zoo3 cross-check at the end of its budget (it has no selection score)."""
    returns = json.loads((job.run_dir / ZOO_RESULT).read_text())["returns"]
    mean = float(statistics.mean(returns))
    total = job.generations * job.steps
    se = standard_error(returns)
    return [Point(1.0, job.generations, total, 0, math.nan, mean, se, mean, mean, (), {0: mean}, tuple(returns))]


def read_wall(job: Job) -> float:
    path = job.run_dir / WALL
    return float(path.read_text()) if path.is_file() else float("nan")


def timing(job: Job) -> Timing:
    """The run's time from its records."""
    total = 0.0
    path = job.run_dir / "generations.csv"
    if path.is_file():
        with path.open(newline="") as handle:
            total = sum(float(row["wall_s"]) for row in csv.DictReader(handle))
    return Timing(read_wall(job), total if path.is_file() else math.nan, job.ranks)


def _stages(history: RunHistory) -> list[tuple[int, dict[int, dict], list[dict], list[dict]]]:
    """Per BG-PBT stage of a run, from its lineage: (stage, its planned students by id, its rungs, its survivors)."""
    planned = [e for e in history.lineage if e.get("event") == "student"]
    found = []
    for stage in sorted({e["stage"] for e in planned}):
        students = {e["member"]: e for e in planned if e["stage"] == stage}
        rungs = [e for e in history.lineage if e.get("event") == "rung" and e["stage"] == stage]
        survivors = [e for e in history.lineage if e.get("event") == "survivor" and e["stage"] == stage]
        found.append((stage, students, rungs, survivors))
    return found


def stage_generations(history: RunHistory) -> list[tuple[int, int]]:
    """Per BG-PBT stage of a run: (the generation its teachers were taken after, its last rung's
    generation). The checkpoints of those two hold the teachers and the survivors in the members'
    places (best first), so their fresh returns compare the best student with its teacher."""
    return [
        (next(iter(students.values()))["generation"], rungs[-1]["generation"])
        for _, students, rungs, _ in _stages(history)
        if rungs
    ]


def stage_facts(history: RunHistory, fresh: Mapping[int, FreshReturns] | None = None) -> list[dict]:
    """Per BG-PBT stage of a run (none without ``--max-distillations``): after which generation and why
    it started, the members' best score then, its teachers, each rung's best student, how each survivor
    was proposed (kept, bo, random), the members' best in the generation after the stage and the env
    steps its students trained; with ``fresh`` (fresh returns by generation) holding both of
    :func:`stage_generations`' checkpoints, the last rung's best student and its teacher on the same
    fresh episodes (:func:`distillation_fresh`)."""
    stages = _stages(history)
    if not stages:
        return []
    best: dict[int, float] = {}
    for row in history.rows:
        if row.teacher is None:  # a member's row (a student's has its teacher)
            best[row.generation] = max(best.get(row.generation, -math.inf), row.score)
    facts = []
    for stage, students, rungs, survivors in stages:
        first = next(iter(students.values()))
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
                **distillation_fresh(students, rungs[-1] if rungs else None, survivors, fresh or {}),
            }
        )
    return facts


def distillation_fresh(
    students: Mapping[int, dict], last_rung: dict | None, survivors: list[dict], fresh: Mapping[int, FreshReturns]
) -> dict:
    """The stage's best student (the last rung's best score) and its teacher on the same fresh episodes:
    the student where it survived into a member's place at the last rung's checkpoint, the teacher as
    the member it was at the checkpoint of the generation the stage began after; their means and the
    mean of the episode-by-episode differences (student minus teacher) with its t-interval (NaN where
    a checkpoint was not kept)."""
    nan = math.nan
    facts = {"best_student": None, "its_teacher": None, "teacher_fresh": nan, "best_student_fresh": nan,
             "fresh_difference": nan, "fresh_low": nan, "fresh_high": nan}  # fmt: skip
    if last_rung is None:
        return facts
    scored = {int(m): v for m, v in last_rung["scores"].items() if v is not None}
    student = max(scored, key=scored.get)
    facts["best_student"] = student
    teacher = facts["its_teacher"] = students[student]["teacher"]
    place = next((e["member"] for e in survivors if e["student"] == student), None)
    began, ended = students[student]["generation"], last_rung["generation"]
    if place is None or began not in fresh or ended not in fresh:
        return facts
    taught, learnt = fresh[began].members.get(teacher), fresh[ended].members.get(place)
    if not taught or not learnt or len(taught) != len(learnt):
        return facts
    difference, low, high = t_interval([b - a for a, b in zip(taught, learnt, strict=True)])
    facts.update(teacher_fresh=statistics.mean(taught), best_student_fresh=statistics.mean(learnt),
                 fresh_difference=difference, fresh_low=low, fresh_high=high)  # fmt: skip
    return facts


def zoo_result(job: Job) -> Result:
    """The rl_zoo3 cross-check's numbers: only its fresh returns (zoo records no selection score)."""
    fresh = statistics.mean(json.loads((job.run_dir / ZOO_RESULT).read_text())["returns"])
    nan = math.nan
    return Result(job.env_id, job.method, job.seed, 1, nan, nan, None, read_wall(job), [], nan, 0, 0, nan, fresh, fresh)


def best_within(curve: list[tuple[int, float]], total_steps: float) -> float:
    """The best score of the last generation that ended within ``total_steps`` env steps of all
    members together (NaN if the first ended later): with a population's final total divided
    by its size, what the population had when it had used as many env steps as one agent."""
    within = [best for total, best in curve if total <= total_steps]
    return within[-1] if within else math.nan


def lineage_counts(lineage: list[dict]) -> tuple[int, int]:
    """(recipients whose score equalled their donor's, weight copies) in a run's lineage; a tie kept
    under ``--ties explore`` is written with the recipient as its own donor."""
    ties = copies = 0
    for exploit in lineage:
        if "event" in exploit:  # a failed member's restart, a stage's student, rung or survivor: no exploit
            continue
        ties += exploit["recipient_score"] == exploit["donor_score"]
        copies += exploit["recipient"] != exploit["donor"]
    return ties, copies
