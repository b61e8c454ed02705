"""Step 2, ``shared``: square tiles of A and B staged in shared memory.

A block of ``t × t`` threads computes a ``t × t`` tile of C.  For each k-step the
block loads a ``t × t`` tile of A and one of B into shared memory, one element per
thread, synchronises, and each thread runs its chain over the staged k: every
element loaded from global memory is used t times.  Thread (y, x) loads A[i, k0+x]
and B[k0+y, j], which is coalesced when both operands are row-major (C order) and
strided by a whole row when one is transposed: ``bank_free`` loads along each
operand's own fast axis.  (Seed 000, section 2.1; 12.8 % of cuBLAS in siboehm's
CUDA C ladder.)
"""

from __future__ import annotations

import numpy as np
from numba import cuda, from_dtype

from ..tiles import Tiles
from .ladder import LadderKernel
from .square_tiles import tile_chain

TILES = {np.dtype(np.float32): Tiles(16, 16, 16), np.dtype(np.float64): Tiles(16, 16, 16)}


def build(dtype: np.dtype, tiles: Tiles, a_k_fast: bool, b_n_fast: bool):
    real = from_dtype(dtype)
    t = tiles.rows
    shape = (t, t)
    advance = tile_chain(t)

    @cuda.jit
    def shared(a, b, c, accumulate):
        sa = cuda.shared.array(shape, real)
        sb = cuda.shared.array(shape, real)
        x, y = cuda.threadIdx.x, cuda.threadIdx.y
        i = cuda.blockIdx.y * t + y
        j = cuda.blockIdx.x * t + x
        m, n, depth = c.shape[0], c.shape[1], a.shape[1]
        acc = c[i, j] if accumulate and i < m and j < n else real(0)
        for k0 in range(0, depth, t):
            sa[y, x] = real(a[i, k0 + x]) if i < m and k0 + x < depth else real(0)
            sb[y, x] = real(b[k0 + y, j]) if k0 + y < depth and j < n else real(0)
            cuda.syncthreads()
            acc = advance(sa, sb, y, x, depth - k0, acc)
            cuda.syncthreads()
        if i < m and j < n:
            c[i, j] = acc

    return shared


KERNEL = LadderKernel("shared", "square tiles of A and B staged in shared memory", TILES, build)
