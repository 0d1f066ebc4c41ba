"""Where a failed member starts again (evo/core/restart.py): a top member's weights and a fresh draw,
fresh weights before any score, its own values under --strategy none, and the limit."""

import math

import numpy as np
import pytest

from evo.core.kinds import Choice, LogFloat
from evo.core.restart import Failure, TooManyFailures, failures_by_member, plan_restarts
from evo.core.result import MemberResult

SPACE = {"learning_rate": LogFloat(1e-5, 1e-2), "n_epochs": Choice([5, 10, 20])}
OWN = {"learning_rate": 3e-4, "n_epochs": 10}


def results(scores):
    return [
        MemberResult(member, 0, 100, score, hparams={"learning_rate": 1e-3, "n_epochs": 5}) for member, score in scores
    ]


def restarts(failed, scored, counts=None, limit=3, strategy="truncation", recipients=frozenset(), seed=0):
    return plan_restarts(
        generation=4,
        failures=[Failure(m, "RuntimeError: boom", OWN) for m in failed],
        scored=results(scored),
        counts=counts or {},
        limit=limit,
        space=SPACE,
        rng=np.random.default_rng(seed),
        strategy=strategy,
        truncation_fraction=0.25,
        recipients=recipients,
    )


def test_a_failed_member_restarts_from_a_top_member_with_a_fresh_draw():
    scored = [(0, 10.0), (1, 50.0), (2, 40.0), (3, 30.0), (4, 20.0), (5, 5.0), (6, 1.0)]
    donors = set()
    for seed in range(40):
        (restart,) = restarts([7], scored, seed=seed)
        donors.add(restart.donor)
        assert restart.member == 7 and restart.generation == 4 and restart.failures == 1
        assert restart.old_hparams == OWN and set(restart.new_hparams) == set(SPACE)
        assert SPACE["learning_rate"].contains(restart.new_hparams["learning_rate"])
        assert restart.new_hparams["n_epochs"] in (5, 10, 20)
        assert restart.donor_score == dict(scored)[restart.donor]
        assert all("(restart: resample)" in change for change in restart.changes)
    assert donors == {1, 2}  # the top quarter of 7 scored members: ceil(1.75) = 2


def test_the_donor_is_never_a_member_that_copies_another_this_generation():
    scored = [(0, 10.0), (1, 50.0), (2, 40.0), (3, 30.0), (5, 35.0)]
    donors = {restarts([4], scored, recipients=frozenset({1}), seed=seed)[0].donor for seed in range(20)}
    assert donors == {2}  # the best of the 4 that keep their weights (a quarter of 4)
    (restart,) = restarts([4], [(0, 1.0), (1, 2.0)], recipients=frozenset({0, 1}))
    assert restart.donor is None  # nobody keeps its weights (winner-takes-all's winner always does)


def test_before_any_score_a_restart_is_fresh_weights_and_a_fresh_draw():
    (restart,) = restarts([2], [(0, math.nan), (1, math.nan)])
    assert restart.donor is None and math.isnan(restart.donor_score)
    assert restart.new_hparams != OWN and set(restart.new_hparams) == set(SPACE)
    (restart,) = restarts([0], [])
    assert restart.donor is None


def test_without_pbt_a_restart_is_fresh_weights_with_its_own_values():
    (restart,) = restarts([3], [(0, 10.0), (1, 20.0)], strategy="none")
    assert restart.donor is None and restart.new_hparams == OWN
    assert all("(restart: own)" in change for change in restart.changes)


def test_each_failure_counts_and_one_past_the_limit_ends_the_job():
    (restart,) = restarts([1], [(0, 1.0)], counts={1: 2}, limit=3)
    assert restart.failures == 3
    with pytest.raises(TooManyFailures, match=r"member 1 \(4 failures, the last: RuntimeError: boom\)"):
        restarts([1], [(0, 1.0)], counts={1: 3}, limit=3)
    with pytest.raises(TooManyFailures, match="--max-member-failures 0"):
        restarts([1], [(0, 1.0)], limit=0)


def test_the_lineage_line_round_trips_to_the_failure_counts():
    scored = [(0, 10.0), (1, 50.0)]
    lines = [r.to_json(SPACE) for r in restarts([2, 3], scored)]
    lines += [r.to_json(SPACE) for r in restarts([2], scored, counts={2: 1})]
    lines.append({"generation": 4, "recipient": 0, "donor": 1})  # an exploit's line
    assert [line["event"] for line in lines[:3]] == ["restart"] * 3
    assert lines[0]["error"] == "RuntimeError: boom" and lines[2]["failures"] == 2
    assert failures_by_member(lines) == {2: 2, 3: 1}


def test_a_tie_for_the_donors_places_is_decided_by_the_runs_draw_and_named():
    """Four members tied at 50 for the top quarter's 2 places (of 7): which two may be drawn is the
    generation's tie draw (PBTRules.restarts), not the lower ids, and the restart names the tie."""
    from evo.core.rules import PBTRules
    from evo.core.streams import tie_priorities

    scored = results([(0, 50.0), (1, 50.0), (2, 50.0), (3, 50.0), (4, 20.0), (5, 5.0), (6, 1.0)])
    pools = set()
    for seed in range(6):
        rules = PBTRules("truncation", "perturb", SPACE, seed, rounds=9, population=8, max_member_failures=3)
        priorities = tie_priorities((seed, 4), range(7))
        pool = set(sorted(range(4), key=lambda m: priorities[m])[:2])
        for round_ in range(8):
            (restart,) = rules.restarts(4, [Failure(7, "RuntimeError: boom", OWN)], scored, {}, frozenset(), round_)
            assert restart.donor in pool
            assert restart.tie == (0, 1, 2, 3) and restart.to_json()["tie"] == [0, 1, 2, 3]
        pools.add(frozenset(pool))
    assert len(pools) > 1  # not members 0 and 1, the lower ids, every time
    (untied,) = restarts([7], [(0, 10.0), (1, 50.0), (2, 40.0)])
    assert untied.tie == () and "tie" not in untied.to_json()
