"""Exchange tests that run on every rank of an MPI job.

Run by tests/test_mpi.py under ``mpiexec -n 2`` and ``-n 4`` with
``python -m mpi4py -m pytest`` (an exception aborts the job instead of deadlocking); plain
``pytest`` also runs them in one process, so every function is checked at size 1 too.
Every test binds COMM_WORLD and a Dup() of it.
"""

import numpy as np
import pytest

from evo.core.selection import truncation, winner_takes_all
from evo.mpi import exchange


def payload(member, size=1000):
    """A buffer whose content says which member it came from."""
    return np.full(size, member, dtype=np.float32) + np.arange(size, dtype=np.float32) * 1e-3


def donor_maps(population):
    rng = np.random.default_rng(population)
    for trial in range(5):
        scores = list(rng.normal(size=population))
        yield truncation(scores, 0.25, np.random.default_rng(trial))
        yield truncation(scores, 0.5, np.random.default_rng(trial))
    yield winner_takes_all(list(rng.normal(size=population)))


@pytest.mark.parametrize("transport", ["p2p", "collective"])
@pytest.mark.parametrize("per_rank", [1, 2, 3])
def test_routing_with_dummy_payloads(comm, transport, per_rank):
    size, rank = comm.Get_size(), comm.Get_rank()
    population = size * per_rank
    owner = lambda member: member // per_rank  # noqa: E731
    mine = range(rank * per_rank, rank * per_rank + per_rank)
    for donors in donor_maps(population):
        assert comm.bcast(donors, root=0) == donors  # the same map on every rank
        buffers = {m: payload(m) for m in mine}
        sent = exchange.exchange(comm, transport, donors, owner, buffers)
        for member in mine:
            expected = payload(donors.get(member, member))
            assert np.array_equal(buffers[member], expected), (member, donors)
        # traffic: p2p sends one message per remote pair; collectives one Bcast per donor
        total = comm.allreduce(sent)
        nbytes = payload(0).nbytes
        if transport == "p2p":
            remote_pairs = sum(owner(r) != owner(d) for r, d in donors.items())
            assert total == remote_pairs * nbytes
        else:
            remote_donors = {d for r, d in donors.items() if owner(r) != owner(d)}
            assert total == len(remote_donors) * nbytes


def test_donor_that_is_also_a_recipient_is_refused(comm):
    with pytest.raises(ValueError, match="both donor and recipient"):
        exchange.exchange_p2p(comm, {0: 1, 1: 2}, lambda m: 0, {})


def test_gather_and_decide(comm):
    size, rank = comm.Get_size(), comm.Get_rank()
    gathered = exchange.gather_to_root(comm, [rank * 10, rank * 10 + 1])
    if rank == 0:
        assert gathered == [r * 10 + i for r in range(size) for i in range(2)]
    else:
        assert gathered is None
    decided = exchange.decide_on_root(comm, lambda: {"rank": comm.Get_rank()})
    assert decided == {"rank": 0}
    assert exchange.agree(comm, rank == size - 1) is True
    assert exchange.agree(comm, False) is False


def test_real_ppo_weights_are_identical_after_transfer(comm, tmp_path_factory):
    """Rank 0's member is copied into every other rank's member, both transports."""
    from evo.config import parse_config
    from evo.sb3.agent import build_member, state_tensors

    size, rank = comm.Get_size(), comm.Get_rank()
    config = parse_config(["--num-envs", "2"], world_size=size, check_run_dir=False)
    member = build_member(config, rank, config.agent.defaults, None)
    member.train(256)
    donors = {r: 0 for r in range(1, size)}
    for transport in ("p2p", "collective"):
        member.pack()
        before = member.buffer.copy()
        exchange.exchange(comm, transport, donors, lambda m: m, {rank: member.buffer})
        if rank in donors:
            member.load(member.buffer, member.hparams)
        packed = np.empty_like(member.buffer)
        from evo.sb3.agent import pack

        pack(member.model, packed)
        reference = comm.bcast(packed if rank == 0 else None, root=0)
        assert np.array_equal(packed, reference)
        if rank == 0:
            assert np.array_equal(packed, before)  # the donor is untouched
        assert all(t.dtype.is_floating_point for t in state_tensors(member.model))
