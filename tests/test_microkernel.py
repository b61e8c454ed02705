"""The microkernel alone, on hand-packed panels (separate from the full operation)."""

import numpy as np
import pytest
from numba import njit

from smallgemm.kernels import KERNELS, microkernel
from smallgemm.simd import ACCUMULATE, OVERWRITE, SCALE, address
from smallgemm.simd.records import matrix, merge


@njit
def _run(shape, kc, apanel, bpanel, c, rs_c, cs_c, rows, cols, alpha, beta, mode, scratch):
    target = matrix(address(c), 0, rs_c, cs_c)
    microkernel(
        shape,
        kc,
        address(apanel),
        0,
        address(bpanel),
        0,
        target,
        rows,
        cols,
        merge(alpha, beta, mode),
        address(scratch),
    )


def pack_panels(a, b, mr, nr):
    """Reference packing: A (mr x kc) column by column, B (kc x nr) row by row."""
    return np.ascontiguousarray(a.T).ravel(), np.ascontiguousarray(b).ravel()


def random_tile_case(rng, mr, nr, kc, dtype):
    """(packed A panel, packed B panel, a C tile, scratch) of random values."""
    a = rng.standard_normal((mr, kc)).astype(dtype)
    b = rng.standard_normal((kc, nr)).astype(dtype)
    ap, bp = pack_panels(a, b, mr, nr)
    return ap, bp, rng.standard_normal((mr, nr)).astype(dtype), np.empty(mr * nr, dtype)


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("full", [True, False], ids=["full_tile", "edge_tile"])
def test_microkernel_modes(kernel, dtype, full):
    rng = np.random.default_rng(0)
    mr, nr, kc = kernel.mr(), kernel.nr(dtype), 37
    a = rng.integers(-8, 8, (mr, kc)).astype(dtype)
    b = rng.integers(-8, 8, (kc, nr)).astype(dtype)
    ap, bp = pack_panels(a, b, mr, nr)
    rows, cols = (mr, nr) if full else (mr - 1, nr - 3)
    exact = (a @ b)[:rows, :cols]  # small integers: every order gives the exact sum
    scratch = np.empty(mr * nr, dtype)
    one, two, half = dtype(1), dtype(2), dtype(0.5)
    c = np.full((mr, nr), np.nan, dtype)
    _run(kernel.shape, kc, ap, bp, c, nr, 1, rows, cols, two, dtype(0), OVERWRITE, scratch)
    np.testing.assert_array_equal(c[:rows, :cols], 2 * exact)
    assert np.isnan(c[rows:, :]).all() and np.isnan(c[:, cols:]).all()  # only the useful part
    c[...] = 4
    _run(kernel.shape, kc, ap, bp, c, nr, 1, rows, cols, one, half, SCALE, scratch)
    np.testing.assert_array_equal(c[:rows, :cols], exact + 2)
    _run(kernel.shape, kc, ap, bp, c, nr, 1, rows, cols, one, half, ACCUMULATE, scratch)
    np.testing.assert_array_equal(c[:rows, :cols], 2 * exact + 2)
    # Column-major C goes through the scalar write-back with the same result.
    cf = np.full((nr, mr), np.nan, dtype)
    _run(kernel.shape, kc, ap, bp, cf, 1, mr, rows, cols, two, dtype(0), OVERWRITE, scratch)
    np.testing.assert_array_equal(cf.T[:rows, :cols], 2 * exact)


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_edge_and_full_writes_round_alike(kernel):
    """An element gets the same bits from the vector write and the scalar write-back."""
    dtype = np.float32
    mr, nr, kc = kernel.mr(), kernel.nr(dtype), 50
    ap, bp, c0, scratch = random_tile_case(np.random.default_rng(1), mr, nr, kc, dtype)
    alpha, beta = dtype(0.3), dtype(-1.7)
    for mode in (OVERWRITE, SCALE, ACCUMULATE):
        full, edge = c0.copy(), c0.copy()
        _run(kernel.shape, kc, ap, bp, full, nr, 1, mr, nr, alpha, beta, mode, scratch)
        _run(kernel.shape, kc, ap, bp, edge, nr, 1, mr - 1, nr, alpha, beta, mode, scratch)
        np.testing.assert_array_equal(edge[: mr - 1], full[: mr - 1])


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_edge_tile_writes_exactly_its_part(kernel, dtype):
    """Every live column count and a few row counts: the vector merge of the live part
    gives the full tile's bits there, in every mode, and nothing else of C (laid out
    with room around the tile) is read into it or written."""
    mr, nr, kc = kernel.mr(), kernel.nr(dtype), 19
    ap, bp, c0, scratch = random_tile_case(np.random.default_rng(2), mr, nr, kc, dtype)
    alpha, beta = dtype(0.3), dtype(-1.7)
    for mode in (OVERWRITE, SCALE, ACCUMULATE):
        full = c0.copy()
        _run(kernel.shape, kc, ap, bp, full, nr, 1, mr, nr, alpha, beta, mode, scratch)
        for rows in sorted({1, mr // 2, mr - 1, mr} - {0}):
            for cols in range(1, nr + 1):
                frame = np.full((mr + 2, nr + 2), np.nan, dtype)
                frame[1 : rows + 1, 1 : cols + 1] = c0[:rows, :cols]
                _run(
                    kernel.shape, kc, ap, bp, frame[1:, 1:], nr + 2, 1, rows, cols, alpha, beta, mode, scratch
                )
                where = f"mode {mode}, {rows}x{cols}"
                np.testing.assert_array_equal(frame[1 : rows + 1, 1 : cols + 1], full[:rows, :cols], where)
                outside = np.ones(frame.shape, bool)
                outside[1 : rows + 1, 1 : cols + 1] = False
                assert np.isnan(frame[outside]).all(), where
