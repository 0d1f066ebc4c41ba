"""BG-PBT's stages in a synchronous run (``--max-distillations N``; the decisions are evo/core/stages.py's).

Between two generations of PBT, when a stage is due (the population's best score has not improved for
``--patience`` generations, or the stage trained ``--stage-steps`` env steps per member), rank 0 plans
the new stage's ``--students`` students (architectures kept, by BO and at random; hyperparameters;
each one's teacher drawn from the top members) and every rank learns the plan. Then:

- **Where the students live**: student ``j`` of the stage (member id N + (stage − 1)·S + j, so no two
  learners of a run share an id) is built on rank ``j mod world_size``, beside that rank's members,
  which wait (they are the teachers). Each teacher's flat weights, statistics and architecture are
  broadcast from its rank once (:meth:`Stages.teachers`); each student holds a frozen copy
  (the learner's ``start_distillation``).
- **Rungs**: successive halving (η = 2, :func:`evo.core.stages.halving_rungs`): each rung is one
  generation of the run (counted in ``--total-generations``) run by the generation loop itself
  (evo/runner/loop.py) over the living students with the rung's hooks (:meth:`Stages.rung_hooks`):
  every student trains the rung's env steps with its distillation loss and is scored; the records step
  cuts them (rank 0 keeps the best, :meth:`evo.core.stages.Distilling.cut`; the others are closed);
  the checkpoint step writes the members and the living students (each with its teacher and α), so a
  run stopped during a distillation resumes at its last rung. The loop's failure handling holds: a
  student whose env or update raises starts again from fresh weights of its own plan, distilling
  anew from its teacher, and trains the rung again.
- **Records**: population.csv gets the students' rows under their own ids with ``stage`` and
  ``teacher``; lineage.jsonl an entry per student planned (``"event": "student"``), per rung's cut
  (``"rung"``) and per member replaced (``"survivor"``); generations.csv a row per rung (its
  ``exchange_s``: the cut, and the survivors' move after the last rung); TensorBoard's population
  folder ``pbt/stage`` and ``stage/*``, each student its own folder.
- **The end**: the survivors, best first, take the members' places (member i gets survivor i's weights,
  statistics, architecture and hyperparameters, moved as an exploit moves them, and its env-step
  count), the explorer starts afresh (BG-PBT resets its GP's data), and PBT goes on.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import time
from collections.abc import Mapping, MutableMapping
from typing import Any

import numpy as np

from evo.core.plan import Exploit
from evo.core.restart import Restart, failures_by_member
from evo.core.result import MemberResult
from evo.core.selection import NO_PBT
from evo.core.stages import Distilling, StageBook, Student, halving_rungs, plan_students, tied_with, top_members
from evo.core.streams import RESUMED_ENVS, STAGE_STREAM, member_seed
from evo.learners.interface import Distiller, Learner
from evo.mpi import exchange
from evo.rundir.checkpoint import Checkpoint, write_checkpoint
from evo.runner.best import KeptBest
from evo.runner.generation import log_restarts, rank_timing, tie_words, write_timing
from evo.runner.loop import GenerationReport, Hooks, LoopOutcome, LoopSettings, run_generations
from evo.runner.session import Session

logger = logging.getLogger("evo")

Teacher = tuple[np.ndarray, np.ndarray | None, dict[str, Any]]
"""A teacher as every rank holds it during a distillation: its flat weights, its normalisation
statistics (None without normalisation) and its hyperparameters."""


class Stages:
    """A run's stages, on every rank: the book (rank 0's is the truth; every rank gets it when a stage
    starts or advances), rank 0's last population, and during a distillation its teachers."""

    def __init__(self, session: Session, checkpoint: Checkpoint | None, best: KeptBest | None = None):
        self.session = session
        self.comm = session.comm
        self.settings = session.stages
        self.best = best
        self.space = self.settings.space
        self.architecture = list(self.settings.architecture)
        manifest = checkpoint.manifest if checkpoint is not None else {}
        self.book = StageBook.from_json(manifest.get("stages"), self.space)
        self.population = [self._result(entry) for entry in manifest.get("stage_population", [])]
        """Rank 0: the population's last results (what a stage's plan draws from)."""
        self.records = session.records
        if self.records is not None:
            self.records.stage = self.book.stage
        self.count = self.settings.students
        self.num_agents = session.placement.num_agents
        self.rungs = halving_rungs(self.count, self.num_agents, self.settings.distillation_steps)
        self.teachers_now: dict[int, Teacher] = {}
        """The distillation's teachers (every rank), from its start or its resume to its end."""

    # --- the generation loop's hooks (the members' generations) -----------------------------------

    def record(self, population: list[MemberResult] | None, run_state: dict | None) -> dict | None:
        """Rank 0, once a generation is written: the book takes its scores, and the run state for the
        checkpoint gets the book and the population."""
        if population is None or run_state is None:
            return run_state
        self.book = self.book.after_generation(population, self.architecture)
        self.population = list(population)
        return {**run_state, **self.state()}

    def state(self) -> dict[str, Any]:
        """The checkpoint's part: the book and the population's last results."""
        return {
            "stages": self.book.to_json(self.space),
            "stage_population": [
                {
                    "member": r.member,
                    "env_steps": r.env_steps,
                    "score": None if math.isnan(r.score) else r.score,
                    "hparams": {name: self.space[name].json(value) for name, value in r.hparams.items()},
                }
                for r in self.population
            ],
        }

    def _result(self, entry: Mapping[str, Any]) -> MemberResult:
        hparams = {name: self.space[name].coerce(value) for name, value in entry["hparams"].items()}
        score_ = math.nan if entry["score"] is None else float(entry["score"])
        return MemberResult(int(entry["member"]), 0, int(entry["env_steps"]), score_, hparams=hparams)

    def ready(self, generation: int) -> bool:
        """Collective, at a generation boundary: whether a distillation runs now (one under way, or a
        new stage due, which rank 0 then plans); every rank gets the book."""

        def decide() -> StageBook | None:
            if self.book.distilling is None and (reason := self.due(generation)) is not None:
                self.plan(generation, reason)
            return self.book if self.book.distilling is not None else None

        book = exchange.decide_on_root(self.comm, decide)
        if book is not None:
            self.book = book
        return book is not None

    def due(self, generation: int) -> str | None:
        """Rank 0: why a new stage starts after ``generation``, or None (none is started unless the run
        has generations left for its rungs and one of PBT after them)."""
        if self.session.budget.total_generations - generation <= len(self.rungs) or not self.population:
            return None
        steps = max(result.env_steps for result in self.population)
        settings = self.settings
        return self.book.due(steps, settings.patience, settings.stage_steps, settings.max_distillations)

    def plan(self, generation: int, reason: str) -> None:
        """Rank 0: the new stage's students, in the book and the records."""
        stage = self.book.stage + 1
        rng = np.random.default_rng([self.session.rules.seed, stage, STAGE_STREAM])
        students = plan_students(
            stage,
            self.population,
            self.space,
            self.architecture,
            self.count,
            self.book.reached,
            self.book.kept,
            self.session.rules.truncation_fraction,
            rng,
            tiebreak := self.session.rules.tiebreak(generation, self.population),
        )
        steps = max(result.env_steps for result in self.population)
        self.book = self.book.start(Distilling(tuple(students), tuple(self.rungs), generation, steps))
        logger.info(
            "stage %d after generation %d (%s): %d students distilled from members %s for %d env steps each, "
            "cut to %d by successive halving in %d rungs",
            stage,
            generation,
            reason,
            len(students),
            sorted({s.teacher for s in students}),
            self.settings.distillation_steps,
            self.num_agents,
            len(self.rungs),
        )
        scores = {result.member: result.score for result in self.population}
        teachers = top_members(self.population, self.session.rules.truncation_fraction, tiebreak)
        tie = tied_with(scores, teachers)
        if tie:
            logger.info("  the teachers rest on a tie: %s", tie_words(tie))
        for student in students:
            logger.info(
                "  student %d (%s) of member %d: %s",
                student.member,
                student.how,
                student.teacher,
                ", ".join(f"{name}={self.space[name].describe(student.hparams[name])}" for name in self.architecture),
            )
        if self.records is not None:
            lineage = [
                {
                    "event": "student",
                    "generation": generation,
                    "stage": stage,
                    "reason": reason,
                    **s.to_json(self.space),
                    **({"tie": list(tie)} if tie else {}),
                }
                for s in students
            ]
            self.records.write_stage(stage, lineage)

    # --- a distillation -----------------------------------------------------------------------------

    def owner(self, member: int) -> int:
        """The rank holding ``member``: a member's as the run places it, a student's by its index."""
        placement = self.session.placement
        if member < self.num_agents:
            return placement.owner(member)
        return ((member - self.num_agents) % self.count) % placement.world_size

    def distil(
        self, members: MutableMapping[int, Learner], generation: int, checkpoint: Checkpoint | None
    ) -> LoopOutcome:
        """Collective: the distillation under way, from its next rung to its end, each rung a generation
        of the loop after ``generation``; ``checkpoint``: the run's, when resumed after a rung. Stopped:
        the last rung's (or the stage's start's) checkpoint is on disk."""
        session, factory = self.session, self.session.members
        rank = session.rank
        distilling = self.book.distilling
        mine = [s for s in distilling.living if self.owner(s.member) == rank]
        self.teachers_now = self.teachers(members, sorted({s.teacher for s in distilling.students}))
        students: dict[int, Learner] = {}
        if checkpoint is not None and checkpoint.generation > distilling.began:
            for plan in mine:
                seed = member_seed(factory.setup.seed, plan.member, stream=RESUMED_ENVS + checkpoint.generation)
                students[plan.member] = factory.make(plan.member, plan.hparams, env_seed=seed)
                factory.restore(students[plan.member], checkpoint, rank)
        else:
            students = {plan.member: self.student(plan, distilling) for plan in mine}
        rungs_left = len(distilling.rungs) - distilling.rung
        settings = LoopSettings(
            generation,
            generation + rungs_left,
            session.transport,
            checkpoint_every=1,  # every rung is written: a stopped distillation resumes at its last
            max_member_failures=session.rules.max_member_failures,
        )
        outcome = run_generations(
            self.comm, students, self.owner, self.rung_hooks(members, students), settings, session.stopper
        )
        for student in students.values():  # a stop leaves the living students; the end closed them
            student.close()
        self.teachers_now = {}
        return outcome

    def rung_hooks(self, members: MutableMapping[int, Learner], students: MutableMapping[int, Learner]) -> Hooks:
        """A rung as a generation of the loop: the living ``students`` train the rung's env steps and are
        scored; no exploit; the records step cuts them (and after the last rung moves the survivors into
        ``members``' places); the checkpoint holds the members and the living students."""
        session, factory = self.session, self.session.members
        failures = failures_by_member(self.records.lineage) if self.records is not None else {}  # rank 0's
        restarting = dataclasses.replace(session.rules, strategy=NO_PBT)  # fresh weights, its own values

        def train(student: Learner, should_stop) -> None:
            distilling = self.book.distilling
            with session.watchdog.watching(f"student {student.member_id} ({session.about.env_id})"):
                student.train(distilling.rungs[distilling.rung].steps, session.watchdog.beating(should_stop))

        def rebuild(failed: Learner, restart: Restart, env_steps: int) -> Learner:
            plan = next(s for s in self.book.distilling.students if s.member == failed.member_id)
            student = factory.rebuild(failed, restart, env_steps)
            self._distil_from_teacher(student, plan)
            return student

        return Hooks(
            train=train,
            score=session.score,
            plan=lambda generation, population: [],
            records=lambda report: self.after_rung(members, students, report),
            snapshot=lambda generation, run_state: (
                generation,
                factory.files({**members, **students}, generation),
                run_state,
            ),
            save=lambda saved: write_checkpoint(self.comm, session.target, *saved, best=self.best),
            restart=lambda generation, failed, scored, recipients, round_: restarting.restarts(
                generation, failed, [], failures, recipients, round_
            ),
            rebuild=rebuild,
        )

    def after_rung(
        self, members: MutableMapping[int, Learner], students: MutableMapping[int, Learner], report: GenerationReport
    ) -> dict | None:
        """The rung's records step (collective): the students' TensorBoard rows, the cut (rank 0 decides,
        every rank closes its dropped students), after the last rung the survivors' move into the
        members' places, and the rung's row of generations.csv; returns rank 0's run state."""
        began = time.perf_counter()
        for result in report.results:
            students[result.member].log_generation(result, False)
        cut = functools.partial(self.cut, report.generation, report.population, report.restarts, report.times.started)
        distilling, survivors = exchange.decide_on_root(self.comm, cut)
        for member in [m for m in students if m not in distilling.alive]:
            students.pop(member).close()
        if distilling.done:
            self.replace(members, students, report.generation, survivors)
            students.clear()
            self.book = self.book.finish(report.generation, max(survivor[1] for survivor in survivors))
        else:
            self.book = dataclasses.replace(self.book, distilling=distilling)
        timing = rank_timing(report.times, extra_exchange_s=time.perf_counter() - began)
        per_rank = exchange.gather_to_root(self.comm, [timing])
        if self.records is None:
            return None
        write_timing(self.records, report.generation, time.perf_counter() - report.times.started, per_rank)
        return {"lineage": list(self.records.lineage), "population_step": self.records.population_step, **self.state()}

    def teachers(self, members: Mapping[int, Learner], teachers: list[int]) -> dict[int, Teacher]:
        """Collective: each teacher's flat weights, statistics and hyperparameters, from its rank to every
        rank (once per distillation)."""
        found = {}
        for teacher in teachers:
            here = members.get(teacher)
            state = None
            if here is not None:
                exported = here.exploit_state()
                normalization = exported.get("normalization")
                state = (
                    np.array(exported["weights"], copy=True),
                    None if normalization is None else np.array(normalization, copy=True),
                    dict(here.hparams),
                )
            found[teacher] = exchange.broadcast(self.comm, state, root=self.session.placement.owner(teacher))
        return found

    def student(self, plan: Student, distilling: Distilling) -> Learner:
        """A new student on this rank: built with its hyperparameters and architecture, its env-step count
        starting where the population's stood, distilling from its teacher."""
        factory = self.session.members
        student = factory.make(plan.member, plan.hparams, tensorboard=False)
        student.continue_counts(distilling.steps_at_start, [])
        student.set_tensorboard(factory.tensorboard(plan.member), distilling.steps_at_start + 1)
        self._distil_from_teacher(student, plan)
        return student

    def _distil_from_teacher(self, student: Distiller, plan: Student) -> None:
        weights, normalization, hparams = self.teachers_now[plan.teacher]
        student.start_distillation(weights, hparams, self.settings.distillation_steps, normalization)

    def cut(self, generation: int, everyone: list[MemberResult], restarts, started: float):
        """Rank 0, after a rung: the students it keeps, the rung's records (its students' restarts
        first), and the next book entry; returns (the distillation after the cut, [(survivor, env steps,
        score train)] best first)."""
        distilling = self.book.distilling
        scores = {result.member: result.score for result in everyone}
        after, kept = distilling.cut(scores, self.session.rules.tiebreak(generation, everyone))
        tie = tied_with({m: scores[m] for m in distilling.alive}, kept)
        by_member = {result.member: result for result in everyone}
        dropped = [m for m in distilling.alive if m not in kept]
        stage = self.book.stage
        logger.info(
            "stage %d rung %d/%d (generation %d): %d students trained %d env steps; kept %s, dropped %s; %.1fs",
            stage,
            distilling.rung + 1,
            len(distilling.rungs),
            generation,
            len(everyone),
            distilling.rungs[distilling.rung].steps,
            ", ".join(f"{m} ({scores[m]:.2f})" for m in kept),
            ", ".join(f"{m} ({scores[m]:.2f})" for m in dropped) or "none",
            time.perf_counter() - started,
        )
        if tie:
            logger.info("  the cut rests on a tie: %s", tie_words(tie))
        log_restarts(restarts, "and trained rung generation {} again")
        teachers = {s.member: s.teacher for s in distilling.students}
        rung = {
            "event": "rung",
            "generation": generation,
            "stage": stage,
            "rung": distilling.rung,
            "kept": kept,
            "dropped": dropped,
            "scores": {str(m): None if math.isnan(s) else s for m, s in scores.items()},
            **({"tie": list(tie)} if tie else {}),
        }
        lineage = [*(restart.to_json(self.space) for restart in restarts), rung]
        self.records.write_rung(generation, everyone, teachers, lineage)
        survivors = [(m, by_member[m].env_steps, by_member[m].standing) for m in kept]
        return after, survivors

    def replace(
        self,
        members: MutableMapping[int, Learner],
        students: MutableMapping[int, Learner],
        generation: int,
        survivors: list[tuple],
    ) -> None:
        """Collective, after the last rung: member i takes survivor i's place (best first): its weights,
        statistics, architecture and hyperparameters by the exchange, its env-step count and its standing (its
        last training score, objectives and outcomes: evo.core.result.Standing); the students are closed."""
        distilling = self.book.distilling
        plans = {s.member: s for s in distilling.students}
        rank = self.session.rank
        old = {r.member: r for r in self.population} if rank == 0 else {}
        moves = []
        for slot, (student, *_) in enumerate(survivors):
            plan = plans[student]
            before = old[slot].hparams if slot in old else {}
            change = f"stage {self.book.stage}: student {student} of member {plan.teacher} ({plan.how})"
            moves.append(Exploit(generation, slot, student, math.nan, math.nan, dict(before), plan.hparams, (change,)))
        exchange.apply_exploits(self.comm, moves, {**members, **students}, self.session.transport, self.owner, {})
        for slot, (_, env_steps, standing) in enumerate(survivors):
            member = members.get(slot)
            if member is not None:
                member.continue_counts(env_steps, member.scores)
                member.carry(standing)
        for student in students.values():
            student.close()
        if self.records is not None:
            lineage = [
                {
                    "event": "survivor",
                    "generation": generation,
                    "stage": self.book.stage,
                    "member": slot,
                    "student": student,
                    "teacher": plans[student].teacher,
                    "env_steps": env_steps,
                    "new_hparams": {n: self.space[n].json(v) for n, v in plans[student].hparams.items()},
                }
                for slot, (student, env_steps, *_) in enumerate(survivors)
            ]
            self.records.write_stage(self.book.stage, lineage)
        if rank == 0:
            logger.info(
                "stage %d: members %s are now students %s",
                self.book.stage,
                list(range(len(survivors))),
                [survivor[0] for survivor in survivors],
            )
