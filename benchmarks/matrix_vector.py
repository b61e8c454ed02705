"""A matrix times a vector against NumPy, on one thread and on the default thread count;
print Markdown.

    python benchmarks/matrix_vector.py > matrix_vector.md

Aligned row reads and exact products (docs/performance.md): ``W @ x`` (row dots), one
row times a row-major B (the single-row stream), one row times a prepacked ``W.T``
(``x @ pack(W, trans=True)``, inference with prepacked weights, against NumPy's ``x @
W.T``) and one sample through ``smallgemm.nn``'s inference pass (its layers multiply
packed weights) against the same pass on NumPy; W as NumPy allocates it (16 or 32
bytes into a cache line) and copied to the start of a line — the two should take the
same time — and ``W @ x`` not exact (lane-wise sums: what exactness costs).  ``W @ x``
rows give the share of ``peak()``'s read bandwidth that W's bytes took.  Each row
times smallgemm and NumPy interleaved in this one process (``targets.compare``),
without the OpenBLAS forcing variables.  The cache is filled first; the default thread
count sets nothing, one thread is set for both libraries.  The targets are those of
the small-products issue (NumPy / smallgemm).
"""

from __future__ import annotations

import numpy as np
from targets import DEFAULT_THREADS, TABLE_HEADER, compare, rand, rerun_clean

import smallgemm
from smallgemm import nn
from smallgemm.plan.workspace import aligned_empty
from smallgemm.tools import bench

# The model of ``benchmarks/nn_step.py``, one sample at a time through ``Sequential.inference``.
MLP_SIZES = (512, 2048, 2048, 10)


def line_aligned(arr: np.ndarray) -> np.ndarray:
    """A copy of ``arr`` whose data starts on a 64-byte boundary."""
    copy = aligned_empty(arr.size, arr.dtype).reshape(arr.shape)
    copy[...] = arr
    return copy


def main():
    rerun_clean()
    bench.compile_first()  # then default settings: each entry loads from the cache on its first call
    print(TABLE_HEADER)
    for threads in sorted({1, DEFAULT_THREADS}):
        for dtype in (np.float32, np.float64):
            rows_of(np.dtype(dtype), threads)


def rows_of(dtype: np.dtype, threads: int) -> None:
    """Every row for one dtype and thread count."""
    name = dtype.name
    for rows, k in ((512, 512), (2048, 512), (1024, 1024), (4096, 4096)):
        w = rand(rows, k, dtype=dtype)
        x = rand(k, dtype=dtype)
        label = f"{name} W @ x, W [{rows},{k}]"
        target = {(2048, 512): ">= 0.9", (4096, 4096): ">= 1.0"}.get((rows, k), "")
        compare(
            f"{label}, {w.ctypes.data % 64} bytes into a line",
            lambda: smallgemm.matmul(w, x),
            lambda: np.matmul(w, x),
            threads,
            target,
            bytes_read=w.nbytes,
        )
        aligned = line_aligned(w)
        compare(
            f"{label}, line-aligned",
            lambda: smallgemm.matmul(aligned, x),
            lambda: np.matmul(aligned, x),
            threads,
            "",
            bytes_read=w.nbytes,
        )
        with smallgemm.exact(False):
            compare(
                f"{label}, not exact", lambda: smallgemm.matmul(w, x), lambda: np.matmul(w, x), threads, ""
            )
    b = rand(512, 2048, dtype=dtype)
    v = rand(512, dtype=dtype)
    label = f"{name} [1,512] @ [512,2048]"
    compare(
        f"{label}, {b.ctypes.data % 64} bytes into a line",
        lambda: smallgemm.matmul(v, b),
        lambda: np.matmul(v, b),
        threads,
        ">= 1.0",
    )
    aligned = line_aligned(b)
    compare(
        f"{label}, line-aligned",
        lambda: smallgemm.matmul(v, aligned),
        lambda: np.matmul(v, aligned),
        threads,
        "",
    )
    weights = rand(2048, 512, dtype=dtype)
    packed = smallgemm.pack(weights, trans=True)
    row = rand(1, 512, dtype=dtype)
    compare(
        f"{name} [1,512] @ pack(W, trans=True) against NumPy's x @ W.T, W [2048,512]",
        lambda: smallgemm.matmul(row, packed),
        lambda: np.matmul(row, weights.T),
        threads,
        ">= 1.3",
    )
    model = nn.mlp(MLP_SIZES, np.random.default_rng(0), dtype)
    with nn.use_backend("numpy"):
        numpy_predict = model.inference()
    predict = model.inference()
    sample = rand(MLP_SIZES[0], dtype=dtype)
    compare(
        f"{name} nn inference, one sample, MLP {'-'.join(map(str, MLP_SIZES))}",
        lambda: predict(sample),
        lambda: numpy_predict(sample),
        threads,
        "",
    )


if __name__ == "__main__":
    main()
