"""What the Dask test modules share: the cluster's memory limit, the entries its workers
load, the references' thread count and block helpers (tests/conftest.py starts the cluster)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import dask.array as da
import distributed
import numpy as np
import pytest

import smallgemm
from smallgemm.api import precompile
from smallgemm.plan import dispatch, entries, strategies

# Each worker's memory limit (distributed's defaults: blocks held for later tasks spilled to
# disk from 60 % of it, the worker paused at 80 %, terminated at 95 %).
MEMORY_LIMIT = 400 * 2**20


def warm_up() -> None:
    """Every entry a one-thread task can run (the serial entries of the strategies for plain
    products and stacks, the small way in for stacks and gemm's multiply-add), compiled or loaded here for the host's
    kernel, whatever ran in this process before: the workers load them from the on-disk cache.
    A worker that compiled would hold LLVM's memory, and distributed pauses a worker at 80 %
    of its limit, for good where the memory stays held."""
    names = {
        entries.name_of(entry)
        for row in strategies.PRODUCT + strategies.STACK
        for entry in row.serial_entries
    }
    precompile.compile_entries(
        [dispatch.current()], ["float32", "float64"], sorted(names | {"SMALL_STACK", "SCALE_ADD"})
    )


@contextlib.contextmanager
def two_workers() -> Iterator[distributed.Client]:
    """A client of a LocalCluster of two worker processes of one thread and MEMORY_LIMIT each,
    whose workers find every entry a task runs in the on-disk cache (``warm_up``)."""
    warm_up()
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, memory_limit=MEMORY_LIMIT, dashboard_address=":0"
    )
    try:
        with distributed.Client(cluster) as client:
            yield client
    finally:
        cluster.close()


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The test process's own products (the references) on one thread, as the tasks run: the
    bits do not depend on it (tests/test_threads.py), and the threaded entries are not
    compiled for this file."""
    with smallgemm.num_threads(1):
        yield


def chunked(x: np.ndarray, chunks) -> da.Array:
    return da.from_array(x, chunks=chunks)


def normal(rng, shape, dtype) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)
