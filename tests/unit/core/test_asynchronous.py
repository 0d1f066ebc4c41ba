"""Asynchronous PBT's decisions (evo.core.asynchronous): who may copy whom at a ready point, what
the copy names, and which member a free rank trains next (pure, no MPI)."""

import heapq
import math

import numpy as np
import pytest

from evo.core.asynchronous import Latest, Schedule, choose_donor, decide_at_ready, ready_rng, ready_tiebreak
from evo.core.explorers import make_explorer
from evo.core.kinds import LogFloat
from evo.core.result import MemberResult
from evo.core.selection import ranking, truncation_count

SPACE = {"lr": LogFloat(1e-3, 1.0)}


def latest_of(scores, intervals=None, steps_per_interval=100):
    """Members 0..N-1 with these latest scores (interval i: member's own index, default 1 + id % 3)."""
    latest = {}
    for member, score in enumerate(scores):
        interval = intervals[member] if intervals else 1 + member % 3
        result = MemberResult(member, 0, interval * steps_per_interval, score, hparams={"lr": 0.01 * (member + 1)})
        latest[member] = Latest(interval, result, wall=float(member))
    return latest


@pytest.mark.parametrize("size, fraction", [(4, 0.25), (8, 0.25), (8, 0.5), (5, 0.2), (9, 0.3)])
def test_truncation_a_bottom_member_copies_a_top_member_and_nobody_else_copies(size, fraction):
    rng = np.random.default_rng(size)
    for _ in range(50):
        scores = list(rng.normal(size=size))
        if rng.random() < 0.3:
            scores[int(rng.integers(size))] = math.nan
        latest = latest_of(scores)
        order = [int(m) for m in ranking(scores)]
        count = truncation_count(size, fraction)
        top, bottom = set(order[:count]), set(order[-count:])
        for member in range(size):
            donor = choose_donor(member, latest, "truncation", fraction, ready_rng(0, member, 1))
            if member in bottom:
                assert donor in top and donor != member
            else:
                assert donor is None


def test_truncation_draws_every_top_member():
    latest = latest_of([5.0, 4.0, 3.0, 2.0, 1.0, 0.0, -1.0, -2.0])  # top {0, 1}, bottom {6, 7}
    donors = {choose_donor(7, latest, "truncation", 0.25, ready_rng(0, 7, i)) for i in range(1, 40)}
    assert donors == {0, 1}


def test_winner_takes_all_copies_the_best_known_member_into_any_other():
    latest = latest_of([1.0, 7.0, math.nan, 3.0])
    assert choose_donor(1, latest, "wta", 0.25, None) is None
    assert [choose_donor(m, latest, "wta", 0.25, None) for m in (0, 2, 3)] == [1, 1, 1]


def test_only_members_with_a_ready_point_are_ranked():
    """The ranking is over the latest scores known: a member alone copies nobody, and a member
    that has not reached its first ready point is neither donor nor counted."""
    assert choose_donor(0, latest_of([1.0]), "wta", 0.25, None) is None
    latest = latest_of([1.0, 2.0])
    assert choose_donor(0, latest, "truncation", 0.25, ready_rng(0, 0, 1)) == 1  # ceil(2 * 0.25) = 1 of 2
    assert choose_donor(0, latest, "none", 0.25, None) is None


def test_the_ready_member_copies_its_donors_last_ready_point_and_keeps_its_own_counters():
    latest = latest_of([0.0, 9.0], intervals=[4, 2])
    decision = decide_at_ready(0, latest, "wta", make_explorer("perturb", SPACE), ready_rng(3, 0, 4))
    exploit = decision.exploit
    assert decision.copies and exploit.recipient == 0 and exploit.donor == 1
    assert exploit.generation == 4  # the recipient's own interval, not the donor's
    assert (decision.donor_interval, decision.donor_env_steps) == (2, 200)
    assert exploit.old_hparams == {"lr": 0.01} and exploit.donor_score == 9.0 and exploit.recipient_score == 0.0
    assert exploit.new_hparams["lr"] in (pytest.approx(0.02 * 0.8), pytest.approx(0.02 * 1.2)) or exploit.changes
    line = decision.to_json(SPACE)
    assert (line["generation"], line["donor"], line["donor_interval"], line["donor_env_steps"]) == (4, 1, 2, 200)


def test_a_tie_with_the_donor_explores_without_a_copy_unless_told_to_copy():
    latest = latest_of([3.0, 3.0, 3.0, 3.0])  # everyone tied: the last by id is the bottom one
    explorer = make_explorer("perturb", SPACE)
    kept = decide_at_ready(3, latest, "truncation", explorer, ready_rng(0, 3, 1))
    assert not kept.copies and kept.exploit.donor == 3 and kept.exploit.old_hparams == {"lr": 0.04}
    copied = decide_at_ready(3, latest, "truncation", explorer, ready_rng(0, 3, 1), ties="copy")
    assert copied.copies and copied.exploit.donor == 0


def test_a_member_that_keeps_its_weights_has_no_exploit():
    latest = latest_of([3.0, 2.0, 1.0, 0.0])
    assert decide_at_ready(0, latest, "truncation", make_explorer("perturb", SPACE), ready_rng(0, 0, 1)) is None
    assert decide_at_ready(3, latest, "none", make_explorer("perturb", SPACE), ready_rng(0, 3, 1)) is None


def test_pb2_learns_from_every_ready_point_with_the_baseline_of_the_weights_held_next():
    """A member's change in score is measured from the score of the weights it started the
    interval with: its own at its last ready point, or its donor's after a copy."""
    explorer = make_explorer("pb2", SPACE)
    latest = latest_of([1.0, 5.0], intervals=[1, 1])
    decide_at_ready(1, latest, "wta", explorer, ready_rng(0, 1, 1))  # the best keeps its weights
    decide_at_ready(0, latest, "wta", explorer, ready_rng(0, 0, 1))  # copies member 1
    assert explorer.observations == []  # no baseline before a member's first ready point
    assert explorer.baselines == {1: 5.0, 0: 5.0}
    later = {0: Latest(2, MemberResult(0, 0, 200, 7.5, hparams={"lr": 0.5})), 1: latest[1]}
    decide_at_ready(0, later, "wta", explorer, ready_rng(0, 0, 2))
    [(interval, x, change)] = explorer.observations
    assert interval == 2 and change == 2.5 and x == [SPACE["lr"].to_unit(0.5)]
    assert explorer.baselines[0] == 7.5  # now the best: keeps its own weights


def test_the_decision_depends_on_the_scores_and_the_seed_only():
    latest = latest_of(list(np.random.default_rng(1).normal(size=8)))
    bottom = int(ranking([latest[m].result.score for m in range(8)])[-1])
    one = decide_at_ready(bottom, latest, "truncation", make_explorer("perturb", SPACE), ready_rng(7, bottom, 3))
    two = decide_at_ready(
        bottom, dict(reversed(latest.items())), "truncation", make_explorer("perturb", SPACE), ready_rng(7, bottom, 3)
    )
    assert one == two


# --- the schedule ------------------------------------------------------------------------------


def test_a_free_rank_takes_its_own_members_first_then_the_one_next_due():
    schedule = Schedule({0: 0, 1: 1, 2: 0, 3: 1}, total=2)
    first = schedule.take(0)
    assert (first.member, first.interval, first.holder, first.moves) == (0, 1, 0, False)
    assert schedule.take(0).member == 2  # its own, before rank 1's
    assert schedule.take(0) is None  # rank 1 has not started: its members stay with it
    assert schedule.take(1).member == 1
    moved = schedule.take(0)
    assert (moved.member, moved.holder, moved.moves) == (3, 1, True)  # now one of rank 1's members moves
    assert schedule.busy() == {0: 0, 1: 1, 2: 0, 3: 0}


def test_own_only_gives_a_rank_nothing_it_does_not_hold():
    schedule = Schedule({0: 0, 1: 1}, total=2)
    assert schedule.take(1).member == 1
    schedule.ready(1, 1, wall=1.0)
    assert schedule.take(0, own_only=True).member == 0
    assert schedule.take(2, own_only=True) is None
    assert schedule.take(2).member == 1


def test_a_member_is_never_given_to_two_ranks_and_a_rank_waits_when_all_are_busy():
    schedule = Schedule({0: 0, 1: 1}, total=3)
    assert schedule.take(0).member == 0 and schedule.take(1).member == 1
    assert schedule.take(0) is None  # both busy: ask again after a ready point
    schedule.ready(1, 1, wall=1.0)
    task = schedule.take(0)
    assert (task.member, task.interval, task.holder) == (1, 2, 1)
    with pytest.raises(ValueError, match="member 0 is not being trained by rank 1"):
        schedule.ready(0, 1, wall=2.0)


def test_the_member_with_fewest_intervals_done_goes_first_then_the_one_waiting_longest():
    schedule = Schedule({0: 0, 1: 0, 2: 0}, total=5, done={0: 3, 1: 2, 2: 2})
    for member in (1, 2):
        schedule.take(0)
        schedule.ready(member, 0, wall=10.0 - member)  # member 2 ready first
    # 3 intervals each: member 0 has waited since the start, member 2 since 8 s, member 1 since 9 s
    assert [schedule.take(0).member for _ in range(3)] == [0, 2, 1]


def test_a_stopped_interval_is_not_counted():
    schedule = Schedule({0: 0}, total=2)
    task = schedule.take(0)
    schedule.release(task.member, 0)
    assert schedule.intervals_done() == {0: 0} and schedule.take(0).interval == 1


def test_resume_continues_each_member_from_its_own_count():
    schedule = Schedule({0: 0, 1: 1}, total=3, done={0: 3, 1: 1})
    assert schedule.take(0) is None  # member 0 has its budget; member 1 waits for its rank
    task = schedule.take(1)
    assert (task.member, task.interval, task.moves) == (1, 2, False)
    assert schedule.take(0) is None
    with pytest.raises(ValueError, match="member 0 has done 4 intervals of 3"):
        Schedule({0: 0}, total=3, done={0: 4})


def simulate(placement, total, seconds_per_interval):
    """Ranks as workers on a clock: each trains what the schedule gives it; a rank that finds
    every remaining member busy waits for the next ready point. Returns [(member, interval, rank)]."""
    schedule = Schedule(placement, total)
    trained, idle, events = [], [], []
    for rank in sorted(seconds_per_interval):
        task = schedule.take(rank)
        heapq.heappush(events, (seconds_per_interval[rank], rank, task.member, task.interval))
    while events:
        now, rank, member, interval = heapq.heappop(events)
        schedule.ready(member, rank, now)
        trained.append((member, interval, rank))
        for waiting in [rank, *idle]:
            task = schedule.take(waiting)
            if task is None:
                if waiting not in idle:
                    idle.append(waiting)
                continue
            if waiting in idle:
                idle.remove(waiting)
            heapq.heappush(events, (now + seconds_per_interval[waiting], waiting, task.member, task.interval))
    assert schedule.finished
    return trained


def test_a_fast_rank_trains_more_intervals_and_every_member_interval_is_trained_once():
    placement = {m: m % 2 for m in range(8)}
    trained = simulate(placement, total=6, seconds_per_interval={0: 1.0, 1: 2.0})
    assert sorted((m, i) for m, i, _ in trained) == [(m, i) for m in range(8) for i in range(1, 7)]
    per_rank = {rank: sum(1 for *_, r in trained if r == rank) for rank in (0, 1)}
    assert per_rank[0] > per_rank[1] and per_rank[0] + per_rank[1] == 48
    # each member's intervals in order, whichever rank trained them
    for member in range(8):
        assert [i for m, i, _ in trained if m == member] == list(range(1, 7))


def test_equal_ranks_keep_their_members():
    placement = {m: m % 2 for m in range(4)}
    trained = simulate(placement, total=3, seconds_per_interval={0: 1.0, 1: 1.0})
    assert all(rank == placement[member] for member, _, rank in trained)


def test_several_objectives_a_ready_member_copies_only_from_the_first_front():
    from evo.core.objective import parse_objective

    objective = parse_objective("return,info:energy:min")[0]
    values = [(10.0, 5.0), (0.0, 0.0), (5.0, 2.0), (4.0, 3.0), (1.0, 6.0), (0.0, 9.0)]  # first front: 0, 1, 2
    latest = {
        member: Latest(1, MemberResult(member, 0, 100, objective.score(v), hparams={"lr": 0.1}, objectives=v))
        for member, v in enumerate(values)
    }
    for strategy in ("wta", "truncation"):
        for seed in range(40):
            rng = np.random.default_rng(seed)
            for member in range(6):
                donor = choose_donor(member, latest, strategy, 0.34, rng, objective)
                if donor is not None:
                    assert donor in (0, 1, 2) and member not in (0, 1, 2), (strategy, member, donor)
    explorer = make_explorer("perturb", SPACE)
    exploit = decide_at_ready(5, latest, "wta", explorer, ready_rng(0, 5, 1), objective=objective)
    assert exploit.exploit.donor in (0, 1, 2)
    assert exploit.exploit.recipient_objectives == {"return": 0.0, "info:energy": 9.0}
    assert exploit.donor_standing.objectives == values[exploit.exploit.donor]


def test_a_tie_at_a_ready_point_is_decided_by_the_runs_tie_draw_not_the_id():
    """Everyone tied at 3.0, truncation over 4: the bottom member, the one that copies, is the one the
    ready point's draw (evo.core.asynchronous.ready_tiebreak) puts last, and its exploit names the tie."""
    latest = latest_of([3.0, 3.0, 3.0, 3.0], intervals=[2, 2, 2, 2])
    bottoms = set()
    for seed in range(8):
        copying = []
        for member in range(4):
            tiebreak = ready_tiebreak(seed, member, 2, latest)
            decided = decide_at_ready(
                member, latest, "truncation", make_explorer("perturb", SPACE), ready_rng(seed, member, 2),
                ties="copy", tiebreak=tiebreak,
            )  # fmt: skip
            if decided is not None:
                copying.append(member)
                assert decided.exploit.tie == (0, 1, 2, 3) and decided.to_json()["tie"] == [0, 1, 2, 3]
                assert member == max(range(4), key=lambda m: tiebreak[m])
        bottoms.update(copying)
    assert len(bottoms) > 1  # not member 3, the highest id, every time
