"""The generation loop, shared by the RL runs (``evo.run``) and the toy (``evo.toy``).

Every generation, on every rank, in this order:

1. **train**: each local member trains for one generation (``hooks.train``); a stop request
   seen while polling ends training early;
2. **agree** on stop (collective): if any rank is stopping, the generation is abandoned
   (nothing is scored, planned or exchanged), the last boundary's checkpoint is written if
   ``checkpoint_every`` had skipped it, and the loop reports ``stopped``;
3. **score**: each local member becomes a :class:`~evo.core.result.MemberResult` (its id,
   rank, env steps, scores and the hyperparameters it trained with);
4. **gather**: rank 0 gets the whole population, sorted by member id;
5. **plan**: rank 0 decides the exploits (``hooks.plan``) and broadcasts them;
6. **exchange**: donors' weights move to their recipients, who take their new hyperparameters;
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

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from evo.core.plan import Exploit
from evo.core.result import MemberResult, Scores, by_member
from evo.learners.interface import Exchangeable
from evo.mpi import exchange

Owner = Callable[[int], int]


class Stopper(Protocol):
    """Stop requests across ranks (:class:`evo.mpi.exchange.StopNotifier`)."""

    def poll(self) -> bool: ...

    def agree(self) -> bool: ...


@dataclass(frozen=True)
class Hooks:
    """What a run plugs into the loop.

    ``train(member, should_stop)`` trains one member for one generation, polling
    ``should_stop``; ``score(member)`` returns its :class:`Scores`; ``plan(generation,
    population)`` (rank 0 only) returns the exploits. Optional: ``records(report)``, called
    on every rank after the exchange, returns the run state to checkpoint (on rank 0);
    ``snapshot(generation, run_state)`` captures the members at a generation boundary and
    ``save(snapshot)`` writes it (collective).
    """

    train: Callable[[Any, Callable[[], bool]], None]
    score: Callable[[Any], Scores]
    plan: Callable[[int, list[MemberResult]], list[Exploit]]
    records: Callable[[GenerationReport], Any] | None = None
    snapshot: Callable[[int, Any], Any] | None = None
    save: Callable[[Any], None] | None = None


@dataclass(frozen=True)
class LoopSettings:
    """Generations ``start + 1 .. total`` (``start``: the generation a checkpoint holds, 0
    for a new run), how weights move, and how often a boundary is written."""

    start: int
    total: int
    transport: str = "p2p"
    checkpoint_every: int = 1


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


@dataclass(frozen=True)
class LoopOutcome:
    """``completed``: the last generation finished (``start`` if none); ``last``: its report."""

    stopped: bool
    completed: int
    last: GenerationReport | None


def run_generations(
    comm,
    members: Mapping[int, Exchangeable],
    owner: Owner,
    hooks: Hooks,
    settings: LoopSettings,
    stopper: Stopper | None = None,
) -> LoopOutcome:
    """Run generations ``settings.start + 1 .. settings.total`` on every rank (collective)."""
    pending = None  # the snapshot of the last boundary not yet on disk
    last = None
    scratch: dict = {}  # the collective exchange's receive buffers on ranks without a recipient
    for generation in range(settings.start + 1, settings.total + 1):
        report = run_generation(comm, members, owner, hooks, generation, settings.transport, stopper, scratch)
        if report is None:
            if pending is not None:
                hooks.save(pending)
            return LoopOutcome(stopped=True, completed=generation - 1, last=last)
        last = report
        run_state = hooks.records(report) if hooks.records is not None else None
        pending = checkpoint(hooks, settings, generation, run_state)
    return LoopOutcome(stopped=False, completed=last.generation if last else settings.start, last=last)


def run_generation(
    comm,
    members: Mapping[int, Exchangeable],
    owner: Owner,
    hooks: Hooks,
    generation: int,
    transport: str,
    stopper: Stopper | None = None,
    scratch: dict | None = None,
) -> GenerationReport | None:
    """train -> agree on stop -> score -> gather -> plan -> exchange; None if stopping."""
    started = time.perf_counter()
    steps_before = sum(member.env_steps for member in members.values())
    train(members, hooks.train, stopper.poll if stopper is not None else _never)
    trained = time.perf_counter()
    if stopper is not None and stopper.agree():
        return None
    agreed = time.perf_counter()
    results = score(comm.Get_rank(), members, hooks.score)
    scored = time.perf_counter()
    population = gather(comm, results)
    gathered = time.perf_counter()
    exploits = plan(comm, hooks.plan, generation, population)
    donors = exchange.apply_exploits(comm, exploits, members, transport, owner, scratch)
    exchanged = time.perf_counter()
    env_steps = sum(member.env_steps for member in members.values()) - steps_before
    times = StepTimes(started, trained, agreed, scored, gathered, exchanged, env_steps)
    return GenerationReport(generation, results, population, exploits, donors, times)


def _never() -> bool:
    return False


def train(members: Mapping[int, Any], train_one: Callable, should_stop: Callable[[], bool]) -> None:
    """Train the members in turn; a stop request leaves the rest untrained."""
    for member in members.values():
        if should_stop():
            break
        train_one(member, should_stop)


def score(rank: int, members: Mapping[int, Any], score_one: Callable[[Any], Scores]) -> list[MemberResult]:
    """Each member's result, under its own id (the mapping's key)."""
    return [
        MemberResult.of(member_id, rank, member.env_steps, score_one(member), member.hparams)
        for member_id, member in members.items()
    ]


def gather(comm, results: list[MemberResult]) -> list[MemberResult] | None:
    """The population on rank 0, sorted by member id (whatever the placement); None elsewhere."""
    population = exchange.gather_to_root(comm, results)
    return by_member(population) if population is not None else None


def plan(comm, decide: Callable, generation: int, population: list[MemberResult] | None) -> list[Exploit]:
    """Rank 0 decides the generation's exploits; every rank gets them."""
    return exchange.decide_on_root(comm, lambda: decide(generation, population))


def checkpoint(hooks: Hooks, settings: LoopSettings, generation: int, run_state: Any) -> Any:
    """Capture the boundary; write it when due. Returns the snapshot still to write, or None."""
    if hooks.snapshot is None:
        return None
    snapshot = hooks.snapshot(generation, run_state)
    if generation % settings.checkpoint_every == 0 or generation == settings.total:
        hooks.save(snapshot)
        return None
    return snapshot
