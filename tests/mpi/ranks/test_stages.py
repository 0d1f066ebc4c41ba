"""The end of a stage across ranks: the survivors, distilling students of other architectures on
their own ranks, take the members' places through :meth:`evo.runner.stages.Stages.replace`. Member i
must then hold survivor i's exact weights and optimizer state, its normalisation statistics, its
architecture and hyperparameters, its env-step count, and no distillation.

Run by tests/mpi/test_under_mpiexec.py under ``mpiexec -n 2`` and ``-n 4``; plain ``pytest`` runs it at size 1.
"""

import numpy as np
import pytest

from evo.core.result import Standing
from tests.mpi.ranks.test_normalize import NORMALIZED_PENDULUM, exact

ARCHITECTURE_SPACE = "search_space:{learning_rate: {low: 1.0e-4, high: 1.0e-3, scale: log}, pi_layers: {low: 1, high: 3, type: int}, pi_width: {choices: [16, 32, 64]}}"  # noqa: E501
TRAIN = 128


@pytest.mark.parametrize("transport", ["p2p", "collective"])
def test_survivors_take_the_members_places_with_their_whole_state(comm, transport):
    from evo.config import parse_config
    from evo.core.stages import Distilling, StageBook, Student, halving_rungs
    from evo.runner.session import member_factory, open_session
    from evo.runner.stages import Stages

    size, rank = comm.Get_size(), comm.Get_rank()
    members_count, students_count = size, 2 * size
    config = parse_config(
        [
            *NORMALIZED_PENDULUM,
            ARCHITECTURE_SPACE,  # one more key:value of NORMALIZED_PENDULUM's --hyperparams
            *("--num-agents", str(members_count), "--agent-training-steps", str(TRAIN)),
            *("--max-distillations", "1", "--students", str(students_count), "--distillation-steps", str(TRAIN)),
        ],
        transport=transport,
        world_size=size,
        check_run_dir=False,
    )
    session = open_session(config, comm, records=False)
    stages = Stages(session, None)
    # every member is 1 x 16 wide; the students are 2 x 32 and 3 x 16: each survivor differs from its slot
    member_shape = {"pi_layers": 1, "pi_width": 16}
    members = {}
    for member in range(members_count):
        if config.owner(member) == rank:
            members[member] = member_factory(config).make(
                member, {**config.agent.defaults, "learning_rate": 3e-4, **member_shape}, tensorboard=False
            )
            members[member].train(TRAIN)
    plans = []
    for j in range(students_count):
        shape = {"pi_layers": 2, "pi_width": 32} if j % 2 == 0 else {"pi_layers": 3, "pi_width": 16}
        hparams = {**config.agent.defaults, "learning_rate": 1e-4 * (j + 1), **shape}
        plans.append(Student(members_count + j, 0, hparams, "random"))
    rungs = halving_rungs(students_count, members_count, TRAIN)
    distilling = Distilling(tuple(plans), tuple(rungs), 1, TRAIN)
    stages.book = StageBook().start(distilling)
    stages.teachers_now = stages.teachers(members, [0])
    students = {p.member: stages.student(p, distilling) for p in plans if stages.owner(p.member) == rank}
    for student in students.values():
        student.train(TRAIN)
        assert student.distillation is not None
    # survivors best first: the last students, in reverse, so most move to another rank and every
    # one to another architecture
    survivors = [
        (plans[-1 - i].member, 2 * TRAIN + i, Standing(10.0 - i, (), (10.0 - i, 9.0 - i))) for i in range(members_count)
    ]
    expected = {}
    for slot, (student, _, _) in enumerate(survivors):
        here = students.get(student)
        state = None if here is None else (here.pack().copy(), exact(here), dict(here.hparams), here.architecture)
        expected[slot] = comm.bcast(state, root=stages.owner(student))
    stages.replace(members, students, 2, survivors)

    for slot, member in members.items():
        weights, statistics, hparams, architecture = expected[slot]
        assert member.member_id == slot
        assert member.architecture == architecture
        assert np.array_equal(member.pack(), weights)  # weights and optimizer state, bit for bit
        assert exact(member) == statistics
        assert member.hparams["learning_rate"] == hparams["learning_rate"]
        assert {n: member.hparams[n] for n in member_shape} != member_shape
        assert member.env_steps == survivors[slot][1]
        assert (member.carried_score, member.carried_outcomes) == (
            10.0 - slot,
            (10.0 - slot, 9.0 - slot),
        )  # its standing
        assert member.distillation is None
        member.train(TRAIN)  # and it trains on as a member, in its new shape
        assert member.env_steps == survivors[slot][1] + TRAIN
    for member in members.values():
        member.close()
    session.close()
