"""What start-up gathers from every rank (evo/main.py), on every rank of the MPI tier's jobs (and at size 1
under plain pytest)."""

import socket

import pytest

from evo.config.memory import crowded_hosts
from evo.main import rank_hosts


def test_the_memory_check_sums_the_members_of_every_rank_on_a_host(comm):
    """Issue 54 N9: 36 members on 2 ranks were checked one rank's 18 at a time against the host's memory.
    Rank 0 now gets where every rank runs; the job's ranks share this host, so their members are summed:
    a member size at which one rank's members fit is refused for the job's."""
    ranks = rank_hosts(comm)
    if comm.Get_rank() != 0:
        assert ranks is None
        return
    size, per_rank = comm.Get_size(), 3
    assert [rank.host for rank in ranks] == [socket.gethostname()] * size
    if any(rank.available is None for rank in ranks):
        pytest.skip("this host's MemAvailable is unknown (no /proc/meminfo): the check is skipped here")
    available = min(rank.available for rank in ranks)
    member = available // (per_rank * size) + 1
    assert size == 1 or member * per_rank <= available  # one rank's members fit
    crowded = crowded_hosts(member, per_rank, ranks)
    assert [(load.host, load.ranks, load.members) for load in crowded] == [(ranks[0].host, size, per_rank * size)]
