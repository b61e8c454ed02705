"""The first-use driver: every product as plain FMA chains, in one small function.

The tuned drivers take 0.1-13 s each to compile cold; this one takes about a second,
for every strategy's products (one, a stack, few rows, any strides).  Products are
exact: each element is one chain of fused multiply-adds in increasing k, so this
driver gives the tuned drivers' bits (the exact-products rule), only more slowly
(a quarter to a third of the kernel's peak).  ``plan.warmup`` runs products on it
while the tuned entries compile in another process.

Each product is taken a column panel of B at a time (``PANEL_COLS`` columns, packed
contiguous) and four rows of A at a time, whose sums stay in a small contiguous
buffer: the inner loop is four FMA streams over one row of the panel, which LLVM
vectorises.
"""

import numpy as np
from numba import njit

from ..simd import address, advance, multiply_add
from ..simd.records import Matrix

PANEL_COLS = 256  # B's columns per panel: four rows of sums (4 KiB float32) stay in L1
ROWS = 4  # rows of A per pass over a panel


@njit(cache=True, nogil=True)
def chain_entry(shape, alpha, beta, a, b, c, offsets_a, offsets_b, offsets_c, continue_chain):
    """C[t] = alpha*A[t].B[t] + beta*C[t] for every t, as the tiles merge: C never read when
    beta == 0, C = fma(alpha, s, beta*C) otherwise, and the chain s starting from C
    instead when ``continue_chain`` (gemm with alpha == beta == 1).  a, b, c are the first
    matrices (any strides), ``offsets_*`` each matrix's first element (``[0]`` for one
    product); ``shape``: the kernel's main tile, whose multiply-add is used."""
    m, k = a.shape
    n = c.shape[1]
    size = a.itemsize
    rs_a, cs_a = a.strides[0] // size, a.strides[1] // size
    rs_b, cs_b = b.strides[0] // size, b.strides[1] // size
    rs_c, cs_c = c.strides[0] // size, c.strides[1] // size
    cols = min(n, PANEL_COLS)
    panel = np.empty(k * cols, a.dtype)
    sums = np.empty(ROWS * cols, a.dtype)
    for t in range(len(offsets_c)):
        pa = advance(address(a), offsets_a[t])
        pb = advance(address(b), offsets_b[t])
        pc = advance(address(c), offsets_c[t])
        for j0 in range(0, n, cols):
            width = min(cols, n - j0)
            for p in range(k):
                for j in range(width):
                    panel[p * width + j] = pb[p * rs_b + (j0 + j) * cs_b]
            for i0 in range(0, m, ROWS):
                rows = min(ROWS, m - i0)
                _panel_rows(
                    shape,
                    alpha,
                    beta,
                    Matrix(pa, i0 * rs_a, rs_a, cs_a),
                    panel,
                    sums,
                    Matrix(pc, i0 * rs_c + j0 * cs_c, rs_c, cs_c),
                    rows,
                    width,
                    k,
                    continue_chain,
                )


@njit(cache=True, nogil=True, inline="always")
def _panel_rows(shape, alpha, beta, a, panel, sums, c, rows, width, k, continue_chain):
    """``rows`` rows of C over the panel's ``width`` columns; A and C are ``Matrix`` records from
    the first of those rows and columns."""
    pa, a_off, rs_a, cs_a = a
    pc, c_off, rs_c, cs_c = c
    zero = alpha - alpha
    for r in range(rows):
        for j in range(width):
            sums[r * width + j] = pc[c_off + r * rs_c + j * cs_c] if continue_chain else zero
    for p in range(k):
        row = panel[p * width : (p + 1) * width]
        for r in range(rows):
            ar = pa[a_off + r * rs_a + p * cs_a]
            s = sums[r * width : (r + 1) * width]
            for j in range(width):
                s[j] = multiply_add(shape, ar, row[j], s[j])
    for r in range(rows):
        for j in range(width):
            at = c_off + r * rs_c + j * cs_c
            s = sums[r * width + j]
            if continue_chain or beta == 0:
                pc[at] = alpha * s
            else:
                pc[at] = multiply_add(shape, alpha, s, beta * pc[at])
