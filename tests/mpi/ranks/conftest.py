"""The communicators every MPI-tier test runs on: COMM_WORLD and a Dup() of it."""

import pytest
from mpi4py import MPI

COMMS = {"world": lambda: MPI.COMM_WORLD, "dup": lambda: MPI.COMM_WORLD.Dup()}


@pytest.fixture(params=sorted(COMMS))
def comm(request):
    comm = COMMS[request.param]()
    yield comm
    if comm is not MPI.COMM_WORLD:
        comm.Free()
