"""Normalisation statistics cross ranks with the weights: real normalised PPO members, two per
rank, through the real generation loop and hooks, winner-takes-all (so every rank but the
winner's receives from another rank), both transports. The statistics are one more array of the
exploit state: they travel in the same exchange as the weights.

Run by tests/mpi/test_under_mpiexec.py under ``mpiexec -n 2`` and ``-n 4``; plain ``pytest`` runs it at size 1.
"""

from dataclasses import replace

import pytest

from evo.runner.loop import LoopSettings, run_generations
from evo.sb3.normalize import statistics

NORMALIZED_PENDULUM = [
    "--tb-writer",
    "False",  # no run directory: no event files (runs/ of the checkout is the users')
    "--env-id",
    "Pendulum-v1",
    "--hyperparams",
    "normalize:true",
    "n_envs:2",
    "n_steps:64",
    "batch_size:64",
    "n_epochs:1",
]


def exact(member) -> list[tuple[bytes, bytes, float]]:
    return [(rms.mean.tobytes(), rms.var.tobytes(), rms.count) for rms in statistics(member.normalizer)]


@pytest.mark.parametrize("transport", ["p2p", "collective"])
def test_recipients_hold_their_donors_statistics_bit_for_bit(comm, transport):
    from evo.config import parse_config
    from evo.core.explorers import make_explorer
    from evo.runner.generation import generation_hooks
    from evo.runner.session import member_factory, open_session

    size, rank = comm.Get_size(), comm.Get_rank()
    config = parse_config(
        [*NORMALIZED_PENDULUM, "--num-agents", str(2 * size), "--agent-training-steps", "512"],
        strategy="wta",
        transport=transport,
        world_size=size,
        check_run_dir=False,
    )
    members = member_factory(config).build(config.members_of(rank), rank, None)
    explorer = make_explorer(
        config.explore, config.agent.search_space, config.perturb_factors, config.resample_probability
    )
    session = open_session(config, comm, records=False)
    hooks = replace(
        generation_hooks(session, members, explorer),
        records=None,
        snapshot=None,
        save=None,
    )
    trained = {}

    def score(member):  # after training, before the exchange
        trained[member.member_id] = exact(member)
        return hooks.score(member)

    outcome = run_generations(comm, members, config.owner, replace(hooks, score=score), LoopSettings(0, 1, transport))

    donors = outcome.last.donors
    assert len(donors) == 2 * size - 1  # every member but the winner
    (winner,) = set(donors.values())
    if size > 1:
        assert any(config.owner(recipient) != config.owner(winner) for recipient in donors)
    before = {member: state for part in comm.allgather(trained) for member, state in part.items()}
    after = {
        member: state
        for part in comm.allgather({m: exact(x) for m, x in members.items()})
        for member, state in part.items()
    }
    weights = comm.allgather({m: x.buffer.tobytes() for m, x in members.items()})
    weights = {member: data for part in weights for member, data in part.items()}
    for member in range(2 * size):
        source = donors.get(member, member)
        assert after[member] == before[source], (member, source)
        assert weights[member] == weights[source]
    for recipient in donors:
        assert before[recipient] != before[winner]  # the statistics really changed hands
    for member in members.values():
        assert list(member.exploit_state()) == ["weights", "normalization"]
    for member in members.values():
        member.close()
    session.close()
