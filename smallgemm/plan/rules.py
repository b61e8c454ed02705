"""The plan's fit rules: which products skip packing, turn over, or use threads.

Pure functions of a product and a kernel's configuration, read by the strategy
table (``strategies``); the configuration and block sizes in force are
``in_force``'s.  Operands arrive as 2-D views of one float dtype (a transpose is
a view), C does not overlap A or B; the public API has checked all of that.
"""

from __future__ import annotations

import numpy as np

from ..drivers.batched import stack_shared_out
from ..drivers.unpacked import L1_SET_PERIOD_BYTES, narrow_turns
from ..kernels import Kernel, KernelConfig
from ..kernels.shared import TASKS_PER_WORKER

# Rows this many bytes apart share L1 sets (``unpacked.L1_SET_PERIOD_BYTES``): the
# 14 rows of A a direct tile reads at once then evict each other (float32
# 128x128x1024, A's rows 4 KiB apart: unpacked / blocked 1.21).
ALIASED_ROW_BYTES = L1_SET_PERIOD_BYTES
# Depths whose block sizes a prepared state remembers (``Prepared.sizes_for_depth``).
DEPTHS_REMEMBERED = 64


def turns_narrow(config: KernelConfig, m: int, n: int, a: np.ndarray, narrow_cols: int) -> bool:
    """Whether a C at most half as wide as the narrow tile is computed turned over.

    With 2-8 float32 columns (2-4 float64) the narrow tile computes 16 (8)
    lanes for each row; turned over (C^T = B^T A^T), the product is a few rows
    (n) times A^T, whose columns are A's contiguous rows: the stream packs
    them a strip at a time with in-register transposes (``x @ W.T``) and its
    few-rows tile computes no padding for 4 rows.  On AVX-512, one thread, turned
    over ran float32 n = 2-4 1.10-1.6x as fast as the narrow tile, but lost on a small
    or shallow A (``1000x4x8`` 0.47x) and on wider C (float32 n = 12, float64
    n = 6-8; docs/performance.md).  A needs more than
    ``few_rows_max`` rows (they become the turned columns), ``turned_narrow_min_depth``
    columns and ``turned_narrow_min_a`` elements (float64: 2^17, where it won).  The rule of
    the compiled small ways in too (``unpacked.narrow_turns``, whose source this runs).
    """
    size = a.itemsize
    return narrow_turns.py_func(
        m,
        n,
        a.shape[1],
        a.strides[1] // size,
        narrow_cols,
        config.few_rows_max,
        config.turned_narrow_min_depth,
        config.turned_narrow_min_a.of(size),
    )


def turned_few_rows(kernel: Kernel, config: KernelConfig, dtype: np.dtype) -> tuple[int, ...]:
    """The few rows (m) of ``x @ W.T`` computed turned over on ``kernel`` (``turns_few_rows``).

    Float32: as many as one strip of the narrow or the main tile holds; other m leave
    lanes of the strip empty and lose to the transposing stream.  Float64: any m from 2
    to two main strips, whose stream is the slower one (AVX2, one thread, W [2048,512]:
    float64 m = 2 346 µs turned over against 500 streamed, m = 24 1291 against 1566, but
    m = 32 lost; the portable kernel alike; docs/performance.md).
    """
    if not config.turned_few_rows:
        return ()
    narrow, main = kernel.narrow.cols(dtype.itemsize), kernel.nr(dtype)
    if dtype.itemsize == 8:
        return tuple(range(2, 2 * main + 1))
    return (narrow, main)


def turns_few_rows(config: KernelConfig, a: np.ndarray, b: np.ndarray, turned_rows: tuple[int, ...]) -> bool:
    """Whether a few-rows product with B's columns contiguous (``x @ W.T``, W stored
    [N, K]) is computed turned over: C^T = W x^T, x^T copied to contiguous rows.

    The few-rows stream packs W a strip at a time with in-register transposes.
    Turned over, W's contiguous rows are the A of the unpacked driver, read in
    place, and x^T is a B a tile strip or two wide, where m is in ``turned_rows``
    (``turned_few_rows``): no transpose, one broadcast element of W per row of the
    tile and step.  Float32 m that leave lanes of a strip empty lose (m = 4 and 12
    on the AVX2 kernel, below); W must have more than ``transposed_few_rows_max`` rows.  Each
    element is the same chain of FMAs either way: the same bits.
    AVX2 (strips of 8 and 16 float32, 4 and 8 float64), one thread, W [2048,512]:
    float32 m = 8 252 µs turned over against 354 streamed, but m = 4, 12 and 32 lose;
    the portable kernel gains alike (docs/performance.md).
    """
    m, n = a.shape[0], b.shape[1]
    size = b.itemsize
    return (
        m in turned_rows
        and m <= config.transposed_few_rows_max < n
        and b.strides[0] == size
        and b.strides[1] != size
    )


def swaps(config: KernelConfig, a: np.ndarray, b: np.ndarray, c: np.ndarray, narrow_cols: int) -> bool:
    """Whether the product is computed swapped, C^T = B^T A^T: the way the kernels read it best.

    The kernel writes rows of C with vector stores: for a C whose columns are
    contiguous, compute C^T = B^T A^T instead (BLIS does the same).  And a C
    with few columns from an A stored transposed (``x.T @ g``, the weight
    gradient of a small output layer) is a few-rows product turned over: its
    rows of B^T = x are contiguous and stream, where the tiles of the
    untransposed problem walk down A one row stride per k
    (``x.T @ g``, x [256,2048], g [256,10], one thread: ~3x faster turned over);
    so is a C narrower than half the narrow tile (``turns_narrow``).  Each
    element is the same chain of FMAs either way (a product does not depend
    on its operands' order), so the bits do not change.
    """
    size = c.itemsize
    if c.strides[1] != size and c.strides[0] == size:
        return True
    m, n = c.shape
    if n <= config.few_rows_max < m and a.strides[0] == size and a.strides[1] != size:
        return True
    return turns_narrow(config, m, n, a, narrow_cols)


def chain_on_tiles(config: KernelConfig, m: int, n: int, k: int, b: np.ndarray) -> bool:
    """Whether gemm's continued chain (alpha == beta == 1) runs on the direct tiles, which
    start each element's chain from C (``unpacked.chain_tile_loops``): B's rows contiguous
    (or one column) and up to ``unpacked_max_volume`` multiply-adds, as on the compiled small
    way in; a longer chain takes the blocked loops, and their threads."""
    size = b.itemsize
    return (n == 1 or b.strides[1] == size) and m * n * k <= config.unpacked_max_volume.of(size)


def use_unpacked(
    config: KernelConfig,
    m: int,
    n: int,
    k: int,
    a: np.ndarray,
    b: np.ndarray,
    narrow_cols: int,
    kc: int,
    one_thread_volume: int,
) -> bool:
    """Unpacked when packing B whole costs more than it saves.

    With B's rows contiguous: small products, few rows, or n within the narrow
    tile (a packed tile would mostly compute padding); on one thread, mid-size
    products too, up to ``one_thread_volume`` multiply-adds
    (the configuration's ``one_thread_unpacked_volume``; 0 on several threads).  With B's columns contiguous
    (``x @ W.T``): few rows (``transposed_few_rows_max``), B packed on the fly a strip at a
    time.  A matrix with contiguous rows times one column (``W @ x``): row dots.
    """
    size = a.itemsize
    if n == 1 and a.strides[1] == size:
        return True
    if b.strides[1] == size:
        volume = m * n * k
        if volume <= config.unpacked_max_volume.of(size) or m <= config.few_rows_max or n <= narrow_cols:
            return True
        return (
            volume <= one_thread_volume
            and k <= kc
            and a.strides[1] == size
            and a.strides[0] % ALIASED_ROW_BYTES != 0
            and b.strides[0] % ALIASED_ROW_BYTES != 0
        )
    return m <= config.transposed_few_rows_max and b.strides[0] == size


def each_on_all_workers(
    config: KernelConfig, count: int, m: int, n: int, k: int, unpacked: bool, workers: int, dtype: np.dtype
) -> bool:
    """Whether a stack's products should each use every worker, one after the other,
    rather than be shared out whole: for products that would be parallel alone (the
    thresholds of ``run``) and too few to share out evenly (two on three workers,
    three on two: [3,4,4096] @ [3,4096,4096] on two threads, 10.7 ms shared out, 8.2
    as lone products)."""
    return (
        worth_threads(config, m, n, k, unpacked, dtype)
        and count < TASKS_PER_WORKER * workers
        and count % workers != 0
    )


def stack_worth_threads(config: KernelConfig, count: int, m: int, n: int, k: int, dtype: np.dtype) -> bool:
    """Whether a stack of ``count`` products is worth sharing out whole between threads: the
    compiled small way in's rule (``batched.stack_shared_out``), its source run as Python, on
    the kernel's ``stack_product_overhead`` and ``parallel_min_stack_volume``."""
    size = dtype.itemsize
    return stack_shared_out.py_func(
        count,
        m * n * k,
        config.stack_product_overhead.of(size),
        config.parallel_min_stack_volume.of(size),
    )


def worth_threads(
    config: KernelConfig, m: int, n: int, k: int, unpacked: bool, dtype: np.dtype, row_stream: bool = False
) -> bool:
    """Whether one product is worth splitting between threads: enough multiply-adds, or
    (unpacked, memory-bound) enough to stream: B, or A when B is one column (``W @ x``);
    ``row_stream``: one row times a B with contiguous rows, from ``parallel_min_row_stream``."""
    streamed = k * (m if n == 1 else n)
    min_stream = (config.parallel_min_row_stream if row_stream else config.parallel_min_stream).of(
        dtype.itemsize
    )
    return m * n * k >= config.parallel_min_volume.of(dtype.itemsize) or (unpacked and streamed >= min_stream)
