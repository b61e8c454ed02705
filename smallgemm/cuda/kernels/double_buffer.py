"""Step 4, ``double_buffer``: the next tiles read while the current ones are used.

``bank_free`` with two shared tiles per operand.  Each k-step first issues the
global loads of the next step's tiles into registers, then runs the chains over the
current tiles, then stores the registers into the other pair of tiles: a GPU does
not execute out of order, so the loads are issued first to be in flight during the
multiply-adds.  One ``syncthreads`` per step instead of two (the store goes to
tiles no thread reads in this step).  Seed 000, section 2.3.
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
    padded = (2, t, t + 1)
    read_a, read_b = tile_reader(real, a_k_fast), tile_reader(real, b_n_fast)
    advance = tile_chain(t)

    @cuda.jit
    def double_buffer(a, b, c, accumulate):
        sa = cuda.shared.array(padded, real)
        sb = cuda.shared.array(padded, real)
        x, y = cuda.threadIdx.x, cuda.threadIdx.y
        i0, j0 = cuda.blockIdx.y * t, cuda.blockIdx.x * t
        i, j = i0 + y, j0 + x
        m, n, depth = c.shape[0], c.shape[1], a.shape[1]
        acc = c[i, j] if accumulate and i < m and j < n else real(0)
        va, ra, ca = read_a(a, i0, 0, x, y)
        vb, rb, cb = read_b(b, 0, j0, x, y)
        sa[0, ra, ca] = va
        sb[0, rb, cb] = vb
        cuda.syncthreads()
        now = 0
        for k0 in range(0, depth, t):
            ahead = k0 + t < depth
            if ahead:
                va, ra, ca = read_a(a, i0, k0 + t, x, y)
                vb, rb, cb = read_b(b, k0 + t, j0, x, y)
            acc = advance(sa[now], sb[now], y, x, depth - k0, acc)
            if ahead:
                sa[1 - now, ra, ca] = va
                sb[1 - now, rb, cb] = vb
            cuda.syncthreads()
            now = 1 - now
        if i < m and j < n:
            c[i, j] = acc

    return double_buffer


KERNEL = LadderKernel(
    "double_buffer", "the next tiles loaded while the current ones are used", TILES, build, layout_aware=True
)
