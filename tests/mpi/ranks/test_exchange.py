"""Exchange tests that run on every rank of an MPI job.

Run by tests/mpi/test_under_mpiexec.py under ``mpiexec -n 2`` and ``-n 4`` with
``python -m mpi4py -m pytest`` (an exception aborts the job instead of deadlocking); plain
``pytest`` also runs them in one process, so every function is checked at size 1 too.
Every test binds COMM_WORLD and a Dup() of it.

The exchange moves named payloads (a dict of numpy arrays per donor): a recipient is asked for
buffers of the donor's layout (``receive``) and gets what it received under each name.
"""

import numpy as np
import pytest

from evo.learners.interface import buffers_for, layout_of
from evo.mpi import exchange
from tests.mpi.ranks.payloads import donor_maps, named_payload


@pytest.mark.parametrize("transport", ["p2p", "collective"])
@pytest.mark.parametrize("per_rank", [1, 2, 3])
def test_routing_with_dummy_payloads(comm, transport, per_rank):
    size, rank = comm.Get_size(), comm.Get_rank()
    population = size * per_rank
    owner = lambda member: member // per_rank  # noqa: E731
    mine = range(rank * per_rank, rank * per_rank + per_rank)
    for donors in donor_maps(population):
        assert comm.bcast(donors, root=0) == donors  # the same map on every rank
        buffers = {m: named_payload(m) for m in mine}
        states = {d: buffers[d] for d in set(donors.values()) if d in buffers}
        asked = []

        def receive(recipient, layout, buffers=buffers, asked=asked):
            asked.append(recipient)
            return buffers_for(layout, buffers[recipient])

        received, sent = exchange.exchange(comm, transport, donors, owner, states, receive)
        assert sorted(received) == sorted(r for r in donors if owner(r) == rank)  # this rank's recipients
        assert sorted(asked) == sorted(received)  # each asked for its buffers once
        for member in mine:
            expected = named_payload(donors.get(member, member))
            assert list(buffers[member]) == list(expected)
            for name, array in expected.items():
                assert np.array_equal(buffers[member][name], array), (member, name, donors)
        for recipient, state in received.items():  # received in place: into the recipient's own arrays
            assert all(state[name] is buffers[recipient][name] for name in buffers[recipient])
        # traffic: p2p sends one payload per remote pair; collectives one Bcast per buffer of each donor
        total = comm.allreduce(sent)
        nbytes = sum(array.nbytes for array in named_payload(0).values())
        if transport == "p2p":
            remote_pairs = sum(owner(r) != owner(d) for r, d in donors.items())
            assert total == remote_pairs * nbytes
        else:
            remote_donors = {d for r, d in donors.items() if owner(r) != owner(d)}
            assert total == len(remote_donors) * nbytes


@pytest.mark.parametrize("transport", ["p2p", "collective"])
def test_a_recipient_of_another_layout_receives_into_new_buffers(comm, transport):
    """Members may differ in size: a recipient whose own buffers do not match the donor's layout
    gets new ones, holding the donor's state exactly; its own stay untouched."""
    size, rank = comm.Get_size(), comm.Get_rank()
    owner = lambda member: member // 2  # noqa: E731
    mine = (2 * rank, 2 * rank + 1)
    population = 2 * size
    donors = {r: 0 for r in range(1, population)}  # member 0 (rank 0) donates to every other member
    own = {m: {"weights": np.full(10 + m, -1.0, dtype=np.float32)} for m in mine}
    states = {0: named_payload(0, size=5)} if rank == 0 else {}
    received, _ = exchange.exchange(
        comm, transport, donors, owner, states, lambda r, layout: buffers_for(layout, own[r])
    )
    for recipient in (m for m in mine if m in donors):
        state = received[recipient]
        assert layout_of(state) == layout_of(named_payload(0, size=5))
        assert all(np.array_equal(state[name], array) for name, array in named_payload(0, size=5).items())
        assert state["weights"] is not own[recipient]["weights"]
        assert np.all(own[recipient]["weights"] == -1.0)


def test_donor_that_is_also_a_recipient_is_refused(comm):
    with pytest.raises(ValueError, match="both donor and recipient"):
        exchange.exchange_p2p(comm, {0: 1, 1: 2}, lambda m: 0, {}, lambda r, layout: {})
    with pytest.raises(ValueError, match="both donor and recipient"):
        exchange.exchange_collective(comm, {0: 1, 1: 2}, lambda m: 0, {}, lambda r, layout: {})


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


def test_real_ppo_weights_are_identical_after_transfer(comm):
    """Rank 0's member is copied into every other rank's member, both transports."""
    from evo.config import parse_config
    from evo.runner.session import member_factory
    from evo.sb3.flat import pack, state_tensors

    size, rank = comm.Get_size(), comm.Get_rank()
    config = parse_config(["--num-envs", "2"], world_size=size, check_run_dir=False)
    member = member_factory(config).make(rank, config.agent.defaults, tensorboard=False)
    member.train(256)
    donors = {r: 0 for r in range(1, size)}
    for transport in ("p2p", "collective"):
        states = {rank: member.exploit_state()} if rank == 0 else {}
        before = member.buffer.copy()
        received, _ = exchange.exchange(
            comm, transport, donors, lambda m: m, states, lambda r, layout: member.receive_buffers(layout)
        )
        if rank in donors:
            assert received[rank]["weights"] is member.buffer  # received straight into the member's memory
            member.load(received[rank], member.hparams)
        else:
            assert received == {}
        packed = np.empty_like(member.buffer)
        pack(member.model, packed)
        reference = comm.bcast(packed if rank == 0 else None, root=0)
        assert np.array_equal(packed, reference)
        if rank == 0:
            assert np.array_equal(packed, before)  # the donor is untouched
        assert all(t.dtype.is_floating_point for t in state_tensors(member.model))


def test_real_sac_state_and_replay_buffer_are_identical_after_transfer(comm):
    """--exploit-buffer copy: rank 0's SAC member, its replay buffer (the filled part of each array,
    its position and full flag) with it, is copied into every other rank's member, both transports."""
    from evo.config import parse_config
    from evo.runner.session import member_factory
    from evo.sb3.offpolicy import replay_arrays

    size, rank = comm.Get_size(), comm.Get_rank()
    config = parse_config(
        ["--algo", "sac", "--env-id", "Pendulum-v1", "--exploit-buffer", "copy", "--hyperparams", "learning_starts:20"]
        + ["batch_size:32", "buffer_size:100", "policy_kwargs:{net_arch: [16, 16]}"],
        world_size=size,
        check_run_dir=False,
    )
    member = member_factory(config).make(rank, config.agent.defaults, tensorboard=False)
    member.train(130 if rank == 0 else 30)  # the donor's buffer is full and has wrapped, the others' are not
    buffer = member.model.replay_buffer
    donors = {r: 0 for r in range(1, size)}

    def digest():
        arrays = {name: array.tobytes() for name, array in replay_arrays(buffer).items()}
        return member.pack().tobytes(), arrays, buffer.pos, buffer.full

    for transport in ("p2p", "collective"):
        if rank in donors:
            member.train(10)  # differ from the donor again
        before = digest()
        states = {rank: member.exploit_state()} if rank == 0 else {}
        received, _ = exchange.exchange(
            comm, transport, donors, lambda m: m, states, lambda r, layout: member.receive_buffers(layout)
        )
        if rank in donors:
            assert received[rank]["weights"] is member.buffer
            assert np.shares_memory(received[rank]["replay.observations"], buffer.observations)  # in place
            member.load(received[rank], member.hparams)
        reference = comm.bcast(digest() if rank == 0 else None, root=0)
        assert digest() == reference
        assert reference[3] is True and reference[2] == 30  # the donor's: full, written up to row 30
        if rank == 0:
            assert before == reference  # the donor is untouched
        else:
            assert before != reference


ZOO_LEARNERS = {
    "a2c": ["--hyperparams", "n_envs:2", "n_steps:8"],
    "dqn": [
        "--hyperparams",
        "learning_starts:20",
        "batch_size:32",
        "buffer_size:200",
        "train_freq:4",
        "gradient_steps:1",
    ],
    "qrdqn": [
        "--hyperparams",
        "learning_starts:20",
        "batch_size:32",
        "buffer_size:200",
        "train_freq:4",
        "gradient_steps:1",
    ],
    "ddpg": ["--env-id", "Pendulum-v1", "--hyperparams", "learning_starts:20", "batch_size:32", "buffer_size:200"],
    "tqc": ["--env-id", "Pendulum-v1", "--hyperparams", "learning_starts:20", "batch_size:32", "buffer_size:200"],
    "crossq": ["--env-id", "Pendulum-v1", "--hyperparams", "learning_starts:20", "batch_size:32", "buffer_size:200"],
}
"""The learners of issue 39, each tiny (16-unit networks); CartPole unless an env is named."""


@pytest.mark.parametrize("algo", list(ZOO_LEARNERS))
def test_each_learners_state_is_identical_after_transfer(comm, algo):
    """Rank 0's member of each learner (networks, targets, optimizer state of RMSprop or Adam, entropy
    coefficients, CrossQ's int64 batch-renorm counts) is copied into every other rank's, both transports,
    received straight into the recipient's own buffer."""
    from evo.config import parse_config
    from evo.runner.session import member_factory

    size, rank = comm.Get_size(), comm.Get_rank()
    flags = ["--algo", algo, *ZOO_LEARNERS[algo], "policy_kwargs:{net_arch: [16, 16]}"]
    config = parse_config(flags, world_size=size, check_run_dir=False)
    member = member_factory(config).make(rank, config.agent.defaults, tensorboard=False)
    member.train(60 + 16 * rank)  # each its own state
    donors = {r: 0 for r in range(1, size)}
    for transport in ("p2p", "collective"):
        if rank in donors:
            member.train(8)  # differ from the donor again
        before = member.pack().tobytes()
        states = {rank: member.exploit_state()} if rank == 0 else {}
        received, _ = exchange.exchange(
            comm, transport, donors, lambda m: m, states, lambda r, layout: member.receive_buffers(layout)
        )
        if rank in donors:
            assert received[rank]["weights"] is member.buffer
            member.load(received[rank], member.hparams)
        reference = comm.bcast(before if rank == 0 else None, root=0)
        assert member.pack().tobytes() == reference
        if rank in donors:
            assert before != reference
    member.close()
