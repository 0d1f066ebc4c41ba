"""Tier 2: the exchange tests of tests/mpi on 2 and 4 real MPI processes."""

import pytest

from tests.conftest import mpiexec


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 4])
def test_exchange_under_mpiexec(ranks):
    result = mpiexec(
        ranks,
        ["-m", "mpi4py", "-m", "pytest", "tests/mpi", "-q", "-p", "no:cacheprovider", "--timeout=240", "--color=no"],
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert result.stdout.count(" passed") == ranks, result.stdout[-2000:]
    assert "failed" not in result.stdout
