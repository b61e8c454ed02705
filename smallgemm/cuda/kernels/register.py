"""Step 5, ``register``: each thread computes a block of C held in registers (2-D block tiling).

A block of 256 threads computes a ``rows × cols`` tile of C (128 × 128 in float32),
each thread an ``8 × 8`` block of it in registers.  Per k-step of ``depth`` (8), the
block stages an A tile (transposed, k-major) and a B tile in shared memory, double
buffered as in ``double_buffer``; each thread then, for each k, reads 8 values of A
and 8 of B from shared memory into registers and makes their 64 products: 16 shared
loads for 64 fused multiply-adds instead of 2 for 1.  Seed 003 (register blocking,
97 % of a GTX 260's peak) and seed 000, sections 2.2–2.3.

Layout details, as in seed 000: a thread's rows are two runs of ``thread_rows / 2``
(one in each half of the tile), and so are its columns, so that a warp reads each
run as adjacent words; the global loads of a tile are coalesced along each operand's
fast axis; and the shared tiles' rows are padded by 4 words, so that a transposed
operand's stores (k varying fastest across a warp) fall in distinct banks while every
run stays 16-byte aligned.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, from_dtype

from ..tiles import Tiles
from .ladder import LadderKernel

TILES = {
    np.dtype(np.float32): Tiles(128, 128, 8, 8, 8),
    # 4 x 4 per thread: 8 x 8 float64 accumulators would take 128 of a thread's 255 registers.
    np.dtype(np.float64): Tiles(64, 64, 8, 4, 4),
}
PAD = 4


def build(dtype: np.dtype, tiles: Tiles, a_k_fast: bool, b_n_fast: bool):
    real = from_dtype(dtype)
    bm, bn, bk, tm, tn = tiles.rows, tiles.cols, tiles.depth, tiles.thread_rows, tiles.thread_cols
    half_m, half_n = tm // 2, tn // 2
    threads, threads_x = tiles.threads, tiles.block[0]
    a_loads, b_loads = bm * bk // threads, bk * bn // threads
    if a_loads * threads != bm * bk or b_loads * threads != bk * bn or tm % 2 or tn % 2:
        raise ValueError(f"{tiles}: the tiles must split evenly among {threads} threads")
    sa_shape, sb_shape = (2, bk, bm + PAD), (2, bk, bn + PAD)
    acc_shape = (tm, tn)

    @cuda.jit(device=True)
    def a_place(idx):
        """Row and k, in the A tile, of the tile's element ``idx`` along A's fast axis."""
        return (idx // bk, idx % bk) if a_k_fast else (idx % bm, idx // bm)

    @cuda.jit(device=True)
    def b_place(idx):
        """k and column, in the B tile, of the tile's element ``idx`` along B's fast axis."""
        return (idx // bn, idx % bn) if b_n_fast else (idx % bk, idx // bk)

    @cuda.jit(device=True)
    def load(a, b, la, lb, i0, j0, k0, tid):
        """This thread's elements of the tiles at k0, into registers.  Element e is number
        e * threads + tid of its tile: each load instruction of a warp is coalesced."""
        m, n, depth = a.shape[0], b.shape[1], a.shape[1]
        for e in range(a_loads):
            mm, kk = a_place(e * threads + tid)
            i, k = i0 + mm, k0 + kk
            la[e] = real(a[i, k]) if i < m and k < depth else real(0)
        for e in range(b_loads):
            kk, nn = b_place(e * threads + tid)
            k, j = k0 + kk, j0 + nn
            lb[e] = real(b[k, j]) if k < depth and j < n else real(0)

    @cuda.jit(device=True)
    def stage(sa, sb, la, lb, now, tid):
        """The registers ``load`` filled, into shared buffer ``now`` (A transposed)."""
        for e in range(a_loads):
            mm, kk = a_place(e * threads + tid)
            sa[now, kk, mm] = la[e]
        for e in range(b_loads):
            kk, nn = b_place(e * threads + tid)
            sb[now, kk, nn] = lb[e]

    @cuda.jit(device=True)
    def row_of(r, row0):
        return (r // half_m) * (bm // 2) + row0 + r % half_m

    @cuda.jit(device=True)
    def col_of(q, col0):
        return (q // half_n) * (bn // 2) + col0 + q % half_n

    @cuda.jit(device=True)
    def step(sa, sb, now, kk, row0, col0, fa, fb, acc):
        """One k of the thread's block: tm values of A and tn of B, tm * tn chains advanced."""
        for r in range(tm):
            fa[r] = sa[now, kk, row_of(r, row0)]
        for q in range(tn):
            fb[q] = sb[now, kk, col_of(q, col0)]
        for r in range(tm):
            for q in range(tn):
                acc[r, q] = cuda.fma(fa[r], fb[q], acc[r, q])

    @cuda.jit
    def register(a, b, c, accumulate):
        sa = cuda.shared.array(sa_shape, real)
        sb = cuda.shared.array(sb_shape, real)
        acc = cuda.local.array(acc_shape, real)
        fa = cuda.local.array(tm, real)
        fb = cuda.local.array(tn, real)
        la = cuda.local.array(a_loads, real)
        lb = cuda.local.array(b_loads, real)
        tid = cuda.threadIdx.y * threads_x + cuda.threadIdx.x
        row0, col0 = cuda.threadIdx.y * half_m, cuda.threadIdx.x * half_n
        i0, j0 = cuda.blockIdx.y * bm, cuda.blockIdx.x * bn
        m, n, depth = c.shape[0], c.shape[1], a.shape[1]
        for r in range(tm):
            i = i0 + row_of(r, row0)
            for q in range(tn):
                j = j0 + col_of(q, col0)
                acc[r, q] = c[i, j] if accumulate and i < m and j < n else real(0)

        load(a, b, la, lb, i0, j0, 0, tid)
        now, k0 = 1, 0
        while k0 < depth:
            # After the barrier no thread reads the other buffer (its step ended before it):
            # one barrier per k-step, as in double_buffer.
            now = 1 - now
            stage(sa, sb, la, lb, now, tid)
            cuda.syncthreads()
            ahead = k0 + bk
            if ahead < depth:  # the next tiles' global loads, in flight during the products
                load(a, b, la, lb, i0, j0, ahead, tid)
            if ahead <= depth:
                for kk in range(bk):
                    step(sa, sb, now, kk, row0, col0, fa, fb, acc)
            else:  # never a k past K, not even on zeros: fma(0, 0, -0.0) is +0.0
                for kk in range(depth - k0):
                    step(sa, sb, now, kk, row0, col0, fa, fb, acc)
            k0 = ahead

        for r in range(tm):
            i = i0 + row_of(r, row0)
            for q in range(tn):
                j = j0 + col_of(q, col0)
                if i < m and j < n:
                    c[i, j] = acc[r, q]

    return register


KERNEL = LadderKernel(
    "register",
    "each thread an 8 x 8 block of C in registers (2-D block tiling)",
    TILES,
    build,
    layout_aware=True,
)
