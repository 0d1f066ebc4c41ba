"""Asynchronous PBT's decisions (pure): who copies whom at a member's ready point, and which
member a free rank trains next.

In asynchronous mode there are no generations shared by the population: each member reaches a
*ready point* every ``--agent-training-steps`` env steps, its own interval 1, 2, ... There it is
ranked against the most recent score of every member that has one (as Ray Tune's PBT ranks a
trial): under truncation a member in the bottom fraction copies a member drawn from the top
fraction; under winner-takes-all any member but the best copies the best. The donor's weights
are those it had at its own last ready point (the weights that earned the score it is ranked
by), so a copy names the donor's interval and env steps as well as its id.

A recipient keeps its own interval and env-step counters (Ray's recipient takes its donor's;
ours must not, or intervals would be skipped or repeated).

Members are tasks and ranks are workers (:class:`Schedule`): a rank that finishes a member's
interval takes the member that is next due (fewest intervals done, the one already on this rank
first, then the one that has waited longest), wherever it last ran (once the rank holding it has
started: at the start each rank trains the members placed on it). A fast rank therefore trains
more intervals, and the population finishes when every member has its ``total`` intervals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from evo.core.explorers.base import Explorer
from evo.core.kinds import SearchSpace
from evo.core.objective import DEFAULT, Objective
from evo.core.plan import Exploit, gate, named_objectives, ties_of
from evo.core.result import MemberResult, Standing
from evo.core.selection import NO_PBT, STRATEGIES, TIE_RULES, leaders, ranking, tied, truncation_count
from evo.core.streams import ASYNC_STREAM, tie_priorities


@dataclass(frozen=True)
class Latest:
    """A member's most recent ready point: its own interval index, its result there, and when
    (seconds since the run began)."""

    interval: int
    result: MemberResult
    wall: float = 0.0


@dataclass(frozen=True)
class ReadyExploit:
    """What a member does at one ready point: copy ``exploit.donor``'s weights of the donor's
    interval ``donor_interval`` (``donor_env_steps`` env steps) and take ``exploit.new_hparams``;
    a donor equal to the recipient explores without a copy. ``exploit.generation`` is the
    recipient's own interval."""

    exploit: Exploit
    donor_interval: int
    donor_env_steps: int
    donor_standing: Standing = Standing()
    """What the donor's weights had earned at that ready point: what the recipient is scored by until it
    finishes an episode of its own (as in a generation)."""

    @property
    def copies(self) -> bool:
        return self.exploit.donor != self.exploit.recipient

    def as_copied(self, copied: tuple[int, int] | None) -> ReadyExploit:
        """This exploit naming the donor's (interval, env steps) its copy actually took (a newer
        snapshot than the decision saw, if the donor got there first); itself without a copy."""
        if copied is None:
            return self
        return replace(self, donor_interval=copied[0], donor_env_steps=copied[1])

    def to_json(self, space: SearchSpace | None = None) -> dict[str, Any]:
        """The lineage's line: an exploit's, with the donor's interval and env steps at the copy."""
        return {
            **self.exploit.to_json(space),
            "donor_interval": self.donor_interval,
            "donor_env_steps": self.donor_env_steps,
        }


def ready_rng(seed: int, member: int, interval: int) -> np.random.Generator:
    """The generator for ``member``'s decision at its ready point ``interval``: the same whichever
    rank decides and whenever, so the decision depends on the scores it saw and nothing else."""
    return np.random.default_rng([seed, member, interval, ASYNC_STREAM])


def ready_tiebreak(seed: int, member: int, interval: int, members) -> dict[int, int]:
    """Each of ``members``' priority in a tie at ``member``'s ready point ``interval`` (lower first):
    the run's tie stream keyed as :func:`ready_rng`, a generator of its own."""
    return tie_priorities((seed, member, interval), members)


def choose_donor(
    member: int,
    latest: Mapping[int, Latest],
    strategy: str,
    fraction: float,
    rng,
    objective: Objective = DEFAULT,
    tiebreak: Mapping[int, int] | None = None,
) -> int | None:
    """The donor ``member`` copies at its ready point (``latest`` holds it too), or None: ranked
    against every member's latest score, best first, NaN last, equal scores by ``tiebreak`` (each id's
    priority, lower first: evo.core.streams.tie_priorities; None: the lower id first) (with several
    objectives, by Pareto fronts: winner-takes-all's donor is drawn from the first front, which keeps
    its weights)."""
    if strategy == NO_PBT:
        return None
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown selection strategy {strategy!r}; use one of {STRATEGIES}")
    ids = sorted(latest)
    keys = objective.selection_keys([latest[m].result for m in ids])
    priorities = None if tiebreak is None else [tiebreak[m] for m in ids]
    order = [ids[i] for i in ranking(keys, priorities)]
    if len(order) < 2:
        return None
    if strategy == "wta":
        winners = [ids[i] for i in leaders(keys, priorities)]
        if member in winners:
            return None
        return winners[0] if len(winners) == 1 else winners[int(rng.integers(len(winners)))]
    count = truncation_count(len(order), fraction)
    if count == 0 or member not in order[len(order) - count :]:
        return None
    return int(order[int(rng.integers(count))])


def decide_at_ready(
    member: int,
    latest: Mapping[int, Latest],
    strategy: str,
    explorer: Explorer,
    rng: np.random.Generator,
    truncation_fraction: float = 0.25,
    ties: str = "explore",
    objective: Objective = DEFAULT,
    tiebreak: Mapping[int, int] | None = None,
    welch_alpha: float | None = None,
) -> ReadyExploit | None:
    """``member``'s exploit at the ready point ``latest[member]`` holds (``latest``: every
    member's most recent ready point, this one included), or None when it keeps its weights and
    values. The explorer sees the ready point first (:meth:`Explorer.observe_ready`) whatever the
    decision, then explores from the donor's values. A recipient whose score ties its donor's
    explores its own values without a copy (``ties="explore"``, the default), as in a generation.
    ``objective``: what members are ranked by (evo.core.objective); ``tiebreak``: each id's priority in a
    tie (:func:`choose_donor`), and an exploit whose recipient or donor ties another member names them.
    ``welch_alpha`` (``--exploit-test welch``): the member copies its donor only if Welch's t-test at that level
    shows the donor's outcomes better than its own (evo.core.welch); otherwise it explores its own values, the
    test in its exploit."""
    if ties not in TIE_RULES:
        raise ValueError(f"unknown tie rule {ties!r}; use one of {TIE_RULES}")
    own = latest[member]
    donor = choose_donor(member, latest, strategy, truncation_fraction, rng, objective, tiebreak)
    tie = ()
    if donor is not None and not objective.several:
        ids = sorted(latest)
        keys = objective.selection_keys([latest[m].result for m in ids])
        tie = ties_of(keys, ids, ids.index(member), ids.index(donor))
    if donor is not None and ties == "explore":
        mine, theirs = objective.selection_keys([own.result, latest[donor].result])
        if tied(mine, theirs):
            donor = member
    test = None
    if donor is not None:  # the generation's gate, on this one recipient (evo.core.plan.gate)
        donors, tests = gate({member: donor}, {m: point.result for m, point in latest.items()}, welch_alpha)
        donor, test = donors[member], tests.get(member)
    explorer.observe_ready(own.interval, own.result, latest[donor].result if donor is not None else own.result)
    if donor is None:
        return None
    source = latest[donor]
    [(new, changes)] = explorer.explore(own.interval, [source.result.hparams], rng)
    exploit = Exploit(
        generation=own.interval,
        recipient=member,
        donor=donor,
        recipient_score=float(own.result.score),
        donor_score=float(source.result.score),
        old_hparams=dict(own.result.hparams),
        new_hparams=new,
        changes=tuple(str(c) for c in changes),
        recipient_objectives=named_objectives(objective, own.result),
        donor_objectives=named_objectives(objective, source.result),
        front=front_of_latest(latest, objective),
        tie=tie,
        test=test,
    )
    return ReadyExploit(
        exploit,
        source.interval,
        source.result.env_steps,
        source.result.standing,
    )


def front_of_latest(latest: Mapping[int, Latest], objective: Objective) -> tuple[int, ...]:
    """With several objectives, the members of the first Pareto front of every member's latest ready
    point, by id (empty otherwise)."""
    if not objective.several:
        return ()
    ids = sorted(latest)
    return tuple(sorted(ids[i] for i in leaders(objective.selection_keys([latest[m].result for m in ids]))))


@dataclass
class Task:
    """A member ``rank`` trains for one interval: ``interval`` is the one it trains (its own index),
    ``holder`` the rank whose memory holds the member now (its state moves when that is not the
    training rank)."""

    member: int
    interval: int
    holder: int
    rank: int

    @property
    def moves(self) -> bool:
        """The member's state travels from ``holder`` to ``rank`` before it trains."""
        return self.holder != self.rank


@dataclass
class _Track:
    done: int
    holder: int
    waited_since: float
    busy_on: int | None = None


@dataclass
class Schedule:
    """Which member each free rank trains next (see the module docstring). ``placement``: the
    rank holding each member at the start; ``done``: each member's intervals already done (0 for
    a new run); ``total``: intervals per member."""

    placement: Mapping[int, int]
    total: int
    done: Mapping[int, int] = field(default_factory=dict)

    def __post_init__(self):
        self._tracks = {m: _Track(self.done.get(m, 0), rank, 0.0) for m, rank in sorted(self.placement.items())}
        self._started: set[int] = set()
        for member, track in self._tracks.items():
            if not 0 <= track.done <= self.total:
                raise ValueError(f"member {member} has done {track.done} intervals of {self.total}")

    def take(self, rank: int, own_only: bool = False) -> Task | None:
        """The member ``rank`` trains next (now marked busy on it), or None when every member that
        still has intervals to train is busy, or held by a rank that has not asked for work yet
        (ask again after the next ready point). A member moves only from a rank that has started:
        at the start each rank trains the members placed on it. ``own_only``: only a member this
        rank holds (the coordinator serves those first, so no member moves while its holder asks)."""
        self._started.add(rank)
        free = [
            (m, t)
            for m, t in self._tracks.items()
            if t.busy_on is None
            and t.done < self.total
            and (t.holder == rank or (not own_only and t.holder in self._started))
        ]
        if not free:
            return None
        member, track = min(free, key=lambda mt: (mt[1].done, mt[1].holder != rank, mt[1].waited_since, mt[0]))
        track.busy_on = rank
        return Task(member, track.done + 1, track.holder, rank)

    def ready(self, member: int, rank: int, wall: float, settled: bool = True) -> None:
        """``member`` reached its ready point on ``rank`` at ``wall``: its interval is done and
        ``rank`` holds it. With ``settled=False`` it stays with ``rank`` (applying its ready
        point's exploit) until :meth:`release`."""
        track = self._tracks[member]
        if track.busy_on != rank:
            raise ValueError(f"member {member} is not being trained by rank {rank} (busy on {track.busy_on})")
        track.done += 1
        track.holder = rank
        track.busy_on = None if settled else rank
        track.waited_since = wall

    def release(self, member: int, rank: int) -> None:
        """``rank`` gives ``member`` back: settled after its ready point, or its interval left
        unfinished (a stop: nothing is counted)."""
        track = self._tracks[member]
        if track.busy_on == rank:
            track.busy_on = None

    @property
    def finished(self) -> bool:
        """Every member has its ``total`` intervals."""
        return all(t.done >= self.total for t in self._tracks.values())

    def intervals_done(self) -> dict[int, int]:
        return {m: t.done for m, t in self._tracks.items()}

    def busy(self) -> dict[int, int]:
        """{member: the rank training it} of the members being trained now."""
        return {m: t.busy_on for m, t in self._tracks.items() if t.busy_on is not None}
