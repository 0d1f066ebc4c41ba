"""The generation loop, shared by the RL runs (``evo.runner``: a synchronous run's generations and BG-PBT's
rungs) and the toy (``evo.toy``).

Every generation, on every rank, in this order:

1. **train**: each local member trains for one generation (``hooks.train``); a stop request
   seen while polling ends training early. With ``max_member_failures`` > 0, a member whose
   training or scoring raises is a failure, logged with its traceback, not the job's end;
2. **agree** on stop (collective): if any rank is stopping, the generation is abandoned
   (nothing is scored, planned or exchanged), the last boundary's checkpoint is written if
   ``checkpoint_every`` had skipped it, and the loop reports ``stopped``;
3. **score**: each local member becomes a :class:`~evo.core.result.MemberResult` (its id,
   rank, env steps, scores and the hyperparameters it trained with); a stop request that ends
   a member's evaluation episodes (``hooks.score`` returns None) leaves the rest unscored, and
   the ranks **agree** on stop again: the generation is abandoned as in step 2;
4. **gather**: rank 0 gets the whole population, sorted by member id; if the run keeps its best
   (``hooks.best``), rank 0 names the member whose score beats the best so far and the rank
   holding it captures it (``hooks.keep_best``) while its weights are still those it was scored
   with, before any exploit overwrites them;
5. **plan**: rank 0 decides the exploits (``hooks.plan``) and where each failed member starts
   again (``hooks.restart``: evo.core.restart), and broadcasts them;
6. **exchange**: donors' weights move to their recipients, who take their new hyperparameters;
   a failed member is rebuilt (``hooks.rebuild``), takes its restart's weights and values, and
   trains the generation again (``hooks.restarted`` first), is scored and gathered (and, if it
   fails again, restarts again: steps 4-6 for the restarted members only);
7. **records** (``hooks.records``, every rank; may be collective): returns, on rank 0, the
   run state that goes into the checkpoint;
8. **checkpoint**: ``hooks.snapshot`` captures the members at the boundary; ``hooks.save``
   (collective) writes it every ``checkpoint_every`` generations and at the last one.

The loop knows no learner, files or signals: it gets the communicator, this rank's members
(id -> member of the learner interface's :class:`~evo.learners.interface.Exchangeable`),
``owner`` (the rank that holds a member, for any placement), the hooks and a stopper. It runs
the same on ``MPI.COMM_SELF`` as under ``mpiexec``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

from evo.core.plan import Exploit, weight_moves
from evo.core.restart import Failure, Restart, error_line
from evo.core.result import MemberResult, Scores, by_member
from evo.learners.interface import Exchangeable
from evo.mpi import exchange

logger = logging.getLogger(__name__)

Owner = Callable[[int], int]


class Stopper(Protocol):
    """Stop requests across ranks (:class:`evo.mpi.exchange.StopNotifier`)."""

    def poll(self) -> bool: ...

    def agree(self) -> bool: ...


@dataclass(frozen=True)
class Hooks:
    """What a run plugs into the loop.

    ``train(member, should_stop)`` trains one member for one generation, polling
    ``should_stop``; ``score(member)`` returns its :class:`Scores`, or None if a stop request
    ended its scoring (the generation is then dropped); ``plan(generation,
    population)`` (rank 0 only) returns the exploits. Optional: ``records(report)``, called
    on every rank after the exchange, returns the run state to checkpoint (on rank 0);
    ``snapshot(generation, run_state)`` captures the members at a generation boundary and
    ``save(snapshot)`` writes it (collective).

    For failed members (``LoopSettings.max_member_failures`` > 0): ``restart(generation,
    failures, scored, recipients, round_)`` (rank 0) returns each one's
    :class:`~evo.core.restart.Restart` (raising past the limit); ``rebuild(member, restart,
    env_steps)`` returns a new member in its place (fresh weights and envs, the restart's
    hyperparameters, its env-step counter back at ``env_steps``, where the failed generation
    began); ``restarted(member, restart)``, once a donor's weights are in, before it trains again.
    """

    train: Callable[[Any, Callable[[], bool]], None]
    score: Callable[[Any], Scores | None]
    plan: Callable[[int, list[MemberResult]], list[Exploit]]
    records: Callable[[GenerationReport], Any] | None = None
    snapshot: Callable[[int, Any], Any] | None = None
    save: Callable[[Any], None] | None = None
    restart: Callable[..., list[Restart]] | None = None
    rebuild: Callable[[Any, Restart, int], Any] | None = None
    restarted: Callable[[Any, Restart], None] | None = None
    best: Callable[[int, list[MemberResult]], MemberResult | None] | None = None
    keep_best: Callable[[int, MemberResult, Any], None] | None = None
    pause: Callable[[GenerationReport], bool] | None = None
    """Every rank (collective), after a generation's checkpoint step: whether the loop hands back
    now (its boundary written), as a run with stages does when a stage is due."""


@dataclass(frozen=True)
class LoopSettings:
    """Generations ``start + 1 .. total`` (``start``: the generation a checkpoint holds, 0
    for a new run), how weights move, and how often a boundary is written."""

    start: int
    total: int
    transport: str = "p2p"
    checkpoint_every: int = 1
    max_member_failures: int = 0
    """A member whose training or scoring raises restarts (this many times at most); 0: the
    exception ends the job."""


@dataclass(frozen=True)
class StepTimes:
    """When each step of a generation ended on this rank (``time.perf_counter``), and the
    env steps this rank's members trained."""

    started: float
    trained: float
    agreed: float
    scored: float
    gathered: float
    exchanged: float
    env_steps: int


@dataclass(frozen=True)
class GenerationReport:
    """One completed generation as this rank saw it: its members' results, the population
    (rank 0 only, sorted by member id; None elsewhere), the plan and its donor map."""

    generation: int
    results: list[MemberResult]
    population: list[MemberResult] | None
    exploits: list[Exploit]
    donors: dict[int, int]
    times: StepTimes
    restarts: tuple[Restart, ...] = ()
    """The generation's restarts of failed members, in the order they were decided."""


@dataclass(frozen=True)
class LoopOutcome:
    """``completed``: the last generation finished (``start`` if none); ``last``: its report;
    ``paused``: handed back by ``hooks.pause`` before the last generation."""

    stopped: bool
    completed: int
    last: GenerationReport | None
    paused: bool = False


def run_generations(
    comm,
    members: MutableMapping[int, Exchangeable],
    owner: Owner,
    hooks: Hooks,
    settings: LoopSettings,
    stopper: Stopper | None = None,
) -> LoopOutcome:
    """Run generations ``settings.start + 1 .. settings.total`` on every rank (collective).
    A failed member's replacement takes its place in ``members``."""
    pending = None  # the snapshot of the last boundary not yet on disk
    last = None
    scratch: dict = {}  # the collective exchange's receive buffers on ranks without a recipient
    for generation in range(settings.start + 1, settings.total + 1):
        report = run_generation(
            comm, members, owner, hooks, generation, settings.transport, stopper, scratch, settings.max_member_failures
        )
        if report is None:
            if pending is not None:
                hooks.save(pending)
            return LoopOutcome(stopped=True, completed=generation - 1, last=last)
        last = report
        run_state = hooks.records(report) if hooks.records is not None else None
        pending = checkpoint(hooks, settings, generation, run_state)
        if generation < settings.total and hooks.pause is not None and hooks.pause(report):
            if pending is not None:
                hooks.save(pending)
            return LoopOutcome(stopped=False, completed=generation, last=report, paused=True)
    return LoopOutcome(stopped=False, completed=last.generation if last else settings.start, last=last)


def run_generation(
    comm,
    members: MutableMapping[int, Exchangeable],
    owner: Owner,
    hooks: Hooks,
    generation: int,
    transport: str,
    stopper: Stopper | None = None,
    scratch: dict | None = None,
    max_member_failures: int = 0,
) -> GenerationReport | None:
    """train -> agree on stop -> score -> gather -> plan -> exchange (-> failed members again);
    None if stopping."""
    should_stop = stopper.poll if stopper is not None else _never
    catch = max_member_failures > 0
    started = time.perf_counter()
    began = {member_id: member.env_steps for member_id, member in members.items()}
    failed = train(members, hooks.train, should_stop, generation, catch)
    trained = time.perf_counter()
    if stopper is not None and stopper.agree():
        return None
    agreed = time.perf_counter()
    results = score(comm.Get_rank(), members, hooks.score, generation, failed if catch else None)
    scored = time.perf_counter()
    if stopper is not None and stopper.agree():  # a stop came during the evaluation episodes
        return None
    population = gather(comm, results)
    failures = gather_failures(comm, members, failed) if catch else None
    gathered = time.perf_counter()
    keep_best(comm, members, owner, hooks, generation, population)  # timed with the exchange
    exploits = plan(comm, hooks.plan, generation, population)
    donors = weight_moves(exploits)
    restarts = restarts_of(comm, hooks, generation, failures, population, frozenset(donors), 0) if catch else []
    apply_restarts(members, hooks, restarts, began, owner, comm.Get_rank())
    exchange.apply_exploits(comm, [*exploits, *restart_moves(restarts)], members, transport, owner, scratch)
    decided = list(restarts)
    round_ = 0
    while restarts:  # ends: a member failing again counts, and rank 0 ends the job past the limit
        round_ += 1
        redone, failed = retrain(comm, members, hooks, generation, restarts, owner, should_stop)
        if stopper is not None and stopper.agree():
            return None
        results += redone
        redone_all = gather(comm, redone)
        keep_best(comm, members, owner, hooks, generation, redone_all)
        if population is not None:
            population = by_member([*population, *redone_all])
        failures = gather_failures(comm, members, failed)
        restarts = restarts_of(comm, hooks, generation, failures, population, frozenset(donors), round_)
        apply_restarts(members, hooks, restarts, began, owner, comm.Get_rank())
        exchange.apply_exploits(comm, restart_moves(restarts), members, transport, owner, scratch)
        decided += restarts
    exchanged = time.perf_counter()
    env_steps = sum(member.env_steps - began.get(member_id, 0) for member_id, member in members.items())
    times = StepTimes(started, trained, agreed, scored, gathered, exchanged, env_steps)
    return GenerationReport(generation, results, population, exploits, donors, times, tuple(decided))


def plan(comm, decide: Callable, generation: int, population: list[MemberResult] | None) -> list[Exploit]:
    """Rank 0 decides the generation's exploits; every rank gets them. A decision that is an exception
    (rank 0 found that the run cannot go on: the env never reported the objective's key) is raised on
    every rank at once, so that no rank waits for another."""
    decided = exchange.decide_on_root(comm, lambda: decide(generation, population))
    if isinstance(decided, BaseException):
        raise decided
    return decided


def keep_best(comm, members: Mapping[int, Any], owner: Owner, hooks: Hooks, generation: int, population) -> None:
    """If the run keeps its best (``hooks.best``): rank 0 names the result of ``population`` (its
    own, None elsewhere) that beats the best so far, and every rank learns it; the rank holding that
    member captures it as it is now, before the exchange."""
    if hooks.best is None:
        return
    best = exchange.decide_on_root(comm, lambda: hooks.best(generation, population))
    if best is not None:
        holder = owner(best.member) == comm.Get_rank()
        hooks.keep_best(generation, best, members[best.member] if holder else None)


def restarts_of(
    comm, hooks: Hooks, generation: int, failures, population, recipients: frozenset[int], round_: int
) -> list[Restart]:
    """Rank 0 decides where each failed member starts again (none if none failed); every rank
    gets the restarts. ``round_``: 0 for the generation's failures, 1 for those of its restarted
    members' second try, ..."""

    def decide() -> list[Restart]:
        if not failures:
            return []
        return hooks.restart(generation, failures, population or [], recipients, round_)

    return exchange.decide_on_root(comm, decide)


def restart_moves(restarts) -> list[Exploit]:
    """The restarts that copy a donor's weights, as the exchange moves them."""
    return [
        Exploit(r.generation, r.member, r.donor, float("nan"), r.donor_score, r.old_hparams, r.new_hparams, r.changes)
        for r in restarts
        if r.donor is not None
    ]


def apply_restarts(members, hooks: Hooks, restarts, began: Mapping[int, int], owner: Owner, rank: int) -> None:
    """This rank's failed members, rebuilt in place (their env-step counters back where the
    generation began), ready for a donor's weights."""
    for restart in restarts:
        if owner(restart.member) == rank:
            members[restart.member] = hooks.rebuild(members[restart.member], restart, began[restart.member])


def retrain(comm, members, hooks: Hooks, generation: int, restarts, owner: Owner, should_stop):
    """The restarted members of this rank train the generation again and are scored: (their
    results, {member: error} of those that failed again)."""
    rank = comm.Get_rank()
    mine = {r.member: members[r.member] for r in restarts if owner(r.member) == rank}
    for restart in restarts:
        if restart.member in mine and hooks.restarted is not None:
            hooks.restarted(mine[restart.member], restart)
    failed = train(mine, hooks.train, should_stop, generation, True)
    return score(rank, mine, hooks.score, generation, failed), failed


def _never() -> bool:
    return False


def train(
    members: Mapping[int, Any], train_one: Callable, should_stop: Callable[[], bool], generation: int = 0, catch=False
) -> dict[int, str]:
    """Train the members in turn; a stop request leaves the rest untrained. With ``catch``, a
    member that raises is logged with its traceback and returned ({member: the error}); without,
    the exception ends the job."""
    failed: dict[int, str] = {}
    for member_id, member in members.items():
        if should_stop():
            break
        try:
            train_one(member, should_stop)
        except Exception as error:
            if not catch:
                raise
            failed[member_id] = _failure(member_id, generation, "training", error)
    return failed


def score(
    rank: int, members: Mapping[int, Any], score_one: Callable[[Any], Scores | None], generation: int = 0, failed=None
) -> list[MemberResult]:
    """Each member's result, under its own id (the mapping's key); a stop request that ends a member's
    scoring (``score_one`` returns None) leaves it and the rest unscored. With ``failed`` (a dict of the
    members that failed), a member that fails to be scored is added to it and has no result."""
    results = []
    for member_id, member in members.items():
        if failed is not None and member_id in failed:
            continue
        try:
            scores = score_one(member)
            if scores is None:  # the generation is dropped: the caller's next agree on stop says so
                break
            results.append(MemberResult.of(member_id, rank, member.env_steps, scores, member.hparams))
        except Exception as error:
            if failed is None:
                raise
            failed[member_id] = _failure(member_id, generation, "scoring", error)
    return results


def _failure(member_id: int, generation: int, doing: str, error: Exception) -> str:
    logger.error("member %d failed in generation %d while %s", member_id, generation, doing, exc_info=error)
    return error_line(error)


def gather_failures(comm, members: Mapping[int, Any], failed: Mapping[int, str]) -> list[Failure] | None:
    """The failures of every rank on rank 0 (by member id); None elsewhere."""
    mine = [Failure(m, error, dict(members[m].hparams)) for m, error in failed.items()]
    everyone = exchange.gather_to_root(comm, mine)
    return sorted(everyone, key=lambda f: f.member) if everyone is not None else None


def gather(comm, results: list[MemberResult]) -> list[MemberResult] | None:
    """The population on rank 0, sorted by member id (whatever the placement); None elsewhere."""
    population = exchange.gather_to_root(comm, results)
    return by_member(population) if population is not None else None


def checkpoint(hooks: Hooks, settings: LoopSettings, generation: int, run_state: Any) -> Any:
    """Capture the boundary; write it when due. Returns the snapshot still to write, or None."""
    if hooks.snapshot is None:
        return None
    snapshot = hooks.snapshot(generation, run_state)
    if generation % settings.checkpoint_every == 0 or generation == settings.total:
        hooks.save(snapshot)
        return None
    return snapshot
