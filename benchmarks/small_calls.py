"""Small calls against NumPy, on one thread and on the default thread count; print Markdown.

    python benchmarks/small_calls.py > small_calls.md
    python benchmarks/small_calls.py --breakdown   # where one float32 16x16 call's time goes

What a call costs where the product itself is a fraction of a microsecond: 2-D
products with and without ``out=``, 64^3, stacks along one batch axis (1000 products
of 16^3, 8^3 and 4^3 among them), a stack times one matrix, 3x3 matrices and 3-vectors,
and ``gemm`` against the NumPy code that does the same (a layer's gradient accumulated as
``smallgemm.nn`` does among them).  Each row times runs of calls in timeit's loop
(``CALLS`` calls, one timer read per run: a timer around each call would add ~0.3 us
to both sides), smallgemm and NumPy interleaved in this one process
(``targets.compare``), without the OpenBLAS forcing variables; the medians are per
call.  The cache is filled first; the default thread count sets nothing (each
library as a user has it), one thread is set for both libraries.  The targets are
those of the small-products issue (NumPy / smallgemm).
"""

from __future__ import annotations

import sys
import timeit

import numpy as np
from targets import DEFAULT_THREADS, TABLE_HEADER, compare, rand, rerun_clean

import smallgemm
from smallgemm.plan import prepared
from smallgemm.tools import bench

CALLS = 1000


def row(
    name: str, ours: str, theirs: str, threads: int, target: str = "", calls: int = CALLS, **names
) -> None:
    names.update(smallgemm=smallgemm, np=np)
    timer_ours, timer_theirs = timeit.Timer(ours, globals=names), timeit.Timer(theirs, globals=names)
    compare(
        name,
        lambda: timer_ours.timeit(calls),
        lambda: timer_theirs.timeit(calls),
        threads,
        target,
        repeats=41,
        calls_per_run=calls,
    )


def main():
    rerun_clean()
    bench.compile_first()  # then default settings: each entry loads from the cache on its first call
    print(TABLE_HEADER)
    for threads in sorted({1, DEFAULT_THREADS}):
        for dtype in (np.float32, np.float64):
            rows_of(np.dtype(dtype), threads)


def matmul_rows(name: str, threads: int, target: str, a, b, c=None, calls: int = CALLS) -> None:
    """``a @ b`` against NumPy, and with ``out=c`` too when ``c`` is given."""
    row(name, "smallgemm.matmul(a, b)", "np.matmul(a, b)", threads, target, calls=calls, a=a, b=b)
    if c is not None:
        row(
            f"{name}, out=",
            "smallgemm.matmul(a, b, out=c)",
            "np.matmul(a, b, out=c)",
            threads,
            calls=calls,
            a=a,
            b=b,
            c=c,
        )


def rows_of(dtype: np.dtype, threads: int) -> None:
    """Every row for one dtype and thread count."""
    kind = dtype.name
    for side in (8, 16, 32):
        a, b = rand(side, side, dtype=dtype), rand(side, side, dtype=dtype)
        c = np.empty((side, side), dtype)
        matmul_rows(f"{kind} {side}x{side}", threads, ">= 1.2" if side == 16 else "", a, b, c)
        row(
            f"{kind} {side}x{side}, gemm(0.5, a, b, beta=1, c=c, overwrite_c=True) against NumPy's c += 0.5 * (a @ b)",
            "smallgemm.gemm(0.5, a, b, beta=1.0, c=c, overwrite_c=True)",
            "np.add(c, 0.5 * np.matmul(a, b), out=c)",
            threads,
            a=a,
            b=b,
            c=c,
        )
    # A linear layer's weight gradient as smallgemm.nn accumulates it: a continued chain.
    x, g, grad = rand(64, 32, dtype=dtype), rand(64, 32, dtype=dtype), np.zeros((32, 32), dtype)
    row(
        f"{kind} [64,32].T @ [64,32], gemm(1, x, g, beta=1, c=c, trans_a=True, overwrite_c=True)"
        " against NumPy's c += x.T @ g",
        "smallgemm.gemm(1.0, x, g, beta=1.0, c=c, trans_a=True, overwrite_c=True)",
        "np.add(c, np.matmul(x.T, g), out=c)",
        threads,
        x=x,
        g=g,
        c=grad,
    )
    matmul_rows(
        f"{kind} 64x64", threads, ">= 1.1", rand(64, 64, dtype=dtype), rand(64, 64, dtype=dtype), calls=100
    )
    for count, side in ((1, 16), (10, 16), (100, 16), (10, 32), (1000, 16), (1000, 8), (1000, 4)):
        a, b = rand(count, side, side, dtype=dtype), rand(count, side, side, dtype=dtype)
        many = count >= 1000  # ~0.1 ms a call: fewer calls per run, and no out= row
        matmul_rows(
            f"{kind} {count}x{side}x{side} @ {count}x{side}x{side}",
            threads,
            ">= 1.5" if (count, side) == (1000, 16) else "",
            a,
            b,
            None if many else np.empty((count, side, side), dtype),
            calls=20 if many else CALLS,
        )
    x, w = rand(4, 8, 32, dtype=dtype), rand(32, 32, dtype=dtype)
    matmul_rows(f"{kind} [4,8,32] @ [32,32] (folded)", threads, "", x, w)
    # Small matrices and vectors (astropy's 3x3 rotations of 3-vectors).
    m3, v3 = rand(3, 3, dtype=dtype), rand(1, 3, dtype=dtype)[0]
    matmul_rows(f"{kind} 3x3 @ 3 (a vector)", threads, "", m3, v3)
    matmul_rows(f"{kind} 3 @ 3x3", threads, "", v3, m3)
    matmul_rows(f"{kind} 3 @ 3 (a scalar)", threads, "", v3, v3)


def breakdown() -> None:
    """One float32 16x16 ``matmul`` and its pieces, each timed interleaved (medians of 15
    bests of 3 runs of 20000 calls): the small way in's builtin (``unpacked.unpacked_call``:
    its call, checks and product), making C as matmul calls it and into a given C, on 16x16
    and on 1x1 matrices; ``np.empty`` of C, which the builtin's own allocation replaces; and
    NumPy's call.  What is left of matmul's time is its Python: the checks of dimensions and
    dtypes and the prepared state's lookup."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((16, 16)).astype(np.float32) for _ in range(2))
    c, tiny = np.empty((16, 16), np.float32), np.ones((1, 1), np.float32)
    smallgemm.matmul(a, b)
    state = prepared.current_prepared(a.dtype)
    state.small(a, b, c, 1.0, 0.0)  # the slot now holds the builtin
    small = state.small
    pieces = {
        "smallgemm.matmul(a, b)": lambda: smallgemm.matmul(a, b),
        "numpy.matmul(a, b)": lambda: np.matmul(a, b),
        "the small way in's builtin making C, 16x16x16": lambda: small(a, b),
        "the small way in's builtin making C, 1x1x1": lambda: small(tiny, tiny),
        "the small way in's builtin into C, 16x16x16": lambda: small(a, b, c, 1.0, 0.0),
        "np.empty((len(a), b.shape[1]), a.dtype)": lambda: np.empty((len(a), b.shape[1]), a.dtype),
        "an empty Python lambda": lambda: None,
    }
    times: dict[str, list[float]] = {name: [] for name in pieces}
    for _ in range(15):
        for name, call in pieces.items():
            times[name].append(min(timeit.repeat(call, number=20000, repeat=3)) / 20000)
    print("| piece | median |\n|---|---|")
    for name, seconds in times.items():
        print(f"| {name} | {np.median(seconds) * 1e9:.0f} ns |")


if __name__ == "__main__":
    if "--breakdown" in sys.argv[1:]:
        rerun_clean()
        bench.compile_first([np.float32])
        breakdown()
    else:
        main()
