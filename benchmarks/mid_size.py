"""Mid-size and tall-narrow products against NumPy, one and two threads; print Markdown.

    python benchmarks/mid_size.py > mid_size.md

The mid-size shapes of docs/performance.md: squares from 32^3 to 256^3, a linear
layer's folded batch, tall products on a narrow B, stacks of 32x32 products; sizes
that are not multiples of the tiles (edges) and an MLP layer (batch 64, 784 inputs,
100 units); narrow products (2-8 columns, computed turned over); one row block times
a wide B (64x2048x2048) and a B no wider than A is tall (768x256x256).
Each row times smallgemm and NumPy interleaved in this one
process (``targets.compare``), without the OpenBLAS forcing variables.
"""

from __future__ import annotations

import numpy as np
from targets import TABLE_HEADER, compare, rand, rerun_clean

import smallgemm
from smallgemm.tools import bench


def cases(dtype):
    """(name, a, b) for one dtype."""
    name = np.dtype(dtype).name
    for s in (32, 64, 96, 128, 160, 256):
        yield f"{name} {s}^3", rand(s, s, dtype=dtype), rand(s, s, dtype=dtype)
    yield f"{name} [8,64,64] @ [64,64]", rand(8, 64, 64, dtype=dtype), rand(64, 64, dtype=dtype)
    yield f"{name} [1024,64] @ [64,64]", rand(1024, 64, dtype=dtype), rand(64, 64, dtype=dtype)
    yield f"{name} 32x32x128", rand(32, 128, dtype=dtype), rand(128, 32, dtype=dtype)
    yield f"{name} stack 100x32x32", rand(100, 32, 32, dtype=dtype), rand(100, 32, 32, dtype=dtype)
    for m, n, k in (
        (50, 50, 50),
        (60, 70, 80),
        (100, 100, 100),
        (200, 200, 200),
        (64, 100, 784),
        (64, 2048, 2048),
        (768, 256, 256),
    ):
        yield f"{name} {m}x{n}x{k}", rand(m, k, dtype=dtype), rand(k, n, dtype=dtype)
    for m, n, k in ((64, 4, 256), (1000, 4, 64), (512, 4, 512), (2000, 8, 128), (20000, 2, 64)):
        yield f"{name} narrow {m}x{n}x{k}", rand(m, k, dtype=dtype), rand(k, n, dtype=dtype)


def main():
    rerun_clean()
    bench.compile_first()  # then default settings: each entry loads from the cache on its first call
    print(TABLE_HEADER)
    for threads in (1, 2):
        for dtype in (np.float32, np.float64):
            for name, a, b in cases(dtype):
                compare(name, lambda: smallgemm.matmul(a, b), lambda: np.matmul(a, b), threads, "")


if __name__ == "__main__":
    main()
