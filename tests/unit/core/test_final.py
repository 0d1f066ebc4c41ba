"""The final pick's decisions (evo/core/final.py, pure): which members it plays, their fresh score, the pick
and its tie rule, the Procgen levels it plays. Whole runs that make it: tests/unit/runner/test_final_runs.py."""

import math

import numpy as np
import pytest

from evo.core.final import (
    Candidate,
    FinalSettings,
    FreshScore,
    Standing,
    candidates,
    fresh_score,
    held_out_levels,
    pick,
)
from evo.core.streams import tie_priorities


def standing(member, score, donor=None):
    return Standing(member, 4, 1024, score, donor)


def test_the_top_members_by_selection_score_leaving_out_those_holding_a_donor_s_weights():
    final = [standing(0, 3.0), standing(1, 9.0, donor=2), standing(2, 9.0), standing(3, 5.0), standing(4, math.nan)]
    final.append(standing(5, 5.0, donor=5))  # a tie that kept its own weights (explored without a copy)
    chosen, left_out = candidates(final, 3)
    assert [c.member for c in chosen] == [2, 3, 5]  # 5.0 twice: the lower id first, as selection ranks
    assert chosen[0] == Candidate(2, 4, 1024, 9.0)
    assert [s.member for s in left_out] == [1]
    assert [c.member for c in candidates(final, 10)[0]] == [2, 3, 5, 0]  # never an unscored member


def test_under_winner_takes_all_the_winner_is_all_there_is_to_play():
    final = [standing(0, 1.0, donor=2), standing(1, 2.0, donor=2), standing(2, 7.0), standing(3, 0.5, donor=2)]
    chosen, left_out = candidates(final, 3)
    assert [c.member for c in chosen] == [2]
    assert [s.member for s in left_out] == [1, 0, 3]


def test_a_fresh_score_is_the_mean_and_standard_error_of_the_finite_values():
    values = [3.0, 5.0, 10.0, math.nan]
    found = fresh_score(values)
    finite = np.array([3.0, 5.0, 10.0])
    assert found.count == 3
    assert found.mean == pytest.approx(finite.mean())
    assert found.standard_error == pytest.approx(finite.std(ddof=1) / math.sqrt(3))
    one = fresh_score([4.0])
    assert (one.mean, one.count) == (4.0, 1) and math.isnan(one.standard_error)
    assert math.isnan(fresh_score([]).mean) and fresh_score([]).count == 0


def test_the_pick_is_the_best_fresh_mean_not_the_best_selection_score():
    chosen = [Candidate(2, 4, 1024, 9.0), Candidate(0, 4, 1024, 6.0), Candidate(3, 4, 1024, 5.0)]
    fresh = {2: FreshScore(4.0, 1.0, 10), 0: FreshScore(7.5, 1.0, 10), 3: FreshScore(math.nan, math.nan, 0)}
    found = pick(chosen, fresh)
    assert (found.member, found.selection_member, found.tie) == (0, 2, None)


def test_a_tie_in_the_fresh_mean_goes_to_the_higher_selection_score_and_is_said():
    chosen = [Candidate(2, 4, 1024, 9.0), Candidate(0, 4, 1024, 6.0), Candidate(3, 4, 1024, 5.0)]
    fresh = {2: FreshScore(500.0, 0.0, 10), 0: FreshScore(400.0, 5.0, 10), 3: FreshScore(500.0, 0.0, 10)}
    found = pick(chosen, fresh)
    assert found.member == 2
    assert found.tie == "member 2 ties member(s) 3 at a fresh mean of 500; broken by the higher selection score"
    # the same selection score too: selection's order decides (its first, here member 3)
    found = pick([Candidate(3, 4, 1024, 9.0), Candidate(2, 4, 1024, 9.0)], fresh)
    assert found.member == 3
    assert found.tie == (
        "member 3 ties member(s) 2 at a fresh mean of 500; broken by selection's order (the same selection score: "
        "the run's tie draw)"
    )


def test_tied_selection_scores_rank_candidates_by_the_runs_draw_not_the_id():
    final = [standing(0, 3.0), standing(1, 5.0), standing(2, 5.0), standing(3, 5.0)]
    orders = set()
    for seed in range(8):
        priorities = tie_priorities((seed, 4), range(4))
        chosen, _ = candidates(final, 2, priorities)
        assert [c.member for c in chosen] == sorted((1, 2, 3), key=lambda m: priorities[m])[:2]
        orders.add(tuple(c.member for c in chosen))
    assert len(orders) > 1  # not [1, 2], the lower ids, every time


@pytest.mark.parametrize(
    "levels, expected",
    [
        ((0, 200, 200, 0), (10_000, 1_000)),  # the autorl set-up: trained on 0-199, evaluated on the rest
        ((0, 0, 0, 0), None),  # trained on the whole distribution: nothing held out
        ((9_500, 1_000, 10_500, 0), (10_500, 1_000)),  # training levels past 10,000: after them
        ((0, 200, 12_000, 500), (12_500, 1_000)),  # evaluation levels past 10,000: after them
    ],
)
def test_procgen_s_final_levels_are_none_it_trained_or_was_selected_on(levels, expected):
    assert held_out_levels(*levels) == expected


def test_what_the_records_say_of_how_it_played():
    settings = FinalSettings(20, 3, 77, (10_000, 1_000), False, "info:success", 12, True)
    assert settings.how == {
        "episodes": 20,
        "top": 3,
        "seed": 77,
        "envs": 1,
        "levels": [10_000, 1_000],
        "actions": "sampled",
        "score": "info:success",
        "generation": 12,
    }
