"""Plan and run one product C = alpha*A.B + beta*C on prepared operands.

The plan decides the path (empty, scale-only, blocked), the kernel, the block
sizes and the orientation of the problem; the driver below it only loops.
Operands arrive as 2-D views of one float dtype (a transpose is a view), C does
not overlap A or B; the public API has checked all of that.
"""

from __future__ import annotations

import numpy as np

from . import blocking, dispatch, workspace
from .driver import gemm_entry
from .kernels import Kernel

_block_sizes: dict[tuple[str, str], blocking.BlockSizes] = {}


def block_sizes(kernel: Kernel, dtype: np.dtype) -> blocking.BlockSizes:
    """Block sizes in force for this kernel and dtype."""
    key = (kernel.name, np.dtype(dtype).name)
    sizes = _block_sizes.get(key)
    if sizes is None:
        sizes = _block_sizes[key] = blocking.default(kernel, dtype)
    return sizes


def set_block_sizes(kernel: Kernel, dtype: np.dtype, sizes: blocking.BlockSizes | None) -> None:
    """Override (or, with None, reset) the block sizes of one kernel and dtype."""
    key = (kernel.name, np.dtype(dtype).name)
    if sizes is None:
        _block_sizes.pop(key, None)
        return
    sizes.check(kernel.mr(), kernel.nr(dtype))
    _block_sizes[key] = sizes


def _element_strides(x: np.ndarray) -> tuple[int, int]:
    size = x.itemsize
    return x.strides[0] // size, x.strides[1] // size


def _scale(c: np.ndarray, beta: float) -> None:
    if beta == 0:
        c[...] = 0  # BLAS rule: C is not read when beta == 0 (NaN must not leak)
    elif beta != 1:
        np.multiply(c, beta, out=c)


def run(alpha: float, a: np.ndarray, b: np.ndarray, beta: float, c: np.ndarray) -> None:
    """C = alpha*A.B + beta*C in place; A (m, k), B (k, n), C (m, n), one dtype."""
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0:
        return
    if k == 0 or alpha == 0:
        _scale(c, beta)
        return
    rs_c, cs_c = _element_strides(c)
    if cs_c != 1 and (rs_c == 1 or n == 1):
        # The kernel writes rows of C with vector stores: compute C^T = B^T A^T,
        # whose rows are C's contiguous columns (BLIS does the same).
        a, b, c = b.T, a.T, c.T
        m, n = n, m
        rs_c, cs_c = cs_c, rs_c
    dtype = c.dtype
    kernel = dispatch.current()
    sizes = block_sizes(kernel, dtype)
    mr, nr = kernel.mr(), kernel.nr(dtype)
    ws = workspace.get(dtype, sizes, mr, nr)
    scalar = dtype.type
    gemm_entry(
        kernel.shape, m, n, k, scalar(alpha), scalar(beta),
        a.ctypes.data, *_element_strides(a),
        b.ctypes.data, *_element_strides(b),
        c.ctypes.data, rs_c, cs_c,
        sizes.mc, sizes.nc, sizes.kc, ws.abuf, ws.bbuf, ws.scratch,
    )
