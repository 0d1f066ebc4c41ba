"""Evaluation scores that rank no one (evo.core.evaluation.uninformative_scores): every member the same under
deterministic actions, no higher than the lowest training score, while the training scores differ. The runs'
log lines are tests/unit/runner/test_evaluation_runs.py's."""

import math

from evo.core.evaluation import uninformative_scores
from evo.core.result import MemberResult

NAN = math.nan


def population(tests, trains):
    return [
        MemberResult(member, 0, 100, test, score_train=train, score_test=test)
        for member, (test, train) in enumerate(zip(tests, trains, strict=True))
    ]


def test_equal_deterministic_scores_below_differing_training_scores_are_said_with_the_fix():
    text = uninformative_scores(population([0.0, 0.0, 0.0], [0.13, 0.47, 0.2]), "deterministic")
    assert text.startswith("every member scored 0 on its evaluation episodes (deterministic actions")
    assert "(0.13 to 0.47)" in text and "--eval-actions sampled" in text
    # at the lowest training score, a member without an evaluation score left out
    assert uninformative_scores(population([1.0, 1.0, NAN], [1.0, 3.0, 9.0]), "deterministic") is not None


def test_scores_that_can_rank_or_say_nothing_are_not_said():
    deterministic = "deterministic"
    assert uninformative_scores(population([0.0, 0.0], [0.1, 0.4]), "sampled") is None  # the fix taken
    assert uninformative_scores(population([0.0, 0.5], [0.1, 0.4]), deterministic) is None  # they differ
    assert uninformative_scores(population([0.0, 0.0], [0.3, 0.3]), deterministic) is None  # training alike too
    assert uninformative_scores(population([500.0, 500.0], [420.0, 480.0]), deterministic) is None  # at the cap
    assert uninformative_scores(population([0.0], [0.5]), deterministic) is None  # one member
    assert uninformative_scores(population([NAN, NAN], [0.1, 0.4]), deterministic) is None  # no evaluation
    assert uninformative_scores(population([0.0, 0.0], [0.1, NAN]), deterministic) is None  # one training score
