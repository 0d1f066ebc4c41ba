"""BG-PBT's stages in a run (``--max-distillations N``; the decisions are evo/core/stages.py's).

Between two generations of PBT, when a stage is due (the population's best score has not improved for
``--patience`` generations, or the stage trained ``--stage-steps`` env steps per member), rank 0 plans
the new stage's ``--students`` students (architectures kept, by BO and at random; hyperparameters;
each one's teacher drawn from the top members) and every rank learns the plan. Then:

- **Where the students live**: student ``j`` of the stage (member id N + (stage − 1)·S + j, so no two
  learners of a run share an id) is built on rank ``j mod world_size``, beside that rank's members,
  which wait (they are the teachers). Each teacher's flat weights, statistics and architecture are
  broadcast from its rank once; each student holds a frozen copy
  (:meth:`evo.sb3.ppo.PPOLearner.start_distillation`).
- **Rungs**: successive halving (η = 2, :func:`evo.core.stages.halving_rungs`): each rung is one
  generation of the run (counted in ``--total-generations``), in which every living student trains
  the rung's env steps with its distillation loss, is scored, and rank 0 keeps the best
  (:meth:`evo.core.stages.Distilling.cut`); the others are closed. A checkpoint is written at every
  rung's end, holding the members and the living students (each with its teacher and α), so a run
  stopped during a distillation resumes at its last rung.
- **Records**: population.csv gets the students' rows under their own ids with ``stage`` and
  ``teacher``; lineage.jsonl an entry per student planned (``"event": "student"``), per rung's cut
  (``"rung"``) and per member replaced (``"survivor"``); TensorBoard's population folder
  ``pbt/stage`` and ``stage/*``, each student its own folder.
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
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from evo.config import Config
from evo.core.plan import Exploit
from evo.core.result import MemberResult
from evo.core.stages import Distilling, StageBook, Student, halving_rungs, plan_students
from evo.learners.interface import Learner
from evo.loop import LoopOutcome, gather, score
from evo.mpi import exchange
from evo.rundir.checkpoint import Checkpoint
from evo.rundir.records import RankTiming, RunRecords, tb_dir
from evo.sb3.learner import member_seed

logger = logging.getLogger("evo")

STAGE_STREAM = 0x57A6E
"""The random stream of a stage's plan: seeded by the run's seed and the stage's number."""


@dataclass(frozen=True)
class RunTools:
    """What a distillation asks of the run (evo.run's functions, handed in so that this module does
    not import evo.run): build a learner, restore one from a checkpoint, its checkpoint payloads, and
    write a checkpoint (collective)."""

    make_member: Callable[..., Learner]
    """(config, member, hparams, env_seed=None, tensorboard=True) -> a new learner."""
    restore_member: Callable[[Config, int, Learner, Checkpoint], None]
    """(config, rank, learner, checkpoint): the learner becomes its file in the checkpoint."""
    payloads: Callable[[Mapping[int, Learner], int], dict[int, bytes]]
    """(learners, generation) -> {member: its checkpoint file's bytes}."""
    save: Callable[[int, dict[int, bytes], dict | None], None]
    """(generation, payloads, run state on rank 0): write the checkpoint (collective)."""


class Stages:
    """A run's stages, on every rank: the book (rank 0's is the truth; every rank gets it when a
    stage starts or advances), rank 0's last population, and the stage's students on this rank."""

    def __init__(
        self, comm, config: Config, checkpoint: Checkpoint | None, records: RunRecords | None, tools: RunTools
    ):
        self.comm = comm
        self.tools = tools
        self.config = config
        self.space = config.agent.search_space
        self.architecture = [name for name in self.space if name in config.agent.spec.architecture]
        manifest = checkpoint.manifest if checkpoint is not None else {}
        self.book = StageBook.from_json(manifest.get("stages"), self.space)
        self.population = [self._result(entry) for entry in manifest.get("stage_population", [])]
        """Rank 0: the population's last results (what a stage's plan draws from)."""
        self.records = records
        if records is not None:
            records.stage = self.book.stage
        self.count = config.stage_students
        self.rungs = halving_rungs(self.count, config.num_agents, config.stage_distillation_steps)

    # --- the generation loop's hooks ---------------------------------------------------------------

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
        score = math.nan if entry["score"] is None else float(entry["score"])
        return MemberResult(int(entry["member"]), 0, int(entry["env_steps"]), score, hparams=hparams)

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
        """Rank 0: why a new stage starts after ``generation``, or None (none is started unless the
        run has generations left for its rungs and one of PBT after them)."""
        config = self.config
        if config.total_generations - generation <= len(self.rungs) or not self.population:
            return None
        steps = max(result.env_steps for result in self.population)
        return self.book.due(steps, config.patience, config.stage_steps, config.max_distillations)

    def plan(self, generation: int, reason: str) -> None:
        """Rank 0: the new stage's students, in the book and the records."""
        config = self.config
        stage = self.book.stage + 1
        rng = np.random.default_rng([config.seed, stage, STAGE_STREAM])
        students = plan_students(
            stage,
            self.population,
            self.space,
            self.architecture,
            self.count,
            self.book.reached,
            self.book.kept,
            config.truncation_fraction,
            rng,
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
            config.stage_distillation_steps,
            config.num_agents,
            len(self.rungs),
        )
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
                }
                for s in students
            ]
            self.records.write_stage(stage, lineage)

    # --- a distillation ---------------------------------------------------------------------------

    def owner(self, member: int) -> int:
        """The rank holding ``member``: a member's as the run places it, a student's by its index."""
        config = self.config
        if member < config.num_agents:
            return config.owner(member)
        return ((member - config.num_agents) % self.count) % config.world_size

    def distil(
        self, members: MutableMapping[int, Learner], generation: int, stopper, checkpoint: Checkpoint | None
    ) -> LoopOutcome:
        """Collective: the distillation under way, from its next rung to its end (each rung a generation
        after ``generation``); ``checkpoint``: the run's, when resumed after a rung. Stopped: the last
        rung's (or the stage's start's) checkpoint is on disk."""
        tools = self.tools
        rank = self.comm.Get_rank()
        distilling = self.book.distilling
        mine = [s for s in distilling.living if self.owner(s.member) == rank]
        if checkpoint is not None and checkpoint.generation > distilling.began:
            students = {}
            for plan in mine:
                seed = member_seed(self.config.seed, plan.member, stream=2 + checkpoint.generation)
                students[plan.member] = tools.make_member(self.config, plan.member, plan.hparams, env_seed=seed)
                tools.restore_member(self.config, rank, students[plan.member], checkpoint)
        else:
            teachers = self.teachers(members, sorted({s.teacher for s in distilling.students}))
            students = {plan.member: self.student(plan, teachers[plan.teacher], distilling) for plan in mine}
        for rung_index in range(distilling.rung, len(distilling.rungs)):
            rung = distilling.rungs[rung_index]
            generation += 1
            started = time.perf_counter()
            steps_before = sum(student.env_steps for student in students.values())
            for student in students.values():
                if stopper.poll():
                    break
                student.train(rung.steps, stopper.poll)
            trained = time.perf_counter()
            trained_steps = sum(student.env_steps for student in students.values()) - steps_before
            if stopper.agree():
                for student in students.values():
                    student.close()
                return LoopOutcome(stopped=True, completed=generation - 1, last=None)
            agreed = time.perf_counter()
            results = score(rank, students, self._score)
            scored = time.perf_counter()
            everyone = gather(self.comm, results)
            gathered = time.perf_counter()
            for result in results:
                students[result.member].log_generation(result, False)
            cut = functools.partial(self.cut, generation, everyone, started)
            distilling, survivors = exchange.decide_on_root(self.comm, cut)
            for member in [m for m in students if m not in distilling.alive]:
                students.pop(member).close()
            if distilling.done:
                self.replace(members, students, generation, survivors)
                students = {}
                self.book = self.book.finish(generation, max(env_steps for _, env_steps, _ in survivors))
            else:
                self.book = dataclasses.replace(self.book, distilling=distilling)
            timing = RankTiming(
                trained=trained_steps,
                train_s=trained - started,
                score_s=scored - agreed,
                wait_s=(agreed - trained) + (gathered - scored),
                exchange_s=time.perf_counter() - gathered,  # the cut, and the survivors' move at the end
            )
            self.write_timing(generation, started, timing)
            run_state = None
            if rank == 0:
                run_state = {
                    "lineage": list(self.records.lineage),
                    "population_step": self.records.population_step,
                    **self.state(),
                }
            tools.save(generation, tools.payloads({**members, **students}, generation), run_state)
        return LoopOutcome(stopped=False, completed=generation, last=None)

    def write_timing(self, generation: int, started: float, timing: RankTiming) -> None:
        """Collective: the rung's row of generations.csv (rank 0), as a generation's: its wall time,
        the students' env steps per second, and the slowest rank's parts."""
        per_rank = exchange.gather_to_root(self.comm, [timing])
        if self.records is not None and per_rank is not None:
            trained = sum(t.trained for t in per_rank)
            self.records.write_timing(generation, time.perf_counter() - started, trained, per_rank)

    def teachers(self, members: Mapping[int, Learner], teachers: list[int]) -> dict[int, tuple]:
        """Collective: each teacher's flat weights, statistics and hyperparameters, from its rank to
        every rank (once per stage)."""
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
            found[teacher] = self.comm.bcast(state, root=self.config.owner(teacher))
        return found

    def student(self, plan: Student, teacher: tuple, distilling: Distilling) -> Learner:
        """A new student on this rank: built with its hyperparameters and architecture, its env-step
        count starting where the population's stood, distilling from its teacher."""
        config = self.config
        weights, normalization, hparams = teacher
        student = self.tools.make_member(config, plan.member, plan.hparams, tensorboard=False)
        student.continue_counts(distilling.steps_at_start, [])
        student.set_tensorboard(tb_dir(config.run_dir, plan.member, config.tb_writer), distilling.steps_at_start + 1)
        student.start_distillation(weights, hparams, config.stage_distillation_steps, normalization)
        return student

    @staticmethod
    def _score(member: Learner):
        scores = member.evaluate()
        member.scores.append(scores.score)
        return scores

    def cut(self, generation: int, everyone: list[MemberResult], started: float):
        """Rank 0, after a rung: the students it keeps, the rung's records, and the next book entry;
        returns (the distillation after the cut, [(survivor, env steps, score train)] best first)."""
        distilling = self.book.distilling
        scores = {result.member: result.score for result in everyone}
        after, kept = distilling.cut(scores)
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
        teachers = {s.member: s.teacher for s in distilling.students}
        rung = {
            "event": "rung",
            "generation": generation,
            "stage": stage,
            "rung": distilling.rung,
            "kept": kept,
            "dropped": dropped,
            "scores": {str(m): None if math.isnan(s) else s for m, s in scores.items()},
        }
        self.records.write_rung(generation, everyone, teachers, [rung])
        survivors = [(m, by_member[m].env_steps, by_member[m].score_train) for m in kept]
        return after, survivors

    def replace(
        self,
        members: MutableMapping[int, Learner],
        students: MutableMapping[int, Learner],
        generation: int,
        survivors: list[tuple[int, int, float]],
    ) -> None:
        """Collective, after the last rung: member i takes survivor i's place (best first): its
        weights, statistics, architecture and hyperparameters by the exchange, its env-step count and
        its last training score; the students are closed."""
        distilling = self.book.distilling
        plans = {s.member: s for s in distilling.students}
        rank = self.comm.Get_rank()
        old = {r.member: r for r in self.population} if rank == 0 else {}
        moves = []
        for slot, (student, _, _) in enumerate(survivors):
            plan = plans[student]
            before = old[slot].hparams if slot in old else {}
            change = f"stage {self.book.stage}: student {student} of member {plan.teacher} ({plan.how})"
            moves.append(Exploit(generation, slot, student, math.nan, math.nan, dict(before), plan.hparams, (change,)))
        exchange.apply_exploits(self.comm, moves, {**members, **students}, self.config.transport, self.owner, {})
        for slot, (_, env_steps, score_train) in enumerate(survivors):
            member = members.get(slot)
            if member is not None:
                member.continue_counts(env_steps, member.scores)
                member.carry_score(score_train)
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
                for slot, (student, env_steps, _) in enumerate(survivors)
            ]
            self.records.write_stage(self.book.stage, lineage)
        if rank == 0:
            logger.info(
                "stage %d: members %s are now students %s",
                self.book.stage,
                list(range(len(survivors))),
                [s for s, _, _ in survivors],
            )
