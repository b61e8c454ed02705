"""A matrix times a vector against NumPy, one thread; print Markdown.

    python benchmarks/matrix_vector.py > matrix_vector.md

Aligned row reads and exact products (docs/performance.md): ``W @ x`` (row dots) and
one row times a row-major B (the single-row stream), with W as NumPy allocates it
(16 or 32 bytes into a cache line) and copied to the start of a line — the two should
take the same time — and ``W @ x`` not exact (lane-wise sums:
what exactness costs).  Each row times smallgemm and NumPy interleaved in this one
process (``targets.compare``), without the OpenBLAS forcing variables.
"""

from __future__ import annotations

import numpy as np
from targets import TABLE_HEADER, compare, rand, rerun_clean

import smallgemm
from smallgemm.plan.workspace import aligned_empty
from smallgemm.tools import bench


def line_aligned(arr: np.ndarray) -> np.ndarray:
    """A copy of ``arr`` whose data starts on a 64-byte boundary."""
    copy = aligned_empty(arr.size, arr.dtype).reshape(arr.shape)
    copy[...] = arr
    return copy


def main():
    rerun_clean()
    bench.compile_first()  # then default settings: each entry loads from the cache on its first call
    print(TABLE_HEADER)
    for dtype in (np.float32, np.float64):
        name = np.dtype(dtype).name
        for rows, k in ((512, 512), (2048, 512), (1024, 1024), (4096, 4096)):
            w = rand(rows, k, dtype=dtype)
            x = rand(k, dtype=dtype)
            label = f"{name} W @ x, W [{rows},{k}]"
            compare(
                f"{label}, {w.ctypes.data % 64} bytes into a line",
                lambda: smallgemm.matmul(w, x),
                lambda: np.matmul(w, x),
                1,
                "",
            )
            aligned = line_aligned(w)
            compare(
                f"{label}, line-aligned",
                lambda: smallgemm.matmul(aligned, x),
                lambda: np.matmul(aligned, x),
                1,
                "",
            )
            with smallgemm.exact(False):
                compare(f"{label}, not exact", lambda: smallgemm.matmul(w, x), lambda: np.matmul(w, x), 1, "")
        b = rand(512, 2048, dtype=dtype)
        v = rand(512, dtype=dtype)
        label = f"{name} [1,512] @ [512,2048]"
        compare(
            f"{label}, {b.ctypes.data % 64} bytes into a line",
            lambda: smallgemm.matmul(v, b),
            lambda: np.matmul(v, b),
            1,
            "",
        )
        aligned = line_aligned(b)
        compare(
            f"{label}, line-aligned",
            lambda: smallgemm.matmul(v, aligned),
            lambda: np.matmul(v, aligned),
            1,
            "",
        )


if __name__ == "__main__":
    main()
