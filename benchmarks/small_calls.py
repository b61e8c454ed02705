"""Small calls against NumPy, one thread; print Markdown.

    python benchmarks/small_calls.py > small_calls.md

What a call costs where the product itself is a fraction of a microsecond: 2-D
products with and without ``out=``, stacks along one batch axis, a stack times one
matrix, and ``gemm`` against the NumPy code that does the same.  Each row times
runs of calls in timeit's loop (``CALLS`` calls, one timer read per run: a timer
around each call would add ~0.3 us to both sides), smallgemm and NumPy
interleaved in this one process (``targets.compare``), without the OpenBLAS
forcing variables; the medians are per call.
"""

from __future__ import annotations

import timeit

import numpy as np
from targets import TABLE_HEADER, compare, rand, rerun_clean

import smallgemm
from smallgemm.tools import bench

CALLS = 1000


def in_a_loop(statement: str, **names) -> callable:
    """A run of ``CALLS`` executions of ``statement`` in timeit's loop."""
    timer = timeit.Timer(statement, globals=names)
    return lambda: timer.timeit(CALLS)


def row(name: str, ours: str, theirs: str, **names) -> None:
    names.update(smallgemm=smallgemm, np=np)
    compare(
        name, in_a_loop(ours, **names), in_a_loop(theirs, **names), 1, "", repeats=41, calls_per_run=CALLS
    )


def main():
    rerun_clean()
    bench.compile_first()  # then default settings: each entry loads from the cache on its first call
    print(TABLE_HEADER)
    for dtype in (np.float32, np.float64):
        kind = np.dtype(dtype).name
        for side in (8, 16, 32):
            a, b = rand(side, side, dtype=dtype), rand(side, side, dtype=dtype)
            c = np.empty((side, side), dtype)
            row(f"{kind} {side}x{side}", "smallgemm.matmul(a, b)", "np.matmul(a, b)", a=a, b=b)
            row(
                f"{kind} {side}x{side}, out=",
                "smallgemm.matmul(a, b, out=c)",
                "np.matmul(a, b, out=c)",
                a=a,
                b=b,
                c=c,
            )
            row(
                f"{kind} {side}x{side}, gemm(0.5, a, b, beta=1, c=c, overwrite_c=True) against NumPy's c += 0.5 * (a @ b)",
                "smallgemm.gemm(0.5, a, b, beta=1.0, c=c, overwrite_c=True)",
                "np.add(c, 0.5 * np.matmul(a, b), out=c)",
                a=a,
                b=b,
                c=c,
            )
        for count, side in ((1, 16), (10, 16), (100, 16), (10, 32)):
            a, b = rand(count, side, side, dtype=dtype), rand(count, side, side, dtype=dtype)
            c = np.empty((count, side, side), dtype)
            row(
                f"{kind} {count}x{side}x{side} @ {count}x{side}x{side}",
                "smallgemm.matmul(a, b)",
                "np.matmul(a, b)",
                a=a,
                b=b,
            )
            row(
                f"{kind} {count}x{side}x{side} @ {count}x{side}x{side}, out=",
                "smallgemm.matmul(a, b, out=c)",
                "np.matmul(a, b, out=c)",
                a=a,
                b=b,
                c=c,
            )
        x, w = rand(4, 8, 32, dtype=dtype), rand(32, 32, dtype=dtype)
        row(f"{kind} [4,8,32] @ [32,32] (folded)", "smallgemm.matmul(x, w)", "np.matmul(x, w)", x=x, w=w)


if __name__ == "__main__":
    main()
