"""Asynchronous PBT's transport (evo.mpi.asynchronous) on every rank of real MPI jobs: every
(member, interval) trained once, members moving to free ranks, a recipient holding exactly the
snapshot its records name, a donor's rank serving its snapshot while its main thread is held, a
fast rank training more intervals. Driven by messages between the ranks, never by sleeps.

Run by tests/mpi/test_under_mpiexec.py under ``mpiexec -n 2`` and ``-n 4``; plain ``pytest`` runs
it at size 1 too (the coordinator, the service and the worker in one process)."""

import dataclasses
import threading
import time

import numpy as np
import pytest
from mpi4py import MPI

from evo.core.asynchronous import Schedule, decide_at_ready, ready_rng
from evo.core.explorers import make_explorer
from evo.core.kinds import LogFloat
from evo.core.restart import plan_restarts, restart_rng
from evo.core.result import Scores
from evo.learners.interface import buffers_for
from evo.mpi.asynchronous import Coordination, WorkerHooks, run_workers

SPACE = {"lr": LogFloat(1e-3, 1.0)}
STEPS = 10
RELEASE = 32201


class Member:
    """A member whose buffer says which member trained it last and its interval; it scores its
    own id (member N-1 is the best), and keeps its own env-step counter through copies."""

    def __init__(self, member_id: int):
        self.member_id = member_id
        self.hparams = {"lr": 0.01}
        self.buffer = np.array([member_id, 0.0])
        self.steps = 0
        self.loaded: list[tuple[int, int]] = []

    @property
    def env_steps(self):
        return self.steps

    def train_interval(self):
        self.steps += STEPS
        self.buffer[:] = [self.member_id, self.steps // STEPS]

    def exploit_state(self):
        return {"x": self.buffer}

    def receive_buffers(self, layout):
        return buffers_for(layout, {"x": self.buffer})

    def load(self, state, hparams):
        if state["x"] is not self.buffer:
            np.copyto(self.buffer, state["x"])
        self.loaded.append((int(self.buffer[0]), int(self.buffer[1])))
        self.set_hparams(hparams)

    def set_hparams(self, hparams):
        self.hparams = dict(hparams)


def hooks(train=None, settled=None):
    def train_one(member, should_stop):
        if train is not None:
            train(member)
        member.train_interval()

    return WorkerHooks(
        train=train_one,
        score=lambda member: Scores(float(member.member_id)),
        pack=lambda member: member,
        adopt=lambda member_id, member: member,
        settled=settled,
    )


def decide(strategy="truncation"):
    explorer = make_explorer("perturb", SPACE)
    return lambda member, latest: decide_at_ready(
        member, latest, strategy, explorer, ready_rng(0, member, latest[member].interval), 0.25
    )


def start(comm, count):
    """Members 0..count-1 round-robin: this rank's, and the schedule (rank 0's)."""
    size, rank = comm.Get_size(), comm.Get_rank()
    placement = {m: m % size for m in range(count)}
    members = {m: Member(m) for m, r in placement.items() if r == rank}
    return members, placement


def test_every_member_interval_once_and_every_member_ends_on_one_rank(comm):
    total = 3
    members, placement = start(comm, 2 * comm.Get_size())
    records = []
    plan = Coordination(
        Schedule(placement, total), decide(), on_ready=lambda point, exploit, rank, record: records.append(point)
    )
    report = run_workers(comm, members, hooks(), plan if comm.Get_rank() == 0 else None)
    trained = comm.gather(report.trained, root=0)
    held = comm.allgather(sorted(members))
    everything = sorted(m for part in held for m in part)
    assert everything == list(range(2 * comm.Get_size()))  # every member on exactly one rank
    assert all(member.env_steps == total * STEPS for member in members.values())  # own counters kept
    if comm.Get_rank() == 0:
        pairs = sorted(pair for part in trained for pair in part)
        assert pairs == [(m, i) for m in placement for i in range(1, total + 1)]
        assert sorted((p.result.member, p.interval) for p in records) == pairs
        for member in placement:  # a member's intervals in order, whichever rank trained them
            assert [p.interval for p in records if p.result.member == member] == list(range(1, total + 1))


def test_a_recipient_holds_the_snapshot_its_records_name(comm):
    total = 4
    members, placement = start(comm, 2 * comm.Get_size())
    lines = []

    def record(point, exploit, rank, record):
        if exploit is not None and exploit.copies:
            lines.append((point.result.member, exploit.exploit.donor, exploit.donor_interval, exploit.donor_env_steps))

    plan = Coordination(Schedule(placement, total), decide(), on_ready=record)
    run_workers(comm, members, hooks(), plan if comm.Get_rank() == 0 else None)
    loads = comm.gather([(m, *origin) for m, member in members.items() for origin in member.loaded], root=0)
    if comm.Get_rank() == 0:
        copies = sorted(load for part in loads for load in part)
        assert copies, "the bottom member copies at some ready point"
        assert copies == sorted((recipient, donor, interval) for recipient, donor, interval, _ in lines)
        assert all(steps == interval * STEPS for *_, interval, steps in lines)  # the donor's, at its snapshot
        best = 2 * comm.Get_size() - 1
        assert all(donor != recipient and recipient != best for recipient, donor, *_ in lines)


@pytest.mark.skipif(MPI.COMM_WORLD.Get_size() < 2, reason="needs a donor on another rank")
def test_a_donors_rank_serves_its_snapshot_while_its_main_thread_is_held(comm):
    """Rank 1's main thread is held right after member 1's first ready point (the best member)
    until member 0 (rank 0) has copied that snapshot: if serving it needed rank 1's main thread,
    this would hang."""
    rank = comm.Get_rank()
    members, placement = start(comm, 2)
    member1_decided = threading.Event()
    world = MPI.COMM_WORLD
    decide_one = decide()

    def deciding(member, latest):
        if member == 1 and latest[1].interval == 1:
            member1_decided.set()
        return decide_one(member, latest)

    def train(member):
        if member.member_id == 0 and member.steps == 0:
            assert member1_decided.wait(240)  # member 1's first ready point is known before member 0's

    def settled(member, point, exploit, restarts, snapshot):
        if member.member_id == 1 and point.interval == 1:
            wait_for_message(world, source=0)
        if member.member_id == 0 and point.interval == 1:
            assert exploit is not None and exploit.copies and exploit.exploit.donor == 1
            assert member.loaded == [(1, 1)]
            world.send("copied", dest=1, tag=RELEASE)

    plan = Coordination(Schedule(placement, 2), deciding)
    report = run_workers(comm, members, hooks(train, settled), plan if rank == 0 else None)
    if rank == 1:
        assert ("snapshot", 1, 0) in report.service.served


@pytest.mark.skipif(MPI.COMM_WORLD.Get_size() < 2, reason="needs a slow rank beside a fast one")
def test_a_fast_rank_trains_more_intervals_and_takes_the_slow_ranks_members(comm):
    """Rank 1's first interval (member 1's) is held until every other member has its budget: the
    other ranks train all of it, rank 1's other members included, and rank 1 trains at most
    member 1's intervals."""
    size, rank = comm.Get_size(), comm.Get_rank()
    total, count = 3, 2 * size
    members, placement = start(comm, count)
    world = MPI.COMM_WORLD
    done = []
    held = [True]

    def train(member):
        if rank == 1 and held[0]:
            assert member.member_id == 1
            held[0] = False
            wait_for_message(world, source=0)

    def record(point, exploit, trained_on, record):
        done.append((point.result.member, trained_on))
        if point.result.member != 1 and sum(1 for member, _ in done if member != 1) == (count - 1) * total:
            world.send("go", dest=1, tag=RELEASE)

    plan = Coordination(Schedule(placement, total), decide("wta"), on_ready=record)
    report = run_workers(comm, members, hooks(train), plan if rank == 0 else None)
    counts = comm.gather(len(report.trained), root=0)
    if rank == 0:
        assert sum(counts) == count * total
        assert 1 <= counts[1] <= total < max(c for r, c in enumerate(counts) if r != 1)
        others = {m for m, r in placement.items() if r == 1} - {1}
        assert others and not [m for m, trained_on in done if m in others and trained_on == 1]


def wait_for_message(comm, source: int) -> None:
    """Poll for one message from ``source`` (a blocked recv would spin a core)."""
    while not comm.Iprobe(source=source, tag=RELEASE):
        time.sleep(0.001)
    comm.recv(source=source, tag=RELEASE)


def test_a_stop_on_one_rank_ends_every_worker_with_no_interval_counted_twice_or_half(comm):
    """The last rank stops in the second interval it trains (its first is always its own first
    member's first: at the start a rank trains the members placed on it; a second always comes, as
    most members are free then): that interval is not counted, the first is, every rank's worker
    returns, and each member's recorded intervals are 1..k."""
    size, rank = comm.Get_size(), comm.Get_rank()
    members, placement = start(comm, 2 * size)
    stopper = size - 1
    calls = []
    records = []

    def train(member):
        calls.append((member.member_id, member.steps // STEPS + 1))  # (member, the interval it trains)

    plan = Coordination(
        Schedule(placement, 5),
        decide(),
        on_ready=lambda point, exploit, trained_on, record: records.append((point.result.member, point.interval)),
    )

    def stopping():  # from the last rank's second interval on, as a signal mid-interval would
        return rank == stopper and len(calls) >= 2

    report = run_workers(comm, members, hooks(train), plan if rank == 0 else None, should_stop=stopping)
    assert report.stopped == (rank == stopper)
    first, stopped = comm.bcast(calls[:2] if rank == stopper else None, root=stopper)
    if rank == 0:
        assert first == (stopper, 1) and first in records and stopped not in records
        assert len(records) == len(set(records)) < 5 * 2 * size
        for member in placement:
            intervals = sorted(i for m, i in records if m == member)
            assert intervals == list(range(1, len(intervals) + 1))


def restarts(limit: int):
    """Rank 0's restart decision (evo.core.restart's, as a run makes it): a top member's snapshot
    among the others' latest ready points, a fresh draw of values; past ``limit`` the job ends."""
    counts: dict[int, int] = {}

    def restart(interval, failure, latest):
        others = [point.result for member, point in sorted(latest.items()) if member != failure.member]
        [planned] = plan_restarts(
            interval, [failure], others, counts, limit, SPACE, restart_rng(0, interval, 0), "truncation", 0.25
        )
        counts[failure.member] = planned.failures
        return planned

    return restart


def rebuilt(member, restart, env_steps):
    fresh = Member(member.member_id)
    fresh.steps = env_steps  # its counter continues where the failed interval began
    fresh.set_hparams(restart.new_hparams)
    return fresh


def test_a_failing_member_restarts_from_a_top_members_snapshot_and_trains_its_interval_again(comm):
    size, rank = comm.Get_size(), comm.Get_rank()
    total, count = 3, 2 * size
    failing = count - 2  # not the best
    members, placement = start(comm, count)
    failed = []
    records = []

    def train(member):
        if member.member_id == failing and member.steps == STEPS and not failed:
            failed.append(rank)
            raise RuntimeError("the env exploded")

    plan = Coordination(
        Schedule(placement, total),
        decide(),
        on_ready=lambda point, exploit, trained_on, record: records.append((point.result.member, point.interval)),
        restart=restarts(limit=1),
    )
    report = run_workers(
        comm,
        members,
        dataclasses.replace(hooks(train), rebuild=rebuilt),
        plan if rank == 0 else None,
        catch=True,
    )
    loads = comm.gather({m: member.loaded for m, member in members.items()}, root=0)
    steps = comm.gather({m: member.env_steps for m, member in members.items()}, root=0)
    if rank == 0:
        [restart] = report.coordinator.restarts
        assert (restart.member, restart.generation, restart.failures) == (failing, 2, 1)
        assert restart.donor is not None and restart.donor != failing and "the env exploded" in restart.error
        loaded = {m: origins for part in loads for m, origins in part.items()}
        assert loaded[failing][0][0] == restart.donor  # the rebuilt member took the donor's snapshot first
        assert sorted(records) == [(m, i) for m in placement for i in range(1, total + 1)]  # the interval once
        assert {m: n for part in steps for m, n in part.items()} == {m: total * STEPS for m in placement}
