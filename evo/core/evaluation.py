"""Whether a run's evaluation scores can tell its members apart (pure).

A policy played by its most likely action (``--eval-actions deterministic``, SB3's default) can hold one
action for ever: on MiniGrid a PPO population that trained to returns of 0.13-0.47 scored 0.0 on its
evaluation episodes at every generation, so no member ever scored above another and PBT copied no one.
:func:`uninformative_scores` says so, for the run's log, with the fix: sampled actions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

FIX = "--eval-actions sampled"


def uninformative_scores(population: Sequence[Any], actions: str) -> str | None:
    """What to warn of, or None: every member of ``population`` (MemberResults, or anything with
    ``member``, ``score_test`` and ``score_train``) scored the same on its ``deterministic`` evaluation
    episodes, no higher than the lowest of their training scores, while those training scores differ.

    Only then: members that all reach an env's cap (CartPole's 500) score alike under argmax and above
    their sampled training returns, as a trained policy should; equal scores from other training scores
    say nothing either way when the training scores are equal too. Members without a finite evaluation
    score (no evaluation episodes, a failed member) are left out; at least two must have one."""
    if actions != "deterministic":
        return None
    scored = [result for result in population if math.isfinite(result.score_test)]
    tests = {result.score_test for result in scored}
    trains = [result.score_train for result in scored if math.isfinite(result.score_train)]
    if len(scored) < 2 or len(tests) != 1 or len(trains) < 2 or min(trains) == max(trains):
        return None
    score = tests.pop()
    if score > min(trains):
        return None
    return (
        f"every member scored {score:.4g} on its evaluation episodes (deterministic actions: the policy's most "
        f"likely one), no more than the lowest of their training scores ({min(trains):.4g} to {max(trains):.4g}): "
        f"the most likely action may be one that earns nothing, and equal scores cannot rank the members; {FIX} "
        "scores the policy as it acts in training (said once per run)"
    )
