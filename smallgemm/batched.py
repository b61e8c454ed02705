"""Stacks of products with one shape: the batch loop runs in compiled code.

Each matrix of a stack is addressed by an element offset from the first one
(``offsets_*``, from NumPy broadcasting, computed by the caller), so
broadcast batch dimensions cost nothing and no operand is copied.  Every
product is computed exactly as a lone call would compute it.
"""

from numba import njit

from .driver import gemm_serial
from .simd import address
from .unpacked import gemm_unpacked_stack


@njit(cache=True)
def batch_entry(
    shape, narrow, few, gemv, resident, alpha, beta, a, b, c, offsets_a, offsets_b, offsets_c, unpacked, mc, nc, kc, abuf, bbuf, scratch,
    sums,
):
    """C[t] = alpha*A[t].B[t] + beta*C[t] for every t; a, b, c are the first matrices."""
    size = a.itemsize
    m, k = a.shape
    n = b.shape[1]
    rs_a, cs_a = a.strides[0] // size, a.strides[1] // size
    rs_b, cs_b = b.strides[0] // size, b.strides[1] // size
    rs_c, cs_c = c.strides[0] // size, c.strides[1] // size
    pa, pb, pc = address(a), address(b), address(c)
    if unpacked:
        gemm_unpacked_stack(
            shape, narrow, few, gemv, resident, m, n, k, alpha, beta, pa, offsets_a, rs_a, cs_a,
            pb, offsets_b, rs_b, cs_b, pc, offsets_c, rs_c, cs_c, kc, address(scratch), address(sums),
        )
        return
    for t in range(offsets_c.shape[0]):
        gemm_serial(
            shape, m, n, k, alpha, beta, pa, offsets_a[t], rs_a, cs_a, pb, offsets_b[t], rs_b, cs_b,
            pc, offsets_c[t], rs_c, cs_c, mc, nc, kc, address(abuf), address(bbuf), address(scratch), False,
        )
