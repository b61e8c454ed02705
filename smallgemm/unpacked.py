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
from .simd import address, tile_cols, tile_rows


@njit(cache=True)
def gemm_unpacked(
    shape, narrow, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c, cs_c, kc, scratch
):
    """C = alpha*A.B + beta*C without packing (requires m, n, k >= 1 and unit-stride B rows).

    ``narrow`` is the kernel's one-vector tile, used when n fits in it: a 16x16
    float32 product then computes no padding and writes C with vector stores.
    """
    if n <= tile_cols(narrow, a):
        unpacked_tiles(narrow, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c, cs_c, kc, scratch)
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
def unpacked_entry(shape, narrow, alpha, beta, a, b, c, kc, scratch):
    """Entry from Python: 2-D arrays of one dtype, C not overlapping A or B."""
    size = a.itemsize
    gemm_unpacked(
        shape, narrow, a.shape[0], b.shape[1], a.shape[1], alpha, beta,
        address(a), 0, a.strides[0] // size, a.strides[1] // size,
        address(b), 0, b.strides[0] // size,
        address(c), 0, c.strides[0] // size, c.strides[1] // size,
        kc, address(scratch),
    )
