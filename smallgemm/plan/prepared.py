"""What a call needs for one (kernel, dtype), built once per thread: the prepared state.

A ``Prepared`` binds the kernel's tiles, the block sizes in force, the workspace
and the entries of the small ways in with their fixed arguments; entries are
fetched (compiled or loaded) on their first call.  It is rebuilt when block sizes
change (``in_force.version``) and looked up again when the kernel or the exact mode
changes (``in_force.generation``).
"""

from __future__ import annotations

import dataclasses
import functools
import threading

import numpy as np

from ..drivers.unpacked import SMALL_REFUSED
from ..kernels import Kernel
from . import blocking, dispatch, entries, in_force, rules, warmup, workspace
from .entry import Entry

# A KC longer than any k: the unpacked drivers' one block when products are exact.
UNBOUNDED_KC = 1 << 40


class FirstUse:
    """Holds a prepared state's slot for an entry until its first call, which compiles (or
    loads) the entry, puts it in the slot (with its first arguments ``bound``) and runs it:
    a first product compiles only what it runs (a first 300x300 float32 matmul on two
    threads, cold cache: 19 s, against 46 s with the four entries fetched at once).  A
    stand-in, not ``__getattr__``, which would slow every attribute read of a small call."""

    __slots__ = ("bound", "entry", "name", "prepared")

    def __init__(self, prepared: Prepared, name: str, entry: Entry, bound: tuple = ()):
        self.prepared, self.name, self.entry, self.bound = prepared, name, entry, bound

    def __call__(self, *args):
        native = self.entry.get(self.prepared.kernel, self.prepared.dtype)
        if self.bound:
            native = functools.partial(native, *self.bound)
        setattr(self.prepared, self.name, native)
        return native(*args)


class FirstSmall(FirstUse):
    """A small-matrix slot (``run_small``, ``run_small_stack``): until a product has needed
    one of the entries ``after`` (compiled or loaded it), it answers ``not_yet``, and the
    caller's general path places the product (~3 us more, once).  Fetching the entry here
    would compile it only to be told that a first large product is not small (a first
    300x300 float32 product, cold cache: 34 s instead of 19).  Nor is it fetched while it
    compiles in another process (``warmup.fetchable``)."""

    __slots__ = ("after", "not_yet")

    def __init__(
        self,
        prepared: Prepared,
        name: str,
        entry: Entry,
        bound: tuple,
        after: tuple[Entry, ...],
        not_yet: int,
    ):
        super().__init__(prepared, name, entry, bound)
        self.after, self.not_yet = after, not_yet

    def __call__(self, *args):
        kernel, dtype = self.prepared.kernel, self.prepared.dtype
        if not any(entry.ready(kernel, dtype) for entry in self.after):
            return self.not_yet
        if not warmup.fetchable(self.entry, kernel, dtype):
            return self.not_yet
        return super().__call__(*args)


class Prepared:
    """Everything a call needs for one (kernel, dtype), looked up once per thread.

    It binds the kernel's configuration in force (``in_force.config_of``) when it is built, the
    small-matrix way in's limits with it: a change takes effect once the states are rebuilt
    (``in_force.override_config`` and ``set_block_sizes`` rebuild them)."""

    __slots__ = (
        "batched",
        "blocked",
        "chain_sizes",
        "config",
        "depth_sizes",
        "dtype",
        "gemv",
        "kernel",
        "lane_sums",
        "narrow_cols",
        "one",
        "one_thread_volume",
        "shape",
        "shared_rows",
        "sizes",
        "small",
        "small_scaled",
        "small_stack",
        "tiles",
        "turned_rows",
        "unpacked",
        "vector",
        "version",
        "workspace",
        "zero",
    )

    def __init__(self, kernel: Kernel, dtype: np.dtype, version: int):
        self.config = config = in_force.config_of(kernel)
        self.shape = kernel.shape
        self.gemv = kernel.gemv
        self.lane_sums = kernel.gemv.lane_sums  # passed as a bool: it unboxes for nothing
        # The arguments every entry with the unpacked tiles begins with, in order.
        self.tiles = (kernel.shape, kernel.narrow, kernel.few, kernel.gemv, self.lane_sums, kernel.resident)
        self.narrow_cols = kernel.narrow.cols(dtype.itemsize)
        self.turned_rows = rules.turned_few_rows(kernel, config, dtype)
        self.sizes = in_force.block_sizes(kernel, dtype)
        # The unpacked drivers' k blocks: one chain over all of k when exact, else KC's.
        self.chain_sizes = self.sizes if self.lane_sums else dataclasses.replace(self.sizes, kc=UNBOUNDED_KC)
        self.workspace = workspace.get(dtype, self.sizes, kernel.mr(), kernel.nr(dtype))
        self.blocked = FirstUse(self, "blocked", entries.BLOCKED)
        # The unpacked entry's arguments that do not change from call to call, bound once
        # (the attribute reads cost ~0.14 us of a 16x16 call); the workspace by
        # its addresses, which unbox for nothing (this state keeps it alive).
        fixed = (
            *self.tiles,
            self.chain_sizes.kc,
            self.workspace.scratch.ctypes.data,
            self.workspace.sums.ctypes.data,
            config.unpacked_max_volume.of(dtype.itemsize),
            config.parallel_min_stream.of(dtype.itemsize),
            config.few_rows_max,
        )
        self.unpacked = FirstUse(self, "unpacked", entries.UNPACKED, fixed)
        self.one, self.zero = dtype.type(1), dtype.type(0)
        self.small = FirstSmall(
            self,
            "small",
            entries.UNPACKED,
            (*fixed, True, self.one, self.zero),
            (entries.UNPACKED,),
            SMALL_REFUSED,
        )
        # The same with alpha and beta given (gemm's way in).
        self.small_scaled = FirstSmall(
            self, "small_scaled", entries.UNPACKED, (*fixed, True), (entries.UNPACKED,), SMALL_REFUSED
        )
        self.batched = FirstUse(self, "batched", entries.BATCHED)
        # A stack of one small product runs on the unpacked entry: either tells that small
        # products are in use.
        self.small_stack = FirstSmall(
            self,
            "small_stack",
            entries.SMALL_STACK,
            (
                *fixed,
                config.parallel_min_stack_volume.of(dtype.itemsize),
                config.stack_product_overhead.of(dtype.itemsize),
                self.one,
                self.zero,
            ),
            (entries.BATCHED, entries.UNPACKED),
            SMALL_REFUSED,
        )
        self.vector = FirstUse(self, "vector", entries.VECTOR)
        self.shared_rows = blocking.shared_block_rows(config, self.sizes, dtype)
        self.one_thread_volume = config.one_thread_unpacked_volume.of(dtype.itemsize)
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
            if len(self.depth_sizes) >= rules.DEPTHS_REMEMBERED:
                self.depth_sizes.clear()
            sizes = self.depth_sizes[k] = self.sizes.for_depth(k, self.kernel.mr())
        return sizes


class _PerThread(threading.local):
    def __init__(self):
        self.cache: dict = {}
        self.last: Prepared | None = None  # the state current_prepared gave last: small calls find it first
        self.generation = -1  # the value of in_force.generation when it did


# This thread's prepared states and the last one given (``current_prepared``); the small
# ways in read ``last`` and ``generation`` themselves, a Python call less per product.
per_thread = _PerThread()


def prepared(kernel: Kernel, dtype: np.dtype) -> Prepared:
    """This thread's prepared state for the kernel and dtype (rebuilt when settings change)."""
    cache = per_thread.cache
    key = (kernel.name, kernel.gemv.lane_sums, dtype.char)
    prep = cache.get(key)
    if prep is None or prep.version != in_force.version:
        prep = cache[key] = Prepared(kernel, dtype, in_force.version)
    return prep


def current_prepared(dtype: np.dtype) -> Prepared:
    """This thread's prepared state for the kernel in force and ``dtype``.  The last one
    given serves while nothing changed (``in_force.generation``): no kernel lookup on a small call
    (~0.14 us of a 16x16 product)."""
    local = per_thread
    if local.generation == in_force.generation and local.last.dtype is dtype:
        return local.last
    generation = in_force.generation  # read first: a change from now on is seen by the next call
    prep = local.last = prepared(dispatch.current(), dtype)
    local.generation = generation
    return prep
