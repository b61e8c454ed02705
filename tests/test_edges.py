"""Unpacked products on the main tile: the smaller tiles on C's edges.  Against the
reference, and bitwise against the blocked driver (every tile gives an element the
same FMA chain)."""

import numpy as np
import pytest
from conftest import random_matrix
from reference import assert_close

import smallgemm
from smallgemm import plan
from smallgemm.unpacked import FEW_TILE_MAX_ROWS


def blocked(a, b, monkeypatch):
    """a @ b on the blocked driver, whatever its size."""
    with monkeypatch.context() as patch:
        patch.setattr(plan, "UNPACKED_MAX_VOLUME", {4: 0, 8: 0})
        patch.setattr(plan, "FEW_ROWS_MAX", 0)
        return smallgemm.matmul(a, b)


def edge_shapes(kernel, dtype):
    """(m, n): past the few-rows sizes (the main tile's products), with a row edge the
    few-rows tile takes, one it may not, none; a column edge the narrow tile takes, one
    wider than it, none."""
    mr, nr = kernel.mr(), kernel.nr(dtype)
    narrow, few = kernel.narrow.cols(dtype.itemsize), kernel.few.rows
    base = mr * (FEW_TILE_MAX_ROWS // mr + 1)
    rows = sorted({base, base + 1, base + few, base + min(mr - 1, 2 * few + 1)})
    cols = sorted({2 * nr, nr + 1, nr + narrow, 2 * nr + min(nr - 1, narrow + 1)})
    return [(m, n) for m in rows for n in cols]


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_edge_tiles_against_the_reference_and_the_blocked_bits(kernel, dtype, layout, monkeypatch):
    rng = np.random.default_rng(11)
    for m, n in edge_shapes(kernel, dtype):
        for k in (3, 40):
            if layout == "strided":
                a = random_matrix(rng, (2 * m, 3 * k), dtype)[::2, ::3]
            else:
                a = random_matrix(rng, (m, k), dtype, order=layout)
            b = random_matrix(rng, (k, n), dtype)
            got = smallgemm.matmul(a, b)
            assert_close(got, 1.0, a, b)
            np.testing.assert_array_equal(got, blocked(a, b, monkeypatch), err_msg=f"{m}x{n}x{k}")


def test_edge_tiles_write_nothing_outside_c(kernel, dtype):
    rng = np.random.default_rng(12)
    for m, n in edge_shapes(kernel, dtype):
        a, b = random_matrix(rng, (m, 9), dtype), random_matrix(rng, (9, n), dtype)
        frame = np.full((m + 2, n + 3), np.nan, dtype)
        smallgemm.gemm(1.0, a, b, beta=0.0, c=frame[1 : m + 1, 1 : n + 1], overwrite_c=True)
        assert_close(frame[1 : m + 1, 1 : n + 1], 1.0, a, b)
        inside = np.zeros(frame.shape, bool)
        inside[1 : m + 1, 1 : n + 1] = True
        assert np.isnan(frame[~inside]).all(), f"{m}x{n}: written outside C"
