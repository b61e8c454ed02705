"""Tiny products with B held in registers (the kernels' resident-B tiles)."""

import numpy as np
import pytest
from conftest import blocked_product, padded_fmas, random_matrix
from numba import njit
from reference import assert_close

import smallgemm
from smallgemm.drivers.unpacked import (
    FEW_TILE,
    GEMV_TILE,
    MAIN_TILE,
    NARROW_STREAM,
    NARROW_TILE,
    RESIDENT_TILE,
    tile_choice,
)
from smallgemm.kernels.shared import RESIDENT_STRIPS
from smallgemm.plan import in_force
from smallgemm.simd import address, row_dots_rule


def resident_limits(kernel, dtype):
    """(largest k, largest n) that the kernel's resident tile takes."""
    tile = kernel.resident
    return tile.depth, RESIDENT_STRIPS * resident_strip(kernel, dtype)


def resident_strip(kernel, dtype):
    """The columns of B the resident tile holds at once."""
    return kernel.resident.cols(dtype.itemsize)


@njit
def _tile_choice(shape, narrow, few, gemv, resident, m, n, k, kc, probe):
    return tile_choice(shape, narrow, few, row_dots_rule(gemv, False), resident, m, n, k, kc, address(probe))


def chosen(kernel, dtype, m, n, k):
    """The tile the unpacked driver picks for an m x n x k product."""
    kc = in_force.block_sizes(kernel, dtype).kc
    return _tile_choice(
        kernel.shape, kernel.narrow, kernel.few, kernel.gemv, kernel.resident, m, n, k, kc, np.zeros(1, dtype)
    )


def a_layouts(rng, m, k, dtype):
    yield "C", random_matrix(rng, (m, k), dtype)
    yield "F", random_matrix(rng, (m, k), dtype, order="F")
    yield "strided", random_matrix(rng, (2 * m, 3 * k), dtype)[::2, ::3]
    yield "reversed", random_matrix(rng, (m, k), dtype)[::-1, ::-1]


def test_resident_tile_takes_the_tiny_products(kernel, dtype):
    depth, width = resident_limits(kernel, dtype)
    assert chosen(kernel, dtype, 16, width, depth) == RESIDENT_TILE
    assert chosen(kernel, dtype, 1, 1, 1) == RESIDENT_TILE
    assert chosen(kernel, dtype, 16, width + 1, depth) != RESIDENT_TILE
    assert chosen(kernel, dtype, 16, width, depth + 1) != RESIDENT_TILE


@pytest.mark.parametrize("m", [1, 3, 8, 9, 16, 17, 41])
def test_resident_products_against_reference(kernel, dtype, m):
    depth, width = resident_limits(kernel, dtype)
    strip = resident_strip(kernel, dtype)
    rng = np.random.default_rng(m)
    for k in sorted({1, 2, depth - 1, depth}):
        for n in sorted({1, strip - 1, strip, strip + 1, 2 * strip + 3, width - 1, width}):
            assert chosen(kernel, dtype, m, n, k) == RESIDENT_TILE
            b = random_matrix(rng, (k, n), dtype)
            for _name, a in a_layouts(rng, m, k, dtype):
                assert_close(smallgemm.matmul(a, b), 1.0, a, b)
                for c in (
                    random_matrix(rng, (m, n), dtype),
                    random_matrix(rng, (m, n), dtype, order="F"),
                    random_matrix(rng, (2 * m, 2 * n), dtype)[::2, ::2],  # no unit stride: the scalar merge
                ):
                    for alpha, beta in ((0.5, -2.0), (1.5, 1.0)):
                        c_in = c.copy()
                        got = smallgemm.gemm(alpha, a, b, beta=beta, c=c, overwrite_c=True)
                        assert np.shares_memory(got, c), "gemm must write a usable c in place"
                        assert_close(got, alpha, a, b, beta, c_in)
                        c[...] = c_in


def test_resident_products_write_nothing_outside_c(kernel, dtype):
    depth, width = resident_limits(kernel, dtype)
    rng = np.random.default_rng(4)
    m, k, n = 11, depth - 1, width - 1
    a, b = random_matrix(rng, (m, k), dtype), random_matrix(rng, (k, n), dtype)
    frame = np.full((m + 2, n + 2), np.nan, dtype)
    c = frame[1:-1, 1:-1]
    smallgemm.matmul(a, b, out=c)
    assert_close(c, 1.0, a, b)
    outside = frame.copy()
    outside[1:-1, 1:-1] = np.nan
    assert np.isnan(outside).all()


def test_resident_products_match_the_blocked_path_bitwise(kernel, dtype):
    """A row of a tiny product has the bits it gets inside a large (packed) product."""
    depth, width = resident_limits(kernel, dtype)
    rng = np.random.default_rng(5)
    k = depth
    big = random_matrix(
        rng, (40000, k), dtype
    )  # past the unpacked volume on every kernel: the blocked driver
    for n in (resident_strip(kernel, dtype), width - 1, width):
        b = random_matrix(rng, (k, n), dtype)
        full = smallgemm.matmul(big, b)
        for rows in (slice(0, 1), slice(5, 12), slice(100, 116)):
            assert chosen(kernel, dtype, rows.stop - rows.start, n, k) == RESIDENT_TILE
            np.testing.assert_array_equal(smallgemm.matmul(big[rows], b), full[rows])


@pytest.mark.parametrize("strips", ["one", "several"])
@pytest.mark.parametrize("layout", ["C", "transposed", "strided"])
def test_stack_of_tiny_products_is_bitwise_the_loop_of_lone_products(kernel, dtype, layout, strips):
    """A stack goes through the resident tile in one compiled loop (``gemm_unpacked_stack``), with
    the bits of lone products, for A and C with or without unit-stride rows, B one strip wide or
    several (the last one partial)."""
    depth, width = resident_limits(kernel, dtype)
    width = resident_strip(kernel, dtype) if strips == "one" else width - 1
    rng = np.random.default_rng(6)
    count, m = 50, 16
    b = random_matrix(rng, (count, depth, width), dtype)
    if layout == "C":
        a, out = random_matrix(rng, (count, m, depth), dtype), np.empty((count, m, width), dtype)
    elif layout == "transposed":
        a = random_matrix(rng, (count, depth, m), dtype).transpose(0, 2, 1)
        out = np.empty((count, width, m), dtype).transpose(0, 2, 1)
    else:
        a = random_matrix(rng, (count, 2 * m, 2 * depth), dtype)[:, ::2, ::2]
        out = np.empty((count, m, 3 * width), dtype)[:, :, ::3]
    assert chosen(kernel, dtype, m, width, depth) == RESIDENT_TILE
    got = smallgemm.matmul(a, b, out=out)
    assert got is out
    for t in range(count):
        np.testing.assert_array_equal(got[t], smallgemm.matmul(a[t], b[t]))
        assert_close(got[t], 1.0, a[t], b[t])


def test_k_beyond_a_kc_block_is_not_resident(kernel, dtype, tiny_blocks):
    """With KC smaller than the tile's depth, the sums must still follow the KC blocks."""
    width = resident_limits(kernel, dtype)[1]
    k = tiny_blocks.kc + 3
    assert chosen(kernel, dtype, 8, width, k) != RESIDENT_TILE
    rng = np.random.default_rng(7)
    a, b = random_matrix(rng, (8, k), dtype), random_matrix(rng, (k, width), dtype)
    assert_close(smallgemm.matmul(a, b), 1.0, a, b)


def test_sixteen_rows_take_the_narrow_tile_where_the_main_tile_would_pad_them(kernel, dtype):
    """Past the resident tile, 15-16 rows on AVX-512 (a 14-row main tile: 28 rows computed) take
    the 16-row narrow tile over two column strips; 30 rows stay on the main tile.  Either way a
    row has the bits it gets inside a large (packed) product, on every kernel."""
    main_cols = kernel.nr(dtype)
    depth, _ = resident_limits(kernel, dtype)
    k = depth + 9  # past the resident tile
    if kernel.name == "avx512":
        assert chosen(kernel, dtype, 16, main_cols, k) == NARROW_TILE
        assert chosen(kernel, dtype, 15, main_cols, k) == NARROW_TILE
        assert chosen(kernel, dtype, 14, main_cols, k) == MAIN_TILE
        assert chosen(kernel, dtype, 30, main_cols, k) == MAIN_TILE
    rng = np.random.default_rng(9)
    big = random_matrix(
        rng, (40000, k), dtype
    )  # past the unpacked volume on every kernel: the blocked driver
    for n in (main_cols - 1, main_cols):
        b = random_matrix(rng, (k, n), dtype)
        full = smallgemm.matmul(big, b)
        for m in (14, 15, 16, 17, 30):
            rows = slice(7, 7 + m)
            got = smallgemm.matmul(big[rows], b)
            np.testing.assert_array_equal(got, full[rows])
            assert_close(got, 1.0, big[rows], b)


@pytest.mark.parametrize("m", [3, 12, 16, 30])
def test_few_rows_on_either_side_of_the_few_tiles_bytes_of_b_give_the_blocked_bits(kernel, dtype, m):
    """A few rows (up to the few tile's ``up_to``) times a B wider than the main tile: from
    the few tile's ``min_b_bytes`` on, the few-rows stream (B read in order; on the narrow tile where it
    pads few rows: ``unpacked.narrow_streams``), or up to the GEMV tile's ``strips`` rows their
    register strips, unless one row tile of the main tile holds the rows with fewer FMAs; below,
    the main tile unless the few tile saves a quarter of the FMAs.  More rows: the main tile.
    Either way the bits of the blocked driver."""
    rng = np.random.default_rng(m)
    n = kernel.nr(dtype) + kernel.few.cols(dtype.itemsize)
    rows, start = kernel.narrow.rows, kernel.narrow.stream_from
    streamed = NARROW_STREAM if 0 < start <= m and -m % rows <= rows - start else FEW_TILE
    if m <= kernel.gemv.strips:
        streamed = GEMV_TILE
    min_b_bytes = kernel.few.min_b_bytes
    below = min_b_bytes // (n * dtype.itemsize) - 1
    for k in (below, below + 2):
        a, b = random_matrix(rng, (m, k), dtype), random_matrix(rng, (k, n), dtype)
        few_fmas, main_fmas = padded_fmas(kernel.few, m, n, dtype), padded_fmas(kernel.shape, m, n, dtype)
        past_limit = k * n * dtype.itemsize >= min_b_bytes and (few_fmas < main_fmas or m > kernel.mr())
        if m > kernel.few.up_to:
            assert chosen(kernel, dtype, m, n, k) == MAIN_TILE, f"{m}x{n}x{k}"
        elif past_limit or 4 * few_fmas <= 3 * main_fmas:
            assert chosen(kernel, dtype, m, n, k) == streamed, f"{m}x{n}x{k}"
        else:
            narrow_pays = 3 * padded_fmas(kernel.narrow, m, n, dtype) < 2 * padded_fmas(
                kernel.shape, m, n, dtype
            )
            assert chosen(kernel, dtype, m, n, k) == (NARROW_TILE if narrow_pays else MAIN_TILE), (
                f"{m}x{n}x{k}"
            )
        with smallgemm.num_threads(1):
            got = smallgemm.matmul(a, b)
        assert_close(got, 1.0, a, b)
        np.testing.assert_array_equal(got, blocked_product(a, b), err_msg=f"{m}x{n}x{k}")
