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

from evo.core.space import hparam_names, typed


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
    hparams: dict[str, float]


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

    def space(self) -> dict[str, dict]:
        """Each explored hyperparameter's search-space entry in config.yaml (empty if unknown)."""
        space = (self.config.get("agent") or {}).get("search_space") or {}
        return {name: dict(space.get(name) or {}) for name in self.names}

    def scales(self) -> dict[str, str]:
        """Each explored hyperparameter's search-space scale (for log axes)."""
        return {name: entry.get("scale", "linear") for name, entry in self.space().items()}


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
    rows = []
    with population.open(newline="") as handle:
        reader = csv.DictReader(handle)
        names = hparam_names(reader.fieldnames or ())
        for line in reader:
            rows.append(
                Row(
                    generation=int(line["generation"]),
                    member=int(line["member"]),
                    env_steps=int(line["env_steps"]),
                    score=_float(line["score"]),
                    donor=int(line["donor"]) if line["donor"] not in ("", None) else None,
                    hparams={name: typed(name, float(line[name])) for name in names},
                )
            )
    if not rows:
        raise RunDirError(f"{population} has no generation yet: the run stopped before its first generation ended")
    lineage_path = run_dir / "lineage.jsonl"
    lineage = []
    if lineage_path.is_file():
        lineage = [json.loads(line) for line in lineage_path.read_text().splitlines() if line.strip()]
    config_path = run_dir / "config.yaml"
    config = yaml.safe_load(config_path.read_text()) if config_path.is_file() else {}
    return RunHistory(run_dir, config or {}, rows, lineage)


def copies_by_generation(history: RunHistory) -> dict[int, dict[int, int]]:
    """``{generation: {recipient: donor}}``: who copied whom at the end of each generation."""
    moves: dict[int, dict[int, int]] = {}
    for row in history.rows:
        if row.donor is not None and row.donor != row.member:
            moves.setdefault(row.generation, {})[row.member] = row.donor
    return moves


def ancestry(history: RunHistory) -> dict[int, dict[int, int]]:
    """``{generation: {member: founder}}``: the initial member whose line each member's
    weights descend from, as they were while it trained in that generation."""
    moves = copies_by_generation(history)
    founder = {member: member for member in history.members}
    result = {}
    for generation in history.generations:
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
    """
    if member not in history.members:
        raise RunDirError(f"member {member} is not in {history.run_dir} (members: {history.members})")
    moves = copies_by_generation(history)
    generations = history.generations
    followed = member
    segments = []
    for generation in reversed(generations):
        row = history.row(generation, followed)
        segments.append((generation, followed, row.hparams))
        previous = moves.get(generation - 1, {})
        if followed in previous:
            followed = previous[followed]
    segments.reverse()
    schedule: list[dict] = []
    for generation, owner, hparams in segments:
        start = history.row(generation - 1, owner).env_steps if generation - 1 in generations else 0
        if schedule and schedule[-1]["hparams"] == hparams:
            continue
        schedule.append({"env_steps": start, "generation": generation, "member": owner, "hparams": dict(hparams)})
    return schedule
