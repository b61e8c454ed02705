"""Plan and run one product C = alpha*A.B + beta*C on prepared operands.

The plan decides the path (empty, scale-only, blocked), the kernel, the block
sizes and the orientation of the problem; the driver below it only loops.
Operands arrive as 2-D views of one float dtype (a transpose is a view), C does
not overlap A or B; the public API has checked all of that.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

import numpy as np

from . import blocking, dispatch, threads, workspace
from .batched import batch_each_parallel_entry, batch_entry, batch_tasks_entry, small_stack_entry
from .driver import gemm_entry, pack_entry, prepacked_entry, prepacked_rows_entry
from .entry import Entry
from .kernels import Kernel
from .parallel import (
    NO_LOG,
    TASKS_PER_WORKER,
    parallel_entry,
    prepacked_parallel_entry,
    prepacked_rows_parallel,
    unpacked_parallel_entry,
)
# The answers of run_small, from the unpacked entry that decides (the API reads them here).
from .unpacked import L1_SET_PERIOD_BYTES, SMALL_DONE, SMALL_PLANNED, SMALL_REFUSED, unpacked_entry, vector_entry

_BLOCKED = Entry(
    gemm_entry,
    ("shape", "scalar", "scalar", "matrix", "matrix", "out", "int", "int", "int", "buffer", "buffer", "buffer"),
)
_UNPACKED = Entry(
    unpacked_entry,
    ("shape", "narrow", "few", "gemv", "bool", "resident", "int", "int", "int", "int", "int", "int", "bool",
     "scalar", "scalar", "matrix", "matrix", "out"),
)
_VECTOR = Entry(
    vector_entry, ("gemv", "bool", "scalar", "scalar", "vector", "matrix", "out_vector", "int", "buffer", "bool")
)
_PARALLEL = Entry(
    parallel_entry,
    ("shape", "scalar", "scalar", "matrix", "matrix", "out", "int", "int", "int", "int", "int",
     "buffer", "buffer", "buffer", "counter", "log", "log"),
)
_PACK = Entry(pack_entry, ("shape", "matrix", "int", "int", "buffer"))
_PREPACKED = Entry(
    prepacked_entry,
    ("shape", "scalar", "scalar", "matrix", "buffer", "int", "out", "int", "int", "int", "buffer", "buffer", "buffer"),
)
_PREPACKED_ROWS = Entry(
    prepacked_rows_entry,
    ("panel_rows", "scalar", "scalar", "matrix", "buffer", "int", "out", "int", "int", "int", "buffer"),
)
_PREPACKED_PARALLEL = Entry(
    prepacked_parallel_entry,
    ("shape", "scalar", "scalar", "matrix", "buffer", "int", "out", "int", "int", "int", "int", "buffer", "buffer",
     "counter"),
)
_PREPACKED_ROWS_PARALLEL = Entry(
    prepacked_rows_parallel,
    ("panel_rows", "scalar", "scalar", "matrix", "buffer", "int", "out", "int", "int", "int", "int", "buffer",
     "counter"),
)
_UNPACKED_PARALLEL = Entry(
    unpacked_parallel_entry,
    ("shape", "narrow", "few", "gemv", "bool", "resident", "scalar", "scalar", "scalar", "scalar", "matrix", "matrix",
     "out", "int", "int", "buffer", "buffer", "buffer", "counter"),
)
_BATCHED = Entry(
    batch_entry,
    ("shape", "narrow", "few", "gemv", "bool", "resident", "scalar", "scalar", "matrix", "matrix", "out",
     "offsets", "offsets", "offsets", "bool", "int", "int", "int", "buffer", "buffer", "buffer", "buffer"),
)
_SMALL_STACK = Entry(
    small_stack_entry,
    ("shape", "narrow", "few", "gemv", "bool", "resident", "int", "int", "int", "int", "int", "int", "int",
     "scalar", "scalar", "int", "stack", "stack", "out_stack", "offsets", "offsets", "offsets"),
)
_BATCH_TASKS = Entry(
    batch_tasks_entry,
    ("shape", "narrow", "few", "gemv", "bool", "resident", "scalar", "scalar", "matrix", "matrix", "out",
     "offsets", "offsets", "offsets", "bool", "int", "int", "int", "int", "buffer", "buffer", "buffer", "buffer",
     "counter"),
)
_BATCH_EACH_PARALLEL = Entry(
    batch_each_parallel_entry,
    ("shape", "narrow", "few", "gemv", "bool", "resident", "scalar", "scalar", "scalar", "scalar", "matrix", "matrix",
     "out", "offsets", "offsets", "offsets", "bool", "int", "int", "int", "int", "int", "buffer", "buffer", "buffer",
     "buffer", "buffer", "counter", "log", "log"),
)
# Up to this many multiply-adds (and with unit-stride B rows) packing costs more
# than it saves, per element size (float32, float64): measured through matmul on
# one thread, packing draws even from 128^3 float32 and 112^3 float64.  Both stay below
# PARALLEL_MIN_VOLUME, so that an unpacked product of this kind is never one
# for threads (docs/design.md).
UNPACKED_MAX_VOLUME = {4: 120 * 120 * 120, 8: 96 * 96 * 96}
# On one thread and with the kernels of UNPACKED_ONE_THREAD_KERNELS, products up to
# this many multiply-adds skip packing too, where k is one KC block and the rows of
# A and B are not a multiple of ALIASED_ROW_BYTES apart.  With the narrow and
# few-rows tiles on C's edges (``unpacked.main_tiles``) the direct tiles beat
# packing there (AVX-512, one thread: 0.91-0.98 of the blocked time from 128^3 to
# 384^3, docs/performance.md).  Not on two threads: the blocked driver's row-block
# tasks then win (float32 200^3 1.46); nor with a longer k (float32 128x128x2048
# 1.21, in two KC blocks).
UNPACKED_ONE_THREAD_MAX_VOLUME = {4: 256 * 256 * 256, 8: 256 * 256 * 256}
# The kernels whose direct tiles beat packing at those sizes.  Not the AVX2 ones:
# there packing beats the direct tiles from 128^3 on one thread (docs/performance.md).
UNPACKED_ONE_THREAD_KERNELS = frozenset({"avx512"})
# The kernels on which ``x @ W.T`` with few rows is turned over (``turned_few_rows``,
# ``_turns_few_rows``), where it measured faster.  Not the AVX-512 one: turned over is
# unmeasured there, and its transposing stream leads NumPy 1.95-3.05x at m = 4-16
# (docs/performance.md).
TURNED_FEW_ROWS_KERNELS = frozenset({"avx2", "portable"})
# Rows this many bytes apart share L1 sets (``unpacked.L1_SET_PERIOD_BYTES``): the
# 14 rows of A a direct tile reads at once then evict each other (float32
# 128x128x1024, A's rows 4 KiB apart: unpacked / blocked 1.21; float64 128x128x512
# 1.21, 128x128x768 0.95).
ALIASED_ROW_BYTES = L1_SET_PERIOD_BYTES
# Depths whose block sizes a prepared state remembers (``_Prepared.sizes_for_depth``).
DEPTHS_REMEMBERED = 64
# Below this many multiply-adds a product stays on one thread: starting the
# workers and the barriers cost more than they give.  Per element size, where two
# threads draw about even with one (float32 144^3 1.04-1.06x, float64 112^3 0.98x;
# docs/design.md).
PARALLEL_MIN_VOLUME = {4: 144 * 144 * 144, 8: 112 * 112 * 112}
# A stack of products is shared out between threads from this many multiply-adds
# in all: each worker then takes whole products, with no barrier inside one
# (two threads against one, float32: 1.03x for 100 products of 16^3, 0.88x for 50).
PARALLEL_MIN_STACK_VOLUME = 80 * 80 * 80
# From this many elements of B, an unpacked product (few rows: memory-bound,
# B read once) is worth splitting across threads whatever its multiply-adds:
# each core then streams its share of B (docs/design.md).
PARALLEL_MIN_STREAM = 1 << 18
# Up to this many rows (and with unit-stride B rows) the unpacked driver beats
# packing B whatever the size: each row of B is used by few rows of A
# (docs/performance.md, few rows).
FEW_ROWS_MAX = 32
# Split-K partial sums are kept below this many elements (KC blocks x m x n).
SPLIT_K_MAX_ELEMENTS = 1 << 22
# One parallel product at a time: Numba's workqueue layer cannot launch two at
# once, and two products each using every core would oversubscribe them.  A
# call that finds the workers busy runs on its own thread (same bits).
_parallel_lock = threading.Lock()

# Block sizes in force, by (kernel name, dtype char).
_block_sizes: dict[tuple[str, str], blocking.BlockSizes] = {}
# A tuned configuration is applied once, before block sizes are first read or
# set (an explicit set_block_sizes then wins over it).  The loader is registered
# by the package (smallgemm.tune.record.apply_config): the plan does not reach
# up into the tuner.
_config_loader: Callable[[], None] | None = None
_config_lock = threading.RLock()  # re-entered by the loader's own set_block_sizes
_config_applied = False
_config_loading = False


def set_config_loader(loader: Callable[[], None] | None) -> None:
    """Register the function that applies a tuned configuration before first use."""
    global _config_loader, _config_applied
    with _config_lock:
        _config_loader = loader
        _config_applied = False


def _apply_config_once() -> None:
    global _config_applied, _config_loading
    if _config_applied:
        return
    with _config_lock:  # other threads wait until the configuration is in force
        if _config_applied or _config_loading or _config_loader is None:
            return
        _config_loading = True
        try:
            _config_loader()  # a corrupt file raises here, and again on the next call
            _config_applied = True
        finally:
            _config_loading = False


def block_sizes(kernel: Kernel, dtype: np.dtype) -> blocking.BlockSizes:
    """Block sizes in force for this kernel and dtype (a numpy dtype object)."""
    _apply_config_once()
    key = (kernel.name, dtype.char)
    sizes = _block_sizes.get(key)
    if sizes is None:
        sizes = _block_sizes[key] = blocking.default(kernel, dtype)
    return sizes


_version = 0  # bumped whenever block sizes change: prepared states are rebuilt


# Bumped by every change a call's prepared state depends on: block sizes (with _version),
# the kernel in force or batch invariance (which leave the states valid: switching back
# and forth rebuilds none).  ``current_prepared`` then looks the state up again.
_generation = 0


def _bump_version() -> None:
    global _version, _generation
    _version += 1
    _generation += 1


def _kernel_changed() -> None:
    global _generation
    _generation += 1


dispatch.on_change(_kernel_changed)


def set_block_sizes(kernel: Kernel, dtype: np.dtype, sizes: blocking.BlockSizes | None) -> None:
    """Override (or, with None, reset) the block sizes of one kernel and dtype."""
    _apply_config_once()
    dtype = np.dtype(dtype)
    key = (kernel.name, dtype.char)
    if sizes is None:
        _block_sizes.pop(key, None)
        _bump_version()
        return
    sizes.check(kernel.mr(), kernel.nr(dtype))
    _block_sizes[key] = sizes
    _bump_version()


def _scale(c: np.ndarray, beta: float) -> None:
    if beta == 0:
        c[...] = 0  # BLAS rule: C is not read when beta == 0 (NaN must not leak)
    elif beta != 1:
        np.multiply(c, beta, out=c)


class _FirstUse:
    """Holds a prepared state's slot for an entry until its first call, which compiles (or
    loads) the entry, puts it in the slot (with its first arguments ``bound``) and runs it:
    a first product compiles only what it runs (a first 300x300 float32 matmul on two
    threads, cold cache: 19 s, against 46 s with the four entries fetched at once).  A
    stand-in, not ``__getattr__``, which would slow every attribute read of a small call."""

    __slots__ = ("prepared", "name", "entry", "bound")

    def __init__(self, prepared: _Prepared, name: str, entry: Entry, bound: tuple = ()):
        self.prepared, self.name, self.entry, self.bound = prepared, name, entry, bound

    def __call__(self, *args):
        native = self.entry.get(self.prepared.kernel, self.prepared.dtype)
        if self.bound:
            native = functools.partial(native, *self.bound)
        setattr(self.prepared, self.name, native)
        return native(*args)


class _FirstSmall(_FirstUse):
    """A small-matrix slot (``run_small``, ``run_small_stack``): until a product has needed
    one of the entries ``after`` (compiled or loaded it), it answers ``not_yet``, and the
    caller's general path places the product (~3 us more, once).  Fetching the entry here
    would compile it only to be told that a first large product is not small (a first
    300x300 float32 product, cold cache: 34 s instead of 19)."""

    __slots__ = ("after", "not_yet")

    def __init__(
        self, prepared: _Prepared, name: str, entry: Entry, bound: tuple, after: tuple[Entry, ...], not_yet: int
    ):
        super().__init__(prepared, name, entry, bound)
        self.after, self.not_yet = after, not_yet

    def __call__(self, *args):
        kernel, dtype = self.prepared.kernel, self.prepared.dtype
        if not any(entry.ready(kernel, dtype) for entry in self.after):
            return self.not_yet
        return super().__call__(*args)


class _Prepared:
    """Everything a call needs for one (kernel, dtype), looked up once per thread.

    It binds the limits of the small-matrix way in (UNPACKED_MAX_VOLUME, PARALLEL_MIN_STREAM,
    FEW_ROWS_MAX) when it is built: a change of them takes effect once the states are
    rebuilt (``_bump_version``)."""

    __slots__ = (
        "shape", "gemv", "lane_sums", "tiles", "narrow_cols", "turned_rows", "sizes", "workspace", "blocked",
        "unpacked", "small", "small_scaled", "batched", "small_stack", "vector", "one", "zero", "shared_rows",
        "one_thread_volume", "version", "kernel", "dtype", "depth_sizes",
    )

    def __init__(self, kernel: Kernel, dtype: np.dtype, version: int):
        self.shape = kernel.shape
        self.gemv = kernel.gemv
        self.lane_sums = kernel.gemv.lane_sums  # passed as a bool: it unboxes for nothing
        # The arguments every entry with the unpacked tiles begins with, in order.
        self.tiles = (kernel.shape, kernel.narrow, kernel.few, kernel.gemv, self.lane_sums, kernel.resident)
        self.narrow_cols = kernel.narrow.cols(dtype.itemsize)
        self.turned_rows = turned_few_rows(kernel, dtype)
        self.sizes = block_sizes(kernel, dtype)
        self.workspace = workspace.get(dtype, self.sizes, kernel.mr(), kernel.nr(dtype))
        self.blocked = _FirstUse(self, "blocked", _BLOCKED)
        # The unpacked entry's arguments that do not change from call to call, bound once
        # (the attribute reads cost ~0.14 us of a 16x16 call); the workspace by
        # its addresses, which unbox for nothing (this state keeps it alive).
        fixed = (*self.tiles, self.sizes.kc, self.workspace.scratch.ctypes.data, self.workspace.sums.ctypes.data,
                 UNPACKED_MAX_VOLUME[dtype.itemsize], PARALLEL_MIN_STREAM, FEW_ROWS_MAX)
        self.unpacked = _FirstUse(self, "unpacked", _UNPACKED, fixed)
        self.one, self.zero = dtype.type(1), dtype.type(0)
        self.small = _FirstSmall(
            self, "small", _UNPACKED, (*fixed, True, self.one, self.zero), (_UNPACKED,), SMALL_REFUSED
        )
        # The same with alpha and beta given (gemm's way in).
        self.small_scaled = _FirstSmall(self, "small_scaled", _UNPACKED, (*fixed, True), (_UNPACKED,), SMALL_REFUSED)
        self.batched = _FirstUse(self, "batched", _BATCHED)
        # A stack of one small product runs on the unpacked entry: either tells that small
        # products are in use.
        self.small_stack = _FirstSmall(
            self, "small_stack", _SMALL_STACK, (*fixed, PARALLEL_MIN_STACK_VOLUME, self.one, self.zero),
            (_BATCHED, _UNPACKED), SMALL_REFUSED,
        )
        self.vector = _FirstUse(self, "vector", _VECTOR)
        self.shared_rows = blocking.shared_block_rows(self.sizes, dtype)
        self.one_thread_volume = one_thread_unpacked_volume(kernel, dtype)
        self.version = version
        self.kernel, self.dtype = kernel, dtype
        self.depth_sizes: dict[int, blocking.BlockSizes] = {}

    def scalar(self, value: float):
        """``value`` as the dtype's scalar; 1 and 0 (matmul's alpha and beta) without a new
        NumPy scalar (~0.2 us each, of a ~1.5 us small call)."""
        if value == 1.0:
            return self.one
        if value == 0.0:
            return self.zero
        return self.dtype.type(value)

    def sizes_for_depth(self, k: int) -> blocking.BlockSizes:
        """``sizes.for_depth(k, MR)``, remembered: building it cost ~1 us of a ~15 us 96^3 product."""
        sizes = self.depth_sizes.get(k)
        if sizes is None:
            if len(self.depth_sizes) >= DEPTHS_REMEMBERED:
                self.depth_sizes.clear()
            sizes = self.depth_sizes[k] = self.sizes.for_depth(k, self.kernel.mr())
        return sizes


class _PerThread(threading.local):
    def __init__(self):
        self.cache: dict = {}
        self.last: _Prepared | None = None  # the state current_prepared gave last: small calls find it first
        self.generation = -1  # the value of _generation when it did


_local = _PerThread()


def prepared(kernel: Kernel, dtype: np.dtype) -> _Prepared:
    """This thread's prepared state for the kernel and dtype (rebuilt when settings change)."""
    cache = _local.cache
    key = (kernel.name, kernel.gemv.lane_sums, dtype.char)
    prep = cache.get(key)
    if prep is None or prep.version != _version:
        prep = cache[key] = _Prepared(kernel, dtype, _version)
    return prep


def current_prepared(dtype: np.dtype) -> _Prepared:
    """This thread's prepared state for the kernel in force and ``dtype``.  The last one
    given serves while nothing changed (``_generation``): no kernel lookup on a small call
    (~0.14 us of a 16x16 product)."""
    local = _local
    if local.generation == _generation and local.last.dtype is dtype:
        return local.last
    generation = _generation  # read first: a change from now on is seen by the next call
    prep = local.last = prepared(dispatch.current(), dtype)
    local.generation = generation
    return prep


# A narrow product is turned over (``_turns_narrow``) from this depth and this
# many elements of A: below, the strip packing costs more than the padding.
TURNED_NARROW_MIN_DEPTH = 32
TURNED_NARROW_MIN_A = {4: 8192, 8: 1 << 17}


def _turns_narrow(m: int, n: int, a: np.ndarray, narrow_cols: int) -> bool:
    """Whether a C at most half as wide as the narrow tile is computed turned over.

    With 2-8 float32 columns (2-4 float64) the narrow tile computes 16 (8)
    lanes for each row; turned over (C^T = B^T A^T), the product is a few rows
    (n) times A^T, whose columns are A's contiguous rows: the stream packs
    them a strip at a time with in-register transposes (``x @ W.T``) and its
    few-rows tile computes no padding for 4 rows.  On AVX-512, one thread, turned
    over ran float32 n = 2-4 1.10-1.6x as fast as the narrow tile, but lost on a small
    or shallow A (``1000x4x8`` 0.47x) and on wider C (float32 n = 12, float64
    n = 6-8; docs/performance.md).  A needs more than
    FEW_ROWS_MAX rows (they become the turned columns), TURNED_NARROW_MIN_DEPTH
    columns and TURNED_NARROW_MIN_A elements (float64: 2^17, where it won).
    """
    k = a.shape[1]
    return (
        1 < n and 2 * n <= narrow_cols and m > FEW_ROWS_MAX and k >= TURNED_NARROW_MIN_DEPTH
        and m * k >= TURNED_NARROW_MIN_A[a.itemsize] and a.strides[1] == a.itemsize
    )


def turned_few_rows(kernel: Kernel, dtype: np.dtype) -> tuple[int, ...]:
    """The few rows (m) of ``x @ W.T`` computed turned over on ``kernel`` (``_turns_few_rows``).

    Float32: as many as one strip of the narrow or the main tile holds; other m leave
    lanes of the strip empty and lose to the transposing stream.  Float64: any m from 2
    to two main strips, whose stream is the slower one (AVX2, one thread, W [2048,512]:
    float64 m = 2 346 µs turned over against 500 streamed, m = 24 1291 against 1566, but
    m = 32 lost; the portable kernel alike; docs/performance.md).
    """
    if kernel.name not in TURNED_FEW_ROWS_KERNELS:
        return ()
    narrow, main = kernel.narrow.cols(dtype.itemsize), kernel.nr(dtype)
    if dtype.itemsize == 8:
        return tuple(range(2, 2 * main + 1))
    return (narrow, main)


def _turns_few_rows(a: np.ndarray, b: np.ndarray, turned_rows: tuple[int, ...]) -> bool:
    """Whether a few-rows product with B's columns contiguous (``x @ W.T``, W stored
    [N, K]) is computed turned over: C^T = W x^T, x^T copied to contiguous rows.

    The few-rows stream packs W a strip at a time with in-register transposes.
    Turned over, W's contiguous rows are the A of the unpacked driver, read in
    place, and x^T is a B a tile strip or two wide, where m is in ``turned_rows``
    (``turned_few_rows``): no transpose, one broadcast element of W per row of the
    tile and step.  Float32 m that leave lanes of a strip empty lose (m = 4 and 12
    on the AVX2 kernel, below); W must have more than FEW_ROWS_MAX rows.  Each
    element is the same chain of FMAs either way: the same bits.
    AVX2 (strips of 8 and 16 float32, 4 and 8 float64), one thread, W [2048,512]:
    float32 m = 8 252 µs turned over against 354 streamed, but m = 4, 12 and 32 lose;
    the portable kernel gains alike (docs/performance.md).
    """
    m, n = a.shape[0], b.shape[1]
    size = b.itemsize
    return m in turned_rows and m <= FEW_ROWS_MAX < n and b.strides[0] == size and b.strides[1] != size


def _oriented(a, b, c, narrow_cols):
    """(a, b, c, swapped): the problem turned the way the kernels read it best.

    The kernel writes rows of C with vector stores: for a C whose columns are
    contiguous, compute C^T = B^T A^T instead (BLIS does the same).  And a C
    with few columns from an A stored transposed (``x.T @ g``, the weight
    gradient of a small output layer) is a few-rows product turned over: its
    rows of B^T = x are contiguous and stream, where the tiles of the
    untransposed problem walk down A one row stride per k
    (``x.T @ g``, x [256,2048], g [256,10], one thread: ~3x faster turned over);
    so is a C narrower than half the narrow tile (``_turns_narrow``).  Each
    element is the same chain of FMAs either way (a product does not depend
    on its operands' order), so the bits do not change.
    """
    size = c.itemsize
    if c.strides[1] != size and c.strides[0] == size:
        return b.T, a.T, c.T, True
    m, n = c.shape
    if n <= FEW_ROWS_MAX < m and a.strides[0] == size and a.strides[1] != size:
        return b.T, a.T, c.T, True
    if _turns_narrow(m, n, a, narrow_cols):
        return b.T, a.T, c.T, True
    return a, b, c, False


def unpacked_max_volume(dtype: np.dtype) -> int:
    """Up to this many multiply-adds a product with B's rows contiguous skips packing."""
    return UNPACKED_MAX_VOLUME[dtype.itemsize]


def one_thread_unpacked_volume(kernel: Kernel, dtype: np.dtype) -> int:
    """Up to this many multiply-adds a product on one thread skips packing (0: only
    small ones do), with ``kernel`` (UNPACKED_ONE_THREAD_KERNELS)."""
    return UNPACKED_ONE_THREAD_MAX_VOLUME[dtype.itemsize] if kernel.name in UNPACKED_ONE_THREAD_KERNELS else 0


def _use_unpacked(
    m: int, n: int, k: int, a: np.ndarray, b: np.ndarray, narrow_cols: int, kc: int, one_thread_volume: int
) -> bool:
    """Unpacked when packing B whole costs more than it saves.

    With B's rows contiguous: small products, few rows, or n within the narrow
    tile (a packed tile would mostly compute padding); on one thread, mid-size
    products too, up to ``one_thread_volume`` multiply-adds
    (``one_thread_unpacked_volume``; 0 on several threads).  With B's columns contiguous
    (``x @ W.T``): few rows, B packed on the fly a strip at a time.  A matrix with
    contiguous rows times one column (``W @ x``): row dots.
    """
    size = a.itemsize
    if n == 1 and a.strides[1] == size:
        return True
    if b.strides[1] == size:
        volume = m * n * k
        if volume <= UNPACKED_MAX_VOLUME[size] or m <= FEW_ROWS_MAX or n <= narrow_cols:
            return True
        return (
            volume <= one_thread_volume and k <= kc and a.strides[1] == size
            and a.strides[0] % ALIASED_ROW_BYTES != 0 and b.strides[0] % ALIASED_ROW_BYTES != 0
        )
    return m <= FEW_ROWS_MAX and b.strides[0] == size


def _trivial(m: int, n: int, k: int, alpha: float, beta: float, c: np.ndarray) -> bool:
    """Handle the products with nothing to multiply (empty C, k == 0, alpha == 0); True if done."""
    if m == 0 or n == 0:
        return True
    if k == 0 or alpha == 0:
        _scale(c, beta)
        return True
    return False


def _in_parallel(run_parallel_path, *args) -> bool:
    """Run ``run_parallel_path(*args)`` if no other parallel product is running; True if it ran."""
    if not _parallel_lock.acquire(blocking=False):
        return False
    try:
        run_parallel_path(*args)
    finally:
        _parallel_lock.release()
    return True


def run(alpha: float, a: np.ndarray, b: np.ndarray, beta: float, c: np.ndarray) -> None:
    """C = alpha*A.B + beta*C in place; A (m, k), B (k, n), C (m, n), one dtype."""
    m, k = a.shape
    n = b.shape[1]
    if _trivial(m, n, k, alpha, beta, c):
        return
    dtype = c.dtype
    prep = current_prepared(dtype)
    kernel = prep.kernel
    a, b, c, swapped = _oriented(a, b, c, prep.narrow_cols)
    if swapped:
        m, n = n, m
    ws = prep.workspace
    workers = threads.workers()
    if not swapped and _turns_few_rows(a, b, prep.turned_rows):
        # m and n stay as given: the threads are worth it as for the few-rows stream of W.
        a, b, c = b.T, np.ascontiguousarray(a.T), c.T
        unpacked = True
    else:
        one_thread = workers == 1 or not worth_threads(m, n, k, True, dtype)
        unpacked = _use_unpacked(
            m, n, k, a, b, prep.narrow_cols, prep.sizes.kc, prep.one_thread_volume if one_thread else 0
        )
    parallel = workers > 1 and worth_threads(m, n, k, unpacked, dtype)
    if unpacked:
        if parallel and _in_parallel(run_unpacked_parallel, prep, kernel, dtype, alpha, beta, a, b, c, workers):
            return
        prep.unpacked(False, prep.scalar(alpha), prep.scalar(beta), a, b, c)
        return
    if parallel and _in_parallel(run_parallel, prep, kernel, dtype, alpha, beta, a, b, c, workers):
        return
    sizes = prep.sizes_for_depth(k)
    prep.blocked(
        prep.shape, prep.scalar(alpha), prep.scalar(beta), a, b, c,
        sizes.mc, sizes.nc, sizes.kc, ws.abuf, ws.bbuf, ws.scratch,
    )


def run_unpacked_parallel(prep, kernel, dtype, alpha, beta, a, b, c, workers) -> None:
    """The unpacked product on ``workers`` workers, with split-K when columns are too few."""
    m, k = a.shape
    n = b.shape[1]
    kc = prep.sizes.kc
    ws = workspace.get(dtype, prep.sizes, kernel.mr(), kernel.nr(dtype), workers)
    _UNPACKED_PARALLEL.get(kernel, dtype)(
        *prep.tiles, prep.scalar(alpha), prep.scalar(beta),
        prep.one, prep.zero,
        a, b, c, kc, workers, ws.scratch, ws.sums, _split_k_room(m, n, k, kc, dtype), ws.counter,
    )


# An empty split-K buffer per dtype char, for calls that have none to give.
_NO_PARTIAL = {"f": np.empty(0, np.float32), "d": np.empty(0, np.float64)}


def _split_k_room(m: int, n: int, k: int, kc: int, dtype: np.dtype) -> np.ndarray:
    """Room for the split-K partial sums of an unpacked product (one slice per KC block),
    or an empty array when k is one block or the slices would be too large."""
    k_blocks = -(-k // kc)
    return np.empty(k_blocks * m * n if 1 < k_blocks and k_blocks * m * n <= SPLIT_K_MAX_ELEMENTS else 0, dtype)


def run_parallel(prep, kernel, dtype, alpha, beta, a, b, c, workers, log_b=NO_LOG, log_rows=NO_LOG):
    """The blocked product on ``workers`` workers (``log_*``: the tests' task-recording hook)."""
    ws = workspace.get(dtype, prep.sizes, kernel.mr(), kernel.nr(dtype), workers)
    sizes = prep.sizes_for_depth(a.shape[1])
    _PARALLEL.get(kernel, dtype)(
        prep.shape, prep.scalar(alpha), prep.scalar(beta), a, b, c, sizes.mc, sizes.nc, sizes.kc, prep.shared_rows,
        workers, ws.abuf, ws.bbuf, ws.scratch, ws.counter, log_b, log_rows,
    )


def run_batch(a: np.ndarray, b: np.ndarray, c: np.ndarray, offsets_a, offsets_b, offsets_c) -> None:
    """C[t] = A[t].B[t] for a stack: a, b, c are the first matrices, offsets in elements.

    Every matrix has the shape and strides of the first; requires m, n, k >= 1.
    """
    if offsets_c.shape[0] == 1 and offsets_a[0] == offsets_b[0] == offsets_c[0] == 0:
        run(1.0, a, b, 0.0, c)  # a stack of one: the lone product, on threads where it is worth it
        return
    dtype = c.dtype
    prep = current_prepared(dtype)
    kernel = prep.kernel
    a, b, c, swapped = _oriented(a, b, c, prep.narrow_cols)
    if swapped:
        offsets_a, offsets_b = offsets_b, offsets_a
    m, k = a.shape
    n = b.shape[1]
    ws = prep.workspace
    workers = threads.workers()
    unpacked = _use_unpacked(
        m, n, k, a, b, prep.narrow_cols, prep.sizes.kc, prep.one_thread_volume if workers == 1 else 0
    )
    sizes = prep.sizes if unpacked else prep.sizes_for_depth(k)
    count = offsets_c.shape[0]
    if workers > 1 and count * m * n * k >= PARALLEL_MIN_STACK_VOLUME:
        offsets = (offsets_a, offsets_b, offsets_c)
        if _each_on_all_workers(count, m, n, k, unpacked, workers, dtype):
            ran = _in_parallel(
                _run_batch_each_parallel, prep, kernel, dtype, a, b, c, offsets, unpacked, sizes, workers
            )
        else:
            ran = _in_parallel(
                _run_batch_tasks, prep, kernel, dtype, a, b, c, offsets, unpacked, sizes, min(workers, count)
            )
        if ran:
            return
    prep.batched(
        *prep.tiles, prep.one, prep.zero, a, b, c,
        offsets_a, offsets_b, offsets_c, unpacked, sizes.mc, sizes.nc, sizes.kc, ws.abuf, ws.bbuf, ws.scratch, ws.sums,
    )


def _each_on_all_workers(count: int, m: int, n: int, k: int, unpacked: bool, workers: int, dtype: np.dtype) -> bool:
    """Whether a stack's products should each use every worker, one after the other,
    rather than be shared out whole: for products that would be parallel alone (the
    thresholds of ``run``) and too few to share out evenly (two on three workers,
    three on two: [3,4,4096] @ [3,4096,4096] on two threads, 10.7 ms shared out, 8.2
    as lone products)."""
    return worth_threads(m, n, k, unpacked, dtype) and count < TASKS_PER_WORKER * workers and count % workers != 0


def parallel_min_volume(dtype: np.dtype) -> int:
    """From this many multiply-adds a product of ``dtype`` is worth splitting between threads."""
    return PARALLEL_MIN_VOLUME[dtype.itemsize]


def worth_threads(m: int, n: int, k: int, unpacked: bool, dtype: np.dtype) -> bool:
    """Whether one product is worth splitting between threads: enough multiply-adds, or
    (unpacked, memory-bound) enough to stream: B, or A when B is one column (``W @ x``)."""
    streamed = k * (m if n == 1 else n)
    return m * n * k >= parallel_min_volume(dtype) or (unpacked and streamed >= PARALLEL_MIN_STREAM)


def _run_batch_tasks(prep, kernel, dtype, a, b, c, offsets, unpacked, sizes, workers) -> None:
    """A stack on ``workers`` workers, each product computed whole by the worker that takes it."""
    ws = workspace.get(dtype, prep.sizes, kernel.mr(), kernel.nr(dtype), workers, private_b=True)
    _BATCH_TASKS.get(kernel, dtype)(
        *prep.tiles, prep.one, prep.zero, a, b, c, *offsets, unpacked,
        sizes.mc, sizes.nc, sizes.kc, workers, ws.abuf, ws.bbuf, ws.scratch, ws.sums, ws.counter,
    )


def _run_batch_each_parallel(prep, kernel, dtype, a, b, c, offsets, unpacked, sizes, workers) -> None:
    """A stack's products, each in turn on ``workers`` workers (the parallel driver a lone
    product takes, with its split-K room when unpacked)."""
    ws = workspace.get(dtype, prep.sizes, kernel.mr(), kernel.nr(dtype), workers)
    partial = _split_k_room(a.shape[0], b.shape[1], a.shape[1], sizes.kc, dtype) if unpacked else _NO_PARTIAL[dtype.char]
    one, zero = prep.one, prep.zero
    _BATCH_EACH_PARALLEL.get(kernel, dtype)(
        *prep.tiles, one, zero, one, zero, a, b, c, *offsets, unpacked,
        sizes.mc, sizes.nc, sizes.kc, prep.shared_rows, workers, ws.abuf, ws.bbuf, ws.scratch, ws.sums, partial,
        ws.counter, NO_LOG, NO_LOG,
    )


def run_small(a: np.ndarray, b: np.ndarray, c: np.ndarray, dtype: np.dtype) -> int:
    """C = A.B if it is a small product, deciding so in compiled code (matmul's way in for
    small matrices: ``unpacked.unpacked_entry`` with ``small_only``).  A, B and C are 2-D
    arrays of one float dtype (nothing else is checked here: the entry would read another
    dtype's memory as this one's).  Returns SMALL_DONE, SMALL_PLANNED (a
    valid product for ``run``) or SMALL_REFUSED (for the caller's general path, which
    says what is wrong: mismatched shapes or part-element strides; or, before any product
    has needed the unpacked entry, any product: see ``_FirstSmall``).  ``dtype``: theirs."""
    local = _local  # current_prepared's fast path, inline: a call is ~0.06 us of a ~2 us product
    prep = local.last if local.generation == _generation else None
    if prep is None or prep.dtype is not dtype:
        prep = current_prepared(dtype)
    return prep.small(a, b, c)


def run_small_scaled(alpha: float, a: np.ndarray, b: np.ndarray, beta: float, c: np.ndarray, dtype: np.dtype) -> int:
    """C = alpha*A.B + beta*C if it is a small product: ``run_small`` with alpha and beta
    (gemm's way in for small matrices; beta == 0 never reads C).  Same arguments and
    answers as ``run_small``."""
    prep = current_prepared(dtype)
    return prep.small_scaled(prep.scalar(alpha), prep.scalar(beta), a, b, c)


def run_small_stack(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, offsets_a: np.ndarray, offsets_b: np.ndarray, offsets_c: np.ndarray,
    dtype: np.dtype,
) -> int:
    """C[t] = A[t].B[t] for two stacks along one batch axis if each product is small and the
    stack not worth the threads, deciding so in compiled code (``batched.small_stack_entry``).
    a, b, c: 3-D arrays of one float dtype, a and b with matching shapes and whole-element
    strides; ``offsets_*``: each matrix's first element.  Returns SMALL_DONE, SMALL_PLANNED
    with nothing computed (a valid stack for ``run_batch``), or SMALL_REFUSED with nothing
    computed (for the caller's general path: a C of another shape, part-element strides or
    overlapping an operand; or, before any product has needed ``run_batch``'s entry or the
    unpacked one, any stack: see ``_FirstSmall``).  ``dtype``: theirs."""
    prep = current_prepared(dtype)
    return prep.small_stack(threads.workers(), a, b, c, offsets_a, offsets_b, offsets_c)


def run_vector(v: np.ndarray, mat: np.ndarray, c: np.ndarray, rows_of_mat: bool) -> None:
    """c = mat @ v (``rows_of_mat``) or c = v @ mat on one thread, for callers that
    checked it applies: 1-D v and c, one dtype, mat's rows contiguous, m, n, k >= 1.
    matmul's way in for a matrix and a vector, with none of the 2-D views."""
    prep = current_prepared(c.dtype)
    prep.vector(
        prep.gemv, prep.lane_sums, prep.one, prep.zero, v, mat, c, prep.sizes.kc, prep.workspace.sums, rows_of_mat
    )


def pack_operand(kernel: Kernel, b: np.ndarray, sizes: blocking.BlockSizes, data: np.ndarray) -> None:
    """Pack all of ``b`` (k x n, one float dtype, whole-element strides) into ``data``
    in the layout the prepacked drivers read (``driver.packed_slice``)."""
    _PACK.get(kernel, b.dtype)(kernel.shape, b, sizes.nc, sizes.kc, data)


def run_prepacked(alpha: float, a: np.ndarray, packed, beta: float, c: np.ndarray) -> None:
    """C = alpha*A.B + beta*C with B prepacked (``packed.PackedMatrix``, checked usable)."""
    m, k = a.shape
    n = packed.shape[1]
    if _trivial(m, n, k, alpha, beta, c):
        return
    dtype = c.dtype
    prep = current_prepared(dtype)
    kernel = prep.kernel
    ws, sizes = prep.workspace, prep.sizes
    # Few rows: the main tile would mostly compute copies of the last row.
    few = m < kernel.mr()
    workers = threads.workers()
    # The thresholds of unpacked and blocked products: few rows stream B, more rows multiply.
    parallel = workers > 1 and (k * n >= PARALLEL_MIN_STREAM if few else m * n * k >= parallel_min_volume(dtype))
    if parallel and _in_parallel(run_prepacked_parallel, prep, kernel, dtype, alpha, a, packed, beta, c, workers, few):
        return
    if few:
        _PREPACKED_ROWS.get(kernel, dtype)(
            kernel.panel_rows(), prep.scalar(alpha), prep.scalar(beta), a, packed.data, n, c,
            sizes.nc, sizes.kc, kernel.nr(dtype), ws.scratch,
        )
        return
    sizes = prep.sizes_for_depth(k)
    _PREPACKED.get(kernel, dtype)(
        prep.shape, prep.scalar(alpha), prep.scalar(beta), a, packed.data, n, c,
        sizes.mc, sizes.nc, sizes.kc, ws.abuf, ws.bbuf, ws.scratch,
    )


def run_prepacked_parallel(prep, kernel, dtype, alpha, a, packed, beta, c, workers, few) -> None:
    """The prepacked product on ``workers`` workers: groups of B panels as tasks for
    ``few`` rows, the row-block tasks of the parallel driver otherwise."""
    sizes = prep.sizes
    n = packed.shape[1]
    ws = workspace.get(dtype, sizes, kernel.mr(), kernel.nr(dtype), workers)
    if few:
        _PREPACKED_ROWS_PARALLEL.get(kernel, dtype)(
            kernel.panel_rows(), prep.scalar(alpha), prep.scalar(beta), a, packed.data, n, c,
            sizes.nc, sizes.kc, kernel.nr(dtype), workers, ws.scratch, ws.counter,
        )
        return
    sizes = prep.sizes_for_depth(a.shape[1])
    _PREPACKED_PARALLEL.get(kernel, dtype)(
        prep.shape, prep.scalar(alpha), prep.scalar(beta), a, packed.data, n, c,
        sizes.mc, sizes.nc, sizes.kc, workers, ws.abuf, ws.scratch, ws.counter,
    )
