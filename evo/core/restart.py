"""A member that failed is restarted, not the job (pure).

A member fails when its env or its update raises while it trains or is scored. Ray Tune retries a
failed trial from its last checkpoint (``max_failures``); a PBT population has a better place to
restart from: a top member. Rank 0 decides, for every member that failed in a generation, where it
starts again (:func:`plan_restarts`):

- from the weights of a member drawn from the top of this generation's scored members that keep
  their weights (the truncation fraction of them, at least the best one), with hyperparameters
  drawn afresh from the search space it is given (what that space leaves out, a network's
  architecture, goes with the weights: the donor's);
- with fresh weights and a fresh draw when no member has a score yet;
- under ``--strategy none`` (nobody copies anybody), with fresh weights and its own
  hyperparameters.

The member then trains the generation it failed in again, so every member still trains each
generation once. Each member may fail ``limit`` times (``--max-member-failures``); one failure
more ends the job (:class:`TooManyFailures`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evo.core.explorers.base import Change
from evo.core.kinds import SearchSpace
from evo.core.objective import DEFAULT, Objective
from evo.core.plan import json_hparams
from evo.core.result import MemberResult, Standing, finite_or_none
from evo.core.selection import NO_PBT, ranking, tied_ids
from evo.core.streams import RESTART_STREAM


@dataclass(frozen=True)
class Failure:
    """A member's failure in a generation: its id, the error as one line, and the hyperparameters
    it trained with."""

    member: int
    error: str
    hparams: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Restart:
    """Where a failed member starts again: ``donor``'s weights (None: fresh weights) and
    ``new_hparams``; ``failures``: how often it has failed, this time included."""

    generation: int
    member: int
    donor: int | None
    donor_score: float
    failures: int
    error: str
    old_hparams: dict[str, Any]
    new_hparams: dict[str, Any]
    changes: tuple[str, ...] = ()
    donor_standing: Standing = Standing()
    """What the donor's weights earned: what the restarted member is scored by until it finishes an
    episode of its own (as a recipient of an exploit is)."""
    tie: tuple[int, ...] = ()
    """The members whose score ties the donor's, by id (empty: no tie): which of them could be drawn was
    decided by the run's tie draw (evo.core.streams.tie_priorities), not by their ids."""

    def to_json(self, space: SearchSpace | None = None) -> dict[str, Any]:
        """The lineage's ``restart`` line (an exploit's line has no ``event``)."""
        return {
            "event": "restart",
            "generation": self.generation,
            "member": self.member,
            "donor": self.donor,
            "donor_score": finite_or_none(self.donor_score),
            "failures": self.failures,
            "error": self.error,
            "old_hparams": json_hparams(self.old_hparams, space),
            "new_hparams": json_hparams(self.new_hparams, space),
            "changes": list(self.changes),
            **({"tie": list(self.tie)} if self.tie else {}),
        }


def error_line(error: BaseException) -> str:
    """A failure's error as the lineage and the log name it: its type and the first line of its message."""
    return f"{type(error).__name__}: {error}".splitlines()[0]


class TooManyFailures(RuntimeError):
    """A member failed more often than ``--max-member-failures`` allows: the job ends."""


def restart_rng(seed: int, generation: int, round_: int) -> np.random.Generator:
    """The generator of a generation's restarts (``round_``: 0 for the first, 1 when a restarted
    member failed again in its second try, ...)."""
    return np.random.default_rng([seed, generation, round_, RESTART_STREAM])


def ready_restart_rng(seed: int, member: int, interval: int, failures: int) -> np.random.Generator:
    """The generator of an asynchronous run's restart of ``member`` in its ``interval`` after
    ``failures`` earlier failures: the same whichever rank reports it and whenever."""
    return np.random.default_rng([seed, member, interval, failures, RESTART_STREAM])


def failures_by_member(lineage: Sequence[Mapping[str, Any]]) -> dict[int, int]:
    """How often each member has failed, from a run's lineage (its ``restart`` lines)."""
    counts: dict[int, int] = {}
    for entry in lineage:
        if entry.get("event") == "restart":
            counts[int(entry["member"])] = counts.get(int(entry["member"]), 0) + 1
    return counts


def plan_restarts(
    generation: int,
    failures: Sequence[Failure],
    scored: Sequence[MemberResult],
    counts: Mapping[int, int],
    limit: int,
    space: SearchSpace,
    rng: np.random.Generator,
    strategy: str,
    truncation_fraction: float,
    recipients: frozenset[int] = frozenset(),
    objective: Objective = DEFAULT,
    tiebreak: Mapping[int, int] | None = None,
) -> list[Restart]:
    """Where each failed member starts again (see the module docstring). ``scored``: this
    generation's results of the members that did not fail; ``counts``: failures before this
    generation's; ``recipients``: members copying another this generation (never a donor).
    ``objective``: what the donors are ranked by; ``tiebreak``: each member id's priority in a tie of their
    scores (evo.core.streams.tie_priorities, lower first; None: the lower id), a restart whose donor ties
    another member naming them. Raises :class:`TooManyFailures` past ``limit``."""
    over = [f for f in failures if counts.get(f.member, 0) + 1 > limit]
    if over:
        said = "; ".join(
            f"member {f.member} ({counts.get(f.member, 0) + 1} failures, the last: {f.error})" for f in over
        )
        raise TooManyFailures(
            f"{said}: more than --max-member-failures {limit} allows; the job ends. Its last checkpoint can be "
            "resumed (--resume) once the cause is fixed, or with a larger --max-member-failures."
        )
    donors = _donor_candidates(scored, truncation_fraction, recipients, objective, tiebreak)
    restarts = []
    for failure in sorted(failures, key=lambda f: f.member):
        old = dict(failure.hparams)
        donor = None if strategy == NO_PBT or not donors else int(rng.choice(donors))
        result = next((r for r in scored if r.member == donor), None)
        if strategy == NO_PBT:
            new, how = dict(old), "restart: own"
        else:  # what the space does not explore (an architecture) goes with the weights: the donor's, or its own
            kept = {**old, **(result.hparams if result is not None else {})}
            new, how = {**kept, **{name: kind.sample(rng) for name, kind in space.items()}}, "restart: resample"
        restarts.append(
            Restart(
                generation=generation,
                member=failure.member,
                donor=donor,
                donor_score=result.score if result is not None else math.nan,
                failures=counts.get(failure.member, 0) + 1,
                error=failure.error,
                old_hparams=old,
                new_hparams=new,
                changes=tuple(
                    str(Change(name, old.get(name), new[name], how if name in space else "with the weights"))
                    for name in new
                    if name in space or old.get(name) != new[name]
                ),
                donor_standing=result.standing if result is not None else Standing(),
                tie=_donor_tie(scored, result, recipients, objective),
            )
        )
    return restarts


def _donor_candidates(
    scored: Sequence[MemberResult],
    truncation_fraction: float,
    recipients: frozenset[int],
    objective: Objective = DEFAULT,
    tiebreak: Mapping[int, int] | None = None,
) -> list[int]:
    """The top of the scored members that keep their weights this generation, by the truncation
    fraction (at least the best of them), ranked by ``objective`` (equal scores by ``tiebreak``); none
    when no member has a score."""
    finite = _keeping(scored, recipients)
    if not finite:
        return []
    priorities = None if tiebreak is None else [tiebreak[r.member] for r in finite]
    order = [finite[i].member for i in ranking(objective.selection_keys(finite), priorities)]
    return order[: max(1, math.ceil(len(order) * truncation_fraction - 1e-12))]


def _donor_tie(
    scored: Sequence[MemberResult], donor: MemberResult | None, recipients: frozenset[int], objective: Objective
) -> tuple[int, ...]:
    """The donor candidates (scored, keeping their weights) whose score ties ``donor``'s, by id, with it
    (empty: no donor, no tie, or several objectives, whose Pareto ranking orders its own ties)."""
    if donor is None or objective.several:
        return ()
    finite = _keeping(scored, recipients)
    ids = [r.member for r in finite]
    return tied_ids(objective.selection_keys(finite), ids, [ids.index(donor.member)])


def _keeping(scored: Sequence[MemberResult], recipients: frozenset[int]) -> list[MemberResult]:
    """The members of ``scored`` with a score (not NaN) that keep their weights this generation."""
    return [r for r in scored if not math.isnan(r.score) and r.member not in recipients]
