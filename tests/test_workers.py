"""Routines run on workers (``simd.workers``): each worker number once, at the same time on
the pool's threads, on every threading layer, whether or not the caller holds the GIL."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import njit

from smallgemm.simd import address, advance, atomic_fetch_add
from smallgemm.simd.workers import on_workers


@on_workers
def _count_each(w, workers, counts, seen_workers):
    """Count that worker ``w`` ran, and the ``workers`` it was told of."""
    atomic_fetch_add(advance(counts, w), 1)
    atomic_fetch_add(advance(seen_workers, w), workers)


@njit
def _holding_the_gil(workers, counts, seen_workers):
    _count_each(workers, address(counts), address(seen_workers))


@njit(nogil=True)
def _without_the_gil(workers, counts, seen_workers):
    _count_each(workers, address(counts), address(seen_workers))


@pytest.mark.parametrize("caller", [_holding_the_gil, _without_the_gil])
@pytest.mark.parametrize("workers", [0, 1, 2, 3, 7])
def test_each_worker_runs_once_and_knows_how_many_there_are(caller, workers):
    counts = np.zeros(8, dtype=np.int64)
    seen = np.zeros(8, dtype=np.int64)
    caller(workers, counts, seen)
    assert counts.tolist() == [1] * workers + [0] * (8 - workers)
    assert seen.tolist() == [workers] * workers + [0] * (8 - workers)


@on_workers
def _meet(w, workers, arrived, waits):
    """Arrive, then wait (a bounded spin) until every worker has: a meeting that only
    workers running at the same time can have.  ``waits[w]``: the spins it took, or -1."""
    atomic_fetch_add(arrived, 1)
    spins = 0
    while atomic_fetch_add(arrived, 0) < workers:
        spins += 1
        if spins > 2_000_000_000:
            spins = -1
            break
    waits[w] = spins


@njit
def _meeting(workers, arrived, waits):
    _meet(workers, address(arrived), address(waits))


def test_two_workers_run_at_the_same_time():
    arrived = np.zeros(1, dtype=np.int64)
    waits = np.zeros(2, dtype=np.int64)
    _meeting(2, arrived, waits)
    assert arrived[0] == 2 and (waits >= 0).all(), waits


LAYER = textwrap.dedent("""
    import numpy as np
    from numba import njit
    import numba
    from smallgemm.simd import address, advance, atomic_fetch_add
    from smallgemm.simd.linked import lazily, linked
    from smallgemm.simd.workers import on_workers

    @linked
    def add_one(out, w):
        atomic_fetch_add(advance(out, w), 1)

    @on_workers
    def each(w, workers, out):
        add_one(out, w)  # linked by the first worker that reaches it, while the caller holds the GIL

    @njit
    def run(workers, out):
        each(workers, address(out))

    out = np.zeros(5, dtype=np.int64)
    with lazily():  # as a product's entry is compiled: its routines are linked by their first callers
        for workers in (2, 5, 1):
            run(workers, out)
    print(numba.threading_layer(), out.tolist())
""")


@pytest.mark.parametrize("layer", ["tbb", "omp", "workqueue"])
def test_workers_run_on_every_threading_layer_and_link_routines_they_reach(layer, tmp_path):
    """In a fresh process with an empty cache: the workers link a routine none had linked,
    while the calling thread holds the GIL (it lets go of it while they run)."""
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": str(tmp_path),
        "NUMBA_THREADING_LAYER": layer,
        "NUMBA_NUM_THREADS": "2",
    }
    script = tmp_path / "layer.py"
    script.write_text(LAYER)
    run = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, env=env, timeout=300
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split(None, 1) == [layer, "[3, 2, 1, 1, 1]\n"], run.stdout
