"""``--objective`` (evo.core.objective): its forms, the refusals of bad ones, what a member's score is,
the refusal of a key the env never reported, and values that are not finite (pure)."""

import math

import pytest

from evo.core.objective import (
    DEFAULT,
    Objective,
    Term,
    nonfinite_warning,
    parse_objective,
    scores_of,
    term_values,
    unreported,
)
from evo.core.result import MemberResult, new_best
from evo.core.selection import ranking


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


def test_values_that_are_not_finite_are_left_out_counted_and_never_a_score():
    """Issue 54 N6: +inf in an info objective won every exploit and became the kept best."""
    objective = parse_objective("info:merit,return")[0]
    values, nonfinite = term_values(objective, 4.0, {"merit": [0.5, math.inf, math.nan, 0.7]})
    assert values == pytest.approx([0.6, 4.0]) and nonfinite == {"merit": 2}
    values, nonfinite = term_values(objective, 4.0, {"merit": [math.nan, -math.inf]})
    assert math.isnan(values[0]) and nonfinite == {"merit": 2}  # none finite: as a member whose episodes lacked it
    assert term_values(objective, 4.0, {"merit": []})[1] == {}
    for value in (math.inf, -math.inf):  # a mean that still is not finite (it overflowed) is no score
        assert math.isnan(scores_of(parse_objective("info:merit")[0], [value])[0])
        assert math.isnan(scores_of(parse_objective("info:merit:min")[0], [value])[0])
        assert all(math.isnan(v) for v in objective.fitness([value, value]))
    assert list(ranking([0.5, math.inf, math.nan, -math.inf, 0.7])) == [4, 0, 1, 2, 3]
    results = [MemberResult(0, 0, 8, math.inf), MemberResult(1, 0, 8, 0.5)]
    assert not results[0].scored and new_best(results, None).member == 1 and new_best(results[:1], None) is None


def test_a_key_only_ever_nan_or_inf_is_a_key_never_reported_and_the_rest_are_named():
    objective = parse_objective("info:merit")[0]
    only_nan = [
        MemberResult(0, 0, 8, math.nan, info_keys=("cost",), nonfinite={"merit": 3}),
        MemberResult(1, 0, 8, math.nan, info_keys=("cost",)),
    ]
    said = unreported(objective, only_nan)
    assert "never put 'merit' in info as a finite number when an episode ended (only as NaN or ±inf: 'merit')" in said
    assert "make the env report 'merit' as a finite number at the end of every episode" in said
    assert nonfinite_warning(objective, only_nan) == (
        "info:merit was NaN or ±inf at the end of 3 scored episodes (member 0: 3): those values are left out, each "
        "member scored on its finite ones (with none, it ranks last, as a member whose episodes did not report the key)"
    )
    assert nonfinite_warning(objective, [MemberResult(0, 0, 8, 0.5, info_keys=("merit",))]) is None
