"""What a run leaves in its run directory (written by rank 0).

- ``config.yaml``: the resolved configuration; ``command.txt``: the command line;
  ``versions.json``: versions of Python and the main packages.
- ``population.csv``: one row per member per generation: the score the member reached in
  that generation (``score``, the one selection used; ``score_train`` over training
  episodes and ``score_test`` over evaluation episodes, NaN without --eval-episodes), the
  hyperparameters it trained with (a column for each explored one, in the learner's
  declaration order, each written as its kind writes it: the same columns for the whole run),
  and ``donor`` (the member it copied at the end of the generation; empty when it kept its
  own weights); ``score_train_stale`` is 1 when ``score_train`` was carried over, not
  measured (no training episode finished since the member's weights last changed hands).
  A run with stages (``--max-distillations``) has two more columns: ``stage`` (0 for the first
  population, then 1, 2 ... from each distillation on) and ``teacher`` (a student's teacher during
  a distillation, whose rows are the students' own, under their ids; empty for members).
  With ``--objective`` other than the return, a column per objective term after ``score_train_stale``
  (``return``, ``info:<key>``): its value on the scored episodes, as measured (``score`` is then
  the first, larger better).
- ``lineage.jsonl``: one JSON object per exploit, and per restart of a failed member (``"event": "restart"``);
  with stages, per student of a stage (``"event": "student"``), per rung's cut (``"event": "rung"``)
  and per member taking a surviving student's place (``"event": "survivor"``).
- ``generations.csv``: per generation, wall time, env steps per second, and the slowest
  rank's seconds training, scoring, waiting for the other ranks and exchanging weights.
- ``tb/population``: TensorBoard aggregates (``pbt/best_score`` ...); members' own
  event files are in ``tb/member_{i}`` (written by the rank that holds the member).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from evo.core.asynchronous import Latest, ReadyExploit
from evo.core.kinds import SearchSpace
from evo.core.objective import DEFAULT, Objective
from evo.core.pareto import fronts
from evo.core.plan import Exploit, weight_moves
from evo.core.restart import Restart
from evo.core.result import MemberResult
from evo.rundir.checkpoint import atomic_write, open_appending
from evo.rundir.jsontext import dumps

TIMING_FIELDS = ["generation", "wall_s", "env_steps_per_s", "train_s", "score_s", "wait_s", "exchange_s"]


ASYNCHRONOUS_FIELDS = ("wall_s", "donor_interval")
"""An asynchronous run's extra population.csv columns: seconds since the run began at the ready point,
and the donor's own interval whose weights the member copied there."""


STAGE_FIELDS = ("stage", "teacher")
"""A run with stages' extra population.csv columns."""


def population_fields(
    names: Sequence[str], asynchronous: bool = False, stages: bool = False, objectives: Sequence[str] = ()
) -> list[str]:
    """population.csv's columns for a run exploring ``names`` (in the learner's declaration order);
    ``objectives``: the names of its objective's terms, when it has its own (``--objective``)."""
    return [
        "generation",
        "member",
        "rank",
        "env_steps",
        "score",
        "donor",
        *(STAGE_FIELDS if stages else ()),
        *names,
        "score_train",
        "score_test",
        "score_train_stale",
        *objectives,
        *(ASYNCHRONOUS_FIELDS if asynchronous else ()),
    ]


def population_row(
    generation: int,
    result: MemberResult,
    donor: int | str,
    space: SearchSpace,
    names: Sequence[str],
    objectives: Sequence[str] = (),
) -> dict[str, Any]:
    """A member's population.csv row at the end of ``generation`` (an asynchronous run: its own interval);
    ``objectives``: the names of the objective's terms, a column each (none: the return's run)."""
    measured = result.objectives or (float("nan"),) * len(objectives)
    return {
        **dict(zip(objectives, measured, strict=True)),
        "generation": generation,
        "member": result.member,
        "rank": result.rank,
        "env_steps": result.env_steps,
        "score": result.score,
        "score_train": result.score_train,
        "score_test": result.score_test,
        "score_train_stale": int(result.score_train_stale),
        "donor": donor,
        **{name: cell(space, name, result.hparams[name]) for name in names},
    }


def result_of_row(row: Mapping[str, Any], space: SearchSpace, objectives: Sequence[str] = ()) -> MemberResult:
    """The :class:`MemberResult` a population.csv row (or a ready point's record) holds; ``objectives``:
    the names of the objective's columns it has."""
    return MemberResult(
        member=int(row["member"]),
        rank=int(row["rank"]),
        env_steps=int(row["env_steps"]),
        score=float(row["score"]),
        score_train=float(row["score_train"]),
        score_test=float(row["score_test"]),
        hparams={name: kind.parse(str(row[name])) for name, kind in space.items()},
        score_train_stale=bool(int(row["score_train_stale"])),
        objectives=tuple(float(row[name]) for name in objectives),
    )


def ready_record(
    point: Latest,
    exploit: ReadyExploit | None,
    restarts: Sequence,
    space: SearchSpace,
    names,
    objectives: Sequence[str] = (),
) -> dict:
    """An asynchronous run's record of one ready point: its population.csv row and its lineage
    lines (the interval's restarts first, each with the donor's interval and env steps it copied,
    then the ready point's exploit). ``restarts``: :class:`evo.mpi.asynchronous.Applied`;
    ``objectives``: the objective's column names (:func:`population_row`)."""
    copies = exploit is not None and exploit.copies
    donor = exploit.exploit.donor if copies else ""
    row = population_row(point.interval, point.result, donor, space, names, objectives)
    for name, value in row.items():  # as population.csv writes them (nan, inf): JSON has no word for them
        if isinstance(value, float) and not math.isfinite(value):
            row[name] = str(value)
    row["wall_s"] = f"{point.wall:.3f}"
    row["donor_interval"] = exploit.donor_interval if copies else ""
    lineage = []
    for applied in restarts:
        interval, env_steps = applied.copied if applied.copied is not None else (None, None)
        lineage.append({**applied.restart.to_json(space), "donor_interval": interval, "donor_env_steps": env_steps})
    if exploit is not None:
        lineage.append(exploit.to_json(space))
    return {
        "member": point.result.member,
        "interval": point.interval,
        "wall_s": point.wall,
        "row": row,
        "lineage": lineage,
        **({"outcomes": list(point.result.outcomes)} if point.result.outcomes else {}),
    }


def result_of_record(record: Mapping[str, Any], space: SearchSpace, objectives: Sequence[str] = ()) -> MemberResult:
    """The :class:`MemberResult` of a ready point's record (:func:`ready_record`): its row's, with the outcomes
    behind its score (which population.csv does not hold), so that a resumed run's Welch tests
    (``--exploit-test welch``) see what the uninterrupted run saw."""
    return replace(result_of_row(record["row"], space, objectives), outcomes=tuple(record.get("outcomes", ())))


LINE_END = "\n"  # every CSV here, also the rows appended after a resume (csv's default is "\r\n")
PACKAGES = ("evo", "torch", "stable-baselines3", "gymnasium", "numpy", "mpi4py", "procgen-mirror", "tensorboard")


@dataclass(frozen=True)
class RankTiming:
    """One rank's share of a generation: env steps trained, and seconds training, scoring,
    waiting for the other ranks and exchanging weights (planning included)."""

    trained: int
    train_s: float
    score_s: float
    wait_s: float
    exchange_s: float


def tb_dir(run_dir: Path, member: int, tb_writer: bool = True) -> Path | None:
    """Member ``member``'s TensorBoard folder (None without TensorBoard)."""
    return Path(run_dir) / "tb" / f"member_{member}" if tb_writer else None


def cell(space: SearchSpace, name: str, value: object) -> str:
    """A hyperparameter's population.csv cell, as its kind writes it."""
    if name in space:
        return space[name].text(value)
    return "inf" if value is None else repr(value)


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    try:
        from evo.mpi.exchange import library_version

        found["mpi"] = library_version()
    except Exception as error:  # reporting only
        found["mpi"] = f"unknown ({error})"
    return found


@dataclass(frozen=True)
class Continuation:
    """Where a resumed run's records continue from: a synchronous run's checkpoint (its
    ``generation``, and the ``lineage`` and ``population_step`` its manifest holds: later rows,
    written after the checkpoint, are dropped), or an asynchronous run's (``ready_records``: the
    records of every ready point its members' checkpoints cover, from which population.csv and the
    lineage are rebuilt; ``generation``: the most intervals a member has done)."""

    generation: int
    lineage: list[dict] | None = None
    population_step: int | None = None
    ready_records: Sequence[Mapping[str, Any]] | None = None


class RunRecords:
    """The run directory's files, owned by rank 0."""

    def __init__(
        self,
        run_dir: Path,
        names: Sequence[str],
        space: SearchSpace,
        tb_writer: bool = True,
        *,
        new_run: tuple[dict, str] | None = None,
        continued: Continuation | None = None,
        command_line: str = "",
        asynchronous: bool = False,
        stages: bool = False,
        objective: Objective = DEFAULT,
        scored_return: str = "score_train",
        start: Sequence[dict] = (),
    ):
        """Create the run directory (``new_run``: the config to save and the command line), or continue
        its records (``continued``; ``command_line`` is appended to command.txt). ``names``: the
        explored hyperparameters, written by ``space``'s kinds; ``asynchronous``: a row per ready point,
        with its wall time and the donor's interval; ``stages``: with the stage and teacher columns;
        ``objective``: with a column per term when it is not the return (``scored_return``: the score
        holding the scored episodes' return, for TensorBoard's population tags); ``start``: the lineage's first
        lines, before any generation's (``--init-from``'s source: kept when an asynchronous run's lineage is
        rebuilt from its ready points)."""
        self.run_dir = Path(run_dir)
        self.population_path = self.run_dir / "population.csv"
        self.lineage_path = self.run_dir / "lineage.jsonl"
        lineage, population_step = list(start), None
        if continued is not None:
            lineage, population_step = continued.lineage, continued.population_step
            if asynchronous:
                records = continued.ready_records or []
                lineage = [*start, *(entry for record in records for entry in record["lineage"])]
                population_step = max((int(record["row"]["env_steps"]) for record in records), default=0)
        self.lineage: list[dict] = list(lineage or [])
        self.names = tuple(names)
        self.space = space
        self.objective = objective
        self.objectives = objective.columns
        """The objective's columns (none for the return's run)."""
        self.scored_return = scored_return
        self.fields = population_fields(self.names, asynchronous, stages, self.objectives)
        self.stage: int | None = 0 if stages else None
        """The stage the population's rows belong to (None: a run without stages)."""
        self.population_step = population_step or 0
        if continued is None:
            saved_config, command_line = new_run if new_run is not None else ({}, command_line)
            self.run_dir.mkdir(parents=True, exist_ok=True)  # the run's lock may have made it (evo.rundir.lock)
            if os.path.lexists(self.run_dir / "config.yaml"):
                raise FileExistsError(f"{self.run_dir} holds a run already (config.yaml): it is not overwritten")
            atomic_write(self.run_dir / "config.yaml", yaml.safe_dump(saved_config, sort_keys=False).encode())
            atomic_write(self.run_dir / "command.txt", command_line.encode())
            atomic_write(self.run_dir / "versions.json", (json.dumps(versions(), indent=2) + "\n").encode())
            header = io.StringIO()
            csv.DictWriter(header, self.fields, lineterminator=LINE_END).writeheader()
            atomic_write(self.population_path, header.getvalue().encode())
            atomic_write(self.lineage_path, "".join(dumps(entry) + "\n" for entry in self.lineage).encode())
        else:
            resumed = (
                "each member's last checkpointed ready point" if asynchronous else f"generation {continued.generation}"
            )
            with open_appending(self.run_dir / "command.txt") as handle:
                handle.write(f"# resumed from {resumed}:\n{command_line}")
            if asynchronous:
                self._rebuild(continued.ready_records or [])
            else:
                self._truncate(continued.generation)
        self.writer = None
        if tb_writer:
            from torch.utils.tensorboard import SummaryWriter

            purge = self.population_step + 1 if continued is not None else None
            self.writer = SummaryWriter(str(self.run_dir / "tb" / "population"), purge_step=purge)

    def _rebuild(self, ready_records: Sequence[Mapping[str, Any]]) -> None:
        """population.csv and lineage.jsonl as the members' checkpoints cover them: a row the CSV
        lacks (a kill between a checkpoint and its row) comes back, a row of a ready point no
        checkpoint holds (it is trained again) goes."""
        text = io.StringIO()
        writer = csv.DictWriter(text, self.fields, lineterminator=LINE_END)
        writer.writeheader()
        writer.writerows(record["row"] for record in ready_records)
        atomic_write(self.population_path, text.getvalue().encode())
        lines = "".join(dumps(entry) + "\n" for entry in self.lineage)
        atomic_write(self.lineage_path, lines.encode())

    def _truncate(self, generation: int) -> None:
        """Keep the records of generations up to ``generation`` (those the checkpoint covers)."""
        with self.population_path.open(newline="") as handle:
            rows = [row for row in csv.DictReader(handle) if int(row["generation"]) <= generation]
        text = io.StringIO()
        writer = csv.DictWriter(text, self.fields, lineterminator=LINE_END)
        writer.writeheader()
        writer.writerows(rows)
        atomic_write(self.population_path, text.getvalue().encode())
        timing_path = self.run_dir / "generations.csv"
        if timing_path.exists():
            with timing_path.open(newline="") as handle:
                kept = [row for row in csv.DictReader(handle) if int(row["generation"]) <= generation]
            text = io.StringIO()
            writer = csv.DictWriter(text, TIMING_FIELDS, lineterminator=LINE_END)
            writer.writeheader()
            writer.writerows(kept)
            atomic_write(timing_path, text.getvalue().encode())
        # the lines the checkpoint's lineage holds, as written (the manifest's copy has its keys sorted)
        written = self.lineage_path.read_text().splitlines(keepends=True)[: len(self.lineage)]
        if [json.loads(line) for line in written] != self.lineage:
            written = [dumps(entry) + "\n" for entry in self.lineage]
        atomic_write(self.lineage_path, "".join(written).encode())

    def write_generation(
        self,
        generation: int,
        population: Sequence[MemberResult],
        exploits: list[Exploit],
        restarts: Sequence[Restart] = (),
    ) -> None:
        """The generation's rows in population.csv, and its restarts (first) and exploits in
        lineage.jsonl."""
        donors = weight_moves(exploits)
        with open_appending(self.population_path, newline="") as handle:
            writer = csv.DictWriter(handle, self.fields, lineterminator=LINE_END)
            for result in population:
                donor = donors.get(result.member, "")
                row = population_row(generation, result, donor, self.space, self.names, self.objectives)
                if self.stage is not None:
                    row.update(stage=self.stage, teacher="")
                writer.writerow(row)
        lines = [exploit.to_json(self.space) for exploit in [*restarts, *exploits]]
        self._append_lineage(lines)
        self.population_step = max(result.env_steps for result in population)
        self._population_scalars(population)
        self._test_scalars(lines)
        if self.writer is not None:
            self.writer.add_scalar("pbt/exploits", len(exploits), self.population_step)
            self.writer.add_scalar("pbt/generation", generation, self.population_step)
            self.writer.flush()

    def write_rung(
        self,
        generation: int,
        students: Sequence[MemberResult],
        teachers: Mapping[int, int],
        lineage: Sequence[dict],
    ) -> None:
        """A distillation's rung (stage ``self.stage``): each student's row under its own id, with its
        teacher; the rung's lineage lines; in TensorBoard the students' best and mean score and the
        stage."""
        with open_appending(self.population_path, newline="") as handle:
            writer = csv.DictWriter(handle, self.fields, lineterminator=LINE_END)
            for result in students:
                row = population_row(generation, result, "", self.space, self.names, self.objectives)
                row.update(stage=self.stage, teacher=teachers[result.member])
                writer.writerow(row)
        self._append_lineage(lineage)
        self.population_step = max(self.population_step, *(result.env_steps for result in students))
        scores = [result.score for result in students if result.scored]
        if self.writer is not None:
            if scores:
                self.writer.add_scalar("stage/best_student_score", max(scores), self.population_step)
                self.writer.add_scalar("stage/mean_student_score", sum(scores) / len(scores), self.population_step)
            self.writer.add_scalar("stage/students", len(students), self.population_step)
            self.writer.add_scalar("pbt/generation", generation, self.population_step)
            self.writer.flush()

    def write_stage(self, stage: int, lineage: Sequence[dict]) -> None:
        """A new stage begins (its students' lineage lines) or ends (its survivors')."""
        self.stage = stage
        self._append_lineage(lineage)
        if self.writer is not None:
            self.writer.add_scalar("pbt/stage", stage, self.population_step)
            self.writer.flush()

    def write_ready(self, record: Mapping[str, Any], latest: Sequence[MemberResult]) -> None:
        """An asynchronous run's ready point (:func:`ready_record`): its row and lineage lines; in
        TensorBoard, the best, mean and lowest of every member's latest score (``latest``: each
        member's latest result) at the highest env-step count reached."""
        with open_appending(self.population_path, newline="") as handle:
            csv.DictWriter(handle, self.fields, lineterminator=LINE_END).writerow(record["row"])
        self._append_lineage(record["lineage"])
        self.population_step = max(self.population_step, int(record["row"]["env_steps"]))
        self._population_scalars(latest)
        self._test_scalars(record["lineage"])
        if self.writer is not None:
            self.writer.flush()

    def _test_scalars(self, lines: Sequence[Mapping[str, Any]]) -> None:
        """With ``--exploit-test welch``, in TensorBoard: how many of the lineage ``lines``' exploits were tested
        (``pbt/welch_tests``) and how many of those copied (``pbt/welch_copies``); the rest kept their weights."""
        tests = [line["welch"] for line in lines if "welch" in line]
        if self.writer is None or not tests:
            return
        self.writer.add_scalar("pbt/welch_tests", len(tests), self.population_step)
        self.writer.add_scalar("pbt/welch_copies", sum(test["copied"] for test in tests), self.population_step)

    def _append_lineage(self, entries: Sequence[dict]) -> None:
        with open_appending(self.lineage_path) as handle:
            for entry in entries:
                handle.write(dumps(entry) + "\n")
                self.lineage.append(entry)

    def _population_scalars(self, results: Sequence[MemberResult]) -> None:
        """The population's TensorBoard tags: its scores' best, mean and lowest; with an objective of the
        run's own, each term's best (in its direction) and mean, and the best and mean return of the
        scored episodes."""
        if self.writer is None:
            return
        step = self.population_step
        scores = [result.score for result in results if result.scored]
        if scores:
            self.writer.add_scalar("pbt/best_score", max(scores), step)
            self.writer.add_scalar("pbt/mean_score", sum(scores) / len(scores), step)
            self.writer.add_scalar("pbt/min_score", min(scores), step)
        if self.objective.default:
            return
        for index, term in enumerate(self.objective.terms):
            values = [
                r.objectives[index] for r in results if r.objectives and r.objectives[index] == r.objectives[index]
            ]
            if values:
                best = max(values) if term.direction == "max" else min(values)
                self.writer.add_scalar(f"objective/{term.name}/best", best, step)
                self.writer.add_scalar(f"objective/{term.name}/mean", sum(values) / len(values), step)
        returns = [value for r in results if (value := getattr(r, self.scored_return)) == value]
        if returns:
            self.writer.add_scalar("pbt/best_return", max(returns), step)
            self.writer.add_scalar("pbt/mean_return", sum(returns) / len(returns), step)

    def write_front(self, generation_of: Mapping[int, int], results: Sequence[MemberResult]) -> list[dict] | None:
        """A run with several objectives, at its end: ``front.json``, the first Pareto front of the final
        population (``results``; ``generation_of``: each member's generation or interval there), each member
        with its objectives; returns its entries (None for a run of one objective)."""
        if not self.objective.several:
            return None
        rows = [self.objective.fitness(r.objectives) if r.objectives else self.objective.nan_row() for r in results]
        found = fronts(rows)
        first = found[0] if found else []
        entries = [
            {
                "member": results[i].member,
                "generation": generation_of[results[i].member],
                "env_steps": results[i].env_steps,
                "objectives": dict(zip(self.objective.names, results[i].objectives, strict=True)),
            }
            for i in first
        ]
        document = {"objective": self.objective.text, "front": entries}
        atomic_write(self.run_dir / "front.json", (dumps(document, indent=1) + "\n").encode())
        return entries

    def write_timing(self, generation: int, wall: float, trained: int, per_rank: Sequence[RankTiming]) -> None:
        """One row per generation in generations.csv: wall time, throughput, and the slowest
        rank's time training, scoring, waiting for the other ranks, and exchanging weights."""
        path = self.run_dir / "generations.csv"
        new = not path.exists()
        with open_appending(path, newline="") as handle:
            writer = csv.DictWriter(handle, TIMING_FIELDS, lineterminator=LINE_END)
            if new:
                writer.writeheader()
            writer.writerow(
                {
                    "generation": generation,
                    "wall_s": f"{wall:.4f}",
                    "env_steps_per_s": f"{trained / wall:.1f}",
                    **{key: f"{max(getattr(t, key) for t in per_rank):.4f}" for key in TIMING_FIELDS[3:]},
                }
            )

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
