"""Step 1, ``naive``: one thread per element of C, every operand read from global memory.

Each thread walks row i of A and column j of B: 2K global loads for K fused
multiply-adds, and no reuse between threads but what the caches give.  Seed 000's
first kernel (11.5 % of a V100's float32 peak).
"""

from __future__ import annotations

import numpy as np
from numba import cuda, from_dtype

from ..tiles import Tiles
from .ladder import LadderKernel

TILES = {np.dtype(np.float32): Tiles(16, 16, 1), np.dtype(np.float64): Tiles(16, 16, 1)}


def build(dtype: np.dtype, tiles: Tiles, a_k_fast: bool, b_n_fast: bool):
    real = from_dtype(dtype)
    rows, cols = tiles.rows, tiles.cols

    @cuda.jit
    def naive(a, b, c, accumulate):
        i = cuda.blockIdx.y * rows + cuda.threadIdx.y
        j = cuda.blockIdx.x * cols + cuda.threadIdx.x
        if i < c.shape[0] and j < c.shape[1]:
            acc = c[i, j] if accumulate else real(0)
            for k in range(a.shape[1]):
                acc = cuda.fma(real(a[i, k]), real(b[k, j]), acc)
            c[i, j] = acc

    return naive


KERNEL = LadderKernel("naive", "one thread per element, operands from global memory", TILES, build)
