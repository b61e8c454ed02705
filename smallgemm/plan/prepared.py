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
from numba import from_dtype, types

from ..drivers.batched import STACK_CALL_PRODUCTS, STACK_CONTEXT
from ..drivers.unpacked import CALL_ANSWERS, CALL_CONTEXT, SMALL_REFUSED
from ..kernels import Kernel
from ..simd import fastcall
from ..simd.objects import NEW_FROM_DESCR_INDEX, numpy_api_function
from . import blocking, dispatch, entries, in_force, rules, warmup, workspace
from .entry import Entry, entry_types

# A KC longer than any k: the unpacked drivers' one block when products are exact.
UNBOUNDED_KC = 1 << 40
# NumPy's function that the small way in makes a result with (``unpacked_call``).
NEW_FROM_DESCR = numpy_api_function(NEW_FROM_DESCR_INDEX)


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


class FirstCall(FirstUse):
    """A slot for an entry that answers the address of a routine Python calls as a builtin
    (``unpacked.unpacked_call``, ``batched.stack_call``; ``simd.fastcall``): its first call
    compiles (or loads) the entry, asks it for the address, and puts in the slot the builtin
    that calls the routine with ``bound`` (the int64 context array) and runs it."""

    __slots__ = ()

    def __call__(self, *args):
        prep = self.prepared
        address = self.entry.get(prep.kernel, prep.dtype)(*prep.call_tiles, prep.like)
        # The routine's argument types: the entry's, its ``like`` array as a pointer, and the
        # four the builtin passes (context, arguments, count, answer).
        tiles = entry_types(self.entry.kinds[:-1], prep.kernel, prep.dtype)
        argtypes = (*tiles, types.CPointer(from_dtype(prep.dtype)), *(types.int64,) * 4)
        name = f"{self.name}_{prep.kernel.name}_{prep.dtype.name}"
        native = fastcall.builtin(address, argtypes, CALL_ANSWERS, self.bound, name)
        setattr(prep, self.name, native)
        return native(*args)


class FirstSmall:
    """A small-matrix slot (``run_small``, ``run_small_stack``): until a product has needed
    one of the entries ``after`` (compiled or loaded it), it answers ``not_yet``, and the
    caller's general path places the product (~3 us more, once).  Fetching the entry here
    would compile it only to be told that a first large product is not small (a first
    300x300 float32 product, cold cache: 34 s instead of 19).  Nor is it fetched while it
    compiles in another process (``warmup.fetchable``).  Then ``first`` fetches it and
    takes the slot."""

    __slots__ = ("after", "first", "not_yet")

    def __init__(self, first: FirstUse, after: tuple[Entry, ...], not_yet: int):
        self.first, self.after, self.not_yet = first, after, not_yet

    def __call__(self, *args):
        first = self.first
        kernel, dtype = first.prepared.kernel, first.prepared.dtype
        if not any(entry.ready(kernel, dtype) for entry in self.after):
            return self.not_yet
        if not warmup.fetchable(first.entry, kernel, dtype):
            return self.not_yet
        return first(*args)


class Prepared:
    """Everything a call needs for one (kernel, dtype), looked up once per thread.

    It binds the kernel's configuration in force (``in_force.config_of``) when it is built, the
    small-matrix way in's limits with it: a change takes effect once the states are rebuilt
    (``in_force.override_config`` and ``set_block_sizes`` rebuild them)."""

    __slots__ = (
        "batched",
        "blocked",
        "call_tiles",
        "chain_sizes",
        "config",
        "depth_sizes",
        "dtype",
        "gemv",
        "given_at",
        "kernel",
        "lane_sums",
        "like",
        "narrow_cols",
        "one",
        "one_thread_volume",
        "shape",
        "shared_rows",
        "sizes",
        "small",
        "small_limits",
        "small_stack",
        "stack_offsets",
        "tiles",
        "turned_rows",
        "unpacked",
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
        # The unpacked routine's builtins (``FirstCall``) and what they are bound to: the
        # tiles and an element it is compiled for, and one context array for products the
        # planner placed and one for the small ways in, which decide first.
        self.call_tiles = (kernel.shape, kernel.narrow, kernel.few, kernel.gemv, kernel.resident)
        self.like = np.zeros(1, dtype)
        # The small ways in's limits (``unpacked.SMALL_LIMITS``), which their contexts hold and
        # the table's small rows read (``Problem.small``).
        self.small_limits = limits = (
            config.unpacked_max_volume.of(dtype.itemsize),
            config.parallel_min_stream.of(dtype.itemsize),
            config.few_rows_max,
            config.turned_narrow_min_depth,
            config.turned_narrow_min_a.of(dtype.itemsize),
        )
        workspace_at = tuple(
            buffer.ctypes.data
            for buffer in (
                self.workspace.abuf,
                self.workspace.bbuf,
                self.workspace.scratch,
                self.workspace.sums,
            )
        )
        shared = (
            self.lane_sums,
            self.chain_sizes.kc,
            *workspace_at,
            *limits,
            id(np.ndarray),
            NEW_FROM_DESCR,
            id(dtype),
        )
        context = dict(zip(CALL_CONTEXT, (False, *shared), strict=True))
        self.unpacked = FirstCall(
            self, "unpacked", entries.UNPACKED, np.array(list(context.values()), np.int64)
        )
        context["decide"] = True
        # Fetched once a product has needed the unpacked entry: small products are then in use.
        self.small = FirstSmall(
            FirstCall(self, "small", entries.UNPACKED, np.array(list(context.values()), np.int64)),
            (entries.UNPACKED,),
            SMALL_REFUSED,
        )
        self.one, self.zero = dtype.type(1), dtype.type(0)
        self.batched = FirstUse(self, "batched", entries.BATCHED)
        # The small stack's builtin: the offsets of a stack's matrices go to this buffer.
        self.stack_offsets = np.empty(3 * STACK_CALL_PRODUCTS, np.int64)
        stack_values = (
            *shared,
            config.parallel_min_stack_volume.of(dtype.itemsize),
            config.stack_product_overhead.of(dtype.itemsize),
            id(True),
            self.stack_offsets.ctypes.data,
        )
        stack_context = dict(zip(STACK_CONTEXT, stack_values, strict=True))
        # Fetched once a product has needed the batch entry or the unpacked one: either tells
        # that small products are in use.
        self.small_stack = FirstSmall(
            FirstCall(
                self, "small_stack", entries.SMALL_STACK, np.array(list(stack_context.values()), np.int64)
            ),
            (entries.BATCHED, entries.UNPACKED),
            SMALL_REFUSED,
        )
        self.shared_rows = blocking.shared_block_rows(config, self.sizes, dtype)
        self.one_thread_volume = config.one_thread_unpacked_volume.of(dtype.itemsize)
        self.version = version
        self.given_at = -1  # in_force.generation when current_prepared last gave it
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


class _NoneGiven:
    """What ``per_thread.last`` holds before ``current_prepared`` gave a state: none matches."""

    given_at = -1
    dtype = None


class _PerThread(threading.local):
    def __init__(self):
        self.cache: dict = {}
        self.last: Prepared | _NoneGiven = _NoneGiven()  # the state current_prepared gave last


# This thread's prepared states and the last one given (``current_prepared``); the small
# ways in read ``last`` themselves, a Python call less per product.
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
    given serves while nothing changed (its ``given_at`` is ``in_force.generation``): no
    kernel lookup on a small call (~0.14 us of a 16x16 product)."""
    local = per_thread
    prep = local.last
    if prep.given_at == in_force.generation and prep.dtype is dtype:
        return prep
    generation = in_force.generation  # read first: a change from now on is seen by the next call
    prep = local.last = prepared(dispatch.current(), dtype)
    prep.given_at = generation
    return prep
