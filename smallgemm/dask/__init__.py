"""smallgemm on Dask's schedulers: ``matmul`` and ``gemm`` for ``dask.array`` arrays.

Each output block is computed by smallgemm from the matching row blocks of ``a``
and column blocks of ``b``, one task per k-chunk in increasing k, each task
continuing every element's chain of fused multiply-adds where the one before
stopped (``gemm(1.0, a_blk, b_blk, beta=1.0, c=partial, overwrite_c=True)``).
So the result has the bits of ``smallgemm.matmul`` / ``smallgemm.gemm`` on the
whole arrays on one machine, for any chunking, scheduler, number of workers and
order of completion.  Dask's own schedulers run the graph, local or
``distributed``; this module is not imported by ``import smallgemm``.

Memory: a task holds one block of ``a``, one of ``b`` and one of C (its chain's
partial block, written in place by the chain's next task, its only reader).  A block
several chains read is kept by Dask until the last of them has run (``distributed``
spills such blocks to disk beyond a worker's memory target).

Threads: a task's smallgemm product uses smallgemm's own setting where the task is
the only one its process runs at once, and one thread where several run at once
(``task_threads``).  Docs: ``docs/distributed.md``.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
from numpy.typing import ArrayLike

from ..api.gemm import as_scalar, operators
from ..api.matmul import promoted, shape_error
from .graph import chain_product, matching
from .npy import NpyFile
from .tasks import task_threads

__all__ = ["NpyFile", "gemm", "matmul", "task_threads"]

_FAST = (np.dtype(np.float32), np.dtype(np.float64))


def _no_dimensions(a: da.Array, b: da.Array) -> ValueError:
    """NumPy's error for a 0-d operand."""
    return ValueError(
        f"matmul: Input operand {0 if a.ndim == 0 else 1} does not have enough dimensions (has 0, "
        "gufunc core with signature (n?,k),(k,m?)->(n?,m?) requires 1)"
    )


def matmul(a: ArrayLike, b: ArrayLike) -> da.Array:
    """``numpy.matmul(a, b)`` as a ``dask.array.Array``, each block computed by smallgemm.

    NumPy's semantics: 1-D operands are promoted and the added axis removed, batch
    dimensions broadcast, NumPy's result dtype.  Operands that are not Dask arrays
    are wrapped with ``dask.array.asarray``.  Where both dtypes are float32 or
    float64 (``smallgemm.matmul``'s fast path) the result is, bit for bit,
    ``smallgemm.matmul`` of the whole arrays: output block (i, j) of a stack's
    batch block is a chain of tasks, one per k-chunk in increasing k, each holding
    one block of ``a``, one of ``b`` and the partial block of C.  Every other dtype
    goes to ``dask.array.matmul``.

    Chunks: output block (i, j) has a's row chunk i and b's column chunk j.  Where
    the chunks along k (a's last, b's second-to-last dimension), or along a batch
    dimension both have at a size above 1, differ, the operand with fewer elements
    is rechunked to the other's.

    Threads: see ``task_threads``.  Raises ``ValueError`` like ``numpy.matmul`` for
    shapes that do not match.
    """
    a, b = da.asarray(a), da.asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        raise _no_dimensions(a, b)
    if a.dtype not in _FAST or b.dtype not in _FAST:
        return da.matmul(a, b)
    dtype = np.result_type(a.dtype, b.dtype)
    a_shape, b_shape = a.shape, b.shape
    a, b, vector_a, vector_b = promoted(a, b)
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise shape_error(
            a_shape, b_shape, f"batch dimensions {a.shape[:-2]} and {b.shape[:-2]} do not broadcast"
        ) from None
    ndim = max(a.ndim, b.ndim)
    a = a[(np.newaxis,) * (ndim - a.ndim)] if a.ndim < ndim else a
    b = b[(np.newaxis,) * (ndim - b.ndim)] if b.ndim < ndim else b
    product = chain_product(*matching(a, b), dtype)
    if vector_a and vector_b:
        return product[..., 0, 0]
    if vector_a:
        return product[..., 0, :]
    if vector_b:
        return product[..., 0]
    return product


def gemm(
    alpha: float,
    a: ArrayLike,
    b: ArrayLike,
    beta: float = 0.0,
    c: ArrayLike | None = None,
    trans_a: bool = False,
    trans_b: bool = False,
) -> da.Array:
    """``alpha * op(a) @ op(b) + beta * c`` as a ``dask.array.Array``, op(x) being x or x.T.

    ``smallgemm.gemm``'s convention and result, bit for bit: each element's chain
    of fused multiply-adds in increasing k, one task per k-chunk (see ``matmul``),
    then ``C = fma(alpha, s, beta*C0)`` by smallgemm's multiply-add in one task per
    block (``alpha*s`` when beta == 0, and ``c`` is then never read); with
    alpha == beta == 1 each chain goes on from C0 (the continued chain).  The
    result dtype is NumPy's among float32 and float64; other dtypes raise
    ``TypeError``, shapes that do not match ``ValueError``.  ``c`` is rechunked to
    the output's chunks (a's row chunks, b's column chunks, of op(a), op(b)) and
    never modified.  Threads: see ``task_threads``.
    """
    alpha, beta = as_scalar(alpha, "alpha"), as_scalar(beta, "beta")
    a, b = da.asarray(a), da.asarray(b)
    operands = [("a", a), ("b", b)] + ([] if c is None else [("c", c := da.asarray(c))])
    for label, x in operands:
        if x.dtype not in _FAST:
            raise TypeError(f"gemm: {label} has dtype {x.dtype}; only float32 and float64 are supported")
        if x.ndim != 2:
            raise ValueError(f"gemm: {label} must be 2-D, got an array of shape {x.shape}")
    op_a, op_b = operators(a, b, trans_a, trans_b)
    shape = (op_a.shape[0], op_b.shape[1])
    if c is not None and c.shape != shape:
        raise ValueError(
            f"gemm: c has shape {c.shape} but op(a) @ op(b) (op(a) {op_a.shape}, op(b) {op_b.shape}) "
            f"has shape {shape}"
        )
    dtype = np.result_type(*(x.dtype for _, x in operands))
    if c is None:
        beta = 0.0
    op_a, op_b = matching(op_a, op_b)
    chunks = (op_a.chunks[0], op_b.chunks[1])
    if op_a.shape[1] == 0 or alpha == 0:  # nothing to multiply: C = beta*C0, as BLAS does
        if beta == 0:
            return da.zeros(shape, dtype, chunks=chunks)
        c = c.astype(dtype).rechunk(chunks)
        return c if beta == 1 else c * dtype.type(beta)
    return chain_product(op_a, op_b, dtype, alpha, beta, c)
