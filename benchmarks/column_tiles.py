"""A with neither its rows nor its columns contiguous times one column, the small way in against
the planner, around each kernel's ``column_tiles_max``; print Markdown.

    python benchmarks/column_tiles.py [--kernel avx2] [--sides 16,32,48,64,96,128]

``A @ x`` with A every other row and column of a matrix and x of shape ``(k, 1)``: up to
``column_tiles_max`` elements of A the small way in computes it on the tiles, a vector's width
per column; past it the planner places it (``KernelConfig``).  (With A's columns contiguous,
``A.T @ x``, the small way in swaps it into a row times rows at any size.)  For square A this
times, on one thread, each side both ways: ``matmul`` with the limit set above the product
(the tiles) and below it (the planner), forcing the path with ``in_force.override_config``,
each the best of 7 runs of 300 calls.  A limit is right where the tiles are at least as fast up
to it (planner / tiles >= 1) and not past it.  Any kernel runs on an x86-64 host (forced
kernels: say so with the figures).
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

import smallgemm
from smallgemm.plan import dispatch, in_force
from smallgemm.tools import bench


def best_time(call) -> float:
    call()
    return min(timeit.repeat(call, number=300, repeat=7)) / 300


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernel", default=None, help="avx512, avx2 or portable (default: the detected one)")
    parser.add_argument("--sides", default="16,32,48,64,96,128")
    args = parser.parse_args()
    sides = [int(side) for side in args.sides.split(",")]
    kernel = args.kernel or dispatch.current().name
    bench.compile_first(kernel=kernel)  # then products load their entries, as a user's do
    rng = np.random.default_rng(0)
    with smallgemm.use_kernel(kernel), smallgemm.num_threads(1):
        limit = in_force.config_of(dispatch.current()).column_tiles_max
        print(f"kernel {kernel}, column_tiles_max {limit}, one thread\n")
        print("| dtype | side | tiles, µs | planner, µs | planner / tiles | the kernel's way |")
        print("|---|---|---|---|---|---|")
        for dtype in (np.float32, np.float64):
            for side in sides:
                a = rng.standard_normal((2 * side, 2 * side)).astype(dtype)[::2, ::2]
                x = rng.standard_normal((side, 1)).astype(dtype)
                times = []
                for forced in (side * side, side * side - 1):  # tiles, then the planner
                    with in_force.override_config(column_tiles_max=forced):
                        times.append(best_time(lambda: smallgemm.matmul(a, x)))
                way = "tiles" if side * side <= limit else "planner"
                print(
                    f"| {np.dtype(dtype).name} | {side} | {times[0] * 1e6:.2f} | {times[1] * 1e6:.2f} | "
                    f"{times[1] / times[0]:.2f} | {way} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
