"""Reading a finished (or stopped) run back: its population table, its lineage, who descends
from whom, and the hyperparameter schedule a member's line followed. Pure (no MPI, no
torch); used by ``evo.tools.plot`` and ``evo.tools.replay``.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from evo.core.kinds import Kind, kind_from_spec
from evo.core.objective import Objective, parse_objective
from evo.core.pareto import fronts
from evo.learners import DEFAULT_ALGO, learner_spec


class RunDirError(ValueError):
    """The directory is not a readable evo run."""


@dataclass(frozen=True)
class Row:
    """One member at the end of one generation (a line of population.csv; in an asynchronous run,
    at its own ready point ``generation``)."""

    generation: int
    member: int
    env_steps: int
    score: float
    donor: int | None
    hparams: dict[str, object]
    donor_interval: int | None = None
    """The donor's own interval whose weights the member copied (an asynchronous run's); None: the
    same generation (a synchronous run's copy)."""
    stage: int | None = None
    """The stage the row belongs to (a run with stages; None without)."""
    teacher: int | None = None
    """A stage's student's teacher (its rows during a distillation), else None."""
    objectives: dict[str, float] = field(default_factory=dict)
    """Each term of the run's own objective (``--objective``) as measured, by name; empty for the return's."""

    @property
    def source(self) -> tuple[int, int] | None:
        """(donor, the donor's generation) whose weights the member copied here, or None."""
        if self.donor is None or self.donor == self.member:
            return None
        return self.donor, self.generation if self.donor_interval is None else self.donor_interval


@dataclass
class RunHistory:
    run_dir: Path
    config: dict
    rows: list[Row]
    lineage: list[dict]

    @property
    def members(self) -> list[int]:
        return sorted({row.member for row in self.rows})

    @property
    def generations(self) -> list[int]:
        return sorted({row.generation for row in self.rows})

    def row(self, generation: int, member: int) -> Row:
        return self._index[(generation, member)]

    def has(self, generation: int, member: int) -> bool:
        return (generation, member) in self._index

    def __post_init__(self) -> None:
        self._index = {(row.generation, row.member): row for row in self.rows}
        self._took = {
            (int(e["generation"]), int(e["member"])): int(e["env_steps"])
            for e in self.lineage
            if e.get("event") == "survivor"
        }
        """{(a distillation's last generation, member): the env steps of the student whose place it took}"""

    def series(self, member: int) -> list[Row]:
        """``member``'s rows in generation order."""
        return sorted((row for row in self.rows if row.member == member), key=lambda row: row.generation)

    def started_at(self, row: Row) -> int:
        """The env steps ``row``'s member had when its generation began: its own previous row's, 0 in
        generation 1; a stage's student at its first rung the population's as the stage began, and a
        member right after a stage its survivor's (the student's steps are the student's rows')."""
        took = self._took.get((row.generation - 1, row.member))
        if took is not None:
            return took
        earlier = [r for r in self.series(row.member) if r.generation < row.generation]
        if earlier:
            return earlier[-1].env_steps
        before = [r.env_steps for r in self.rows if r.generation == row.generation - 1]
        return max(before) if before and row.teacher is not None else 0

    def last_generation(self, member: int) -> int:
        """``member``'s last recorded generation (an asynchronous run's members may differ)."""
        return max(row.generation for row in self.rows if row.member == member)

    def at(self, generation: int) -> list[Row]:
        """Each member's row at ``generation``, or its last before it (a member of an asynchronous run
        that stopped may have fewer)."""
        latest: dict[int, Row] = {}
        for row in sorted(self.rows, key=lambda r: r.generation):
            if row.generation <= generation:
                latest[row.member] = row
        return [latest[m] for m in sorted(latest)]

    @property
    def asynchronous(self) -> bool:
        return bool(self.config.get("asynchronous"))

    @property
    def names(self) -> tuple[str, ...]:
        """The explored hyperparameters the run recorded (its population.csv columns)."""
        return tuple(self.rows[0].hparams)

    @property
    def objective(self) -> Objective:
        """What the run ranked its members by (config.yaml's ``objective``; runs before it: the return)."""
        return objective_of(self.config)

    def first_front(self, rows: list[Row]) -> list[Row]:
        """The members of ``rows`` in the first Pareto front of the run's objectives (each term larger or
        smaller better as the run said), in row order; empty for a run of one objective."""
        objective = self.objective
        if not objective.several:
            return []
        values = [
            objective.fitness([row.objectives[name] for name in objective.names]) if row.objectives else None
            for row in rows
        ]
        values = [value if value is not None else objective.nan_row() for value in values]
        found = fronts(values)
        return [rows[i] for i in found[0]] if found else []

    @property
    def algo(self) -> str:
        """The run's learner (runs from before --algo trained PPO)."""
        return (self.config.get("agent") or {}).get("algo") or self.config.get("algo") or DEFAULT_ALGO

    def space(self) -> dict[str, dict]:
        """Each explored hyperparameter's search-space entry in config.yaml (empty if unknown)."""
        space = (self.config.get("agent") or {}).get("search_space") or {}
        return {name: dict(space.get(name) or {}) for name in self.names}

    def kinds(self) -> dict[str, Kind]:
        """The kind of each explored hyperparameter the run's config.yaml records."""
        return kinds_of(self.config)

    def label(self, name: str) -> str:
        """A hyperparameter's axis label: its learner's, or its name."""
        setting = learner_spec(self.algo).by_name.get(name) if self.algo in _known_algos() else None
        return setting.label if setting is not None and setting.label else name


def _known_algos() -> tuple[str, ...]:
    from evo.learners import algos

    return algos()


def objective_of(saved: dict) -> Objective:
    """The objective config.yaml records (the return when it records none)."""
    return parse_objective(saved.get("objective") or "return")[0]


def kinds_of(saved: dict) -> dict[str, Kind]:
    space = (saved.get("agent") or {}).get("search_space") or {}
    return {name: kind_from_spec({"kind": "float", "choices": [], **entry}) for name, entry in space.items()}


FIXED_COLUMNS = ("generation", "member", "rank", "env_steps", "score", "donor", "score_train", "score_test")
OTHER_COLUMNS = ("score_train_stale", "wall_s", "donor_interval", "stage", "teacher")


def parse_value(kinds: dict[str, Kind], algo: str, name: str, text: str) -> object:
    """A population.csv cell of hyperparameter ``name``: by its kind, or by its setting's type (a
    value a replayed schedule gave, outside the search space)."""
    if name in kinds:
        return kinds[name].parse(text)
    setting = learner_spec(algo).by_name.get(name) if algo in _known_algos() else None
    if setting is not None and setting.may_be_off and text.strip().lower() in ("inf", "none", "off", ""):
        return None
    if setting is not None and setting.type is int:
        return int(round(float(text)))
    try:
        return float(text)
    except ValueError:
        return text


def _float(text: str) -> float:
    return float(text) if text not in ("", None) else math.nan


def load_run(run_dir: str | Path) -> RunHistory:
    """Read ``population.csv``, ``lineage.jsonl`` and ``config.yaml`` of a run directory."""
    run_dir = Path(run_dir)
    population = run_dir / "population.csv"
    if not population.is_file():
        hint = "" if run_dir.is_dir() else " (the directory does not exist)"
        raise RunDirError(
            f"{population} not found{hint}: give the run directory a PBT script wrote (its --run-dir, e.g. runs/...)"
        )
    config_path = run_dir / "config.yaml"
    config = (yaml.safe_load(config_path.read_text()) if config_path.is_file() else {}) or {}
    kinds = kinds_of(config)
    algo = (config.get("agent") or {}).get("algo") or config.get("algo") or DEFAULT_ALGO
    objective = objective_of(config)
    measured = objective.columns
    rows = []
    with population.open(newline="") as handle:
        reader = csv.DictReader(handle)
        others = FIXED_COLUMNS + OTHER_COLUMNS + measured
        names = [name for name in reader.fieldnames or () if name not in others]
        for line in reader:
            rows.append(
                Row(
                    generation=int(line["generation"]),
                    member=int(line["member"]),
                    env_steps=int(line["env_steps"]),
                    score=_float(line["score"]),
                    donor=int(line["donor"]) if line["donor"] not in ("", None) else None,
                    hparams={name: parse_value(kinds, algo, name, line[name]) for name in names},
                    donor_interval=int(line["donor_interval"]) if line.get("donor_interval") else None,
                    stage=int(line["stage"]) if line.get("stage") else None,
                    teacher=int(line["teacher"]) if line.get("teacher") else None,
                    objectives={name: _float(line[name]) for name in measured if name in line},
                )
            )
    if not rows:
        raise RunDirError(f"{population} has no generation yet: the run stopped before its first generation ended")
    lineage_path = run_dir / "lineage.jsonl"
    lineage = []
    if lineage_path.is_file():
        lineage = [json.loads(line) for line in lineage_path.read_text().splitlines() if line.strip()]
    return RunHistory(run_dir, config, rows, lineage)


def copies_by_generation(history: RunHistory) -> dict[int, dict[int, int]]:
    """``{generation: {recipient: donor}}``: who copied whom at the end of each generation (an
    asynchronous run: at the recipient's ready point; :func:`copy_sources` names the donor's interval)."""
    moves: dict[int, dict[int, int]] = {}
    for row in history.rows:
        if row.source is not None:
            moves.setdefault(row.generation, {})[row.member] = row.donor
    return moves


def copy_sources(history: RunHistory) -> dict[tuple[int, int], tuple[int, int]]:
    """``{(generation, recipient): (donor, donor's generation)}``: the weights each copy took, and
    with stages, each member taking a surviving student's place after a distillation's last rung."""
    found = {(row.generation, row.member): row.source for row in history.rows if row.source is not None}
    for entry in history.lineage:
        if entry.get("event") == "survivor":
            generation = int(entry["generation"])
            found[(generation, int(entry["member"]))] = (int(entry["student"]), generation)
    return found


def stage_starts(history: RunHistory) -> dict[int, int]:
    """``{stage: the generation after which it began}`` of a run with stages (empty without)."""
    return {int(e["stage"]): int(e["generation"]) for e in history.lineage if e.get("event") == "student"}


def restart_sources(history: RunHistory) -> dict[tuple[int, int], tuple[int, int] | None]:
    """``{(generation, member): (donor, donor's generation) or None}``: where each failed member
    started again before it trained its generation again (its last restart there; None: fresh
    weights). A synchronous run's donor had trained that generation; an asynchronous run's line
    names the donor's interval it copied."""
    found: dict[tuple[int, int], tuple[int, int] | None] = {}
    for entry in history.lineage:
        if entry.get("event") == "restart":
            generation, donor = int(entry["generation"]), entry["donor"]
            interval = entry.get("donor_interval")
            found[(generation, int(entry["member"]))] = (
                None if donor is None else (int(donor), generation if interval is None else int(interval))
            )
    return found


def _origin(history, copies, restarts, generation: int, member: int) -> tuple[int, int] | None:
    """Where the weights ``member`` trained in ``generation`` came from: (member, generation) whose
    end they were, or None when they were new (its first generation, or fresh weights at a restart)."""
    if (generation, member) in restarts:
        return restarts[(generation, member)]
    if (generation - 1, member) in copies:
        return copies[(generation - 1, member)]
    return (member, generation - 1) if history.has(generation - 1, member) else None


def weight_origins(history: RunHistory) -> dict[tuple[int, int], tuple[int, int] | None]:
    """``{(generation, member): (member, generation) or None}`` for every row: whose end of which
    generation the weights were that the member trained in that generation (its own previous one, a
    donor's it copied, a restart's donor's or a surviving student's), None where they were new (its
    first generation, fresh weights at a restart)."""
    copies, restarts = copy_sources(history), restart_sources(history)
    return {
        (row.generation, row.member): _origin(history, copies, restarts, row.generation, row.member)
        for row in history.rows
    }


def ancestry(history: RunHistory) -> dict[int, dict[int, int]]:
    """``{generation: {member: founder}}``: the initial member whose line each member's
    weights descend from, as they were while it trained in that generation (a restarted member:
    its donor's line, or its own again with fresh weights)."""
    copies, restarts = copy_sources(history), restart_sources(history)
    founder: dict[tuple[int, int], int] = {}
    for row in sorted(history.rows, key=lambda r: r.generation):
        chain = [(row.generation, row.member)]  # walk back to a known founder (iterative: long runs)
        while chain[-1] not in founder:
            origin = _origin(history, copies, restarts, *chain[-1])
            if origin is None:
                founder[chain[-1]] = chain[-1][1]
                break
            chain.append((origin[1], origin[0]))
        known = founder[chain[-1]]
        for point in chain:
            founder[point] = known
    result: dict[int, dict[int, int]] = {}
    for (generation, member), line in founder.items():
        if history.has(generation, member):
            result.setdefault(generation, {})[member] = line
    return result


def best_member(history: RunHistory, generation: int | None = None) -> int:
    """The member with the highest score at ``generation`` (default: the last; a member without a
    row there, by its last before it); NaN ranks last, ties go to the lower id (the selection rule's
    order)."""
    generation = history.generations[-1] if generation is None else generation
    candidates = history.at(generation)
    return max(candidates, key=lambda row: (-math.inf if math.isnan(row.score) else row.score, -row.member)).member


def schedule_of(history: RunHistory, member: int) -> list[dict]:
    """The hyperparameter schedule ``member``'s weights were trained with, from scratch.

    Walking back from the member's last generation: in generation g the weights were trained by the
    member currently followed with its hyperparameters of g; if that member copied a donor at the
    end of generation g-1, the weights before g were the donor's at the end of its generation (in
    a synchronous run g-1; in an asynchronous run the donor's own interval the copy names), so the
    walk continues with the donor there (Ray Tune's PBT replay does the same). Consecutive equal
    hyperparameters are merged. Each entry: ``env_steps`` (when it starts), ``hparams``,
    ``member`` (whose training it reproduces) and ``generation`` (the first one it covers).

    A member that failed in generation g and restarted from a donor's weights trained g again
    after the donor had trained it: the walk takes both, the donor's first; with fresh weights
    the line starts at its restart.

    A segment starts at the env steps the line's weights had trained by then: the sum of what
    each member followed trained in the generations before it. That is where an agent replaying
    the schedule ends those generations; a member's own count can differ from it when members
    train different env steps per generation (an off-policy learner's budget is rounded up to
    whole collections of the member's own train_freq).
    """
    if member not in history.members:
        raise RunDirError(f"member {member} is not in {history.run_dir} (members: {history.members})")
    copies, restarts = copy_sources(history), restart_sources(history)
    point: tuple[int, int] | None = (history.last_generation(member), member)
    segments = []
    while point is not None:
        generation, followed = point
        segments.append((generation, followed, history.row(generation, followed).hparams))
        origin = _origin(history, copies, restarts, generation, followed)
        point = (origin[1], origin[0]) if origin is not None else None
    segments.reverse()
    first = history.row(segments[0][0], segments[0][1])
    if first.teacher is not None:
        raise RunDirError(
            f"member {member}'s weights began as student {first.member} of stage {first.stage}, distilled from "
            f"member {first.teacher} (BG-PBT's stages): a schedule cannot replay a distillation; replay a run "
            "without --max-distillations, or a member's line before its first stage"
        )
    schedule: list[dict] = []
    start = 0  # env steps the line's weights had trained when the generation began
    for generation, owner, hparams in segments:
        trained_before = history.row(generation - 1, owner).env_steps if history.has(generation - 1, owner) else 0
        if not schedule or schedule[-1]["hparams"] != hparams:
            schedule.append({"env_steps": start, "generation": generation, "member": owner, "hparams": dict(hparams)})
        start += history.row(generation, owner).env_steps - trained_before
    return schedule
