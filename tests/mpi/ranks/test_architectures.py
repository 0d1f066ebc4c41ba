"""A member of another architecture crossing ranks in an asynchronous run: rank 1's real PPO member (1 layer
of 16 for its policy, 1 for its value) copies rank 0's (3 layers of 32, 2) from the snapshot rank 0's service
thread serves (evo.mpi.asynchronous.fetch_snapshot, as a recipient's copy at its ready point does): it is
rebuilt to its donor's shape, holds its state bit for bit, and trains on. The synchronous exchanges move
members of other architectures across ranks in tests/mpi/ranks/test_stages.py (a stage's survivors, both
transports); the same in one process: tests/unit/sb3/test_architecture.py; whole runs with the architecture
in the space: tests/unit/runner/test_architecture_runs.py.

Run by tests/mpi/test_under_mpiexec.py under ``mpiexec -n 2`` (at size 2 only, as test_migration.py: 1 and 4
ranks would add time and nothing new)."""

import numpy as np
import pytest
import torch
from mpi4py import MPI

SPACE = (
    "search_space:{pi_layers: {low: 1, high: 3, type: int}, pi_width: {choices: [16, 32, 64]}, "
    "vf_layers: {low: 1, high: 3, type: int}}"
)
DONOR = {"pi_layers": 3, "pi_width": 32, "vf_layers": 2}
RECIPIENT = {"pi_layers": 1, "pi_width": 16, "vf_layers": 1}


def hidden_sizes(module) -> list[int]:
    return [layer.out_features for layer in module if isinstance(layer, torch.nn.Linear)]


@pytest.mark.skipif(MPI.COMM_WORLD.Get_size() != 2, reason="a donor and a recipient on two ranks (run at size 2)")
def test_a_recipient_on_another_rank_becomes_its_asynchronous_donor_of_another_architecture():
    from evo.config import parse_config
    from evo.mpi.asynchronous import Service, fetch_snapshot, snapshot_state
    from tests.support import member_of

    comm = MPI.COMM_WORLD.Dup()  # as run_workers does
    rank = comm.Get_rank()
    config = parse_config(
        ["--env-id", "Pendulum-v1", "--hyperparams", "n_envs:2", "n_steps:32", "batch_size:32", "n_epochs:1", SPACE],
        world_size=2,
        check_run_dir=False,
    )
    member = member_of(config, rank, DONOR if rank == 0 else RECIPIENT)
    member.train(64)
    donor_hparams = comm.bcast(dict(member.hparams) if rank == 0 else None, root=0)
    donor_state = comm.bcast(member.pack().copy() if rank == 0 else None, root=0)

    snapshots = {0: (1, member.env_steps, snapshot_state(member))} if rank == 0 else {}
    service = Service(comm, snapshots, give=lambda member_id: None)
    service.start()
    if rank == 1:
        assert member.buffer.size < donor_state.size
        interval, env_steps, state = fetch_snapshot(comm, 0, 0, member.receive_buffers)
        assert (interval, env_steps) == (1, 64)  # the donor's, at its snapshot
        member.load(state, donor_hparams)
    comm.Barrier()  # the recipient has its snapshot before the service threads stop
    service.stop()
    if rank == 0:
        assert service.served == [("snapshot", 0, 1)]

    assert {name: member.hparams[name] for name in DONOR} == DONOR
    assert np.array_equal(member.pack(), donor_state)  # weights and optimizer state, bit for bit
    policy = member.model.policy
    assert hidden_sizes(policy.mlp_extractor.policy_net) == [32, 32, 32]
    assert hidden_sizes(policy.mlp_extractor.value_net) == [64, 64]
    member.train(64)  # and it trains on in its new shape, on its own counters
    assert member.env_steps == 128
    member.close()
    comm.Free()
