"""Selection invariants, over many population sizes and with ties (pure, no MPI)."""

import math

import numpy as np
import pytest

from evo.core.selection import (
    keep_tied,
    leaders,
    ranking,
    select,
    truncation,
    truncation_count,
    winner_takes_all,
)
from evo.core.streams import tie_priorities
from tests.unit.core.scores import score_sets

SIZES = range(1, 10)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.3, 0.5])
def test_truncation_invariants(n, fraction):
    rng = np.random.default_rng(n)
    for scores in score_sets(n, rng):
        for trial in range(20):
            donors = truncation(scores, fraction, np.random.default_rng(trial))
            count = truncation_count(n, fraction)
            order = list(ranking(scores))
            top, bottom = set(order[:count]), set(order[n - count :])
            assert count == min(math.ceil(n * fraction), n // 2)
            # bottom members are all replaced, and nobody else is
            assert set(donors) == bottom
            # every donor is in the top group, and no top member is overwritten
            assert set(donors.values()) <= top
            assert not (set(donors) & top)
            # a recipient is never also a donor
            assert not (set(donors) & set(donors.values()))


def test_truncation_ranks_by_score_and_breaks_ties_by_index():
    scores = [5.0, 1.0, 9.0, 1.0, 7.0, 3.0, 1.0, 8.0]
    donors = truncation(scores, 0.25, np.random.default_rng(0))
    # two bottom: the tied 1.0s at members 1, 3, 6 rank by index, so 3 and 6 are last
    assert set(donors) == {3, 6}
    assert set(donors.values()) <= {2, 7}


def test_nan_scores_rank_last():
    assert list(ranking([1.0, float("nan"), 0.0])) == [0, 2, 1]
    assert set(truncation([float("nan"), 2.0, 3.0, 1.0], 0.25, np.random.default_rng(0))) == {0}


def test_truncation_count_is_exact_for_decimal_fractions():
    assert truncation_count(10, 0.3) == 3  # 10 * 0.3 = 3.0000000000000004 in floats
    assert truncation_count(4, 0.25) == 1
    assert truncation_count(5, 0.25) == 2
    assert truncation_count(3, 0.5) == 1
    assert truncation_count(1, 0.5) == 0


def test_truncation_donors_are_drawn_uniformly_from_the_top():
    scores = list(range(8))  # top quarter = members 7 and 6
    picks = [truncation(scores, 0.25, np.random.default_rng(seed))[0] for seed in range(400)]
    counts = {m: picks.count(m) for m in set(picks)}
    assert set(counts) == {6, 7}
    assert 140 < counts[6] < 260


def test_truncation_is_a_function_of_scores_and_generator():
    scores = list(np.random.default_rng(1).normal(size=9))
    a = truncation(scores, 0.25, np.random.default_rng(42))
    b = truncation(scores, 0.25, np.random.default_rng(42))
    assert a == b


@pytest.mark.parametrize("n", SIZES)
def test_winner_takes_all(n):
    rng = np.random.default_rng(n)
    for scores in score_sets(n, rng):
        donors = winner_takes_all(scores)
        best = int(ranking(scores)[0])
        assert best not in donors
        assert set(donors) == set(range(n)) - {best}
        assert set(donors.values()) <= {best}


def test_winner_ties_go_to_lowest_index():
    assert winner_takes_all([3.0, 5.0, 5.0]) == {0: 1, 2: 1}


def test_select_rejects_unknown_strategy():
    with pytest.raises(ValueError, match="unknown selection strategy 'best'"):
        select("best", [1.0, 2.0], 0.25, np.random.default_rng(0))


def test_strategy_none_copies_nobody():
    assert select("none", [3.0, 1.0, 2.0, float("nan")], 0.25, np.random.default_rng(0)) == {}


def test_keep_tied_maps_only_tied_recipients_to_themselves():
    nan = float("nan")
    scores = [5.0, 5.0, 1.0, nan, nan, 2.0]
    donors = {1: 0, 2: 0, 3: 4, 5: 0}
    assert keep_tied(donors, scores) == {1: 1, 2: 0, 3: 3, 5: 0}  # 1 ties 0; 3 and 4 are both NaN
    assert keep_tied({3: 0}, scores) == {3: 0}  # NaN never ties a number
    assert keep_tied({}, scores) == {}


# --- several objectives (MO-PBT): the population ranked by Pareto fronts ---------------------------

FRONTS = [
    (1.0, 0.0),  # 0: front 0
    (0.0, 1.0),  # 1: front 0
    (0.5, 0.5),  # 2: front 0
    (0.4, 0.4),  # 3: front 1 (2 dominates it)
    (0.1, 0.1),  # 4: front 2
    (0.0, 0.0),  # 5: front 3
    (0.2, 0.05),  # 6: front 2
    (0.05, 0.2),  # 7: front 2
]


def test_several_objectives_truncation_copies_from_the_top_of_the_first_front_into_the_last():
    from evo.core.pareto import front_of

    front = front_of(np.array(FRONTS))
    for seed in range(50):
        donors = truncation(FRONTS, 0.25, np.random.default_rng(seed))  # two replaced
        assert set(donors) == {5, 7}  # the last front, then front 2's last in its ε-net order
        assert all(front[d] == 0 for d in donors.values())
        assert set(donors.values()) <= {0, 1}  # the top two of the order: the ends of the first front


def test_several_objectives_winner_takes_all_copies_a_first_front_member_into_every_other():
    picks = []
    for seed in range(300):
        donors = winner_takes_all(FRONTS, np.random.default_rng(seed))
        assert set(donors) == {3, 4, 5, 6, 7}  # the first front keeps its weights
        assert set(donors.values()) <= {0, 1, 2}
        picks += list(donors.values())
    counts = [picks.count(m) for m in (0, 1, 2)]  # uniform over the front: 500 draws each
    assert all(400 < c < 600 for c in counts), counts
    with pytest.raises(ValueError, match="give rng"):
        winner_takes_all(FRONTS)


def test_several_objectives_with_one_member_in_front_draws_nothing():
    scores = [(1.0, 1.0), (0.0, 0.5), (0.5, 0.0)]
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    assert winner_takes_all(scores, rng) == {1: 0, 2: 0}
    assert rng.bit_generator.state == before


def test_several_objectives_tie_only_when_every_one_ties():
    scores = [(1.0, 2.0), (1.0, 2.0), (1.0, 3.0), (math.nan, math.nan), (math.nan, math.nan)]
    assert keep_tied({1: 0, 0: 2, 3: 4}, scores) == {1: 1, 0: 2, 3: 3}


# --- ties: broken by the run's draw (evo.core.streams.tie_priorities), not by the member id -------


def drawn_winner(seed: int, generation: int, scores) -> int:
    priorities = tie_priorities((seed, generation), range(len(scores)))
    return leaders(scores, [priorities[m] for m in range(len(scores))])[0]


def test_a_tie_is_broken_by_the_runs_draw_reproducibly_and_not_by_the_index():
    scores = [5.0, 5.0, 5.0, 5.0, 1.0]
    winners = {drawn_winner(seed, 1, scores) for seed in range(20)}
    assert winners == {0, 1, 2, 3}  # every tied member wins under some seed: the lower index is not favoured
    assert all(drawn_winner(seed, 1, scores) == drawn_winner(seed, 1, scores) for seed in range(20))
    assert {drawn_winner(3, generation, scores) for generation in range(20)} == {0, 1, 2, 3}  # a new draw per key


def test_the_draw_orders_only_equal_scores():
    """A ranking without a tie is the same with the draw: the draw changes a decision only at a tie."""
    rng = np.random.default_rng(4)
    for _ in range(50):
        scores = list(rng.normal(size=7))
        priorities = list(tie_priorities((9, 2), range(7)).values())
        assert list(ranking(scores, priorities)) == list(ranking(scores))
    scores = [2.0, float("nan"), 7.0, 2.0, float("nan")]
    priorities = [tie_priorities((1, 1), range(5))[m] for m in range(5)]
    order = list(ranking(scores, priorities))
    assert order[0] == 2 and set(order[1:3]) == {0, 3} and set(order[3:]) == {1, 4}
    assert order[1:3] == sorted((0, 3), key=lambda m: priorities[m])  # the tie by the draw, lower first


def test_a_members_priority_is_its_ids_wherever_it_is_held():
    assert tie_priorities((5, 3), [7, 2, 9]) == {m: tie_priorities((5, 3), [m])[m] for m in (9, 2, 7)}
    assert tie_priorities((5, 3), [0])[0] != tie_priorities((5, 4), [0])[0] != tie_priorities((6, 3), [0])[0]
