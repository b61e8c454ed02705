"""A whole product in compiled code with nothing around it: the core of ``smallgemm.njit``.

``standalone_product`` computes C = alpha*A.B + beta*C on the caller's thread with the
blocked loops (``blocked.gemm_serial``) and the PRODUCT table's rules for the scalars
(``plan.strategies``), so that every element is the FMA chain of every other path
(docs/design.md, section 4):

- C empty: nothing; nothing to multiply (k == 0 or alpha == 0): C = beta*C, C not read
  when beta == 0 ("scale only");
- alpha == beta == 1: each chain goes on from C ("continued chain"; ``blocked.block_merge``);
- beta kept (not 0) and k longer than one KC block: the chains into a buffer first, then
  C = fma(alpha, s, beta*C0) (``strategies.in_two_steps``, ``blocked.scale_add_entry``);
- a C that may overlap A or B: computed into a copy of C, then copied back.

The scalars' decisions are taken on the caller's values (``alpha64``, ``beta64``: float64,
as the Python API takes them on Python floats), the arithmetic on the dtype's (``alpha``,
``beta``).  The workspace is one ``np.empty`` per call, sized to the product and its
blocks (not to the block sizes): a compiled caller keeps no state between calls, and
concurrent calls (a ``prange`` body) share nothing.  Operands are pointers to element
[0, 0] with signed strides in elements: one compiled specialisation per (kernel, dtype)
serves every layout.
"""

import numpy as np
from numba import types
from numba.extending import overload

from ..simd import (
    address,
    advance,
    elements_to_line_boundary,
    multiply_add,
    one_of,
    tile_cols,
    tile_rows,
    zero_of,
)
from ..simd.records import Workspace, matrix, product
from ..simd.subroutine import subroutine
from .blocked import gemm_serial

# Elements left before each workspace region so that it starts on a 64-byte line.
_LINE_ELEMENTS = 16


def _empty_of(count, ptr):
    """A new 1-D array of ``count`` elements of ``ptr``'s element type."""


@overload(_empty_of)
def _empty_of_typed(count, ptr):
    if isinstance(ptr, types.CPointer) and ptr.dtype == types.float32:
        return lambda count, ptr: np.empty(count, np.float32)
    if isinstance(ptr, types.CPointer) and ptr.dtype == types.float64:
        return lambda count, ptr: np.empty(count, np.float64)
    return None


@subroutine(inline=True)
def _region(shape, work, at, count):
    """(a region of ``count`` elements at or after ``at`` starting on a line, the element after it)."""
    start = at + elements_to_line_boundary(shape, work, at)
    return advance(work, start), start + count


@subroutine
def _scale(c, rs_c, cs_c, m, n, beta64, beta):
    """C = beta*C; zeros when beta == 0 (C never read: NaN does not leak), untouched when 1."""
    if beta64 == 1:
        return
    zero = zero_of(c)
    for i in range(m):
        for j in range(n):
            at = i * rs_c + j * cs_c
            c[at] = zero if beta64 == 0 else beta * c[at]


@subroutine
def _copy(src, rs_s, cs_s, dst, rs_d, cs_d, m, n):
    for i in range(m):
        for j in range(n):
            dst[i * rs_d + j * cs_d] = src[i * rs_s + j * cs_s]


@subroutine
def standalone_product(shape, alpha64, beta64, problem, a, b, c, c_apart, blocks):
    """C = alpha*A.B + beta*C (``problem``: a ``Product``) for A (m x k), B (k x n), C (m x n),
    ``Matrix`` records at offset 0; ``c_apart``: C overlaps neither A nor B.  ``blocks``: the
    ``Blocks``, MC a multiple of MR and NC of NR (see the module docstring)."""
    m, n, k, alpha, beta = problem
    mc, nc, kc = blocks
    if m == 0 or n == 0:
        return
    if k == 0 or alpha64 == 0:
        _scale(c.data, c.rs, c.cs, m, n, beta64, beta)  # A and B not read: in place even if C overlaps them
        return
    two_steps = beta64 != 0 and not (alpha64 == 1 and beta64 == 1) and k > kc
    mr, nr = tile_rows(shape), tile_cols(shape, c.data)
    depth = min(k, kc)
    rows = -(-min(m, mc) // mr) * mr
    cols = -(-min(n, nc) // nr) * nr
    copies = (1 if two_steps else 0) + (0 if c_apart else 1)
    space = _empty_of((rows + cols) * depth + mr * nr + copies * m * n + 4 * _LINE_ELEMENTS, c.data)
    w = address(space)
    abuf, at = _region(shape, w, 0, rows * depth)
    bbuf, at = _region(shape, w, at, cols * depth)
    scratch, at = _region(shape, w, at, mr * nr)
    work = Workspace(abuf, bbuf, scratch, scratch)  # no stream's sums: the blocked loops only
    target = c
    if not c_apart:
        copy_at, at = _region(shape, w, at, m * n)
        target = matrix(copy_at, 0, n, 1)
        if beta64 != 0:
            _copy(c.data, c.rs, c.cs, target.data, target.rs, target.cs, m, n)
    if two_steps:
        sums, at = _region(shape, w, at, m * n)
        gemm_serial(
            shape,
            product(m, n, k, one_of(c.data), zero_of(c.data)),
            a,
            b,
            matrix(sums, 0, n, 1),
            blocks,
            work,
            False,
        )
        for i in range(m):
            for j in range(n):
                at = i * target.rs + j * target.cs
                target.data[at] = multiply_add(shape, alpha, sums[i * n + j], beta * target.data[at])
    else:
        gemm_serial(shape, problem, a, b, target, blocks, work, False)
    if not c_apart:
        _copy(target.data, target.rs, target.cs, c.data, c.rs, c.cs, m, n)
