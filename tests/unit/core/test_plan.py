"""A generation's plan (evo.core.plan): members known by id, the explorer it is given, and the
tie rule (pure, no MPI)."""

import math

import numpy as np
import pytest

from evo.core.explorers import PB2, make_explorer
from evo.core.kinds import LogFloat
from evo.core.plan import generation_rng, plan_generation, weight_moves
from evo.core.result import MemberResult
from evo.core.rules import PBTRules
from evo.core.selection import select
from evo.core.streams import tie_priorities
from tests.unit.core.scores import score_sets

SPACE = {"lr": LogFloat(1e-3, 1.0)}


def perturb(space=SPACE):
    return make_explorer("perturb", space)


def test_strategy_none_plans_nothing():
    population = [MemberResult(member, 0, 0, s, hparams={"lr": 0.1}) for member, s in enumerate((1.0, 5.0))]
    explorer = perturb({"lr": LogFloat(0.01, 1.0)})
    plan = plan_generation(1, population, "none", explorer, np.random.default_rng(0))
    assert plan == []


ID_ORDERS = [[2, 0, 3, 1], [12, 0, 9, 5], [7, 3, 11, 1, 20, 4, 8, 2, 30]]


def id_population(ids, scores):
    return [MemberResult(m, 0, 0, s, hparams={"lr": 0.01 * (m + 1)}) for m, s in zip(ids, scores, strict=True)]


@pytest.mark.parametrize("ids", ID_ORDERS)
@pytest.mark.parametrize("strategy, fraction", [("truncation", 0.25), ("truncation", 0.5), ("wta", 0.25)])
def test_the_plan_knows_members_by_id_whatever_their_ids_and_order(ids, strategy, fraction):
    """Ids that are not 0..N-1, gathered in any order: donors, recipients and their scores
    and hyperparameters are those of the ids, and the plan does not depend on the order."""
    rng = np.random.default_rng(len(ids))
    for scores in score_sets(len(ids), rng):
        population = id_population(ids, scores)
        by_id = {r.member: r for r in population}
        plan = plan_generation(3, population, strategy, perturb(), generation_rng(0, 3), fraction, ties="copy")
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
        again = plan_generation(3, shuffled, strategy, perturb(), generation_rng(0, 3), fraction, ties="copy")
        assert [e.to_json() for e in again] == [e.to_json() for e in plan]


def test_ids_are_never_positions_for_selection_and_pb2():
    """Gathered as [12, 0, 9, 5] with member 5 best and member 12 worst: member 12 copies
    member 5, and PB2's history and baselines are keyed by those ids."""
    population = id_population([12, 0, 9, 5], [1.0, 3.0, 2.0, 4.0])
    plan = plan_generation(1, population, "truncation", perturb(), generation_rng(0, 1), 0.25)
    assert weight_moves(plan) == {12: 5}
    assert plan[0].old_hparams == {"lr": 0.13} and plan[0].recipient_score == 1.0 and plan[0].donor_score == 4.0

    pb2 = PB2(SPACE, baselines={12: 0.5, 0: 1.0, 9: 2.5, 5: 3.0})
    pb2.record(2, population)
    changes = {round(SPACE["lr"].from_unit(x[0]), 6): dy for _, x, dy in pb2.observations}
    assert changes == {0.13: 0.5, 0.01: 2.0, 0.1: -0.5, 0.06: 1.0}
    pb2.rebase(population, {12: 5})
    assert pb2.baselines == {12: 4.0, 0: 3.0, 9: 2.0, 5: 4.0}
    with pytest.raises(ValueError, match="repeat"):
        plan_generation(1, population + population[:1], "wta", perturb(), generation_rng(0, 1))


def tie_plan(strategy, scores, ties):
    population = id_population(list(range(len(scores))), scores)
    return plan_generation(5, population, strategy, perturb(), generation_rng(0, 5), 0.25, ties=ties)


@pytest.mark.parametrize("strategy", ["wta", "truncation"])
def test_a_population_failing_alike_copies_nobody_by_default(strategy):
    """Acrobot's every member at -500: winner-takes-all used to copy member 0, chosen only by
    its index, into the whole population. With the default tie rule nobody copies, and every
    recipient explores its own hyperparameters."""
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


def test_several_objectives_plan_from_the_first_front_and_name_the_objectives_in_the_lineage():
    from evo.core.objective import parse_objective

    objective = parse_objective("return,info:energy:min")[0]
    values = {4: (10.0, 5.0), 9: (0.0, 0.0), 2: (3.0, 8.0), 7: (1.0, 9.0)}  # first front: 4 and 9
    population = [
        MemberResult(m, 0, 0, objective.score(v), hparams={"lr": 0.1}, objectives=v) for m, v in values.items()
    ]
    for seed in range(20):
        plan = plan_generation(1, population, "wta", perturb(), np.random.default_rng(seed), objective=objective)
        assert weight_moves(plan).keys() == {2, 7} and set(weight_moves(plan).values()) <= {4, 9}
        line = plan[0].to_json(SPACE)
        assert line["recipient_objectives"] == {"return": 3.0, "info:energy": 8.0}
        assert line["donor_objectives"] == dict(zip(objective.names, values[line["donor"]], strict=True))
    default = plan_generation(1, population, "wta", perturb(), np.random.default_rng(0))
    assert "recipient_objectives" not in default[0].to_json(SPACE)  # a run selecting on the return records as before


def test_a_tied_generation_is_decided_by_the_runs_tie_draw_and_each_exploit_names_the_tie():
    """The run's rules (evo.core.rules.PBTRules.plan) order equal scores by the generation's draw
    (evo.core.streams.tie_priorities), the same whatever order the population is held in; each exploit
    resting on the tie names the tied members, and one without a tie writes its lineage line as before."""
    scores = [3.0] * 6 + [1.0, 0.5]
    recipients = set()
    for seed in range(8):
        rules = PBTRules("truncation", "perturb", SPACE, seed, rounds=9, population=8, ties="copy")
        population = id_population(list(range(8)), scores)
        plan = rules.plan(4, population, perturb())
        priorities = tie_priorities((seed, 4), range(8))
        tied_by_draw = sorted(range(6), key=lambda m: priorities[m])
        assert {e.recipient for e in plan} == {6, 7}  # the untied bottom two, whatever the draw
        assert {e.donor for e in plan} <= set(tied_by_draw[:2])  # the top two of the tie, by the draw
        assert all(e.to_json()["tie"] == [0, 1, 2, 3, 4, 5] for e in plan)
        shuffled = [population[i] for i in np.random.default_rng(seed).permutation(8)]
        assert [e.to_json() for e in rules.plan(4, shuffled, perturb())] == [e.to_json() for e in plan]
        tied = rules.plan(4, id_population(list(range(8)), [3.0] * 8), perturb())
        recipients.add(frozenset(e.recipient for e in tied))
        assert {e.recipient for e in tied} == set(sorted(range(8), key=lambda m: priorities[m])[-2:])
    assert len(recipients) > 1  # another seed, another pair: not the two highest ids every time
    untied = plan_generation(4, id_population(list(range(4)), [4.0, 3.0, 2.0, 1.0]), "truncation", perturb(),
                             generation_rng(0, 4), ties="copy", tiebreak=tie_priorities((0, 4), range(4)))  # fmt: skip
    assert untied and all("tie" not in e.to_json() for e in untied)
