"""The MPI tier: the tests of tests/mpi/ranks on every rank of real MPI jobs of 2 and 4 processes.

``python -m mpi4py -m pytest``: an exception on one rank aborts the whole job instead of leaving
the others waiting in a collective; a failing assertion does not raise out of pytest, so the other
ranks could still wait for the failed one in a collective: ``--timeout`` is the backstop."""

import pytest

from tests.support import mpiexec


@pytest.mark.parametrize("ranks", [2, 4])
def test_rank_tests_under_mpiexec(ranks):
    result = mpiexec(
        ranks,
        ["-m", "mpi4py", "-m", "pytest", "tests/mpi/ranks", "-q", "-p", "no:cacheprovider", "--timeout=240"]
        + ["--color=no"],
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert result.stdout.count(" passed") == ranks, result.stdout[-2000:]
    assert "failed" not in result.stdout


COORDINATOR_FAILS = """
import logging
from mpi4py import MPI
from evo.core.asynchronous import Schedule
from evo.mpi.asynchronous import Coordination, run_workers
from tests.mpi.ranks.test_asynchronous import hooks, start

logging.basicConfig()
def decide(member, latest):
    raise ValueError(f"no decision for member {member}")
comm = MPI.COMM_WORLD
members, placement = start(comm, 2)
run_workers(comm, members, hooks(), Coordination(Schedule(placement, 2), decide) if comm.Get_rank() == 0 else None)
print("returned")
"""


def test_a_failing_coordinator_ends_the_job_with_its_traceback():
    """Asynchronous PBT (evo.mpi.asynchronous): the ranks waiting on rank 0's coordinator thread
    would wait for ever; its exception is logged and the job ends."""
    result = mpiexec(2, ["-c", COORDINATOR_FAILS], timeout=120)
    assert result.returncode != 0 and "returned" not in result.stdout
    assert "the coordinator thread of rank 0 failed; ending the job" in result.stderr, result.stderr[-3000:]
    assert "ValueError: no decision for member" in result.stderr


FAILS_TWICE = """
import dataclasses, logging
from mpi4py import MPI
from evo.core.asynchronous import Schedule
from evo.mpi.asynchronous import Coordination, run_workers
from tests.mpi.ranks.test_asynchronous import decide, hooks, rebuilt, restarts, start

logging.basicConfig()
def train(member):
    if member.member_id == 1:
        raise RuntimeError("the env exploded")
comm = MPI.COMM_WORLD
members, placement = start(comm, 2)
plan = Coordination(Schedule(placement, 2), decide(), restart=restarts(limit=1))
worker_hooks = dataclasses.replace(hooks(train), rebuild=rebuilt)
run_workers(comm, members, worker_hooks, plan if comm.Get_rank() == 0 else None, catch=True)
print("returned")
"""


def test_a_member_failing_past_the_limit_ends_the_asynchronous_job():
    result = mpiexec(2, ["-c", FAILS_TWICE], timeout=120)
    assert result.returncode != 0 and "returned" not in result.stdout
    assert "member 1 failed in interval 1" in result.stderr and "RuntimeError: the env exploded" in result.stderr
    assert "TooManyFailures: member 1 (2 failures, the last: RuntimeError: the env exploded)" in result.stderr
