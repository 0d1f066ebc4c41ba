"""BG-PBT's stages (pure): when a population starts a new stage, which architectures the new stage's
students take, and how successive halving cuts the students down to the population.

Wan et al., "Bayesian Generational Population-Based Training" (AutoML-Conf 2022; code
xingchenwan/bgpbt, ``hpo/casmo/bgpbt_arch.py``). BG-PBT calls them generations; in evo a generation
is a PBT interval, so here they are *stages*. A new stage starts when the population's best score
has not improved for ``patience`` generations, or after a stage's budget of env steps, while fewer
than ``max_stages`` distillations have run (:func:`stage_due`). Its students' architectures come
from :func:`propose_architectures`; each student is distilled from a top teacher (evo/core/distill.py,
evo/sb3/ppo.py), and successive halving keeps the best of them (:func:`halving_rungs`,
:func:`survivors`) until the population's size remains.

The bookkeeping a run carries from generation to generation and into its checkpoints
(:class:`StageBook`: the stage's bests, the architectures that ran and the best each reached, the
distillation under way) and a new stage's students (:func:`plan_students`) are here too; the MPI side
that trains the students is evo/runner/stages.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from evo.core.kinds import SearchSpace, sample_hparams
from evo.core.result import MemberResult
from evo.core.selection import ranking, tied_ids

ETA = 2
"""Successive halving's rate: a rung keeps 1/ETA of its students (BG-PBT's ``eta = 2.0``)."""
CANDIDATES = 512
"""Random architectures the BO's upper confidence bound is evaluated on, per pick."""


def stage_due(
    bests: Sequence[float],
    patience: int,
    steps_in_stage: int,
    every: int | None,
    stages_done: int,
    max_stages: int,
) -> str | None:
    """Why a new stage starts after this generation, or None. ``bests``: the population's best score
    at each generation of the current stage, in order; due when none of the last ``patience`` beat the
    best before them (BG-PBT's ``patience``), or when the stage has trained ``every`` env steps per
    member (its ``distill_every``; None: no such limit), and only while ``stages_done`` <
    ``max_stages`` (its ``max_distillation``)."""
    if patience < 1:
        raise ValueError(f"patience {patience}: the generations without improvement must be at least 1")
    if stages_done >= max_stages:
        return None
    if every is not None and steps_in_stage >= every:
        return f"the stage has trained {steps_in_stage} env steps per member (at most {every})"
    if len(bests) > patience:
        before = [b for b in bests[:-patience] if not math.isnan(b)]
        recent = [b for b in bests[-patience:] if not math.isnan(b)]
        if before and (not recent or max(recent) <= max(before)):
            return f"the best score {max(before):.4g} has not improved for {patience} generations"
    return None


@dataclass(frozen=True)
class Rung:
    """One round of successive halving: ``students`` train ``steps`` env steps each, then ``keep`` of
    them go on."""

    students: int
    steps: int
    keep: int


def halving_rungs(candidates: int, population: int, budget: int, eta: int = ETA) -> list[Rung]:
    """Successive halving from ``candidates`` students down to ``population``, as BG-PBT's code runs it:
    each rung keeps max(population, round(n / eta)) of its n students, until ``population`` remain;
    with s rungs, rung r (from 0) trains eta^(r − s) · ``budget`` env steps and the last rung the rest
    of ``budget``, so every survivor is distilled for ``budget`` env steps in all (the length of its
    α schedule). Equal numbers: one rung that keeps everyone. s is the number of cuts needed; the
    code's ⌈log n / log population⌉ is the same for its 24 students and 8 members, but can add a last
    rung that cuts nobody (8 students, 4 members: 2 rungs there, 1 here)."""
    if population < 1 or candidates < population:
        raise ValueError(f"{candidates} candidates for a population of {population}: give at least as many")
    if budget < 1 or eta < 2:
        raise ValueError(f"budget {budget}, eta {eta}: a distillation needs env steps, and a rung must cut (eta >= 2)")
    sizes = [candidates]
    while sizes[-1] > population:
        sizes.append(max(population, round(sizes[-1] / eta)))
    rungs = max(len(sizes) - 1, 1)
    if len(sizes) == 1:
        sizes.append(population)
    steps = [int(budget * eta ** (r - rungs)) for r in range(rungs - 1)]
    steps.append(budget - sum(steps))
    return [Rung(students=sizes[r], steps=steps[r], keep=sizes[r + 1]) for r in range(rungs)]


def survivors(scores: Sequence[float], keep: int, tiebreak: Sequence[int] | None = None) -> list[int]:
    """The indices of the ``keep`` best ``scores`` (NaN last, equal scores by ``tiebreak``, each index's
    priority, lower first: evo.core.streams.tie_priorities; None: the lower index), best first."""
    return [int(i) for i in ranking(scores, tiebreak)[:keep]]


def tied_with(scores: Mapping[int, float], chosen: Sequence[int]) -> tuple[int, ...]:
    """The ids whose score ties a ``chosen`` one's (ties of two or more; NaN ties NaN), sorted: a choice
    among them (a stage's teachers, a rung's survivors and their order) rested on the tie draw."""
    ids = sorted(scores)
    return tied_ids([scores[m] for m in ids], ids, [ids.index(m) for m in chosen])


def propose_architectures(
    space: SearchSpace,
    count: int,
    reached: Sequence[tuple[Mapping[str, Any], float, int]],
    kept: Sequence[Mapping[str, Any]],
    rng: np.random.Generator,
) -> list[tuple[dict[str, Any], str]]:
    """``count`` architectures for a new stage's students, each with how it was chosen (BG-PBT's
    ``search_init`` with ``init_policy='bo'``):

    - ``kept``: the best architecture of each earlier stage, as they are ("kept");
    - then half of ``count`` by BO ("bo"): a GP with BG-PBT's kernel (Matérn over integer values,
      exponentiated overlap over ``choices``, the stage as its time) fitted to ``reached``, each
      architecture that ran with the best score it reached and its stage, copula-standardised; each
      pick maximises the upper confidence bound over random architectures of ``space`` and joins the
      data at the GP's predicted mean, so the next goes elsewhere. With fewer than 2 distinct scores
      no GP is fitted and these are drawn at random too;
    - the rest drawn uniformly from ``space`` ("random").

    ``space`` holds the architecture's dimensions only (``pi_layers`` ...)."""
    from evo.core.explorers.casmo import fit_posterior
    from evo.core.explorers.mixed import is_category

    names = list(space)
    chosen: list[tuple[dict[str, Any], str]] = [({n: a[n] for n in names}, "kept") for a in kept[:count]]
    by_bo = min(count // 2, count - len(chosen))
    finite = [(a, score, stage) for a, score, stage in reached if not math.isnan(score)]
    if by_bo and len({score for _, score, _ in finite}) >= 2:
        X = np.array([[space[n].to_unit(a[n]) for n in names] + [float(stage)] for a, _, stage in finite])
        categories = [c for c, n in enumerate(names) if is_category(space[n])]
        posterior = fit_posterior(X, [score for _, score, _ in finite], categories, rng)
        now = float(max(stage for _, _, stage in finite) + 1)
        for _ in range(by_bo):
            drawn = [{n: space[n].sample(rng) for n in names} for _ in range(CANDIDATES)]
            units = np.array([[space[n].to_unit(a[n]) for n in names] + [now] for a in drawn])
            best = int(np.argmax(posterior.ucb(units)))
            chosen.append((drawn[best], "bo"))
            posterior.add_pending(units[best])
    while len(chosen) < count:
        chosen.append(({n: space[n].sample(rng) for n in names}, "random"))
    return chosen


# ---------------------------------------------------------------------------------------
# A run's stages: its bookkeeping, and a new stage's students


@dataclass(frozen=True)
class Student:
    """One of a stage's candidate students: its member id, the population member it is distilled
    from, its explored hyperparameters (its architecture included) and how its architecture was
    chosen (``kept``, ``bo`` or ``random``)."""

    member: int
    teacher: int
    hparams: dict[str, Any]
    how: str

    def to_json(self, space: SearchSpace) -> dict[str, Any]:
        return {
            "member": self.member,
            "teacher": self.teacher,
            "how": self.how,
            "hparams": {name: space[name].json(value) for name, value in self.hparams.items()},
        }

    @classmethod
    def from_json(cls, entry: Mapping[str, Any], space: SearchSpace) -> Student:
        hparams = {name: space[name].coerce(value) for name, value in entry["hparams"].items()}
        return cls(int(entry["member"]), int(entry["teacher"]), hparams, str(entry["how"]))


def student_ids(population: int, students: int, stage: int) -> range:
    """The member ids of stage ``stage``'s (1, 2, ...) students: after the population's 0 .. N-1 and
    every earlier stage's, so that no two learners of a run ever share an id (nor a TensorBoard
    folder)."""
    first = population + (stage - 1) * students
    return range(first, first + students)


def top_members(
    population: Sequence[MemberResult], fraction: float, tiebreak: Mapping[int, int] | None = None
) -> list[int]:
    """The teachers: the best max(1, int(N · ``fraction``)) members by their last score (BG-PBT's
    ``quantile_fraction``), best first; equal scores by ``tiebreak`` (each id's priority, lower first;
    None: the lower id)."""
    count = max(1, int(len(population) * fraction))
    priorities = None if tiebreak is None else [tiebreak[result.member] for result in population]
    order = ranking([result.score for result in population], priorities)
    return [population[i].member for i in order[:count]]


def plan_students(
    stage: int,
    population: Sequence[MemberResult],
    space: SearchSpace,
    architecture: Sequence[str],
    count: int,
    reached: Sequence[tuple[Mapping[str, Any], float, int]],
    kept: Sequence[Mapping[str, Any]],
    fraction: float,
    rng: np.random.Generator,
    tiebreak: Mapping[int, int] | None = None,
) -> list[Student]:
    """Stage ``stage``'s ``count`` students, as BG-PBT's ``search_init`` makes them: architectures
    from :func:`propose_architectures` over the ``architecture`` dimensions of ``space``; a kept or
    BO architecture comes with the hyperparameters of a population member drawn at random, a random
    one with hyperparameters drawn from ``space``; each student's teacher is drawn from
    :func:`top_members` (a tie by ``tiebreak``). ``population``: the last generation's results, sorted by
    member."""
    arch_space = {name: space[name] for name in architecture}
    rest = {name: kind for name, kind in space.items() if name not in arch_space}
    teachers = top_members(population, fraction, tiebreak)
    students = []
    ids = student_ids(len(population), count, stage)
    for member, (arch, how) in zip(ids, propose_architectures(arch_space, count, reached, kept, rng), strict=True):
        if how == "random":
            base = sample_hparams(rest, rng)
        else:
            donor = population[int(rng.integers(len(population)))]
            base = {name: donor.hparams[name] for name in rest}
        teacher = teachers[int(rng.integers(len(teachers)))]
        students.append(Student(member, teacher, {**base, **arch}, how))
    return students


@dataclass(frozen=True)
class StageBook:
    """What a run knows of its stages, carried into every checkpoint (:meth:`to_json`).

    ``stage``: stages started so far (0: the first population's); ``began``: the generation after
    which the current stage began (0 for the first); ``steps_at_start``: env steps per member then;
    ``bests``: the population's best score at each generation of the stage; ``reached``: each
    architecture that ran, with the best score it reached and its stage (the BO's data); ``kept``:
    the best architecture of each finished stage; ``distilling``: the distillation under way (None
    outside one): its students, its rungs, the next rung to run and the students still in."""

    stage: int = 0
    began: int = 0
    steps_at_start: int = 0
    bests: tuple[float, ...] = ()
    reached: tuple[tuple[dict[str, Any], float, int], ...] = ()
    kept: tuple[dict[str, Any], ...] = ()
    distilling: Distilling | None = None

    def after_generation(self, population: Sequence[MemberResult], architecture: Sequence[str]) -> StageBook:
        """The book once a generation of the population is scored."""
        scores = [result.score for result in population if not math.isnan(result.score)]
        reached = list(self.reached)
        for result in population:
            if math.isnan(result.score):
                continue
            arch = {name: result.hparams[name] for name in architecture}
            for i, (known, score, stage) in enumerate(reached):
                if known == arch and stage == self.stage:
                    reached[i] = (known, max(score, result.score), stage)
                    break
            else:
                reached.append((arch, result.score, self.stage))
        best = max(scores) if scores else math.nan
        return replace(self, bests=(*self.bests, best), reached=tuple(reached))

    def due(self, steps_per_member: int, patience: int, every: int | None, max_stages: int) -> str | None:
        """Why a new stage starts now (:func:`stage_due`), or None."""
        steps = steps_per_member - self.steps_at_start
        return stage_due(self.bests, patience, steps, every, self.stage, max_stages)

    def best_architecture(self) -> dict[str, Any] | None:
        """The architecture that reached the best score in the current stage."""
        current = [(score, arch) for arch, score, stage in self.reached if stage == self.stage]
        return max(current, key=lambda item: item[0])[1] if current else None

    def start(self, distilling: Distilling) -> StageBook:
        """A new stage begins with its distillation; the stage that ends leaves its best architecture."""
        best = self.best_architecture()
        kept = (*self.kept, best) if best is not None else self.kept
        return replace(self, stage=self.stage + 1, kept=kept, bests=(), distilling=distilling)

    def finish(self, generation: int, steps_per_member: int) -> StageBook:
        """The distillation is over at ``generation``: the new stage's PBT begins."""
        return replace(self, distilling=None, began=generation, steps_at_start=steps_per_member)

    def to_json(self, space: SearchSpace) -> dict[str, Any]:
        def arch(values):
            return {name: space[name].json(value) for name, value in values.items()}

        return {
            "stage": self.stage,
            "began": self.began,
            "steps_at_start": self.steps_at_start,
            "bests": [None if math.isnan(b) else b for b in self.bests],
            "reached": [[arch(a), score, stage] for a, score, stage in self.reached],
            "kept": [arch(a) for a in self.kept],
            "distilling": self.distilling.to_json(space) if self.distilling is not None else None,
        }

    @classmethod
    def from_json(cls, entry: Mapping[str, Any] | None, space: SearchSpace) -> StageBook:
        if not entry:
            return cls()

        def arch(values):
            return {name: space[name].coerce(value) for name, value in values.items()}

        distilling = entry.get("distilling")
        return cls(
            stage=int(entry["stage"]),
            began=int(entry["began"]),
            steps_at_start=int(entry["steps_at_start"]),
            bests=tuple(math.nan if b is None else float(b) for b in entry["bests"]),
            reached=tuple((arch(a), float(score), int(stage)) for a, score, stage in entry["reached"]),
            kept=tuple(arch(a) for a in entry["kept"]),
            distilling=Distilling.from_json(distilling, space) if distilling is not None else None,
        )


@dataclass(frozen=True)
class Distilling:
    """A distillation under way: its students, its rungs (:func:`halving_rungs`), the next rung to
    run (``rung``), the ids of the students still in (``alive``), the generation after which it began
    and the env steps per member then (the students' counters start there)."""

    students: tuple[Student, ...]
    rungs: tuple[Rung, ...]
    began: int
    steps_at_start: int
    rung: int = 0
    alive: tuple[int, ...] = field(default=())

    def __post_init__(self):
        if not self.alive:
            object.__setattr__(self, "alive", tuple(s.member for s in self.students))

    @property
    def living(self) -> list[Student]:
        return [s for s in self.students if s.member in self.alive]

    def cut(
        self, scores: Mapping[int, float], tiebreak: Mapping[int, int] | None = None
    ) -> tuple[Distilling, list[int]]:
        """After rung ``rung``: the students it keeps (by ``scores``, {student: score}; equal scores by
        ``tiebreak``, each id's priority, lower first), best first, and the book moved to the next rung."""
        alive = list(self.alive)
        priorities = None if tiebreak is None else [tiebreak[m] for m in alive]
        order = survivors([scores[m] for m in alive], self.rungs[self.rung].keep, priorities)
        kept = [alive[i] for i in order]
        return replace(self, rung=self.rung + 1, alive=tuple(kept)), kept

    @property
    def done(self) -> bool:
        return self.rung >= len(self.rungs)

    def to_json(self, space: SearchSpace) -> dict[str, Any]:
        return {
            "students": [s.to_json(space) for s in self.students],
            "rungs": [[r.students, r.steps, r.keep] for r in self.rungs],
            "began": self.began,
            "steps_at_start": self.steps_at_start,
            "rung": self.rung,
            "alive": list(self.alive),
        }

    @classmethod
    def from_json(cls, entry: Mapping[str, Any], space: SearchSpace) -> Distilling:
        return cls(
            students=tuple(Student.from_json(s, space) for s in entry["students"]),
            rungs=tuple(Rung(*r) for r in entry["rungs"]),
            began=int(entry["began"]),
            steps_at_start=int(entry["steps_at_start"]),
            rung=int(entry["rung"]),
            alive=tuple(int(m) for m in entry["alive"]),
        )
