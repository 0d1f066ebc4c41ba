"""Selection invariants, over many population sizes and with ties (pure, no MPI)."""

import math

import numpy as np
import pytest

from evo.core.selection import keep_tied, ranking, select, truncation, truncation_count, winner_takes_all

SIZES = range(1, 10)


def score_sets(n, rng):
    yield list(rng.normal(size=n))
    yield [1.0] * n  # all tied
    yield list(rng.integers(0, 3, size=n).astype(float))  # many ties
    yield [float("nan")] + list(rng.normal(size=n - 1)) if n > 1 else [float("nan")]


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


def test_strategy_none_copies_nobody_and_plans_nothing():
    from evo.core.plan import plan_generation
    from evo.core.result import MemberResult
    from evo.core.space import ParamSpace

    assert select("none", [3.0, 1.0, 2.0, float("nan")], 0.25, np.random.default_rng(0)) == {}
    population = [MemberResult(member, 0, 0, s, hparams={"lr": 0.1}) for member, s in enumerate((1.0, 5.0))]
    plan = plan_generation(1, population, "none", {"lr": ParamSpace(0.01, 1.0, "log")}, np.random.default_rng(0))
    assert plan == []


ID_ORDERS = [[2, 0, 3, 1], [12, 0, 9, 5], [7, 3, 11, 1, 20, 4, 8, 2, 30]]


def id_population(ids, scores):
    from evo.core.result import MemberResult

    return [MemberResult(m, 0, 0, s, hparams={"lr": 0.01 * (m + 1)}) for m, s in zip(ids, scores, strict=True)]


@pytest.mark.parametrize("ids", ID_ORDERS)
@pytest.mark.parametrize("strategy, fraction", [("truncation", 0.25), ("truncation", 0.5), ("wta", 0.25)])
def test_the_plan_knows_members_by_id_whatever_their_ids_and_order(ids, strategy, fraction):
    """Ids that are not 0..N-1, gathered in any order: donors, recipients and their scores
    and hyperparameters are those of the ids, and the plan does not depend on the order."""
    from evo.core.plan import generation_rng, plan_generation, weight_moves
    from evo.core.space import ParamSpace

    space = {"lr": ParamSpace(1e-3, 1.0, "log")}
    rng = np.random.default_rng(len(ids))
    for scores in score_sets(len(ids), rng):
        population = id_population(ids, scores)
        by_id = {r.member: r for r in population}
        plan = plan_generation(3, population, strategy, space, generation_rng(0, 3), fraction, ties="copy")
        donors = weight_moves(plan)
        # selection invariants, on ids: the same as selecting over the scores sorted by id
        ordered = sorted(ids)
        expected = select(strategy, [by_id[m].score for m in ordered], fraction, generation_rng(0, 3))
        assert donors == {ordered[r]: ordered[d] for r, d in expected.items()}
        assert set(donors) | set(donors.values()) <= set(ids)
        assert not (set(donors) & set(donors.values()))
        for exploit in plan:
            assert exploit.recipient_score == by_id[exploit.recipient].score or math.isnan(exploit.recipient_score)
            assert exploit.donor_score == by_id[exploit.donor].score or math.isnan(exploit.donor_score)
            assert exploit.old_hparams == by_id[exploit.recipient].hparams
        shuffled = [population[i] for i in np.random.default_rng(1).permutation(len(population))]
        again = plan_generation(3, shuffled, strategy, space, generation_rng(0, 3), fraction, ties="copy")
        assert [e.to_json() for e in again] == [e.to_json() for e in plan]


def test_ids_are_never_positions_for_selection_and_pb2():
    """Gathered as [12, 0, 9, 5] with member 5 best and member 12 worst: member 12 copies
    member 5, and PB2's history and baselines are keyed by those ids."""
    from evo.core.pb2 import PB2
    from evo.core.plan import generation_rng, plan_generation, weight_moves
    from evo.core.space import ParamSpace

    space = {"lr": ParamSpace(1e-3, 1.0, "log")}
    population = id_population([12, 0, 9, 5], [1.0, 3.0, 2.0, 4.0])
    plan = plan_generation(1, population, "truncation", space, generation_rng(0, 1), 0.25)
    assert weight_moves(plan) == {12: 5}
    assert plan[0].old_hparams == {"lr": 0.13} and plan[0].recipient_score == 1.0 and plan[0].donor_score == 4.0

    pb2 = PB2(space, baselines={12: 0.5, 0: 1.0, 9: 2.5, 5: 3.0})
    pb2.observe(2, population)
    changes = {round(space["lr"].from_unit(x[0]), 6): dy for _, x, dy in pb2.observations}
    assert changes == {0.13: 0.5, 0.01: 2.0, 0.1: -0.5, 0.06: 1.0}
    pb2.rebase(population, {12: 5})
    assert pb2.baselines == {12: 4.0, 0: 3.0, 9: 2.0, 5: 4.0}
    with pytest.raises(ValueError, match="repeat"):
        plan_generation(1, population + population[:1], "wta", space, generation_rng(0, 1))


def test_keep_tied_maps_only_tied_recipients_to_themselves():
    nan = float("nan")
    scores = [5.0, 5.0, 1.0, nan, nan, 2.0]
    donors = {1: 0, 2: 0, 3: 4, 5: 0}
    assert keep_tied(donors, scores) == {1: 1, 2: 0, 3: 3, 5: 0}  # 1 ties 0; 3 and 4 are both NaN
    assert keep_tied({3: 0}, scores) == {3: 0}  # NaN never ties a number
    assert keep_tied({}, scores) == {}


def tie_plan(strategy, scores, ties):
    from evo.core.plan import generation_rng, plan_generation
    from evo.core.space import ParamSpace

    population = id_population(list(range(len(scores))), scores)
    space = {"lr": ParamSpace(1e-3, 1.0, "log")}
    return plan_generation(5, population, strategy, space, generation_rng(0, 5), 0.25, ties=ties)


@pytest.mark.parametrize("strategy", ["wta", "truncation"])
def test_a_population_failing_alike_copies_nobody_by_default(strategy):
    """Acrobot's every member at -500: winner-takes-all used to copy member 0, chosen only by
    its index, into the whole population. With the default tie rule nobody copies, and every
    recipient explores its own hyperparameters."""
    from evo.core.plan import weight_moves

    scores = [-500.0] * 8
    plan = tie_plan(strategy, scores, "explore")
    assert plan and weight_moves(plan) == {}
    for exploit in plan:
        assert exploit.donor == exploit.recipient
        assert exploit.old_hparams == {"lr": 0.01 * (exploit.recipient + 1)}  # its own, not member 0's
        assert exploit.new_hparams != exploit.old_hparams
    copied = weight_moves(tie_plan(strategy, scores, "copy"))
    assert copied and set(copied.values()) <= {0, 1}  # the old rule: the lowest indices win the tie
    assert set(copied) == {e.recipient for e in plan}  # the same recipients, only the copy differs


def test_truncation_copies_where_the_donor_is_better_and_explores_where_it_ties():
    from evo.core.plan import weight_moves

    scores = [3.0, 3.0, 3.0, 1.0, 2.0, 2.0, 2.0, 3.0]  # bottom 2: members 3 and 6; top 2: 0 and 1
    plan = tie_plan("truncation", scores, "explore")
    assert {e.recipient for e in plan} == {3, 6}
    assert set(weight_moves(plan)) == {3, 6}  # scores 1 and 2 are below every top member's 3
    scores = [2.0, 2.0, 2.0, 2.0, 1.0, 2.0, 2.0, 2.0]
    plan = {e.recipient: e for e in tie_plan("truncation", scores, "explore")}
    assert weight_moves(plan.values()) == {4: plan[4].donor}  # member 4 is worse: it copies
    assert plan[7].donor == 7  # member 7 ties every top member: it keeps its weights


def test_an_unknown_tie_rule_is_refused():
    with pytest.raises(ValueError, match="tie rule 'coin'"):
        tie_plan("wta", [1.0, 2.0], "coin")
