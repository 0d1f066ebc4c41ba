"""A latency-bandwidth (alpha-beta) model of evo's weight exchange per generation (pure: numpy
and evo's selection rule; no MPI, no torch).

What the exchange sends is read off the algorithm of ``evo.mpi.exchange`` (and checked against
it by ``tests/test_exchange_model.py``, which counts the calls the real functions make):

- **p2p**: for every recipient whose donor lives on another rank, the donor's rank posts the
  exploit state's layout (a small pickled message, :data:`LAYOUT_BYTES`) and one ``Isend`` per
  buffer of the state (the weights with Adam's state, and the normalisation statistics when the
  members have them), and the recipient's rank receives them in that order, all in one round. A
  donor drawn by k recipients sends k times.
- **collective**: per donor with a recipient on another rank, donors in increasing id, one small
  ``bcast`` of the layout and one ``Bcast`` per buffer over the whole communicator, every rank
  taking part in every one of them.

The model of one message of n bytes is ``alpha + n / bandwidth``. A p2p round costs, on the
busiest rank, its messages times alpha plus its bytes over the bandwidth, sent and received
counted apart (a full-duplex link, no congestion inside the network); the round takes as long
as its busiest rank. A ``Bcast`` of n bytes to P ranks costs the cheapest of three textbook
algorithms, as a tuned MPI picks among them by size: a binomial tree,
``ceil(log2 P) (alpha + n / bandwidth)``; van de Geijn's scatter + ring allgather,
``(log2 P + P - 1) alpha + 2 (P - 1) / P * n / bandwidth`` (both from Thakur, Rabenseifner &
Gropp, "Optimization of collective communication operations in MPICH", IJHPCA 2005); and a
binary tree pipelined in m segments, ``2 (m + H - 1) (alpha + n / (m bandwidth))`` with H =
floor(log2 P) levels and the best m (each node forwards every segment to two children). For
large n all three but the binomial tree cost about twice the bytes over the bandwidth, whatever
P. The Bcasts of one generation run one after the other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evo.core.selection import truncation, truncation_count

Owner = Callable[[int], int]
LAYOUT_BYTES = 65
"""A pickled layout of a state of two buffers (``pickle.dumps(layout_of(state))``: 37 bytes for
one buffer, 65 for two)."""


@dataclass(frozen=True)
class Network:
    """A network's one-way MPI latency (s) and bandwidth (bytes/s), and where they come from."""

    name: str
    latency: float
    bandwidth: float
    source: str


NETWORKS = (
    Network(
        "10 GbE (TCP)",
        30e-6,
        1.1e9,
        "Open MPI's tcp BTL over a switched 10 GbE link: 20-50 us one-way MPI latency (kernel TCP stack, "
        "Hurwitz & Feng measured 20 us end to end on tuned hosts); 10 Gb/s less Ethernet/IP/TCP framing "
        "is ~1.18 GB/s of payload, 1.1 GB/s as MPI achieves it",
    ),
    Network(
        "InfiniBand HDR",
        1.5e-6,
        23e9,
        "NVIDIA ConnectX-6 HDR: 200 Gb/s = 25 GB/s line rate, adapter latency under 0.6 us; MPI (UCX) adds "
        "software and a switch hop or two: 1-2 us one way, ~23-24 GB/s for large messages",
    ),
)


@dataclass(frozen=True)
class RankTraffic:
    """What one rank sends and receives in one round of the exchange."""

    messages_sent: int = 0
    bytes_sent: int = 0
    messages_received: int = 0
    bytes_received: int = 0


def p2p_traffic(donors: Mapping[int, int], owner: Owner, size: int, nbytes: int) -> list[RankTraffic]:
    """Per rank, the messages and bytes of one p2p round (``evo.mpi.exchange.exchange_p2p``):
    one message per recipient whose donor is on another rank; a local pair is a memory copy."""
    sent = [[0, 0] for _ in range(size)]
    received = [[0, 0] for _ in range(size)]
    for recipient, donor in donors.items():
        source, destination = owner(donor), owner(recipient)
        if source != destination:
            sent[source][0] += 1
            sent[source][1] += nbytes
            received[destination][0] += 1
            received[destination][1] += nbytes
    return [RankTraffic(s[0], s[1], r[0], r[1]) for s, r in zip(sent, received, strict=True)]


def collective_broadcasts(donors: Mapping[int, int], owner: Owner, nbytes: int) -> list[tuple[int, int]]:
    """The ``Bcast``s of one collective round (``evo.mpi.exchange.exchange_collective``), in
    order, as (root rank, bytes): one per donor with a recipient on another rank."""
    broadcasts = []
    for donor in sorted(set(donors.values())):
        if any(owner(recipient) != owner(donor) for recipient, d in donors.items() if d == donor):
            broadcasts.append((owner(donor), nbytes))
    return broadcasts


def p2p_round_time(traffic: Sequence[RankTraffic], latency: float, bandwidth: float) -> float:
    """The busiest rank's time: its messages times the latency plus its bytes over the bandwidth,
    sending and receiving in parallel (full duplex)."""
    busiest = 0.0
    for rank in traffic:
        sending = rank.messages_sent * latency + rank.bytes_sent / bandwidth
        receiving = rank.messages_received * latency + rank.bytes_received / bandwidth
        busiest = max(busiest, sending, receiving)
    return busiest


def bcast_time(size: int, nbytes: int, latency: float, bandwidth: float) -> float:
    """One ``Bcast`` of ``nbytes`` to ``size`` ranks: the cheaper of a binomial tree and a
    scatter + ring allgather."""
    if size < 2:
        return 0.0
    steps = math.ceil(math.log2(size))
    binomial = steps * (latency + nbytes / bandwidth)
    scatter_allgather = (math.log2(size) + size - 1) * latency + 2 * (size - 1) / size * nbytes / bandwidth
    return min(binomial, scatter_allgather, pipelined_tree_time(size, nbytes, latency, bandwidth))


def gather_time(size: int, nbytes: int, latency: float, bandwidth: float) -> float:
    """A ``gather`` of ``nbytes`` from every rank to one, down a binomial tree: log2 P steps, and
    the root receives every other rank's bytes."""
    if size < 2:
        return 0.0
    return math.ceil(math.log2(size)) * latency + (size - 1) * nbytes / bandwidth


def pipelined_tree_time(size: int, nbytes: int, latency: float, bandwidth: float) -> float:
    """A ``Bcast`` down a binary tree in m segments: 2 (m + H - 1) (alpha + n / (m bandwidth)),
    H = floor(log2 P) levels, at the whole number of segments that minimises it
    (m* = sqrt((H - 1) n / (alpha bandwidth)))."""
    levels = math.floor(math.log2(size))
    best = math.sqrt(max(levels - 1, 0) * nbytes / (latency * bandwidth)) if latency > 0 else 1.0
    candidates = {max(1, math.floor(best)), max(1, math.ceil(best))}
    return min(2 * (m + levels - 1) * (latency + nbytes / (m * bandwidth)) for m in candidates)


def exchange_time(
    transport: str,
    donors: Mapping[int, int],
    owner: Owner,
    size: int,
    buffers: Sequence[int],
    latency: float,
    bandwidth: float,
) -> float:
    """Seconds to move one generation's donor map: p2p, one round in which every remote pair sends
    its layout and its buffers; collective, per donor its layout's broadcast then its buffers'."""
    if transport == "p2p":
        rounds = [p2p_traffic(donors, owner, size, nbytes) for nbytes in (LAYOUT_BYTES, *buffers)]
        combined = [
            RankTraffic(
                sum(r[rank].messages_sent for r in rounds),
                sum(r[rank].bytes_sent for r in rounds),
                sum(r[rank].messages_received for r in rounds),
                sum(r[rank].bytes_received for r in rounds),
            )
            for rank in range(size)
        ]
        return p2p_round_time(combined, latency, bandwidth)
    if transport == "collective":
        per_donor = sum(bcast_time(size, n, latency, bandwidth) for n in (LAYOUT_BYTES, *buffers))
        return len(collective_broadcasts(donors, owner, 1)) * per_donor
    raise ValueError(f"unknown transport {transport!r}")


def truncation_maps(size: int, fraction: float, draws: int, seed: int = 0) -> list[dict[int, int]]:
    """Donor maps of evo's truncation rule for ``size`` members with random scores."""
    rng = np.random.default_rng(seed)
    return [truncation(list(rng.normal(size=size)), fraction, rng) for _ in range(draws)]


@dataclass(frozen=True)
class Counts:
    """Messages and bytes of one generation's exchange, one member per rank (means over draws)."""

    recipients: int
    busiest_sender_messages: float
    broadcasts: float


def expected_counts(size: int, fraction: float, draws: int = 200, seed: int = 0) -> Counts:
    """How many recipients there are (ceil(P f), at most P/2), how many messages the busiest
    donor sends in a p2p round, and how many Bcasts a collective round makes."""
    maps = truncation_maps(size, fraction, draws, seed)
    busiest = [max(t.messages_sent for t in p2p_traffic(m, one_per_rank, size, 1)) for m in maps]
    broadcasts = [len(collective_broadcasts(m, one_per_rank, 1)) for m in maps]
    return Counts(truncation_count(size, fraction), float(np.mean(busiest)), float(np.mean(broadcasts)))


def expected_exchange_time(
    transport: str,
    size: int,
    fraction: float,
    buffers: Sequence[int],
    latency: float,
    bandwidth: float,
    draws: int = 200,
    seed: int = 0,
) -> float:
    """The mean over truncation's random donor maps of :func:`exchange_time`, one member per rank."""
    maps = truncation_maps(size, fraction, draws, seed)
    return float(np.mean([exchange_time(transport, m, one_per_rank, size, buffers, latency, bandwidth) for m in maps]))


def fit_latency_bandwidth(sizes: Sequence[float], seconds: Sequence[float]) -> tuple[float, float]:
    """Least-squares ``t = alpha + n / bandwidth`` over message sizes, in relative error (every
    size counts alike, small ones fix alpha, large ones the bandwidth). Returns (alpha, bandwidth)."""
    sizes, seconds = np.asarray(sizes, dtype=float), np.asarray(seconds, dtype=float)
    design = np.stack([np.ones_like(sizes), sizes], axis=1) / seconds[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(design, np.ones_like(seconds), rcond=None)
    return float(alpha), float(1.0 / beta)


def one_per_rank(member: int) -> int:
    """The owner of member m when every rank holds one member: rank m."""
    return member
