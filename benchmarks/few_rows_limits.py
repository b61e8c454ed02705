"""Unpacked against blocked for few rows times a large matrix, around each kernel's few-rows
limits; print Markdown.

    python benchmarks/few_rows_limits.py [--kernel avx2] [--dtype float64] [--rows 2,3,4,8,16,24,32]

Few rows times a B too large to skip packing otherwise run unpacked up to the kernel's
``few_rows_max`` (B's rows contiguous: the few-rows tile and stream) and
``transposed_few_rows_max`` (``x @ W.T``: the transposing stream, or the turned rows), and
blocked past them (``KernelConfig``).  For ``[m,512] @ [512,2048]`` and ``[m,512] @ W.T``
(W ``[2048,512]``) this times each m on one thread both ways, forcing the path with
``in_force.override_config`` (the limits set to ``shared.STREAM_ROWS``, then below m), each
the best of 11 loops of about 20 ms.  A limit is right where the unpacked path is at least as
fast up to it (blocked / unpacked >= 1) and not past it; the table marks the rows the kernel
runs unpacked.  Any kernel runs on an x86-64 host (forced kernels: say so with the figures).
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np


def best_time(call) -> float:
    call()
    number = max(1, int(0.02 / max(timeit.timeit(call, number=1), 1e-7)))
    return min(timeit.repeat(call, number=number, repeat=11)) / number


def main() -> None:
    import smallgemm
    from smallgemm.kernels import kernel_by_name, shared
    from smallgemm.plan import dispatch, in_force
    from smallgemm.tools.bench import compile_first

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernel", default=None, help="avx512, avx2 or portable (default: the detected one)")
    parser.add_argument("--dtype", default=None, choices=["float32", "float64"], help="default: both")
    parser.add_argument("--rows", default="2,3,4,8,16,24,32", help="comma-separated m")
    args = parser.parse_args()
    kernel = kernel_by_name(args.kernel) if args.kernel else dispatch.detect()
    dtypes = [args.dtype] if args.dtype else ["float32", "float64"]
    compile_first(dtypes, kernel=kernel.name)
    smallgemm.set_kernel(kernel.name)
    smallgemm.set_num_threads(1)
    rng = np.random.default_rng(0)
    k, n = 512, 2048
    config = kernel.config
    for dtype in dtypes:
        b = rng.standard_normal((k, n)).astype(dtype)
        w_t = rng.standard_normal((n, k)).astype(dtype).T
        print(f"\n{kernel.name} {dtype}, one thread\n")
        print("| product | unpacked way | unpacked | blocked | blocked / unpacked | unpacked by default |")
        print("|---|---|---|---|---|---|")
        for limit, name, matrix in (
            (config.few_rows_max, "B", b),
            (config.transposed_few_rows_max, "W.T", w_t),
        ):
            for m in (int(rows) for rows in args.rows.split(",")):
                x = rng.standard_normal((m, k)).astype(dtype)
                times, ways = [], []
                for most in (shared.STREAM_ROWS, m - 1):
                    with in_force.override_config([kernel], few_rows_max=most, transposed_few_rows_max=most):
                        ways.append(smallgemm.explain(x, matrix).strategy)
                        times.append(best_time(lambda x=x, matrix=matrix: smallgemm.matmul(x, matrix)))
                label = f"[{m},{k}] @ {'[512,2048]' if name == 'B' else 'W.T'}"
                print(
                    f"| {label} | {ways[0]} | {times[0] * 1e6:.1f} µs | {times[1] * 1e6:.1f} µs |"
                    f" {times[1] / times[0]:.2f} | {'yes' if m <= limit else ''} |"
                )


if __name__ == "__main__":
    main()
