"""The generation loop on every rank of an MPI job, with members placed round-robin
(member m on rank m % size) instead of in contiguous blocks.

Run by tests/mpi/test_under_mpiexec.py under ``mpiexec -n 2`` and ``-n 4``; plain ``pytest`` runs it at
size 1 too. Every test binds COMM_WORLD and a Dup() of it.
"""

import numpy as np
import pytest

from evo.core.plan import Exploit
from evo.core.result import Scores
from evo.learners.interface import Exchangeable, buffers_for
from evo.runner.loop import Hooks, LoopSettings, run_generations
from tests.mpi.ranks.payloads import donor_maps, payload


class Worker:
    """A member whose buffer says which member it came from; counts its loads and how many of
    them arrived straight in its own buffer."""

    def __init__(self, member_id: int):
        self.member_id = member_id
        self.buffer = payload(member_id)
        self.hparams = {"origin": float(member_id)}
        self.env_steps = 0
        self.loads = 0
        self.in_place = 0

    def exploit_state(self):
        return {"x": self.buffer}

    def receive_buffers(self, layout):
        return buffers_for(layout, {"x": self.buffer})

    def load(self, state, hparams):
        if state["x"] is self.buffer:
            self.in_place += 1
        else:
            np.copyto(self.buffer, state["x"])
        self.hparams = dict(hparams)
        self.loads += 1

    def set_hparams(self, hparams):
        self.hparams = dict(hparams)


def fixed_plan(donors: dict[int, int]) -> list[Exploit]:
    return [
        Exploit(1, recipient, donor, 0.0, 1.0, {"origin": float(recipient)}, {"origin": float(donor)})
        for recipient, donor in sorted(donors.items())
    ]


@pytest.mark.parametrize("transport", ["p2p", "collective"])
@pytest.mark.parametrize("per_rank", [1, 2, 3])
def test_round_robin_members_get_exactly_their_donors_buffers(comm, transport, per_rank):
    size, rank = comm.Get_size(), comm.Get_rank()
    population = size * per_rank
    owner = lambda member: member % size  # noqa: E731
    mine = [member for member in range(population) if owner(member) == rank]
    for donors in donor_maps(population):
        members = {member: Worker(member) for member in mine[::-1]}  # not even in id order locally
        assert all(isinstance(worker, Exchangeable) for worker in members.values())
        seen = []

        def plan(generation, gathered, donors=donors, seen=seen):
            seen.append([(result.member, result.rank, result.score) for result in gathered])
            return fixed_plan(donors)

        hooks = Hooks(train=lambda member, stop: None, score=lambda member: Scores(float(member.member_id)), plan=plan)
        outcome = run_generations(comm, members, owner, hooks, LoopSettings(0, 1, transport))

        assert outcome.last.donors == donors
        for member, worker in members.items():
            source = donors.get(member, member)
            assert np.array_equal(worker.buffer, payload(source)), (member, donors)
            assert worker.hparams == {"origin": float(source)}
            assert worker.loads == (1 if member in donors else 0)  # nobody else was touched
            assert worker.in_place == worker.loads  # every recipient received into its own buffer
        if rank == 0:  # the population arrives sorted by id, each member under its own id and rank
            assert seen == [[(member, member % size, float(member)) for member in range(population)]]
        else:
            assert seen == []
