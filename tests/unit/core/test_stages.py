"""BG-PBT's stages, pure: when one is due, successive halving's rungs and survivors, and the
architectures proposed for a new stage's students (kept, by BO, at random)."""

import math

import numpy as np
import pytest

from evo.core.kinds import Choice, Integer
from evo.core.stages import Rung, halving_rungs, propose_architectures, stage_due, survivors

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
