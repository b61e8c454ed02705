"""Packing alone: the panel layouts of packing.py, exactly, and nothing written outside them."""

import numpy as np
import pytest
from numba import njit

from smallgemm.drivers.packing import pack_a, pack_b_panel, pack_b_panels
from smallgemm.kernels import KERNELS
from smallgemm.kernels.shared import PACK_A_COLUMN_PANELS, PACK_B_GROUP
from smallgemm.plan.workspace import aligned_empty
from smallgemm.simd import address, advance

# Elements of the buffer on each side of the packed block, which must keep their sentinel.
GUARD = 64
# Depths around every vector width (4, 8 and 16 lanes): whole vector blocks and the rest.
DEPTHS = (1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 50)


@njit
def _pack_a(shape, a, off, rs, cs, rows, depth, buf):
    pack_a(shape, address(a), off, rs, cs, rows, depth, address(buf), GUARD)


@njit
def _pack_b(shape, b, off, rs, cs, depth, live, buf):
    pack_b_panel(shape, address(b), off, rs, cs, depth, live, address(buf), GUARD)


@njit
def _pack_b_range(shape, b, off, rs, cs, depth, cols, first, end, buf, streaming):
    pack_b_panels(
        shape, address(b), off, rs, cs, depth, cols, first, end, advance(address(buf), GUARD), streaming
    )


def expected_a(block, mr):
    """Panels of MR rows, each k-major (MR elements per k), zero rows past the block."""
    rows, depth = block.shape
    panels = -(-rows // mr)
    padded = np.zeros((panels * mr, depth), block.dtype)
    padded[:rows] = block
    return padded.reshape(panels, mr, depth).transpose(0, 2, 1).ravel()


def expected_b(block, nr):
    """One panel: NR elements per k, zero columns past the block."""
    depth, live = block.shape
    padded = np.zeros((depth, nr), block.dtype)
    padded[:, :live] = block
    return padded.ravel()


def operand(rng, shape, dtype, layout):
    """A view of ``shape`` with the layout's strides, in a larger array (its first
    element's offset and strides in elements returned with it)."""
    rows, cols = shape
    base = rng.standard_normal((rows + 3, 2 * cols + 5)).astype(dtype)
    if layout == "row-major":
        view = base[1 : rows + 1, 2 : cols + 2]
    elif layout == "column-major":
        view = np.asfortranarray(base[:rows, :cols])
    elif layout == "reversed":
        view = base[rows:0:-1, cols + 1 : 1 : -1]
    else:  # every other column
        view = base[1 : rows + 1, 1 : 2 * cols + 1 : 2]
    size = view.itemsize
    whole = view.base if view.base is not None else view
    off = (view.__array_interface__["data"][0] - whole.__array_interface__["data"][0]) // size
    return view, whole, off, view.strides[0] // size, view.strides[1] // size


LAYOUTS = ["row-major", "column-major", "reversed", "strided"]


def check_packing(rng, shape, dtype, layout, size, pack, expected):
    """Pack an operand of ``shape`` laid out as ``layout`` with ``pack(array, offset, rs,
    cs, buf)`` into a NaN-filled buffer with GUARD elements on each side: its ``size``
    elements must be ``expected(view)`` exactly, and the guards keep their NaN."""
    view, whole, off, rs, cs = operand(rng, shape, dtype, layout)
    where = "x".join(map(str, shape))
    buf = np.full(size + 2 * GUARD, np.nan, dtype)
    pack(whole, off, rs, cs, buf)
    np.testing.assert_array_equal(buf[GUARD : GUARD + size], expected(view), where)
    assert np.isnan(buf[:GUARD]).all() and np.isnan(buf[GUARD + size :]).all(), f"{where}: written outside"


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_pack_a_layout(kernel, dtype, layout):
    """Every row count around MR and past a group of column-packed panels, and depth
    around the vector widths, whole vectors included: the exact panels, the guard
    untouched."""
    rng = np.random.default_rng(0)
    mr = kernel.mr()
    for rows in sorted({1, mr - 1, mr, mr + 1, 2 * mr + 1, (PACK_A_COLUMN_PANELS + 1) * mr + 1} - {0}):
        for depth in DEPTHS:
            check_packing(
                rng,
                (rows, depth),
                dtype,
                layout,
                -(-rows // mr) * mr * depth,
                lambda x, off, rs, cs, buf, rows=rows, depth=depth: _pack_a(
                    kernel.shape, x, off, rs, cs, rows, depth, buf
                ),
                lambda view: expected_a(view, mr),
            )


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_pack_b_layout(kernel, dtype, layout):
    """A panel of every live column count and depth around the vector widths."""
    rng = np.random.default_rng(1)
    nr = kernel.nr(dtype)
    for live in sorted({1, nr - 1, nr}):
        for depth in DEPTHS:
            check_packing(
                rng,
                (depth, live),
                dtype,
                layout,
                depth * nr,
                lambda x, off, rs, cs, buf, depth=depth, live=live: _pack_b(
                    kernel.shape, x, off, rs, cs, depth, live, buf
                ),
                lambda view: expected_b(view, nr),
            )


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("streaming", [False, True], ids=["cached", "streaming"])
def test_pack_b_panels_range(kernel, dtype, layout, streaming):
    """A range of a slice's panels, full ones packed in groups where B's rows are
    contiguous (stores cached or streamed past the caches): each panel at its
    place, nothing outside the range written."""
    rng = np.random.default_rng(2)
    nr = kernel.nr(dtype)
    group = PACK_B_GROUP * nr
    for cols in (1, nr - 1, nr, group - 1, group, group + nr + 3, 2 * group + 1):
        panels = -(-cols // nr)
        ranges = {(0, panels), (1, panels), (0, panels - 1), (panels // 2, panels)}
        for depth in (1, 9, 17):
            view, whole, off, rs, cs = operand(rng, (depth, cols), dtype, layout)
            slice_panels = np.concatenate(
                [expected_b(view[:, q * nr : (q + 1) * nr], nr) for q in range(panels)]
            )
            for first, end in sorted(r for r in ranges if r[0] < r[1]):
                size = panels * nr * depth
                buf = aligned_empty(size + 2 * GUARD, dtype)  # streamed stores need aligned vectors
                buf[:] = np.nan
                _pack_b_range(kernel.shape, whole, off, rs, cs, depth, cols, first, end, buf, streaming)
                lo, hi = GUARD + first * nr * depth, GUARD + end * nr * depth
                where = f"{depth}x{cols}, panels {first}-{end}"
                np.testing.assert_array_equal(buf[lo:hi], slice_panels[lo - GUARD : hi - GUARD], where)
                assert np.isnan(buf[:lo]).all() and np.isnan(buf[hi:]).all(), where
