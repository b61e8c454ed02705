"""What a kernel's configuration holds: every tuning value the planner reads for it.

Each kernel module (``avx512``, ``avx2``, ``portable``) gives one ``KernelConfig``
beside its tile shapes, as BLIS keeps one ``config/<arch>`` table per CPU.  No field has
a default: a kernel module sets every value, with the measurement behind it, and says so
where a value was not measured on that kernel.  Only KC changes bits; every other value
only moves work between paths that compute the same chains of FMAs.  What the compiled
drivers read per kernel is in its tile shapes' Numba types (the main tile's ``short_rows``,
the few-rows tile's ``up_to``, the narrow tile's ``stream_from``, the streaming tiles'
``stream`` settings, the GEMV tile's ``strips``, ``row_fetch``, ``wide_groups`` and ``dot_pairs``); the constants
compiled into the drivers for every kernel, measured alike on all of them, are in ``shared``.  The measurements
behind the values: docs/design.md and docs/performance.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

# A threshold no product reaches: the way it opens is never taken (on that kernel and dtype).
NEVER = 1 << 62


class BySize(NamedTuple):
    """One value per dtype, where it was measured per dtype."""

    float32: int
    float64: int

    def of(self, itemsize: int) -> int:
        """The value for a dtype of ``itemsize`` bytes."""
        return self.float32 if itemsize == 4 else self.float64


@dataclass(frozen=True)
class VendorCorrection:
    """Where a CPU vendor's caches measured better than the cache model: MC and NC caps
    (neither changes a bit of a result; only KC does)."""

    # The MC x KC block of A takes at most this share of the L2.
    l2_share_for_a: float
    # The KC x NC slice of B has at most this many columns.
    nc_max: int


@dataclass(frozen=True)
class KernelConfig:
    """The tuning values of one kernel."""

    # KC per dtype; None: the cache model's KC (Low et al.), for each dtype.
    kc: BySize | None
    # Products up to this many multiply-adds on one thread, within one KC block, skip
    # packing too, where the direct tiles beat it (0: only those up to
    # ``unpacked_max_volume`` do).
    one_thread_unpacked_volume: BySize
    # Up to this many multiply-adds (B's rows contiguous) packing costs more than it
    # saves, on any thread count.  Below ``parallel_min_volume``, so that such a product
    # never needs threads.
    unpacked_max_volume: BySize
    # Whether ``x @ W.T`` with m in the turned rows (``rules.turned_few_rows``) is computed
    # turned over, C^T = W x^T, where it measured faster than the transposing stream.
    turned_few_rows: bool
    # A stack's products are shared out whole among the threads from this many multiply-adds
    # in all, each product counted with ``stack_product_overhead`` more: what its setup and
    # loop cost in multiply-adds' time.  The threaded stack costs a fixed ~15 us more on two
    # threads (a stack of 50 float32 16x16x16 products: 6.6 us on one thread, 17.6 on two),
    # so threads pay from ~35 us of work, whatever the products' size.
    parallel_min_stack_volume: BySize
    stack_product_overhead: BySize
    # An unpacked, memory-bound product (row dots, the few-rows and transposing streams) is
    # worth threads from this many elements streamed (B, or A when B is one column), whatever
    # its multiply-adds: below, two threads took longer than one.
    parallel_min_stream: BySize
    # One row times a B with contiguous rows (the single-row stream, ``x @ W``, and a vector
    # times a matrix) is worth threads from this many elements of B, where its threads' fixed
    # cost is paid back; every other unpacked product from ``parallel_min_stream``.
    parallel_min_row_stream: BySize
    # Few rows times a prepacked B (``x @ pack(W)``) is worth threads from this many elements
    # of B.
    parallel_min_packed_rows: BySize
    # NC beyond this stops paying (a B slice of 4096 columns is already megabytes) and
    # only grows the workspace.
    nc_max: int
    # MC and NC caps by CPU vendor (``cpu.vendor()``); none: the cache model's.
    vendor_corrections: Mapping[str, VendorCorrection]
    # Rows of A all threads share as one packed block are at most this many L2s of packed
    # A; beyond, each worker's own MC-row blocks win.
    shared_a_l2s: float
    # Up to this many rows, times a B with contiguous rows, the unpacked drivers (the
    # few-rows tile and stream) beat packing B whatever the size; a C with as few columns
    # from an A with contiguous columns is turned over to such a product.  At most
    # ``shared.STREAM_ROWS``, the rows one sweep of the few-rows stream takes.
    few_rows_max: int
    # The same for a B with contiguous columns (``x @ W.T``): up to this many rows the
    # transposing stream, or the turned few rows (``turned_few_rows``), beat packing B.
    transposed_few_rows_max: int
    # A C at most half as wide as the narrow tile is turned over from this depth and
    # this many elements of A; below, the strip packing costs more than the padding.
    turned_narrow_min_depth: int
    turned_narrow_min_a: BySize
    # From this many multiply-adds a product is worth splitting between threads.
    parallel_min_volume: BySize
    # Split-K partial sums are kept below this many elements (KC blocks x m x n): a bound
    # on the workspace, not a speed.
    split_k_max_elements: int
