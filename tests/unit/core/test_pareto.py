"""MO-PBT's ranking of several objectives (evo.core.pareto): the fronts against pymoo's non-dominated
sorting on random populations, and the ε-net within a front, by cases (pure, no MPI)."""

import math

import numpy as np
import pytest

from evo.core.pareto import dominates, front_of, fronts, pareto_ranking, scaled

NAN = math.nan


def reference_fronts(values: np.ndarray) -> list[set[int]]:
    """pymoo's non-dominated sorting (it minimises: the values negated), rows with a NaN left out."""
    from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

    complete = np.flatnonzero(~np.isnan(values).any(axis=1))
    if not len(complete):
        return []
    found = NonDominatedSorting().do(-values[complete])
    return [{int(complete[i]) for i in front} for front in found]


def random_population(rng: np.random.Generator) -> np.ndarray:
    """2-30 members, 2-4 objectives; whole numbers from a small range half the time (ties, equal members)."""
    members, objectives = int(rng.integers(2, 31)), int(rng.integers(2, 5))
    if rng.random() < 0.5:
        values = rng.integers(0, 4, size=(members, objectives)).astype(float)
    else:
        values = rng.normal(size=(members, objectives))
    if rng.random() < 0.3:
        values[rng.random(members) < 0.2, int(rng.integers(objectives))] = NAN
    return values


def test_the_fronts_are_pymoo_s_on_random_populations():
    pytest.importorskip("pymoo", reason="pymoo is the reference: pip install pymoo (the dev extra)")
    rng = np.random.default_rng(2023)
    for _ in range(300):
        values = random_population(rng)
        assert [set(front) for front in fronts(values)] == reference_fronts(values)


def test_no_member_of_a_front_dominates_another_and_each_later_one_is_dominated_by_an_earlier_front():
    rng = np.random.default_rng(7)
    for _ in range(100):
        values = random_population(rng)
        found = fronts(values)
        for k, front in enumerate(found):
            assert not any(dominates(values[i], values[j]) for i in front for j in front)
            if k:
                assert all(any(dominates(values[i], values[j]) for i in found[k - 1]) for j in front)


def test_the_ranking_places_front_by_front_and_members_with_a_nan_last_by_index():
    rng = np.random.default_rng(11)
    for _ in range(100):
        values = random_population(rng)
        order = list(pareto_ranking(values))
        assert sorted(order) == list(range(len(values)))
        front = front_of(values)
        placed = [int(front[i]) for i in order]
        complete = [f for f in placed if f >= 0]
        assert complete == sorted(complete)
        incomplete = [i for i in order if front[i] < 0]
        assert order[len(complete) :] == incomplete == sorted(incomplete)


def test_the_first_member_is_the_first_front_s_best_in_the_first_objective():
    values = np.array([[1.0, 5.0], [3.0, 1.0], [2.0, 3.0], [0.0, 0.0]])
    assert pareto_ranking(values)[0] == 1


def test_the_epsilon_net_places_the_farthest_member_next():
    # one front on a line: (1, 0) first (best first objective), then the far end (0, 1), then the middle
    values = np.array([[0.5, 0.5], [0.0, 1.0], [1.0, 0.0]])
    assert list(pareto_ranking(values)) == [2, 1, 0]
    # five on the line: the ends, then the middle, then the quarter points (the first of equals by first objective)
    line = np.array([[x, 1.0 - x] for x in (0.0, 0.25, 0.5, 0.75, 1.0)])
    assert list(pareto_ranking(line)) == [4, 0, 2, 3, 1]


def test_the_next_front_is_spread_away_from_every_member_already_placed():
    # front 0: (1, 0) and (0, 1); front 1: (0.9, -0.1) next to the first, (-0.1, 0.9) next to the second,
    # (0.45, 0.45) away from both: it goes first in its front
    values = np.array([[1.0, 0.0], [0.0, 1.0], [0.9, -0.1], [-0.1, 0.9], [0.45, 0.45]])
    order = list(pareto_ranking(values))
    assert order[:2] == [0, 1] and order[2] == 4


def test_objectives_are_scaled_so_that_a_large_one_does_not_decide_the_spread_alone():
    # a return in hundreds, an objective in tenths, one front. After (1000, 0) and (0, 1), the return alone
    # would place (500, 0.02) next (500 from both ends); scaled, (100, 0.5) is farther from both
    values = np.array([[1000.0, 0.0], [0.0, 1.0], [500.0, 0.02], [100.0, 0.5]])
    assert list(front_of(values)) == [0, 0, 0, 0]
    assert list(pareto_ranking(values)) == [0, 1, 3, 2]
    # the order does not depend on the objectives' units
    assert list(pareto_ranking(values * [1e-3, 1e3] + [5.0, -2.0])) == [0, 1, 3, 2]
    assert scaled(values).min() == 0.0 and scaled(values).max() == 1.0


def test_equal_members_share_a_front_and_the_copy_comes_last_in_it():
    values = np.array([[1.0, 1.0], [1.0, 1.0], [0.0, 2.0]])
    assert list(front_of(values)) == [0, 0, 0]
    assert list(pareto_ranking(values)) == [0, 2, 1]


def test_a_population_without_a_complete_member_ranks_by_index():
    values = np.array([[NAN, 1.0], [2.0, NAN]])
    assert fronts(values) == []
    assert list(pareto_ranking(values)) == [0, 1]
