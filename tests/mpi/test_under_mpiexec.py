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
