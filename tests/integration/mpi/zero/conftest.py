"""Fixtures of the optimizer-sharding tests (run under mpirun -np 2 and
-np 4; every test is collective): the MPI world for the file, and the
auto-parallel context and execution mode reset around each test."""
import pytest

import spora
from spora import communication as comm


@pytest.fixture(scope="module", autouse=True)
def world():
    comm.init("mpi", timeout_ms=120000)  # a failing rank must not hang the others
    yield
    spora.reset_auto_parallel_context()
    comm.release()


@pytest.fixture(autouse=True)
def reset():
    yield
    spora.reset_auto_parallel_context()
    spora.set_context(mode=spora.GRAPH_MODE)
