"""Products that skip packing: the microkernel reads A and B where they are.

For small products (and few rows) packing costs more than it saves.  This
driver walks the same KC blocks and MR x NR tiles as the blocked driver and
runs the same tile, FMA chain and merge (``direct_microkernel``), so a product
gives the same bits whichever driver its size selects.  It needs B's rows to be
contiguous (vector loads of B rows); A may have any strides.
"""

from numba import njit

from .driver import merge_mode
from .kernels.microkernel import direct_microkernel
from .simd import ACCUMULATE, OVERWRITE, address, axpy_vector, multiply_add, prefetch_read, tile_cols, tile_lanes, tile_rows


# Up to this many rows the few-rows tile (4 x 64 with AVX-512) beats the main
# 14 x 32 tile on unpacked operands: measured 1.6x at m = 16, equal at m = 64.
FEW_TILE_MAX_ROWS = 32


@njit(cache=True)
def tile_choice(shape, narrow, m, n, a):
    """Which of the kernel's tiles suits an unpacked product: 0 main, 1 narrow, 2 few rows, 3 gemv.

    ``narrow`` (one vector wide) when n fits in it: a 16x16 float32 product then
    computes no padding; ``gemv`` (1 x 256) for a single row; ``few`` (4 x 64)
    for a few rows, where the main tile would mostly compute copies of the last row.
    """
    if n <= tile_cols(narrow, a):
        return 1
    if m == 1:
        return 3
    if m <= FEW_TILE_MAX_ROWS:
        return 2
    return 0


# Columns of C accumulated at once by ``gemv_rows`` (its row buffer: 16 KiB of
# float32, resident in L1 while B streams past).
GEMV_CHUNK = 4096
# Elements of B requested ahead of the single-row stream (a few KiB: the
# hardware prefetcher alone left a 64 MiB B at ~45 % of the read bandwidth,
# this brings it to ~85 %).
PREFETCH_AHEAD = 2048


@njit(cache=True)
def gemv_rows(rule, n, k, alpha, beta, a, a_off, cs_a, b, b_off, rs_b, c, c_off, cs_c, kc, row):
    """One row of C (m == 1): B streamed row after row, in order, as memory delivers it.

    For each chunk of columns and each KC block, the chunk's partial sums live in
    ``row`` (L1) and every row of B is read once, contiguously: the read
    bandwidth bound, where a register tile walking down B's columns jumps one
    row stride per k.  Each element is still the FMA chain of its KC block in
    increasing k from zero, merged by the usual rules, so the bits are those of
    every other path.
    """
    lanes = tile_lanes(rule, b)
    zero = alpha - alpha
    for j0 in range(0, n, GEMV_CHUNK):
        width = min(GEMV_CHUNK, n - j0)
        whole = width - width % lanes
        for pc in range(0, k, kc):
            depth = min(kc, k - pc)
            for j in range(width):
                row[j] = zero  # fma(x, b, 0) is the rounded product: the chain's first step
            for p in range(depth):
                x = a[a_off + (pc + p) * cs_a]
                start = b_off + (pc + p) * rs_b + j0
                for j in range(0, whole, lanes):
                    prefetch_read(b, start + j + PREFETCH_AHEAD)
                    axpy_vector(rule, x, b, start + j, row, j)
                for j in range(whole, width):
                    row[j] = multiply_add(rule, x, b[start + j], row[j])
            mode = merge_mode(pc, beta)
            for j in range(width):
                at = c_off + (j0 + j) * cs_c
                if mode == OVERWRITE:
                    c[at] = alpha * row[j]
                elif mode == ACCUMULATE:
                    c[at] = multiply_add(rule, alpha, row[j], c[at])
                else:
                    c[at] = multiply_add(rule, alpha, row[j], beta * c[at])


@njit(cache=True)
def gemm_unpacked(
    shape, narrow, few, gemv, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c, cs_c, kc,
    scratch, row,
):
    """C = alpha*A.B + beta*C without packing (requires m, n, k >= 1 and unit-stride B rows)."""
    choice = tile_choice(shape, narrow, m, n, a)
    if choice == 1:
        unpacked_tiles(narrow, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c, cs_c, kc, scratch)
    elif choice == 2:
        unpacked_tiles(few, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c, cs_c, kc, scratch)
    elif choice == 3:
        gemv_rows(gemv, n, k, alpha, beta, a, a_off, cs_a, b, b_off, rs_b, c, c_off, cs_c, kc, row)
    else:
        unpacked_tiles(shape, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c, cs_c, kc, scratch)


@njit(cache=True)
def unpacked_tiles(
    shape, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c, cs_c, kc, scratch
):
    """PC, JR, IR loops over the tiles of ``shape``, each from the unpacked operands."""
    mr = tile_rows(shape)
    nr = tile_cols(shape, a)
    for pc in range(0, k, kc):  # PC: the same KC blocks as the blocked driver
        depth = min(kc, k - pc)
        mode = merge_mode(pc, beta)
        for jr in range(0, n, nr):
            for ir in range(0, m, mr):
                direct_microkernel(
                    shape, depth,
                    a, a_off + ir * rs_a + pc * cs_a, rs_a, cs_a,
                    b, b_off + pc * rs_b + jr, rs_b,
                    c, c_off + ir * rs_c + jr * cs_c, rs_c, cs_c,
                    min(mr, m - ir), min(nr, n - jr),
                    alpha, beta, mode, scratch,
                )


@njit(cache=True)
def unpacked_entry(shape, narrow, few, gemv, alpha, beta, a, b, c, kc, scratch, row):
    """Entry from Python: 2-D arrays of one dtype, C not overlapping A or B."""
    size = a.itemsize
    gemm_unpacked(
        shape, narrow, few, gemv, a.shape[0], b.shape[1], a.shape[1], alpha, beta,
        address(a), 0, a.strides[0] // size, a.strides[1] // size,
        address(b), 0, b.strides[0] // size,
        address(c), 0, c.strides[0] // size, c.strides[1] // size,
        kc, address(scratch), address(row),
    )
