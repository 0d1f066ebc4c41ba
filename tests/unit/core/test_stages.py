"""BG-PBT's stages, pure: when one is due, successive halving's rungs and survivors, and the
architectures proposed for a new stage's students (kept, by BO, at random)."""

import json
import math

import numpy as np
import pytest

from evo.core.kinds import Choice, Integer, LogFloat
from evo.core.result import MemberResult
from evo.core.stages import (
    Distilling,
    Rung,
    StageBook,
    Student,
    halving_rungs,
    plan_students,
    propose_architectures,
    stage_due,
    student_ids,
    survivors,
    top_members,
)

NAN = math.nan


@pytest.mark.parametrize(
    "bests, due",
    [
        ([1.0, 2.0, 3.0, 3.0, 2.5], False),  # 2 generations without a new best: patience 3 not reached
        ([1.0, 3.0, 3.0, 2.0, 3.0], True),  # 3.0 equalled, never beaten, for 3 generations
        ([1.0, 3.0, 2.0, 2.0, 3.1], False),  # beaten at the last generation
        ([NAN, NAN, NAN, NAN], False),  # nothing scored yet
        ([2.0, NAN, NAN, NAN], True),  # scored once, then nothing for 3 generations
        ([1.0, 2.0, 3.0], False),  # a stage shorter than patience + 1
    ],
)
def test_a_stage_is_due_when_the_best_has_not_improved_for_patience_generations(bests, due):
    reason = stage_due(bests, patience=3, steps_in_stage=0, every=None, stages_done=0, max_stages=2)
    assert (reason is not None) == due
    if due:
        assert "has not improved for 3 generations" in reason


def test_a_stage_is_due_after_its_budget_and_never_past_the_last():
    assert "at most 1000" in stage_due([1.0, 2.0], 5, steps_in_stage=1000, every=1000, stages_done=1, max_stages=2)
    assert stage_due([1.0, 2.0], 5, steps_in_stage=999, every=1000, stages_done=1, max_stages=2) is None
    flat = [3.0] * 10
    assert stage_due(flat, 3, steps_in_stage=10**9, every=1000, stages_done=2, max_stages=2) is None
    with pytest.raises(ValueError, match="patience 0"):
        stage_due(flat, 0, 0, None, 0, 2)


def test_halving_runs_bg_pbts_rungs():
    # BG-PBT's set-up: 24 students for 8 members, 30M env steps of distillation
    assert halving_rungs(24, 8, 30_000_000) == [Rung(24, 7_500_000, 12), Rung(12, 22_500_000, 8)]
    rungs = halving_rungs(24, 4, 8000)
    assert [(r.students, r.keep) for r in rungs] == [(24, 12), (12, 6), (6, 4)]
    assert [r.steps for r in rungs] == [1000, 2000, 5000]  # 8000/8, 8000/4, the rest
    assert halving_rungs(4, 4, 100) == [Rung(4, 100, 4)]


@pytest.mark.parametrize(
    "candidates, population, budget", [(24, 8, 30_000), (9, 4, 1001), (100, 3, 77_777), (5, 1, 10)]
)
def test_each_survivor_is_distilled_for_the_whole_budget_and_each_rung_cuts_to_the_next(candidates, population, budget):
    rungs = halving_rungs(candidates, population, budget)
    assert sum(r.steps for r in rungs) == budget
    assert rungs[0].students == candidates and rungs[-1].keep == population
    assert all(a.keep == b.students for a, b in zip(rungs[:-1], rungs[1:], strict=True))
    assert all(r.keep < r.students for r in rungs) and all(r.steps > 0 for r in rungs)


def test_halving_refuses_what_it_cannot_cut():
    with pytest.raises(ValueError, match="3 candidates for a population of 4"):
        halving_rungs(3, 4, 100)
    with pytest.raises(ValueError, match="eta 1"):
        halving_rungs(8, 4, 100, eta=1)


def test_survivors_are_the_best_with_nan_last_and_ties_to_the_lower_index():
    assert survivors([1.0, NAN, 3.0, 3.0, 2.0], 3) == [2, 3, 4]
    assert survivors([NAN, NAN, 0.0], 2) == [2, 0]


SPACE = {"pi_layers": Integer(1, 5), "pi_width": Choice([32, 64, 128, 256]), "vf_layers": Integer(1, 5)}


def test_kept_first_then_half_by_bo_then_random():
    rng = np.random.default_rng(0)
    kept = [{"pi_layers": 2, "pi_width": 64, "vf_layers": 2, "learning_rate": 3e-4}]
    reached = [({n: k.sample(rng) for n, k in SPACE.items()}, float(score), 0) for score in range(8)]
    proposed = propose_architectures(SPACE, 6, reached, kept, rng)
    assert [how for _, how in proposed] == ["kept", "bo", "bo", "bo", "random", "random"]
    assert proposed[0][0] == {"pi_layers": 2, "pi_width": 64, "vf_layers": 2}
    assert all(set(a) == set(SPACE) and all(SPACE[n].contains(v) for n, v in a.items()) for a, _ in proposed)


def test_without_two_distinct_scores_the_bo_half_is_random():
    rng = np.random.default_rng(1)
    reached = [
        ({"pi_layers": 1, "pi_width": 32, "vf_layers": 1}, 1.0, 0),
        ({"pi_layers": 2, "pi_width": 32, "vf_layers": 1}, NAN, 0),
    ]
    assert [how for _, how in propose_architectures(SPACE, 4, reached, [], rng)] == ["random"] * 4


def test_bo_goes_where_the_scores_were_high():
    """Scores rise with depth: BO's picks are deep (a uniform draw of 1-5 layers averages 3), over seeds."""
    bo = []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        reached = []
        for _ in range(16):
            arch = {n: k.sample(rng) for n, k in SPACE.items()}
            reached.append((arch, float(arch["pi_layers"]) + 0.1 * rng.standard_normal(), 0))
        bo += [arch["pi_layers"] for arch, how in propose_architectures(SPACE, 4, reached, [], rng) if how == "bo"]
    assert len(bo) == 12 and np.mean(bo) >= 4.0, bo  # measured: 4.9 (seeds 6-11: 5.0, 12-17: 4.7)


# --- a run's bookkeeping and a stage's students ---------------------------------------------------

HP_SPACE = {
    "learning_rate": LogFloat(1e-4, 1e-2),
    "pi_layers": Integer(1, 5),
    "pi_width": Choice([32, 64, 128, 256]),
}
ARCH = ["pi_layers", "pi_width"]


def population(scores, layers=(1, 2, 3, 4), steps=1000):
    return [
        MemberResult(m, 0, steps, s, hparams={"learning_rate": 1e-3 * (m + 1), "pi_layers": layers[m], "pi_width": 64})
        for m, s in enumerate(scores)
    ]


def test_the_book_keeps_each_architectures_best_per_stage_and_is_due_by_steps_or_patience():
    book = StageBook().after_generation(population([1.0, 2.0, NAN, 0.5]), ARCH)
    book = book.after_generation(population([3.0, 1.0, 0.0, 0.5], layers=(1, 1, 3, 4)), ARCH)
    assert book.bests == (2.0, 3.0)
    reached = {(a["pi_layers"], stage): score for a, score, stage in book.reached}
    assert reached == {(1, 0): 3.0, (2, 0): 2.0, (4, 0): 0.5, (3, 0): 0.0}
    assert book.best_architecture() == {"pi_layers": 1, "pi_width": 64}
    assert book.due(1000, patience=5, every=1000, max_stages=1) is not None  # 1000 steps since the start
    assert book.due(999, patience=1, every=1000, max_stages=1) is None  # improved at its last generation
    flat = book.after_generation(population([1.0, 1.0, 1.0, 1.0]), ARCH)
    assert "has not improved for 1 generations" in flat.due(0, patience=1, every=None, max_stages=1)
    started = flat.start(Distilling((), (Rung(4, 10, 4),), began=3, steps_at_start=1000))
    assert (started.stage, started.bests, started.kept) == (1, (), ({"pi_layers": 1, "pi_width": 64},))
    assert started.due(10**9, patience=1, every=1, max_stages=1) is None  # no stage past the maximum
    finished = started.finish(5, 2000)
    assert (finished.distilling, finished.began, finished.steps_at_start) == (None, 5, 2000)
    assert finished.due(2999, 1, every=1000, max_stages=2) is None
    assert finished.due(3000, 1, every=1000, max_stages=2) is not None


def test_a_distillation_cuts_to_the_best_students_rung_by_rung():
    students = tuple(Student(m, 0, {}, "random") for m in (4, 5, 6, 7, 8))
    distilling = Distilling(students, tuple(halving_rungs(5, 2, 100)), began=1, steps_at_start=0)
    assert distilling.alive == (4, 5, 6, 7, 8) and [r.keep for r in distilling.rungs] == [2]
    after, kept = distilling.cut({4: 1.0, 5: NAN, 6: 3.0, 7: 2.0, 8: 3.0})
    assert kept == [6, 8] and after.alive == (6, 8) and after.done  # ties: the lower id first; NaN last
    assert [s.member for s in after.living] == [6, 8]


def test_the_book_and_its_distillation_go_through_json_unchanged():
    rng = np.random.default_rng(0)
    pop = population([1.0, 2.0, 3.0, 4.0])
    book = StageBook().after_generation(pop, ARCH)
    students = plan_students(1, pop, HP_SPACE, ARCH, 6, book.reached, book.kept, 0.25, rng)
    book = book.start(Distilling(tuple(students), tuple(halving_rungs(6, 4, 100)), began=1, steps_at_start=1000))
    text = json.loads(json.dumps(book.to_json(HP_SPACE)))
    assert StageBook.from_json(text, HP_SPACE) == book
    assert StageBook.from_json(None, HP_SPACE) == StageBook()


def test_a_stages_students_as_bg_pbt_makes_them():
    """Ids after the population's and every earlier stage's; teachers from the top quarter; a kept or BO
    architecture comes with a population member's hyperparameters, a random one with drawn ones."""
    assert list(student_ids(4, 6, 1)) == [4, 5, 6, 7, 8, 9] and list(student_ids(4, 6, 2)) == list(range(10, 16))
    pop = population([1.0, 4.0, 3.0, 2.0] * 2, layers=(1, 2, 3, 4, 5, 1, 2, 3))
    pop = [MemberResult(m, 0, 1000, r.score, hparams=r.hparams) for m, r in enumerate(pop)]
    assert top_members(pop, 0.25) == [1, 5]
    book = StageBook().after_generation(pop, ARCH)
    for seed in range(5):
        students = plan_students(2, pop, HP_SPACE, ARCH, 12, book.reached, ({"pi_layers": 2, "pi_width": 64},), 0.25,
                                 np.random.default_rng(seed))  # fmt: skip
        assert [s.member for s in students] == list(student_ids(8, 12, 2))
        assert {s.teacher for s in students} <= {1, 5}
        assert [s.how for s in students] == ["kept"] + ["bo"] * 6 + ["random"] * 5
        assert students[0].hparams["pi_layers"] == 2
        rates = {r.hparams["learning_rate"] for r in pop}
        for s in students:
            assert all(HP_SPACE[n].contains(s.hparams[n]) for n in HP_SPACE)
        assert all(s.hparams["learning_rate"] in rates for s in students if s.how != "random")
        assert sum(s.hparams["learning_rate"] in rates for s in students if s.how == "random") == 0


def test_a_stages_teachers_and_a_rungs_survivors_tied_are_drawn_by_the_run_and_named():
    """Three members tied for two teachers' places, three students tied for two survivors': the places go
    as the run's tie draw ranks them (not the lower ids: another seed, another pair), and the tie is named."""
    from evo.core.stages import tied_with
    from evo.core.streams import tie_priorities

    pop = [MemberResult(m, 0, 1000, s) for m, s in enumerate([4.0, 4.0, 1.0, 4.0, 0.5, 0.2, 0.1, 0.0])]
    students = tuple(Student(m, 0, {}, "random") for m in (8, 9, 10, 11))
    teachers, kept_pairs = set(), set()
    for seed in range(8):
        priorities = tie_priorities((seed, 3), range(12))
        top = top_members(pop, 0.25, priorities)
        assert top == sorted((0, 1, 3), key=lambda m: priorities[m])[:2]
        assert tied_with({r.member: r.score for r in pop}, top) == (0, 1, 3)
        teachers.add(tuple(top))
        distilling = Distilling(students, (Rung(4, 100, 2),), began=1, steps_at_start=0)
        scores = {8: 2.0, 9: 2.0, 10: 1.0, 11: 2.0}
        _, kept = distilling.cut(scores, priorities)
        assert kept == sorted((8, 9, 11), key=lambda m: priorities[m])[:2]
        assert tied_with(scores, kept) == (8, 9, 11)
        kept_pairs.add(tuple(kept))
    assert len(teachers) > 1 and len(kept_pairs) > 1
    assert tied_with({0: 3.0, 1: 2.0, 2: 2.0}, [0]) == ()  # no tie touches the chosen: nothing to say
