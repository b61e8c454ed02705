"""Entries from Python into the unpacked driver: the small way in (deciding in
compiled code whether a product is small), and the matrix-vector entry.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ...simd import address, buffer_at, row_dots_rule, tile_cols
from ...simd.subroutine import subroutine
from .row_dots import dot_rows, gemv_rows
from .tiles import gemm_unpacked

# What ``unpacked_entry`` did with a product it was asked to decide on (``small_only``).
SMALL_DONE, SMALL_PLANNED, SMALL_REFUSED = 0, 1, 2


@subroutine(inline=True)
def byte_span(data, shape, strides, itemsize):
    """(first byte, one past the last byte) that the elements of an array at address ``data``
    with this shape and these strides span; (0, 0) when it is empty."""
    lo = hi = data
    for d in range(len(shape)):
        if shape[d] == 0:
            return 0, 0
        span = (shape[d] - 1) * strides[d]
        if span < 0:
            lo += span
        else:
            hi += span
    return lo, hi + itemsize


@subroutine(inline=True)
def byte_extent(x):
    """``byte_span`` of the array ``x``."""
    return byte_span(x.ctypes.data, x.shape, x.strides, x.itemsize)


@subroutine(inline=True)
def spans_meet(x_span, y_span):
    """Whether two ``byte_span``s meet (NumPy's ``may_share_memory``: bounds only)."""
    return x_span[0] < y_span[1] and y_span[0] < x_span[1]


@subroutine(inline=True)
def may_overlap(x, y):
    """Whether the spans of ``x`` and ``y`` meet."""
    return spans_meet(byte_extent(x), byte_extent(y))


@subroutine(inline=True)
def whole_elements(x):
    """Whether every stride of ``x`` is a whole number of its elements (the drivers' unit)."""
    for d in range(x.ndim):
        if x.strides[d] % x.itemsize:
            return False
    return True


@subroutine(inline=True)
def output_apart(c, a, b):
    """Whether C, an output of the small ways in, has whole-element strides and lies apart
    from A and B (an ``out=`` on an operand goes to the general path's copy)."""
    return whole_elements(c) and not may_overlap(c, a) and not may_overlap(c, b)


@subroutine(inline=True)
def small_product_route(narrow, m, n, k, cs_a, rs_b, cs_b, max_volume, min_stream, few_rows, a):
    """SMALL_DONE when a product whose operands are checked is small enough to be computed
    straight away on the unpacked tiles, else SMALL_PLANNED (see ``unpacked_entry``)."""
    volume = m * n * k
    streamed = k * (m if n == 1 else n)
    along_rows = cs_b == 1 or (m == 1 and rs_b == 1) or (n == 1 and cs_a == 1)
    if volume == 0 or volume > max_volume or streamed >= min_stream or not along_rows:
        return SMALL_PLANNED
    if n > 1 and 2 * n <= tile_cols(narrow, a) and m > few_rows:
        return SMALL_PLANNED
    return SMALL_DONE


@njit(cache=True)
def unpacked_entry(
    shape, narrow, few, gemv, lane_sums, resident, kc, scratch, sums, max_volume, min_stream, few_rows, small_only,
    alpha, beta, a, b, c,
):
    """Entry from Python: C = alpha*A.B + beta*C for 2-D arrays of one dtype, C not
    overlapping A or B; ``lane_sums``: the row-dots rule's flag (``simd.row_dots_rule``).

    With ``small_only`` (matmul's way in for small matrices, where the same checks in
    Python cost more than a 16x16 product) the entry first decides: SMALL_REFUSED when
    the shapes do not match or a stride is not whole elements (the general path says
    what is wrong) or C may overlap A or B (an ``out=``; the general path computes into
    a new array and copies), SMALL_PLANNED for a product the planner must place (more than
    ``max_volume`` multiply-adds, from ``min_stream`` elements streamed, no contiguous
    rows to run along, or a C of more than ``few_rows`` rows and 2 to half the narrow
    tile's columns, which the planner may turn over: ``rules.turns_narrow``), else it
    computes the product: SMALL_DONE.  The arguments before ``alpha`` are the same on
    every call of a prepared state, which binds them once (``prepared.Prepared``);
    ``scratch`` and ``sums`` are the addresses of its workspace (``simd.buffer_at``).
    """
    m, k = a.shape
    k_b, n = b.shape
    size = a.itemsize
    rs_a, cs_a, rs_b, cs_b = a.strides[0] // size, a.strides[1] // size, b.strides[0] // size, b.strides[1] // size
    if small_only:
        if k != k_b or c.shape[0] != m or c.shape[1] != n:
            return SMALL_REFUSED
        if not (whole_elements(a) and whole_elements(b) and output_apart(c, a, b)):
            return SMALL_REFUSED
        if small_product_route(narrow, m, n, k, cs_a, rs_b, cs_b, max_volume, min_stream, few_rows,
                               address(a)) == SMALL_PLANNED:
            return SMALL_PLANNED
    origin = 0
    gemm_unpacked(
        shape, narrow, few, row_dots_rule(gemv, lane_sums), resident, m, n, k, alpha, beta,
        address(a), origin, rs_a, cs_a, address(b), origin, rs_b, cs_b,
        address(c), origin, c.strides[0] // size, c.strides[1] // size,
        kc, buffer_at(scratch, a), buffer_at(sums, a),
    )
    return SMALL_DONE


@njit(cache=True)
def vector_entry(gemv, lane_sums, alpha, beta, vec, mat, c, kc, sums, rows_of_mat):
    """Entry from Python for a matrix and a vector (1-D ``vec`` and ``c``), ``mat`` with
    contiguous rows: c = mat @ vec (``rows_of_mat``, row dots) or c = vec @ mat (GEMV rows)."""
    origin = 0
    rule = row_dots_rule(gemv, lane_sums)
    size = mat.itemsize
    if rows_of_mat:
        dot_rows(rule, mat.shape[0], mat.shape[1], alpha, beta, address(vec), origin, vec.strides[0] // size,
                 address(mat), origin, mat.strides[0] // size, address(c), origin, c.strides[0] // size, kc,
                 address(sums))
    else:
        unit = np.intp(1)  # one row: its row strides are never read
        gemv_rows(rule, unit, mat.shape[1], mat.shape[0], alpha, beta, address(vec), origin, unit,
                  vec.strides[0] // size, address(mat), origin, mat.strides[0] // size, address(c), origin, unit,
                  c.strides[0] // size, kc, address(sums))
