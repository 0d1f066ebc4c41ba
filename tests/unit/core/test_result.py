"""The best of a run (evo.core.result.new_best): what beats the best kept so far."""

import math

from evo.core.result import MemberResult, new_best
from evo.core.selection import ranking
from evo.core.streams import tie_priorities


def results(*scores: float) -> list[MemberResult]:
    return [MemberResult(member, 0, 100, score) for member, score in enumerate(scores)]


def test_the_highest_score_beats_nothing_kept_yet_and_a_tie_goes_to_the_lower_member():
    assert new_best(results(1.0, 3.0, 2.0), None).member == 1
    assert new_best(results(1.0, 3.0, 3.0), None).member == 1
    assert new_best(results(5.0, 1.0), None).score == 5.0


def test_only_a_higher_score_beats_the_kept_best():
    assert new_best(results(1.0, 3.0), 3.0) is None  # equal: the earlier best stays
    assert new_best(results(1.0, 3.0), 3.5) is None
    assert new_best(results(1.0, 3.0), 2.5).member == 1
    assert new_best(results(-4.0, -2.0), -3.0).member == 1  # negative scores (Pendulum's)


def test_a_member_with_no_score_never_wins():
    nan = math.nan
    assert new_best(results(nan, nan), None) is None
    assert new_best(results(nan, 1.0), None).member == 1
    assert new_best(results(nan, 1.0), 2.0) is None
    assert new_best([], None) is None


def test_a_tie_for_the_best_is_decided_by_the_generations_draw_as_selection_decides_it():
    """With the run's draw (the same the generation's selection orders ties by), the kept best of a tie is
    the member the draw ranks first: reproducibly, and another generation's draw can name another."""
    tied = results(1.0, 3.0, 3.0, 3.0)
    named = set()
    for generation in range(12):
        priorities = tie_priorities((3, generation), range(4))
        best = new_best(tied, None, priorities).member
        assert best == new_best(tied, None, priorities).member
        assert best == int(ranking([r.score for r in tied], [priorities[m] for m in range(4)])[0])
        named.add(best)
    assert named == {1, 2, 3}
