"""Step 3, ``bank_free``: tiles loaded along each operand's fast axis, padded in shared memory.

``shared`` reads A[i, k0+x] across a warp: coalesced for a row-major A, one
transaction per thread for a transposed one.  Here the threads of a warp walk the
axis along which the operand's elements are adjacent (the kernel is compiled for
each layout), so every load is coalesced; a transposed operand is then written
down a column of its shared tile, and the tile's rows are padded by one word so
that such a column falls in different banks instead of one (seed 000, section 2.2:
the transposed, conflict-free tiles).  The compute loop is that of ``shared``.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, from_dtype

from ..tiles import Tiles
from .ladder import LadderKernel
from .square_tiles import tile_chain, tile_reader

TILES = {np.dtype(np.float32): Tiles(16, 16, 16), np.dtype(np.float64): Tiles(16, 16, 16)}


def build(dtype: np.dtype, tiles: Tiles, a_k_fast: bool, b_n_fast: bool):
    real = from_dtype(dtype)
    t = tiles.rows
    padded = (t, t + 1)
    read_a, read_b = tile_reader(real, a_k_fast), tile_reader(real, b_n_fast)
    advance = tile_chain(t)

    @cuda.jit
    def bank_free(a, b, c, accumulate):
        sa = cuda.shared.array(padded, real)
        sb = cuda.shared.array(padded, real)
        x, y = cuda.threadIdx.x, cuda.threadIdx.y
        i0, j0 = cuda.blockIdx.y * t, cuda.blockIdx.x * t
        i, j = i0 + y, j0 + x
        m, n, depth = c.shape[0], c.shape[1], a.shape[1]
        acc = c[i, j] if accumulate and i < m and j < n else real(0)
        for k0 in range(0, depth, t):
            value, row, col = read_a(a, i0, k0, x, y)
            sa[row, col] = value
            value, row, col = read_b(b, k0, j0, x, y)
            sb[row, col] = value
            cuda.syncthreads()
            acc = advance(sa, sb, y, x, depth - k0, acc)
            cuda.syncthreads()
        if i < m and j < n:
            c[i, j] = acc

    return bank_free


KERNEL = LadderKernel(
    "bank_free", "coalesced loads for any layout, padded conflict-free tiles", TILES, build, layout_aware=True
)
