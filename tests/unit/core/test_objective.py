"""``--objective`` (evo.core.objective): its forms, the refusals of bad ones, what a member's score is,
and the refusal of a key the env never reported (pure)."""

import math

import pytest

from evo.core.objective import DEFAULT, Objective, Term, parse_objective, scores_of, unreported
from evo.core.result import MemberResult


def test_the_forms():
    assert parse_objective(None) == (DEFAULT, [])
    assert parse_objective("return") == (DEFAULT, [])
    assert parse_objective("return:max") == (DEFAULT, [])
    found, problems = parse_objective("info:is_success")
    assert problems == [] and found.terms == (Term("is_success"),) and not found.default
    found, _ = parse_objective("return, info:energy:min")
    assert found.terms == (Term(None), Term("energy", "min"))
    assert found.several and found.names == ("return", "info:energy") and found.info_keys == ("energy",)
    assert found.text == "return,info:energy:min"
    assert parse_objective(found.text)[0] == found


@pytest.mark.parametrize(
    "text, said",
    [
        ("retrun", "'retrun' is not an objective; did you mean 'return'?"),
        ("success", "'success' is not an objective; give 'return' (the episode return) or 'info:<key>'"),
        ("info", "'info' names no key"),
        ("info:", "'info:' names no key"),
        ("info:energy:lowest", "the direction 'lowest' of info:energy is not 'max' or 'min'"),
        ("return:up", "the direction 'up' of return is not 'max' or 'min'"),
        ("return,,info:x", "an empty objective between commas"),
        ("info:x,info:x:min", "info:x is given twice"),
    ],
)
def test_a_bad_form_is_refused_with_the_value_and_the_fix(text, said):
    found, problems = parse_objective(text)
    assert found == DEFAULT
    assert len(problems) == 1 and said in problems[0] and problems[0].startswith(f"--objective {text}")


def test_every_bad_term_is_reported_at_once():
    assert len(parse_objective("retrun,info,info:x:down")[1]) == 3


def test_the_score_is_the_first_objective_larger_better():
    minimised = Objective((Term("energy", "min"), Term(None)))
    assert minimised.score([2.5, 100.0]) == -2.5
    assert minimised.fitness([2.5, 100.0]) == (-2.5, 100.0)
    assert math.isnan(minimised.score([math.nan, 1.0]))
    assert scores_of(DEFAULT, [7.0]) == (7.0, ())
    assert scores_of(minimised, [2.5, 100.0]) == (-2.5, (2.5, 100.0))


def test_selection_ranks_one_objective_by_its_score_and_several_by_their_row():
    one = Objective((Term("success"),))
    results = [MemberResult(0, 0, 0, 0.5, objectives=(0.5,)), MemberResult(1, 0, 0, 0.7, objectives=(0.7,))]
    assert one.selection_keys(results) == [0.5, 0.7]
    two = Objective((Term(None), Term("energy", "min")))
    results = [MemberResult(0, 0, 0, 10.0, objectives=(10.0, 3.0)), MemberResult(1, 0, 0, math.nan)]
    keys = two.selection_keys(results)
    assert keys[0] == (10.0, -3.0) and all(math.isnan(v) for v in keys[1])


def test_a_key_no_member_s_episodes_reported_stops_the_run_naming_the_keys_reported():
    objective = parse_objective("return,info:energy:min")[0]
    ended = [
        MemberResult(0, 0, 10, 1.0, info_keys=("TimeLimit.truncated", "x")),
        MemberResult(1, 0, 10, 1.0, info_keys=None),
    ]
    said = unreported(objective, ended)
    assert "never put 'energy' in info" in said and "TimeLimit.truncated, x" in said and "members 0 finished" in said
    assert unreported(objective, [MemberResult(0, 0, 10, 1.0, info_keys=None)]) is None  # no episode ended yet
    assert unreported(objective, [*ended, MemberResult(2, 0, 10, 1.0, info_keys=("energy",))]) is None
    assert unreported(DEFAULT, ended) is None
