"""Asynchronous PBT over MPI: no barrier; every rank works; members are tasks (issue 22).

Three parts, on a communicator of their own (a ``Dup`` of the run's):

- **the coordinator**, a thread on rank 0: holds the :class:`~evo.core.asynchronous.Schedule`
  and every member's latest ready point, decides each ready member's exploit
  (``decide(member, latest)``: evo.core.asynchronous.decide_at_ready) and answers each rank's
  request for work with the member next due, or tells it the population has its budget;
- **a service thread on every rank**: hands out, without the rank's main thread, the exploit
  state each member had at its last ready point on this rank (its *snapshot*: the weights that
  earned the score it is ranked by) and a whole member that moves to another rank;
- **the worker**, every rank's main thread (:func:`run_workers`): asks for a member, fetches it
  if it last ran elsewhere, trains one interval, scores it, keeps its snapshot, reports the ready
  point, applies the decision (fetching the donor's snapshot from whichever rank made it) and
  asks again.

A donor's rank therefore never waits on a recipient: its snapshot is served by its service
thread while its main thread trains. The two threads poll with ``Iprobe`` and a sleep that grows
from 1 to 20 ms while nothing comes (a blocked ``recv`` would spin a core that training needs,
and each poll takes the GIL from the training thread). MPI must give
``MPI_THREAD_MULTIPLE`` (mpi4py asks for it; Open MPI gives it).

Messages: a worker sends the coordinator ``("ready", rank, Ready)`` and gets the decision, then
``("next", rank, Settled | None)`` and gets a :class:`Work`; it asks a service
``("snapshot", member)`` or ``("member", member)`` and gets the data back.

A donor may reach its next ready point on the same rank before a recipient's fetch arrives; the
recipient then copies that newer snapshot (the freshest weights of the member it chose, as Ray's
recipient takes its donor's latest checkpoint), and the records name the interval and env steps
actually copied, reported back with the member once settled.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evo.core.asynchronous import Latest, ReadyExploit, Schedule, Task
from evo.core.restart import Failure, Restart, error_line
from evo.core.result import MemberResult, Scores
from evo.learners.interface import Layout, Payload, layout_of

logger = logging.getLogger(__name__)

ASK, REPLY, FETCH, DATA = 32101, 32102, 32103, 32104
Snapshot = tuple[int, int, Payload]
"""A member's exploit state at one of its ready points: (interval, env steps, buffers), a copy."""
POLL_S = (0.001, 0.02)
"""How long an idle coordinator or service thread sleeps between two ``Iprobe``s: from the first
to the second value, doubling while nothing comes (each poll takes the GIL from a training thread
that needs it), back to the first after each message."""


@dataclass(frozen=True)
class Ready:
    """A member at its ready point: its own interval, its result there, the wall time (seconds
    since the run began)."""

    interval: int
    result: MemberResult
    wall: float


@dataclass(frozen=True)
class Decision:
    """The coordinator's answer to a ready point (``exploit``: a :class:`ReadyExploit`, None to
    keep weights and values) or to a failure (a :class:`Restart`), and the rank holding the
    donor's snapshot; ``best``: the ready point's score is the best of the run so far (the worker
    keeps the member as it is, before it copies anything)."""

    exploit: Any
    source: int = -1
    best: bool = False


@dataclass(frozen=True)
class Settled:
    """A member whose ready point's decision is applied: the donor's interval and env steps its
    copy actually took (None without a copy), and what the worker's ``settled`` hook returned for
    the records (rank 0's ``on_ready`` gets it)."""

    member: int
    copied: tuple[int, int] | None = None
    record: Any = None
    best: Any = None
    """What the worker's ``keep_best`` hook returned, if the ready point was the best so far."""


@dataclass(frozen=True)
class Applied:
    """A restart as the worker carried it out: the :class:`Restart` and the donor's (interval, env
    steps) its copy took (None: fresh weights)."""

    restart: Restart
    copied: tuple[int, int] | None = None


@dataclass(frozen=True)
class Work:
    """The coordinator's answer to a request for work: a task, or None when every member has its
    budget (or the run is stopping)."""

    task: Task | None


class _Poller(threading.Thread):
    """A daemon thread that handles messages of one tag until :meth:`stop`."""

    def __init__(self, comm, tag: int, name: str):
        super().__init__(name=name, daemon=True)
        self.comm = comm
        self.tag = tag
        self.error: BaseException | None = None
        self._stopping = threading.Event()

    def run(self) -> None:
        from mpi4py import MPI

        status = MPI.Status()
        pause = POLL_S[0]
        try:
            while not self._stopping.is_set() and not self.finished():
                if self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=self.tag, status=status):
                    source = status.Get_source()
                    self.handle(source, self.comm.recv(source=source, tag=self.tag))
                    pause = POLL_S[0]
                else:
                    time.sleep(pause)
                    pause = min(2 * pause, POLL_S[1])
        except BaseException as error:
            # The ranks waiting on this thread would wait for ever: its traceback, then the job ends
            # (as an exception in the generation loop ends it).
            self.error = error
            logger.error(
                "the %s thread of rank %d failed; ending the job", self.name, self.comm.Get_rank(), exc_info=error
            )
            MPI.COMM_WORLD.Abort(1)

    def finished(self) -> bool:
        return False

    def handle(self, source: int, message) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self.signal_stop()
        self.join()
        self.raise_if_failed()

    def signal_stop(self) -> None:
        """Ask the thread to end after its current poll, without waiting for it."""
        self._stopping.set()

    def raise_if_failed(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"the {self.name} thread failed: {self.error!r}") from self.error


@dataclass
class Coordination:
    """Rank 0's part of the run: the :class:`Schedule`, ``decide(member, latest)`` (a ready
    member's exploit) and the records' view:
    ``on_ready(point, exploit, rank, record)`` sees each ready point once its decision is applied
    (with the copy actually made; ``record``: what the worker's ``settled`` hook returned). For
    failed members: ``restart(interval, failure, latest)`` returns where it starts again (raising
    past the limit ends the job) and ``on_restart(restart)`` sees it. A resumed run starts from
    ``latest`` (each member's last ready point) and ``snapshot_on`` (the rank serving its snapshot)."""

    schedule: Schedule
    decide: Callable[[int, Mapping[int, Latest]], ReadyExploit | None]
    on_ready: Callable[[Latest, ReadyExploit | None, int, Any], None] | None = None
    restart: Callable[[int, Failure, Mapping[int, Latest]], Restart] | None = None
    on_restart: Callable[[Restart], None] | None = None
    best: Callable[[Latest], bool] | None = None
    """Whether a ready point's score beats the best of the run so far (and is now the best)."""
    on_best: Callable[[Latest, Any], None] | None = None
    """Sees a best ready point once settled, with what the worker's ``keep_best`` returned."""
    latest: Mapping[int, Latest] = field(default_factory=dict)
    snapshot_on: Mapping[int, int] = field(default_factory=dict)
    halt: Callable[[Mapping[int, Latest]], BaseException | None] | None = None
    """Whether the run must end, seen at each ready point: an exception to raise on every rank once the
    workers are released (the env never reported the objective's key), or None. The ready point and
    those already under way are settled as usual, and no more work is given."""


class Coordinator(_Poller):
    """Rank 0's coordinator thread (see the module docstring), doing what ``plan`` (a
    :class:`Coordination`) says."""

    def __init__(self, comm, plan: Coordination):
        super().__init__(comm, ASK, "coordinator")
        self.plan = plan
        self.latest: dict[int, Latest] = dict(plan.latest)
        self.deciding: dict[int, tuple[Latest, ReadyExploit | None]] = {}
        """Member -> its ready point and decision, until the worker has applied it."""
        self.snapshot_on: dict[int, int] = dict(plan.snapshot_on)
        """Member -> the rank holding the snapshot of its latest ready point."""
        self.waiting: list[int] = []
        self.released: set[int] = set()
        self.stopped = False
        self.restarts: list[Restart] = []
        self.halted: BaseException | None = None
        """Why the run ends (``plan.halt``), or None."""

    def finished(self) -> bool:
        return len(self.released) == self.comm.Get_size()

    def handle(self, source: int, message) -> None:
        kind, rank, body = message
        if kind == "ready":
            self.comm.send(self.ready(rank, body), dest=rank, tag=REPLY)
            return
        if kind == "failed":
            self.comm.send(self.failed(*body), dest=rank, tag=REPLY)
            return
        if kind == "stop":  # the rank left its member's interval unfinished: nothing counted; all end
            self.plan.schedule.release(body, rank)
            self.stopped = True
        elif kind == "next" and body is not None:
            self.settle(rank, body)
        self.waiting.append(rank)
        self.serve()

    def ready(self, rank: int, ready: Ready) -> Decision:
        member = ready.result.member
        point = Latest(ready.interval, ready.result, ready.wall)
        self.latest[member] = point
        self.snapshot_on[member] = rank
        self.plan.schedule.ready(member, rank, ready.wall, settled=False)
        if self.halted is None and self.plan.halt is not None:
            self.halted = self.plan.halt(self.latest)
            self.stopped = self.stopped or self.halted is not None
        exploit = self.plan.decide(member, self.latest) if self.halted is None else None
        self.deciding[member] = (point, exploit)
        best = self.plan.best(point) if self.plan.best is not None else False
        if exploit is None or not exploit.copies:
            return Decision(exploit, best=best)
        return Decision(exploit, self.snapshot_on[exploit.exploit.donor], best)

    def settle(self, rank: int, settled: Settled) -> None:
        """The member's decision is applied on ``rank``: it is free again, and its ready point goes
        to the records with the copy it actually made."""
        point, exploit = self.deciding.pop(settled.member)
        if exploit is not None:
            exploit = exploit.as_copied(settled.copied)
        self.plan.schedule.release(settled.member, rank)
        if self.plan.on_ready is not None:
            self.plan.on_ready(point, exploit, rank, settled.record)
        if settled.best is not None and self.plan.on_best is not None:
            self.plan.on_best(point, settled.best)

    def failed(self, interval: int, failure: Failure) -> Decision:
        """Where a member that failed in ``interval`` starts again (it trains the interval again)."""
        restart = self.plan.restart(interval, failure, self.latest)
        self.restarts.append(restart)
        if self.plan.on_restart is not None:
            self.plan.on_restart(restart)
        return Decision(restart, self.snapshot_on[restart.donor] if restart.donor is not None else -1)

    def serve(self) -> None:
        """Give every waiting rank a member that is free (first the members a waiting rank holds
        itself, so none moves while its holder asks), or release it when nothing is left."""
        for own_only in (True, False):
            for rank in list(self.waiting):
                task = None if self.stopped else self.plan.schedule.take(rank, own_only)
                if task is None and (own_only or not (self.stopped or self.plan.schedule.finished)):
                    continue  # every member left is being trained elsewhere: ask again later
                self.waiting.remove(rank)
                if task is None:
                    self.released.add(rank)
                self.comm.send(Work(task), dest=rank, tag=REPLY)


class Service(_Poller):
    """Every rank's service thread: serves snapshots (``snapshots``: member -> (interval, env
    steps, its exploit state), kept by the worker) and whole members (``give(member)``: the member's
    migration payload; the rank forgets it)."""

    def __init__(self, comm, snapshots: Mapping[int, Snapshot], give: Callable[[int], Any]):
        super().__init__(comm, FETCH, "service")
        self.snapshots = snapshots
        self.give = give
        self.served: list[tuple[str, int, int]] = []
        """(what, member, to rank) of every request served."""

    def handle(self, source: int, message) -> None:
        kind, member = message
        if kind == "snapshot":
            send_payload(self.comm, source, self.snapshots[member])
        elif kind == "member":
            self.comm.send(self.give(member), dest=source, tag=DATA)
        else:
            raise ValueError(f"unknown request {kind!r} from rank {source}")
        self.served.append((kind, member, source))


def snapshot_state(member) -> Payload:
    """A copy of ``member``'s exploit state: what it serves as its snapshot while it trains on."""
    return {name: np.array(array) for name, array in member.exploit_state().items()}


def send_payload(comm, dest: int, snapshot: Snapshot) -> None:
    """A snapshot: its interval, env steps and layout (pickled), then each buffer as it is."""
    interval, env_steps, state = snapshot
    comm.send((interval, env_steps, layout_of(state)), dest=dest, tag=DATA)
    for array in state.values():
        comm.Send(array, dest=dest, tag=DATA)


def fetch_snapshot(comm, rank: int, member: int, receive: Callable[[Layout], Payload]) -> Snapshot:
    """``member``'s snapshot from ``rank``'s service, received into the buffers ``receive`` gives."""
    comm.send(("snapshot", member), dest=rank, tag=FETCH)
    interval, env_steps, layout = comm.recv(source=rank, tag=DATA)
    target = receive(layout)
    for name, _, _ in layout:
        comm.Recv(target[name], source=rank, tag=DATA)
    return interval, env_steps, target


def fetch_member(comm, rank: int, member: int) -> Any:
    """The whole ``member`` from ``rank``'s service (which forgets it)."""
    comm.send(("member", member), dest=rank, tag=FETCH)
    return comm.recv(source=rank, tag=DATA)


@dataclass(frozen=True)
class WorkerHooks:
    """What a run plugs into the workers.

    ``train(member, should_stop)`` trains one interval; ``score(member)`` returns its
    :class:`Scores` (None: a stop request ended its scoring, and the interval is dropped);
    ``pack(member)`` is its migration payload and ``adopt(member_id, payload)`` the member rebuilt
    from it on the rank it moved to. Optional: ``settled(member, point, exploit,
    restarts, snapshot)`` after a ready point's decision is applied (checkpoint, TensorBoard): the
    ready point (a :class:`Latest`), the exploit as applied (naming the snapshot actually copied),
    the interval's restarts (:class:`Applied`) and the member's own snapshot of the ready point
    (the weights that earned its score); what it returns goes to rank 0's ``on_ready``;
    ``rebuild(member, restart, env_steps)``, a new member in a failed one's place (its env-step
    counter back at ``env_steps``, where the failed interval began) and ``restarted(member,
    restart)`` once a donor's weights are in (as in evo.runner.loop)."""

    train: Callable[[Any, Callable[[], bool]], None]
    score: Callable[[Any], Scores | None]
    pack: Callable[[Any], Any]
    adopt: Callable[[int, Any], Any]
    settled: Callable[[Any, Latest, ReadyExploit | None, tuple[Applied, ...], Snapshot], Any] | None = None
    rebuild: Callable[[Any, Restart, int], Any] | None = None
    restarted: Callable[[Any, Restart], None] | None = None
    keep_best: Callable[[Any, Latest], Any] | None = None
    """``keep_best(member, point)``: the member is the best of the run so far at ``point``; keep it
    as it is (before the decision's copy); what it returns goes to rank 0's ``on_best``."""


@dataclass
class WorkerReport:
    """What one rank did: (member, interval) it trained, in order; whether it stopped."""

    trained: list[tuple[int, int]]
    stopped: bool
    coordinator: Coordinator | None = None
    service: Service | None = None


def run_workers(
    comm,
    members: MutableMapping[int, Any],
    hooks: WorkerHooks,
    plan: Coordination | None,
    should_stop: Callable[[], bool] = lambda: False,
    catch: bool = False,
    clock: Callable[[], float] = time.time,
    snapshots: Mapping[int, Snapshot] | None = None,
    wall_origin: float = 0.0,
) -> WorkerReport:
    """Train until every member has its budget or a rank stops (collective: every rank calls it).
    ``members``: this rank's members (id -> member), changed in place as members move; ``plan``:
    rank 0's :class:`Coordination` (None elsewhere). With ``catch``, a member whose training or
    scoring raises is logged with its traceback and restarted where rank 0 says, and trains its
    interval again; without, the exception ends the job. ``snapshots``: this rank's members' last
    ready points of a resumed run (the coordination's ``snapshot_on`` names this rank for them);
    ``wall_origin``: the wall time the run's records reached before (a resumed run's continue from it)."""
    comm = comm.Dup()
    rank = comm.Get_rank()
    began = comm.bcast(clock(), root=0)  # one origin for every rank's wall times
    snapshots = dict(snapshots or {})

    def give(member_id: int):
        return hooks.pack(members.pop(member_id))

    service = Service(comm, snapshots, give)
    coordinator = Coordinator(comm, plan) if rank == 0 else None
    service.start()
    if coordinator is not None:
        coordinator.start()
    trained: list[tuple[int, int]] = []
    stopped = False
    message = ("next", rank, None)
    try:
        while True:
            comm.send(message, dest=0, tag=ASK)
            task = comm.recv(source=0, tag=REPLY).task
            if task is None:
                break
            if task.moves:
                members[task.member] = hooks.adopt(task.member, fetch_member(comm, task.holder, task.member))
            outcome = train_interval(comm, members, hooks, task, should_stop, catch, snapshots)
            if outcome is None:
                stopped, message = True, ("stop", rank, task.member)
                continue
            result, restarts = outcome
            member = members[task.member]
            snapshots[task.member] = (task.interval, member.env_steps, snapshot_state(member))
            ready = Ready(task.interval, result, wall_origin + clock() - began)
            comm.send(("ready", rank, ready), dest=0, tag=ASK)
            decision = comm.recv(source=0, tag=REPLY)
            kept = None
            if decision.best and hooks.keep_best is not None:  # as scored: before it copies a donor
                kept = hooks.keep_best(member, Latest(task.interval, result, ready.wall))
            copied = apply(comm, member, decision, snapshots)
            exploit = decision.exploit.as_copied(copied) if decision.exploit is not None else None
            record = None
            if hooks.settled is not None:
                point = Latest(ready.interval, result, ready.wall)
                record = hooks.settled(member, point, exploit, tuple(restarts), snapshots[task.member])
            trained.append((task.member, task.interval))
            message = ("next", rank, Settled(task.member, copied, record, kept))
        comm.Barrier()  # no rank fetches any more: the service threads can stop
    except BaseException:
        # this rank's exception ends the job (the caller aborts it): the threads are told to stop,
        # not waited for (the coordinator would wait for ranks that never ask again)
        service.signal_stop()
        if coordinator is not None:
            coordinator.signal_stop()
        raise
    service.stop()
    if coordinator is not None:
        coordinator.join()
        coordinator.raise_if_failed()
    comm.Free()
    return WorkerReport(trained, stopped, coordinator, service)


def train_interval(comm, members, hooks: WorkerHooks, task: Task, should_stop, catch: bool, snapshots):
    """Train ``task``'s member for its interval and score it: its :class:`MemberResult` and the
    restarts it took (:class:`Applied`), or None if a stop came. A failure (with ``catch``)
    restarts the member where rank 0 says and trains the interval again."""
    rank = comm.Get_rank()
    restarts: list[Applied] = []
    while True:
        member = members[task.member]
        began = member.env_steps
        try:
            hooks.train(member, should_stop)
            if should_stop():
                return None
            scores = hooks.score(member)
            if scores is None:  # a stop request ended its evaluation episodes
                return None
            return MemberResult.of(task.member, rank, member.env_steps, scores, member.hparams), restarts
        except Exception as error:
            if not catch:
                raise
            logger.error("member %d failed in interval %d", task.member, task.interval, exc_info=error)
            failure = Failure(task.member, error_line(error), dict(member.hparams))
        comm.send(("failed", rank, (task.interval, failure)), dest=0, tag=ASK)
        decision = comm.recv(source=0, tag=REPLY)
        restart = decision.exploit
        member = members[task.member] = hooks.rebuild(member, restart, began)
        copied = None
        if restart.donor is not None:
            interval, env_steps, state = donor_snapshot(comm, decision.source, restart.donor, member, snapshots)
            member.load(state, restart.new_hparams)
            copied = (interval, env_steps)
        restarts.append(Applied(restart, copied))
        if hooks.restarted is not None:
            hooks.restarted(member, restart)


def apply(comm, member, decision: Decision, snapshots: Mapping[int, Snapshot]) -> tuple[int, int] | None:
    """Carry out a ready point's decision on ``member``: copy the donor's snapshot (from its
    rank's service, or this rank's own) and take the new values, or only take them. Returns the
    donor's (interval, env steps) copied, or None."""
    exploit = decision.exploit
    if exploit is None:
        return None
    if not exploit.copies:
        member.set_hparams(exploit.exploit.new_hparams)
        return None
    interval, env_steps, state = donor_snapshot(comm, decision.source, exploit.exploit.donor, member, snapshots)
    member.load(state, exploit.exploit.new_hparams)
    return interval, env_steps


def donor_snapshot(comm, source: int, donor: int, member, snapshots: Mapping[int, Snapshot]) -> Snapshot:
    """``donor``'s snapshot for ``member`` to load: this rank's own (``source`` is this rank), or
    fetched from ``source``'s service into ``member``'s buffers."""
    if source == comm.Get_rank():
        return snapshots[donor]
    return fetch_snapshot(comm, source, donor, member.receive_buffers)
