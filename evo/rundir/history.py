"""Reading a finished (or stopped) run back: its population table, its lineage, who descends
from whom, and the hyperparameter schedule a member's line followed. Pure (no MPI, no
torch); used by ``evo.plot`` and ``evo.replay``.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from evo.core.kinds import Kind, kind_from_spec
from evo.learners import learner_spec


class RunDirError(ValueError):
    """The directory is not a readable evo run."""


@dataclass(frozen=True)
class Row:
    """One member at the end of one generation (a line of population.csv)."""

    generation: int
    member: int
    env_steps: int
    score: float
    donor: int | None
    hparams: dict[str, object]


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

    def series(self, member: int) -> list[Row]:
        """``member``'s rows in generation order."""
        return sorted((row for row in self.rows if row.member == member), key=lambda row: row.generation)

    @property
    def names(self) -> tuple[str, ...]:
        """The explored hyperparameters the run recorded (its population.csv columns)."""
        return tuple(self.rows[0].hparams)

    @property
    def algo(self) -> str:
        """The run's learner (runs from before --algo trained PPO)."""
        return (self.config.get("agent") or {}).get("algo") or self.config.get("algo") or "ppo"

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


def kinds_of(config: dict) -> dict[str, Kind]:
    space = (config.get("agent") or {}).get("search_space") or {}
    return {name: kind_from_spec({"kind": "float", "choices": [], **entry}) for name, entry in space.items()}


FIXED_COLUMNS = ("generation", "member", "rank", "env_steps", "score", "donor", "score_train", "score_test")


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
    algo = (config.get("agent") or {}).get("algo") or config.get("algo") or "ppo"
    rows = []
    with population.open(newline="") as handle:
        reader = csv.DictReader(handle)
        names = [name for name in reader.fieldnames or () if name not in FIXED_COLUMNS and name != "score_train_stale"]
        for line in reader:
            rows.append(
                Row(
                    generation=int(line["generation"]),
                    member=int(line["member"]),
                    env_steps=int(line["env_steps"]),
                    score=_float(line["score"]),
                    donor=int(line["donor"]) if line["donor"] not in ("", None) else None,
                    hparams={name: parse_value(kinds, algo, name, line[name]) for name in names},
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
    """``{generation: {recipient: donor}}``: who copied whom at the end of each generation."""
    moves: dict[int, dict[int, int]] = {}
    for row in history.rows:
        if row.donor is not None and row.donor != row.member:
            moves.setdefault(row.generation, {})[row.member] = row.donor
    return moves


def restarts_by_generation(history: RunHistory) -> dict[int, dict[int, int | None]]:
    """``{generation: {member: donor}}``: the failed members restarted in each generation, from a
    donor's weights of that generation (None: fresh weights), before they trained it again (the
    last restart, where a member failed twice)."""
    restarts: dict[int, dict[int, int | None]] = {}
    for entry in history.lineage:
        if entry.get("event") == "restart":
            restarts.setdefault(int(entry["generation"]), {})[int(entry["member"])] = entry["donor"]
    return restarts


def ancestry(history: RunHistory) -> dict[int, dict[int, int]]:
    """``{generation: {member: founder}}``: the initial member whose line each member's
    weights descend from, as they were while it trained in that generation (a restarted member:
    its donor's line, or its own again with fresh weights)."""
    moves = copies_by_generation(history)
    restarts = restarts_by_generation(history)
    founder = {member: member for member in history.members}
    result = {}
    for generation in history.generations:
        for member, donor in restarts.get(generation, {}).items():  # donors never restart themselves
            founder[member] = member if donor is None else founder[donor]
        result[generation] = dict(founder)
        copied = moves.get(generation, {})
        founder = {m: founder[copied[m]] if m in copied else founder[m] for m in founder}
    return result


def best_member(history: RunHistory, generation: int | None = None) -> int:
    """The member with the highest score at ``generation`` (default: the last); NaN ranks last,
    ties go to the lower id (the selection rule's order)."""
    generation = history.generations[-1] if generation is None else generation
    candidates = [history.row(generation, m) for m in history.members]
    return max(candidates, key=lambda row: (-math.inf if math.isnan(row.score) else row.score, -row.member)).member


def schedule_of(history: RunHistory, member: int) -> list[dict]:
    """The hyperparameter schedule ``member``'s weights were trained with, from scratch.

    Walking back from the last generation: in generation g the weights were trained by the
    member currently followed with its hyperparameters of g; if that member copied a donor
    at the end of generation g-1, the weights before g were the donor's, so the walk
    continues with the donor (Ray Tune's PBT replay does the same). Consecutive equal
    hyperparameters are merged. Each entry: ``env_steps`` (when it starts), ``hparams``,
    ``member`` (whose training it reproduces) and ``generation`` (the first one it covers).

    A member that failed in generation g and restarted from a donor's weights trained g again
    after the donor had trained it: the walk takes both, the donor's g first; with fresh weights
    the line starts at its restart.

    A segment starts at the env steps the line's weights had trained by then: the sum of what
    each member followed trained in the generations before it. That is where an agent replaying
    the schedule ends those generations; a member's own count can differ from it when members
    train different env steps per generation (an off-policy learner's budget is rounded up to
    whole collections of the member's own train_freq).
    """
    if member not in history.members:
        raise RunDirError(f"member {member} is not in {history.run_dir} (members: {history.members})")
    moves = copies_by_generation(history)
    restarts = restarts_by_generation(history)
    generations = history.generations
    followed = member
    segments = []
    for generation in reversed(generations):
        row = history.row(generation, followed)
        segments.append((generation, followed, row.hparams))
        restarted = restarts.get(generation, {})
        if followed in restarted:  # it failed and trained this generation again from a donor's weights
            if restarted[followed] is None:
                break  # fresh weights: the line starts here
            followed = restarted[followed]
            segments.append((generation, followed, history.row(generation, followed).hparams))
        previous = moves.get(generation - 1, {})
        if followed in previous:
            followed = previous[followed]
    segments.reverse()
    schedule: list[dict] = []
    start = 0  # env steps the line's weights had trained when the generation began
    for generation, owner, hparams in segments:
        trained_before = history.row(generation - 1, owner).env_steps if generation - 1 in generations else 0
        if not schedule or schedule[-1]["hparams"] != hparams:
            schedule.append({"env_steps": start, "generation": generation, "member": owner, "hparams": dict(hparams)})
        start += history.row(generation, owner).env_steps - trained_before
    return schedule
