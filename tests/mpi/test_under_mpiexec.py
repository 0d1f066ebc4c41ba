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
from evo.mpi.asynchronous import run_workers
from tests.mpi.ranks.test_asynchronous import hooks, start

logging.basicConfig()
def decide(member, latest):
    raise ValueError(f"no decision for member {member}")
comm = MPI.COMM_WORLD
members, placement = start(comm, 2)
run_workers(comm, members, hooks(), Schedule(placement, 2) if comm.Get_rank() == 0 else None, decide)
print("returned")
"""


def test_a_failing_coordinator_ends_the_job_with_its_traceback():
    """Asynchronous PBT (evo.mpi.asynchronous): the ranks waiting on rank 0's coordinator thread
    would wait for ever; its exception is logged and the job ends."""
    result = mpiexec(2, ["-c", COORDINATOR_FAILS], timeout=120)
    assert result.returncode != 0 and "returned" not in result.stdout
    assert "the coordinator thread of rank 0 failed; ending the job" in result.stderr, result.stderr[-3000:]
    assert "ValueError: no decision for member" in result.stderr
