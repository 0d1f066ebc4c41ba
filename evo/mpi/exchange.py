"""Everything that talks MPI. Every function takes the communicator as an argument.

A member's exploit state (its networks and optimizers as one flat float32 buffer, its
normalisation statistics as a float64 one, ...: evo/learners/interface.py) travels with mpi4py's
uppercase (buffer) calls, received straight into the recipient's own memory; only small metadata
(scores, hyperparameters, the plan, a state's layout) is pickled.

The donor map ``{recipient: donor}`` is the same on every rank (rank 0 decides it and
broadcasts it). Donors are never recipients, so a donor's buffer can be sent while
recipients' buffers are being overwritten.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from evo.core.plan import Exploit, weight_moves
from evo.learners.interface import Exchangeable, Layout, Payload, buffers_for, layout_of

T = TypeVar("T")
Owner = Callable[[int], int]


def _check_donor_map(donors: Mapping[int, int]) -> None:
    both = set(donors) & set(donors.values())
    if both:
        raise ValueError(f"members {sorted(both)} are both donor and recipient; the donor map is invalid")


def gather_to_root(comm, local: list[T], root: int = 0) -> list[T] | None:
    """Concatenate every rank's list on ``root`` (rank order); None elsewhere."""
    parts = comm.gather(local, root=root)
    if parts is None:
        return None
    return [item for part in parts for item in part]


def decide_on_root(comm, decide: Callable[[], T], root: int = 0) -> T:
    """Run ``decide`` on ``root`` only and give its result to every rank."""
    result = decide() if comm.Get_rank() == root else None
    return comm.bcast(result, root=root)


Receive = Callable[[int, Layout], Payload]
"""``receive(recipient, layout)``: the buffers recipient ``recipient`` takes a state of ``layout`` into."""


def exchange_p2p(
    comm, donors: Mapping[int, int], owner: Owner, states: Mapping[int, Payload], receive: Receive
) -> tuple[dict[int, Payload], int]:
    """Copy each donor's exploit state into its recipients' buffers with point-to-point messages.

    ``states`` holds the exploit states of this rank's donors (packed: views of their memory).
    Only the ranks that hold a donor and a recipient talk: the donor's rank posts, per remote
    recipient, the state's layout (a small pickled message) and one ``Isend`` per buffer; the
    recipient's rank receives the layout, asks the recipient for buffers of it (its own, when
    they match) and ``Recv``s straight into them. All sends are posted before any receive
    blocks, so no ordering can deadlock; messages of one pair share a tag and arrive in order.
    Returns what each recipient on this rank received, and the number of bytes this rank sent.
    """
    from mpi4py import MPI

    _check_donor_map(donors)
    rank = comm.Get_rank()
    pairs = sorted(donors.items())
    requests = []
    sent = 0
    for recipient, donor in pairs:
        if owner(donor) == rank and owner(recipient) != rank:
            state = states[donor]
            requests.append(comm.isend(layout_of(state), dest=owner(recipient), tag=recipient))
            for array in state.values():
                requests.append(comm.Isend(array, dest=owner(recipient), tag=recipient))
                sent += array.nbytes
    received = {}
    for recipient, donor in pairs:
        if owner(recipient) != rank:
            continue
        if owner(donor) == rank:
            state = states[donor]
            target = receive(recipient, layout_of(state))
            for name, array in state.items():
                if target[name] is not array:
                    np.copyto(target[name], array)
        else:
            layout = comm.recv(source=owner(donor), tag=recipient)
            target = receive(recipient, layout)
            for name, _, _ in layout:
                comm.Recv(target[name], source=owner(donor), tag=recipient)
        received[recipient] = target
    MPI.Request.Waitall(requests)
    return received, sent


def exchange_collective(
    comm,
    donors: Mapping[int, int],
    owner: Owner,
    states: Mapping[int, Payload],
    receive: Receive,
    scratch: dict | None = None,
) -> tuple[dict[int, Payload], int]:
    """Copy each donor's exploit state into its recipients' buffers with one ``Bcast`` per buffer
    (after one small broadcast of its layout).

    Donors whose recipients all live on the donor's own rank are copied locally with no
    communication. Ranks that hold no recipient of a donor receive into ``scratch`` buffers
    (kept across calls, one set per layout). Returns what each recipient on this rank received,
    and the number of bytes this rank broadcast as root.
    """
    _check_donor_map(donors)
    scratch = {} if scratch is None else scratch
    rank = comm.Get_rank()
    sent = 0
    received: dict[int, Payload] = {}
    for donor in sorted(set(donors.values())):
        recipients = sorted(r for r, d in donors.items() if d == donor)
        root = owner(donor)
        local = [r for r in recipients if owner(r) == rank]
        if any(owner(r) != root for r in recipients):
            layout = comm.bcast(layout_of(states[donor]) if rank == root else None, root=root)
            if rank == root:
                data = states[donor]
                sent += sum(array.nbytes for array in data.values())
            elif local:
                data = received[local[0]] = receive(local[0], layout)
            else:
                data = scratch.setdefault(layout, buffers_for(layout, {}))
            for name, _, _ in layout:
                comm.Bcast(data[name], root=root)
        elif rank == root:
            data = states[donor]
        else:
            continue
        for recipient in local:
            if recipient in received:
                continue
            target = receive(recipient, layout_of(data))
            for name, array in data.items():
                if target[name] is not array:
                    np.copyto(target[name], array)
            received[recipient] = target
    return received, sent


def exchange(
    comm,
    transport: str,
    donors: Mapping[int, int],
    owner: Owner,
    states: Mapping[int, Payload],
    receive: Receive,
    scratch: dict | None = None,
) -> tuple[dict[int, Payload], int]:
    """Move exploit states by ``transport`` ('p2p' or 'collective')."""
    if transport == "p2p":
        return exchange_p2p(comm, donors, owner, states, receive)
    if transport == "collective":
        return exchange_collective(comm, donors, owner, states, receive, scratch)
    raise ValueError(f"unknown transport {transport!r}")


def apply_exploits(
    comm,
    exploits: Sequence[Exploit],
    members: Mapping[int, Exchangeable],
    transport: str,
    owner: Owner,
    scratch: dict | None = None,
) -> dict[int, int]:
    """Carry out a plan that every rank holds (collective); returns its donor map.

    Donors' exploit states move to their recipients by ``transport``; each recipient on this
    rank then ``load``s what it received with its new hyperparameters, and a member that
    explores without copying (donor == recipient) only ``set_hparams``.

    ``members`` maps this rank's member ids to objects of the learner interface's
    :class:`~evo.learners.interface.Exchangeable` (RL learners and the toy's workers).
    ``owner(member)`` is the rank that holds a member, for any placement.
    """
    donors = weight_moves(exploits)
    states = {donor: members[donor].exploit_state() for donor in set(donors.values()) if donor in members}
    received, _ = exchange(
        comm, transport, donors, owner, states, lambda r, layout: members[r].receive_buffers(layout), scratch
    )
    for exploit in exploits:
        member = members.get(exploit.recipient)
        if member is None:
            continue
        if exploit.donor == exploit.recipient:
            member.set_hparams(exploit.new_hparams)
        else:
            member.load(received[exploit.recipient], exploit.new_hparams)
    return donors


class StopNotifier:
    """Spreads a stop request from any rank to all, without a collective mid-training.

    The rank that got the signal sends one small message to every other rank when it next
    polls; the others see it with ``Iprobe`` (cheap enough to call every env step). At the
    generation's sync point, :meth:`agree` makes every rank take the same decision and
    receives every stop message, so none is left unmatched.
    """

    TAG = 32001

    def __init__(self, comm, requested: Callable[[], bool]):
        self.comm = comm
        self.requested = requested
        self.announced = False
        self.heard = False
        self._requests = []

    def poll(self) -> bool:
        """True once a stop was requested here or announced by another rank."""
        if not self.announced and self.requested():
            rank = self.comm.Get_rank()
            token = np.ones(1, dtype=np.int8)
            self._token = token
            for other in range(self.comm.Get_size()):
                if other != rank:
                    self._requests.append(self.comm.Isend(token, dest=other, tag=self.TAG))
            self.announced = True
        if not (self.announced or self.heard):
            from mpi4py import MPI

            self.heard = bool(self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=self.TAG))
        return self.announced or self.heard

    def agree(self) -> bool:
        """Collective: true on every rank if any rank is stopping; drains the messages."""
        from mpi4py import MPI

        self.poll()
        if not agree(self.comm, self.announced):
            return False
        announcers = self.comm.allgather(self.announced)
        rank = self.comm.Get_rank()
        sink = np.empty(1, dtype=np.int8)
        for other, announced in enumerate(announcers):
            if announced and other != rank:
                self.comm.Recv(sink, source=other, tag=self.TAG)
        MPI.Request.Waitall(self._requests)
        self._requests = []
        return True


def agree(comm, flag: bool) -> bool:
    """True on every rank if ``flag`` is true on any rank."""
    from mpi4py import MPI

    return bool(comm.allreduce(bool(flag), op=MPI.LOR))


def broadcast(comm, value: Any, root: int = 0) -> Any:
    """``value`` from ``root`` to every rank (pickled: small metadata only)."""
    return comm.bcast(value, root=root)


def barrier(comm) -> None:
    """Every rank waits for all."""
    comm.Barrier()


def abort(comm, status: int = 1) -> None:
    """End the whole job now, from any rank (no rank is left waiting in a collective or a receive)."""
    comm.Abort(status)


def world():
    """The communicator of every rank the job started with (``MPI.COMM_WORLD``); asked for by
    the entry points only, never at import time."""
    from mpi4py import MPI

    return MPI.COMM_WORLD


def library_version() -> str:
    """The MPI library's name and version, one line (MPI pads the string with a NUL)."""
    from mpi4py import MPI

    return MPI.Get_library_version().replace("\x00", "").strip().splitlines()[0]
