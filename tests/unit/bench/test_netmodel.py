"""The exchange model of bench/netmodel.py counts what evo's exchange really sends.

``evo.mpi.exchange.apply_exploits`` runs here once per simulated rank, with a communicator
that records every ``Isend``, ``Recv`` and ``Bcast`` instead of sending it (no MPI job; the
requests it returns are MPI's null request, which ``Waitall`` accepts). The messages and
bytes it records must be the model's, for many population sizes, truncation fractions and
placements of members on ranks, with and without normalisation statistics (one more array
of a member's exploit state, sent right after its weights).

Before its buffers, each exchange sends the state's layout, a small pickled message (``isend``
/ ``recv`` for p2p, ``bcast`` for the collective): the communicator records those apart, and
there is exactly one per remote pair (p2p) or per broadcast donor (collective).
"""

import math

import numpy as np
import pytest
from mpi4py import MPI

from bench import netmodel
from evo.core.plan import Exploit
from evo.core.selection import truncation, truncation_count
from evo.learners.interface import buffers_for, layout_of
from evo.mpi import exchange


class RecordingComm:
    """Stands for rank ``rank`` of ``size``: records the calls, moves no data. A layout message
    received is ``layout``, the one every member's exploit state has."""

    def __init__(self, rank: int, size: int, layout):
        self.rank, self.size, self.layout = rank, size, layout
        self.sends, self.receives, self.broadcasts = [], [], []
        self.layout_sends, self.layout_receives, self.layout_broadcasts = [], [], []

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def Isend(self, buffer, dest, tag):
        self.sends.append((dest, buffer.nbytes))
        return MPI.REQUEST_NULL

    def Recv(self, buffer, source, tag):
        self.receives.append((source, buffer.nbytes))

    def Bcast(self, buffer, root):
        self.broadcasts.append((root, buffer.nbytes))

    def isend(self, obj, dest, tag):
        self.layout_sends.append((dest, obj))
        return MPI.REQUEST_NULL

    def recv(self, source, tag):
        self.layout_receives.append(source)
        return self.layout

    def bcast(self, obj, root):
        self.layout_broadcasts.append(root)
        return obj if self.rank == root else self.layout


class Member:
    """What apply_exploits needs of a member: a float32 buffer, maybe float64 statistics."""

    def __init__(self, floats: int, statistics: int | None):
        self.buffer = np.zeros(floats, dtype=np.float32)
        self.stats = np.zeros(statistics, dtype=np.float64) if statistics else None
        self.hparams = {}

    def exploit_state(self):
        state = {"weights": self.buffer}
        if self.stats is not None:
            state["normalization"] = self.stats
        return state

    def receive_buffers(self, layout):
        return buffers_for(layout, self.exploit_state())

    def load(self, state, hparams):
        assert state["weights"] is self.buffer  # received in place
        self.hparams = dict(hparams)

    def set_hparams(self, hparams):
        self.hparams = dict(hparams)


def recorded(donors, owner, size, members_per_rank, floats, statistics, transport):
    """Every simulated rank's RecordingComm after apply_exploits of ``donors``."""
    exploits = [Exploit(1, r, d, 0.0, 1.0, {}, {}) for r, d in sorted(donors.items())]
    layout = layout_of(Member(floats, statistics).exploit_state())
    comms = []
    for rank in range(size):
        mine = [m for m in range(size * members_per_rank) if owner(m) == rank]
        comm = RecordingComm(rank, size, layout)
        exchange.apply_exploits(comm, exploits, {m: Member(floats, statistics) for m in mine}, transport, owner)
        comms.append(comm)
    return comms


PLACEMENTS = {
    "one per rank": (1, lambda size, per_rank: lambda m: m),
    "blocks": (3, lambda size, per_rank: lambda m: m // per_rank),
    "round robin": (3, lambda size, per_rank: lambda m: m % size),
}


@pytest.mark.parametrize("placement", sorted(PLACEMENTS))
@pytest.mark.parametrize("statistics", [None, 7])
@pytest.mark.parametrize("size", [1, 2, 3, 4, 8, 13, 32])
def test_model_counts_every_message_and_byte(size, statistics, placement):
    per_rank, make_owner = PLACEMENTS[placement]
    owner = make_owner(size, per_rank)
    floats = 1000
    buffers = [floats * 4] + ([statistics * 8] if statistics else [])
    rng = np.random.default_rng(size)
    for fraction in (0.1, 0.25, 0.5):
        for _ in range(3):
            donors = truncation(list(rng.normal(size=size * per_rank)), fraction, rng)
            p2p = recorded(donors, owner, size, per_rank, floats, statistics, "p2p")
            model = [netmodel.p2p_traffic(donors, owner, size, nbytes) for nbytes in buffers]
            for rank, comm in enumerate(p2p):
                assert len(comm.sends) == sum(t[rank].messages_sent for t in model)
                assert sum(n for _, n in comm.sends) == sum(t[rank].bytes_sent for t in model)
                assert len(comm.receives) == sum(t[rank].messages_received for t in model)
                assert sum(n for _, n in comm.receives) == sum(t[rank].bytes_received for t in model)
                # one layout message per pair, before its buffers
                assert len(comm.layout_sends) == model[0][rank].messages_sent
                assert len(comm.layout_receives) == model[0][rank].messages_received
            collective = recorded(donors, owner, size, per_rank, floats, statistics, "collective")
            # statistics are one more array of the state: each donor's buffers go one after the other
            rounds = [netmodel.collective_broadcasts(donors, owner, nbytes) for nbytes in buffers]
            expected = [b for donor in zip(*rounds, strict=True) for b in donor]
            for comm in collective:  # every rank takes part in every Bcast, in the same order
                assert comm.broadcasts == expected
                assert comm.layout_broadcasts == [root for root, _ in rounds[0]]  # one layout per donor
                assert comm.sends == comm.receives == comm.layout_sends == comm.layout_receives == []


@pytest.mark.parametrize("size", [2, 3, 4, 7, 16, 32, 100])
@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.5])
def test_one_member_per_rank_closed_forms(size, fraction):
    """One member per rank: ceil(P f) recipients (at most P/2) each receive exactly one
    message of the buffer; the collective round broadcasts once per distinct donor."""
    rng = np.random.default_rng(size)
    recipients = truncation_count(size, fraction)
    assert recipients == min(math.ceil(size * fraction - 1e-12), size // 2)
    for _ in range(5):
        donors = truncation(list(rng.normal(size=size)), fraction, rng)
        comms = recorded(donors, lambda m: m, size, 1, 10, None, "p2p")
        assert sum(len(c.receives) for c in comms) == sum(len(c.sends) for c in comms) == recipients
        assert all(len(comms[r].receives) == 1 for r in donors)
        assert max(len(c.sends) for c in comms) == max(
            t.messages_sent for t in netmodel.p2p_traffic(donors, lambda m: m, size, 40)
        )
        collective = recorded(donors, lambda m: m, size, 1, 10, None, "collective")
        assert len(collective[0].broadcasts) == len(set(donors.values()))


def test_model_times():
    latency, bandwidth = 10e-6, 1e9
    # a 2-rank Bcast is one message, as a send is
    assert netmodel.bcast_time(2, 1000, latency, bandwidth) == pytest.approx(latency + 1000 / bandwidth)
    # a large Bcast costs about twice the bytes (scatter + allgather), whatever the ranks
    assert netmodel.bcast_time(1024, 10**9, latency, bandwidth) == pytest.approx(2 * 10**9 / bandwidth, rel=0.01)
    # p2p: a donor drawn by three recipients sends three layouts and three buffers; the round waits for it
    donors = {5: 0, 6: 0, 7: 0, 4: 1}
    layout = netmodel.LAYOUT_BYTES
    time = netmodel.exchange_time("p2p", donors, lambda m: m, 8, [1000], latency, bandwidth)
    assert time == pytest.approx(3 * (2 * latency + (layout + 1000) / bandwidth))
    collective = netmodel.exchange_time("collective", donors, lambda m: m, 8, [1000, 80], latency, bandwidth)
    assert collective == pytest.approx(
        2 * sum(netmodel.bcast_time(8, n, latency, bandwidth) for n in (layout, 1000, 80))
    )


def test_fit_recovers_latency_and_bandwidth():
    sizes = np.logspace(2, 8, 13)
    alpha, bandwidth = netmodel.fit_latency_bandwidth(sizes, 20e-6 + sizes / 3e9)
    assert alpha == pytest.approx(20e-6) and bandwidth == pytest.approx(3e9)


def test_pipelined_tree_takes_its_best_segment_count():
    latency, bandwidth, nbytes = 30e-6, 1.1e9, 7_515_216
    best = netmodel.pipelined_tree_time(1024, nbytes, latency, bandwidth)
    for segments in (1, 2, 10, 50, 100, 1000):
        assert best <= 2 * (segments + 9) * (latency + nbytes / (segments * bandwidth)) + 1e-12
    # large messages: about twice the bytes over the bandwidth, plus a pipeline's start-up
    assert 2 * nbytes / bandwidth < best < 3 * nbytes / bandwidth


def test_gather_time():
    assert netmodel.gather_time(1, 100, 1e-6, 1e9) == 0.0
    assert netmodel.gather_time(1024, 100, 1e-6, 1e9) == pytest.approx(10e-6 + 1023 * 100 / 1e9)
