"""Run a product on the entry a strategy names: the serial and parallel runners.

Each runner takes a thread's prepared state (``prepared``) and the operands the
strategy table (``strategies``) placed, fetches the workspace for the worker count
and calls one compiled entry (``entries``).  A parallel runner runs only while no
other parallel product does (``in_parallel``); the caller then runs the serial one.
"""

from __future__ import annotations

import threading

import numpy as np

from ..drivers.parallel import NO_LOG
from ..kernels import Kernel
from ..machine import threads
from . import blocking, entries, in_force, packed_layout, prepared, warmup, workspace

# One parallel product at a time: Numba's workqueue layer cannot launch two at
# once, and two products each using every core would oversubscribe them.  A
# call that finds the workers busy runs on its own thread (same bits).
_parallel_lock = threading.Lock()


def scale(c: np.ndarray, beta: float) -> None:
    if beta == 0:
        c[...] = 0  # BLAS rule: C is not read when beta == 0 (NaN must not leak)
    elif beta != 1:
        np.multiply(c, beta, out=c)


def scale_add(prep, alpha: float, sums: np.ndarray, beta: float, c: np.ndarray) -> None:
    """C = fma(alpha, sums, beta*C) per element, with the kernel's multiply-add."""
    entries.SCALE_ADD.get(prep.kernel, prep.dtype)(prep.shape, prep.scalar(alpha), sums, prep.scalar(beta), c)


def in_parallel(run_parallel_path, *args) -> bool:
    """Run ``run_parallel_path(*args)`` if no other parallel product is running; True if it ran."""
    if not _parallel_lock.acquire(blocking=False):
        return False
    try:
        run_parallel_path(*args)
    finally:
        _parallel_lock.release()
    return True


def run_unpacked(prep, alpha, beta, a, b, c) -> None:
    """The unpacked product on the caller's thread."""
    prep.unpacked(a, b, c, float(prep.scalar(alpha)), float(prep.scalar(beta)))


def run_blocked(prep, alpha, beta, a, b, c) -> None:
    """The blocked product (five loops, A and B packed) on the caller's thread."""
    sizes = prep.sizes_for_depth(a.shape[1])
    prep.blocked(prep.shape, prep.scalar(alpha), prep.scalar(beta), a, b, c, sizes.blocks, prep.workspace)


def run_unpacked_parallel(prep, kernel, dtype, alpha, beta, a, b, c, workers) -> None:
    """The unpacked product on ``workers`` workers, with split-K when columns are too few."""
    m, k = a.shape
    n = b.shape[1]
    kc = prep.chain_sizes.kc
    ws = workspace.get(dtype, prep.sizes, kernel.mr(), kernel.nr(dtype), workers)
    entries.UNPACKED_PARALLEL.get(kernel, dtype)(
        prep.tiles,
        prep.scalar(alpha),
        prep.scalar(beta),
        a,
        b,
        c,
        kc,
        workers,
        ws,
        _split_k_room(prep, m, n, k, kc),
    )


# An empty split-K buffer per dtype char, for calls that have none to give.
_NO_PARTIAL = {"f": np.empty(0, np.float32), "d": np.empty(0, np.float64)}


def _split_k_room(prep, m: int, n: int, k: int, kc: int) -> np.ndarray:
    """Room for the split-K partial sums of an unpacked product (one slice per KC block),
    or an empty array when k is one block or the slices would be too large."""
    k_blocks = -(-k // kc)
    elements = k_blocks * m * n
    return np.empty(
        elements if k_blocks > 1 and elements <= prep.config.split_k_max_elements else 0, prep.dtype
    )


def run_parallel(prep, kernel, dtype, alpha, beta, a, b, c, workers, log_b=NO_LOG, log_rows=NO_LOG):
    """The blocked product on ``workers`` workers (``log_*``: the tests' task-recording hook)."""
    ws = workspace.get(dtype, prep.sizes, kernel.mr(), kernel.nr(dtype), workers)
    sizes = prep.sizes_for_depth(a.shape[1])
    entries.PARALLEL.get(kernel, dtype)(
        prep.shape,
        prep.scalar(alpha),
        prep.scalar(beta),
        a,
        b,
        c,
        sizes.blocks,
        prep.shared_rows,
        workers,
        ws,
        (log_b, log_rows),
    )


def run_batch_serial(prep, a, b, c, offsets, unpacked, sizes) -> None:
    """A stack's products one after the other on the caller's thread."""
    prep.batched(prep.tiles, a, b, c, offsets, unpacked, sizes.blocks, prep.workspace)


def run_batch_tasks(prep, kernel, dtype, a, b, c, offsets, unpacked, sizes, workers) -> None:
    """A stack on ``workers`` workers, each product computed whole by the worker that takes it."""
    ws = workspace.get(dtype, prep.sizes, kernel.mr(), kernel.nr(dtype), workers, private_b=True)
    entries.BATCH_TASKS.get(kernel, dtype)(prep.tiles, a, b, c, offsets, unpacked, sizes.blocks, workers, ws)


def run_batch_each_parallel(prep, kernel, dtype, a, b, c, offsets, unpacked, sizes, workers) -> None:
    """A stack's products, each in turn on ``workers`` workers (the parallel driver a lone
    product takes, with its split-K room when unpacked)."""
    ws = workspace.get(dtype, prep.sizes, kernel.mr(), kernel.nr(dtype), workers)
    partial = (
        _split_k_room(prep, a.shape[0], b.shape[1], a.shape[1], sizes.kc)
        if unpacked
        else _NO_PARTIAL[dtype.char]
    )
    entries.BATCH_EACH_PARALLEL.get(kernel, dtype)(
        prep.tiles,
        a,
        b,
        c,
        offsets,
        unpacked,
        sizes.blocks,
        prep.shared_rows,
        workers,
        ws,
        partial,
        (NO_LOG, NO_LOG),
    )


def run_small(a: np.ndarray, b: np.ndarray, c: np.ndarray, dtype: np.dtype) -> int:
    """C = A.B if it is a small product, deciding so in compiled code (matmul's way in for
    small matrices: ``unpacked.unpacked_call`` with ``decide``).  A, B and C are arrays of
    one float dtype, each a matrix, a vector or a stack that folds (``unpacked.matrix_fields``),
    as matmul's result has them (nothing else is checked here: the routine would read another
    dtype's memory as this one's).  Returns SMALL_DONE, SMALL_PLANNED (a
    valid product for ``run``) or SMALL_REFUSED (for the caller's general path, which
    says what is wrong: mismatched shapes or part-element strides; or, before any product
    has needed the unpacked entry, any product: see ``FirstSmall``).  ``dtype``: theirs."""
    # current_prepared's fast path, inline: a call is ~0.06 us of a ~1 us product.
    prep = prepared.per_thread.last
    if prep.given_at != in_force.generation or prep.dtype is not dtype:
        prep = prepared.current_prepared(dtype)
    return prep.small(a, b, c, 1.0, 0.0)


def run_small_scaled(
    alpha: float, a: np.ndarray, b: np.ndarray, beta: float, c: np.ndarray, dtype: np.dtype
) -> int:
    """C = alpha*A.B + beta*C if it is a small product: ``run_small`` with alpha and beta
    (gemm's way in for small matrices; beta == 0 never reads C).  Same arguments and
    answers as ``run_small``."""
    prep = prepared.current_prepared(dtype)
    return prep.small(a, b, c, float(prep.scalar(alpha)), float(prep.scalar(beta)))


def run_small_made(alpha: float, a: np.ndarray, b: np.ndarray, dtype: np.dtype):
    """alpha*A.B into a new array that the compiled way in makes, if it is a small product
    (gemm's way in without c): A and B matrices of one float dtype, ``alpha`` a Python float.
    Returns the array, or SMALL_PLANNED or SMALL_REFUSED as ``run_small`` answers them, nothing
    made.  ``dtype``: theirs."""
    prep = prepared.per_thread.last
    if prep.given_at != in_force.generation or prep.dtype is not dtype:
        prep = prepared.current_prepared(dtype)
    return prep.small(a, b, alpha)


def run_small_stack(a: np.ndarray, b: np.ndarray, c: np.ndarray, dtype: np.dtype) -> int:
    """C[t] = A[t].B[t] for two stacks along one batch axis if each product is small and the
    stack not worth the threads, deciding so in compiled code (``batched.stack_call``).
    a and b: 3-D arrays of one float dtype (nothing else is checked here).  Returns
    SMALL_DONE, SMALL_PLANNED with nothing computed (a valid stack for ``strategies.compute``), or
    SMALL_REFUSED with nothing computed (for the caller's general path: another type than
    ``ndarray``, stacks whose shapes differ, a C of another shape, part-element strides or
    overlapping an operand; or, before any product has needed the batch entry or the
    unpacked one, any stack: see ``FirstSmall``).  ``dtype``: theirs."""
    prep = prepared.current_prepared(dtype)
    return prep.small_stack(a, b, c, threads.workers() > 1)


def pack_operand(kernel: Kernel, b: np.ndarray, sizes: blocking.BlockSizes, data: np.ndarray) -> None:
    """Pack all of ``b`` (k x n, one float dtype, whole-element strides) into ``data``
    in the layout the prepacked drivers read (``blocked.packed_slice``): in NumPy while the
    compiled packing compiles in another process (``warmup``), the same elements."""
    if not warmup.fetchable(entries.PACK, kernel, b.dtype):
        packed_layout.pack_into(b, kernel.nr(b.dtype), sizes.kc, sizes.nc, data)
        return
    entries.PACK.get(kernel, b.dtype)(kernel.shape, b, sizes.nc, sizes.kc, data)


def run_prepacked(prep, alpha, a, packed, beta, c, few) -> None:
    """The prepacked product on the caller's thread: for ``few`` rows (fewer than MR) the
    packed panels streamed past the rows, else the blocked loops with B already packed."""
    kernel, ws, sizes = prep.kernel, prep.workspace, prep.sizes
    n = packed.shape[1]
    if few:
        entries.PREPACKED_ROWS.get(kernel, prep.dtype)(
            kernel.panel_rows(),
            prep.scalar(alpha),
            prep.scalar(beta),
            a,
            packed.data,
            n,
            c,
            sizes.nc,
            sizes.kc,
            kernel.nr(prep.dtype),
            ws.scratch,
        )
        return
    sizes = prep.sizes_for_depth(a.shape[1])
    entries.PREPACKED.get(kernel, prep.dtype)(
        prep.shape, prep.scalar(alpha), prep.scalar(beta), a, packed.data, n, c, sizes.blocks, ws
    )


def run_prepacked_parallel(prep, kernel, dtype, alpha, a, packed, beta, c, workers, few) -> None:
    """The prepacked product on ``workers`` workers: groups of B panels as tasks for
    ``few`` rows, the row-block tasks of the parallel driver otherwise."""
    sizes = prep.sizes
    n = packed.shape[1]
    ws = workspace.get(dtype, sizes, kernel.mr(), kernel.nr(dtype), workers)
    if few:
        entries.PREPACKED_ROWS_PARALLEL.get(kernel, dtype)(
            kernel.panel_rows(),
            prep.scalar(alpha),
            prep.scalar(beta),
            a,
            packed.data,
            n,
            c,
            sizes.nc,
            sizes.kc,
            kernel.nr(dtype),
            workers,
            ws,
        )
        return
    sizes = prep.sizes_for_depth(a.shape[1])
    entries.PREPACKED_PARALLEL.get(kernel, dtype)(
        prep.shape, prep.scalar(alpha), prep.scalar(beta), a, packed.data, n, c, sizes.blocks, workers, ws
    )
