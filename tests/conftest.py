"""The test tiers, one folder each, each setting its marker (pyproject.toml lists them):
``unit/`` (no MPI job; mirrors evo/), ``mpi/`` (real MPI processes), ``e2e/`` (entry scripts
under mpiexec, the package built and installed), ``slurm/`` (a private SLURM), ``multinode/``
(two hosts in network namespaces). Shared helpers live in tests/support.py."""

import os
from pathlib import Path

import pytest

from tests.support import TINY_CARTPOLE

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "mpi", "e2e", "slurm", "multinode")

# Open MPI's libfabric BTL finds no fabric here and sleeps a second as it closes, in every
# MPI_Init (README, MPI notes); the suite starts MPI a few hundred times. A user's own setting wins.
os.environ.setdefault("OMPI_MCA_btl", "^ofi")


def pytest_collection_modifyitems(config, items):
    """Each test takes the marker of its tier's folder; a test outside every tier folder is an error."""
    for item in items:
        parts = Path(item.path).resolve().relative_to(TESTS).parts
        tier = parts[0] if len(parts) > 1 else None
        if tier not in TIERS:
            raise pytest.UsageError(f"{item.nodeid}: every test lives in a tier folder ({', '.join(TIERS)})")
        item.add_marker(tier)


@pytest.fixture
def tiny_hyperparams(tmp_path) -> Path:
    path = tmp_path / "tiny.yml"
    path.write_text(TINY_CARTPOLE)
    return path
