"""Few rows times a matrix (B's rows contiguous) against NumPy, on one thread and on the
default thread count; print Markdown.

    python benchmarks/few_rows.py > few_rows.md

The rows around the few-rows stream's two tiles on AVX-512 (docs/design.md, section 3):
the 4 x 64 few-rows tile, and the 16 x 16 narrow tile where it pads at most 3 rows (13 to
16 and 29 to 32 rows).  Each row times smallgemm and NumPy interleaved in this one process
(``targets.compare``), without the OpenBLAS forcing variables, after the cache is filled;
the default thread count sets nothing, one thread is set for both libraries.  The last
column is smallgemm's share of ``peak()``'s FMA rate (one core, or all the threads').
"""

from __future__ import annotations

import numpy as np
from targets import DEFAULT_THREADS, TABLE_HEADER, compare, rand, rerun_clean

import smallgemm
from smallgemm.tools import bench

SHAPES = [(m, 512, 2048) for m in (4, 8, 12, 13, 16, 24, 29, 32)] + [(16, 1024, 4096), (32, 2048, 4096)]


def main():
    rerun_clean()
    bench.compile_first()  # then default settings: each entry loads from the cache on its first call
    fma = smallgemm.peak()["fma_gflops"]
    shares = []
    print(TABLE_HEADER)
    for threads in sorted({1, DEFAULT_THREADS}):
        for dtype in (np.float32, np.float64):
            name = np.dtype(dtype).name
            peak = max(
                rate["one_core" if threads == 1 else "all_cores"] for key, rate in fma.items() if name in key
            )
            for m, k, n in SHAPES:
                a, b = rand(m, k, dtype=dtype), rand(k, n, dtype=dtype)
                c = np.empty((m, n), dtype)
                label = f"{name} [{m},{k}] @ [{k},{n}]"
                ours, _ = compare(
                    label,
                    lambda a=a, b=b, c=c: smallgemm.matmul(a, b, out=c),
                    lambda a=a, b=b, c=c: np.matmul(a, b, out=c),
                    threads,
                    "",
                )
                shares.append((label, threads, 2 * m * n * k / ours / 1e9 / peak))
    print("\n| product | threads | smallgemm's share of the FMA peak |\n|---|---|---|")
    for label, threads, share in shares:
        print(f"| {label} | {threads} | {share:.0%} |")


if __name__ == "__main__":
    main()
