"""The graph of a smallgemm product on Dask: per output block, a chain of tasks in k.

Output block (batch..., i, j) is the chain of tasks ``(chain, batch..., i, j, 0)``,
``(chain, ..., 1)``, ... one per k-chunk in increasing order, each depending on
the one before and on the a-block (batch..., i, kk) and b-block (batch..., kk, j)
it multiplies (``tasks``).  No tree reduction: the order of every element's FMA
chain is the graph's, whatever the scheduler, the workers or the order in which
tasks complete.
"""

from __future__ import annotations

import itertools

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from . import tasks


def matching(a: da.Array, b: da.Array) -> tuple[da.Array, da.Array]:
    """``a`` (batch..., m, k) and ``b`` (batch..., k, n), both of ndim dimensions, with the
    same chunks along k and along every batch dimension they share at a size above 1.

    Where they differ, the operand with fewer elements is rechunked to the other's
    chunks (``b`` on a tie): a rechunk moves the smaller operand's data once.
    """
    batch = a.ndim - 2
    shared = [d for d in range(batch) if a.shape[d] == b.shape[d] != 1 and a.chunks[d] != b.chunks[d]]
    if a.chunks[-1] == b.chunks[-2] and not shared:
        return a, b
    if a.size < b.size:
        chunks = {d: b.chunks[d] for d in shared}
        chunks[batch + 1] = b.chunks[-2]
        return a.rechunk(chunks), b
    chunks = {d: a.chunks[d] for d in shared}
    chunks[batch] = a.chunks[-1]
    return a, b.rechunk(chunks)


def _block_index(x: da.Array, at: tuple[int, ...], out_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The index of ``x``'s block along the batch dimensions of output block ``at``: 0 where
    ``x`` has size 1 and is broadcast."""
    return tuple(0 if x.shape[d] != out_shape[d] else at[d] for d in range(len(at)))


def chain_product(
    a: da.Array,
    b: da.Array,
    dtype: np.dtype,
    alpha: float = 1.0,
    beta: float = 0.0,
    c: da.Array | None = None,
) -> da.Array:
    """alpha * a @ b + beta * c by smallgemm's exact rule, block by block.

    ``a`` (batch..., m, k) and ``b`` (batch..., k, n) have the same number of
    dimensions (size-1 batch dimensions broadcast) and ``matching`` chunks; ``c``
    (2-D only) has the output's shape.  alpha != 0: with nothing to multiply
    (alpha == 0, or k == 0 in ``gemm``) smallgemm's C is beta*C0, which ``gemm``
    builds without a product.
    """
    batch = a.ndim - 2
    batch_shape = tuple(max(a.shape[d], b.shape[d]) for d in range(batch))
    shape = (*batch_shape, a.shape[-2], b.shape[-1])
    batch_chunks = tuple(a.chunks[d] if a.shape[d] == batch_shape[d] else b.chunks[d] for d in range(batch))
    chunks = (*batch_chunks, a.chunks[-2], b.chunks[-1])
    continued = alpha == 1 and beta == 1
    scaled = not continued and (alpha != 1 or beta != 0)
    # astype: a no-op for c of dtype
    c = c.astype(dtype).rechunk(chunks) if c is not None and (continued or beta != 0) else None

    token = tokenize(a, b, c, dtype, alpha, beta)
    name = f"smallgemm-matmul-{token}"
    chain = f"smallgemm-chain-{token}"
    k_chunks = len(a.chunks[-1])
    layer = {}
    for at in itertools.product(*(range(len(sizes)) for sizes in chunks)):
        out_batch, (i, j) = at[:batch], at[batch:]
        a_at, b_at = _block_index(a, out_batch, shape), _block_index(b, out_batch, shape)
        previous = None
        for kk in range(k_chunks):
            a_key, b_key = (a.name, *a_at, i, kk), (b.name, *b_at, kk, j)
            key = (name, *at) if kk == k_chunks - 1 and not scaled else (chain, *at, kk)
            if kk > 0:
                layer[key] = (tasks.step, previous, a_key, b_key)
            elif continued:
                layer[key] = (tasks.start_from, (c.name, *at), a_key, b_key, dtype)
            else:
                layer[key] = (tasks.start, a_key, b_key, dtype)
            previous = key
        if scaled:
            layer[(name, *at)] = (tasks.finish, previous, alpha, beta, None if beta == 0 else (c.name, *at))
    dependencies = [a, b] if c is None else [a, b, c]
    graph = HighLevelGraph.from_collections(name, layer, dependencies=dependencies)
    return da.Array(graph, name, chunks, dtype=dtype, meta=np.empty((0,) * len(shape), dtype))
