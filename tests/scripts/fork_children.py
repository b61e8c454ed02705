"""Children computing products after a threaded product in their parent, by every start method.

    python fork_children.py fork spawn forkserver  ->  one JSON object on stdout

Run by tests/test_fork.py in a process of its own (Numba chooses its threading
layer once per process: ``NUMBA_THREADING_LAYER`` in the environment picks it).
Each child computes the products of SHAPES and reports, for each, whether its
bits equal the parent's, how many threads it used and whether the parallel
driver ran.  A child that dies or hangs is the failure the caller looks for.
"""

import json
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor

import numpy as np

import smallgemm
from smallgemm.machine import threading_layer, threads
from smallgemm.plan import runners

# Serial, parallel (two threads), parallel: float32 and float64.
SHAPES = [(64, 64, 64, "float32"), (300, 200, 500, "float32"), (400, 300, 350, "float64")]
_parallel_runs = []
_in_parallel = runners.in_parallel


def _counting_in_parallel(*args):
    ran = _in_parallel(*args)
    _parallel_runs.append(ran)
    return ran


runners.in_parallel = _counting_in_parallel  # installed again by each spawned child's import of this file


def operands(shape):
    m, n, k, dtype = shape
    rng = np.random.default_rng(m * n * k)
    return rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)


def expected():
    return [smallgemm.matmul(*operands(shape)) for shape in SHAPES]


def child(shape_index):
    """One product: (its bytes, the threads the child used, whether it ran in parallel)."""
    del _parallel_runs[:]
    c = smallgemm.matmul(*operands(SHAPES[shape_index]))
    return c.tobytes(), threads.workers(), any(_parallel_runs)


def report(results, want):
    """Per product: [equal bits, threads used, ran in parallel]."""
    return [[got == w.tobytes(), used, parallel] for (got, used, parallel), w in zip(results, want)]


def in_os_fork(want, grandchild=False):
    """The products in a child made by os.fork (and, within it, a grandchild's)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            rows = report([child(i) for i in range(len(SHAPES))], want)
            if grandchild:
                rows = [rows, in_os_fork(want)]
            os.write(write, json.dumps(rows).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    return json.loads(data) if data else f"died: wait status {status}"


def main():
    smallgemm.set_num_threads(2)
    want = expected()
    assert any(_parallel_runs), "the parent's products did not run on threads"
    indices = range(len(SHAPES))
    out = {"layer": threading_layer.started(), "os.fork": in_os_fork(want, grandchild=True)}
    for method in sys.argv[1:]:
        context = multiprocessing.get_context(method)
        with ProcessPoolExecutor(2, mp_context=context) as executor:
            out[f"{method} ProcessPoolExecutor"] = report(list(executor.map(child, indices)), want)
        with context.Pool(2) as pool:
            out[f"{method} Pool"] = report(pool.map(child, indices), want)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
