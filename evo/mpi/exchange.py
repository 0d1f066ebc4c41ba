"""Everything that talks MPI. Every function takes the communicator as an argument.

Weights and optimizer state travel as flat numpy buffers with mpi4py's uppercase
(buffer) calls, and so do a member's normalisation statistics (a second, float64 buffer);
only small metadata (scores, hyperparameters, the plan) is pickled.

The donor map ``{recipient: donor}`` is the same on every rank (rank 0 decides it and
broadcasts it). Donors are never recipients, so a donor's buffer can be sent while
recipients' buffers are being overwritten.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from evo.core.plan import Exploit, weight_moves

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


def exchange_p2p(comm, donors: Mapping[int, int], owner: Owner, buffers: Mapping[int, np.ndarray]) -> int:
    """Copy each donor's buffer into its recipients' buffers with point-to-point messages.

    ``buffers`` holds this rank's members' flat buffers (donors' already packed). Only the
    ranks that hold a donor and a recipient talk: the donor's rank posts one ``Isend`` per
    remote recipient, the recipient's rank ``Recv``s straight into the recipient's buffer.
    All sends are posted before any receive blocks, so no ordering can deadlock.
    Returns the number of bytes this rank sent.
    """
    from mpi4py import MPI

    _check_donor_map(donors)
    rank = comm.Get_rank()
    pairs = sorted(donors.items())
    requests = []
    sent = 0
    for recipient, donor in pairs:
        if owner(donor) == rank and owner(recipient) != rank:
            requests.append(comm.Isend(buffers[donor], dest=owner(recipient), tag=recipient))
            sent += buffers[donor].nbytes
    for recipient, donor in pairs:
        if owner(recipient) == rank:
            if owner(donor) == rank:
                np.copyto(buffers[recipient], buffers[donor])
            else:
                comm.Recv(buffers[recipient], source=owner(donor), tag=recipient)
    MPI.Request.Waitall(requests)
    return sent


def exchange_collective(
    comm,
    donors: Mapping[int, int],
    owner: Owner,
    buffers: Mapping[int, np.ndarray],
    scratch: np.ndarray,
) -> int:
    """Copy each donor's buffer into its recipients' buffers with one ``Bcast`` per donor.

    Donors whose recipients all live on the donor's own rank are copied locally with no
    communication. ``scratch`` (same size as a buffer) receives on ranks that hold no
    recipient of that donor. Returns the number of bytes this rank broadcast as root.
    """
    _check_donor_map(donors)
    rank = comm.Get_rank()
    sent = 0
    for donor in sorted(set(donors.values())):
        recipients = sorted(r for r, d in donors.items() if d == donor)
        root = owner(donor)
        local = [r for r in recipients if owner(r) == rank]
        if any(owner(r) != root for r in recipients):
            if rank == root:
                data = buffers[donor]
                sent += data.nbytes
            else:
                data = buffers[local[0]] if local else scratch
            comm.Bcast(data, root=root)
        elif rank == root:
            data = buffers[donor]
        else:
            continue
        for recipient in local:
            if buffers[recipient] is not data:
                np.copyto(buffers[recipient], data)
    return sent


def exchange(
    comm,
    transport: str,
    donors: Mapping[int, int],
    owner: Owner,
    buffers: Mapping[int, np.ndarray],
    scratch: np.ndarray | None = None,
) -> int:
    """Move weights by ``transport`` ('p2p' or 'collective')."""
    if transport == "p2p":
        return exchange_p2p(comm, donors, owner, buffers)
    if transport == "collective":
        if scratch is None:
            scratch = np.empty_like(next(iter(buffers.values())))
        return exchange_collective(comm, donors, owner, buffers, scratch)
    raise ValueError(f"unknown transport {transport!r}")


def apply_exploits(
    comm,
    exploits: Sequence[Exploit],
    members: Mapping[int, Any],
    transport: str,
    owner: Owner,
    scratch: np.ndarray | None = None,
) -> dict[int, int]:
    """Carry out a plan that every rank holds (collective); returns its donor map.

    Donors' buffers move to their recipients by ``transport``; each recipient on this rank
    then ``load``s the new weights with its new hyperparameters, and a member that explores
    without copying (donor == recipient) only ``set_hparams``.

    ``members`` maps this rank's member ids to objects with ``buffer``, ``pack()``,
    ``load(buffer, hparams)`` and ``set_hparams(hparams)``: PPO agents and the toy's workers.
    A member may also hold ``stats`` (a PPO agent's normalisation statistics, packed by
    ``pack()``): they follow the weights by the same transport, received into the recipient's
    ``stats``, where its ``load`` reads them. Every member of a run has them or none has (one
    config), so every rank makes the same calls. ``owner(member)`` is the rank that holds a
    member, for any placement.
    """
    donors = weight_moves(exploits)
    for donor in set(donors.values()):
        if donor in members:
            members[donor].pack()
    exchange(comm, transport, donors, owner, {member: members[member].buffer for member in members}, scratch)
    stats = {member: members[member].stats for member in members if getattr(members[member], "stats", None) is not None}
    if stats:
        exchange(comm, transport, donors, owner, stats)
    for exploit in exploits:
        member = members.get(exploit.recipient)
        if member is None:
            continue
        if exploit.donor == exploit.recipient:
            member.set_hparams(exploit.new_hparams)
        else:
            member.load(member.buffer, exploit.new_hparams)
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
    return comm.bcast(value, root=root)


def world():
    """The communicator of every rank the job started with (``MPI.COMM_WORLD``); asked for by
    the entry points only, never at import time."""
    from mpi4py import MPI

    return MPI.COMM_WORLD


def library_version() -> str:
    """The MPI library's name and version, one line (MPI pads the string with a NUL)."""
    from mpi4py import MPI

    return MPI.Get_library_version().replace("\x00", "").strip().splitlines()[0]
