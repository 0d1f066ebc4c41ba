"""A synchronous run's failed member restarted across ranks (evo.runner.loop with evo.core.restart's plan) on
every rank of an MPI job: the last rank's last member raises in generation 2; every rank learns the same
restart from rank 0, the member is rebuilt on its own rank with fresh weights, receives the donor's buffer bit
for bit from the donor's rank (a top member, on rank 0), trains the generation again, and every rank's report
holds it. (Whole runs with real PPO members that restart, in one process: tests/unit/runner/test_restart_runs.py.)

Run by tests/mpi/test_under_mpiexec.py under ``mpiexec -n 2`` and ``-n 4``; plain ``pytest`` runs it at
size 1 too (the donor then on the same rank). Every test binds COMM_WORLD and a Dup() of it."""

import numpy as np
import pytest

from evo.core.explorers import make_explorer
from evo.core.plan import generation_rng, plan_generation
from evo.core.restart import plan_restarts
from evo.core.result import Scores
from evo.learners.interface import buffers_for
from evo.runner.loop import Hooks, LoopSettings, run_generations
from tests.mpi.ranks.payloads import payload

PER_RANK = 2


class Worker:
    """A member whose buffer says which member's weights it holds (zeros: fresh weights); its score is
    minus its id, so member 0 is the best. It fails in the generations ``fails`` names, once each."""

    def __init__(self, member_id: int, buffer: np.ndarray, fails: set[int] = frozenset()):
        self.member_id = member_id
        self.buffer = buffer
        self.hparams = {}
        self.env_steps = 0
        self.fails = set(fails)
        self.trained: list[int] = []

    def exploit_state(self):
        return {"x": self.buffer}

    def receive_buffers(self, layout):
        return buffers_for(layout, {"x": self.buffer})

    def load(self, state, hparams):
        if state["x"] is not self.buffer:
            np.copyto(self.buffer, state["x"])
        self.hparams = dict(hparams)

    def set_hparams(self, hparams):
        self.hparams = dict(hparams)


@pytest.mark.parametrize("transport", ["p2p", "collective"])
def test_a_failed_member_restarts_from_a_donor_on_another_rank(comm, transport):
    size, rank = comm.Get_size(), comm.Get_rank()
    population = size * PER_RANK
    failing = population - 1  # the last rank's last member
    owner = lambda member: member // PER_RANK  # noqa: E731
    members = {
        m: Worker(m, payload(m), fails={2} if m == failing else set()) for m in range(population) if owner(m) == rank
    }
    explorer = make_explorer("perturb", {})
    generation_of = {}

    def train(member, should_stop):
        generation = generation_of[member.member_id] = generation_of.get(member.member_id, 0) + 1
        member.env_steps += 10
        if generation in member.fails:
            member.fails.discard(generation)
            generation_of[member.member_id] -= 1  # a failed try does not count
            raise RuntimeError(f"member {member.member_id} broke")
        member.trained.append(generation)

    def restart(generation, failures, scored, recipients, round_):
        rng = np.random.default_rng(round_)
        return plan_restarts(generation, failures, scored, {}, 1, {}, rng, "truncation", 0.25, recipients)

    def rebuild(member, restart, env_steps):
        fresh = Worker(member.member_id, np.zeros_like(member.buffer))  # fresh weights, no fault
        fresh.env_steps = env_steps
        fresh.trained = list(member.trained)
        return fresh

    reports = []
    hooks = Hooks(
        train=train,
        score=lambda member: Scores(-float(member.member_id)),
        plan=lambda generation, population: plan_generation(
            generation, population, "truncation", explorer, generation_rng(0, generation)
        ),
        records=reports.append,
        restart=restart,
        rebuild=rebuild,
    )
    outcome = run_generations(comm, members, owner, hooks, LoopSettings(0, 2, transport, max_member_failures=1))

    assert outcome.completed == 2
    (restart,) = reports[-1].restarts  # on every rank, as rank 0 decided it
    assert (restart.member, restart.generation, restart.failures) == (failing, 2, 1)
    assert owner(restart.donor) == 0 and restart.donor in (0, 1)  # the top of the kept members
    assert restart.error == f"RuntimeError: member {failing} broke"
    assert reports[0].restarts == ()
    if owner(failing) == rank:
        rebuilt = members[failing]
        assert np.array_equal(rebuilt.buffer, payload(restart.donor))  # the donor's weights, from rank 0
        assert rebuilt.trained == [1, 2] and rebuilt.env_steps == 20  # generation 2 trained again, once
    for member, worker in members.items():  # everyone else trained each generation once
        assert worker.trained == [1, 2], member
