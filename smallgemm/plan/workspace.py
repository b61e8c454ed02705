"""Packing buffers, sized from the block sizes (never from the matrices) and reused.

Each Python thread gets its own buffers, so concurrent calls never share a
packed panel.  Buffers are 64-byte aligned (a cache line, a zmm register).
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from ..drivers.parallel import COUNTER_STRIDE
from ..drivers.unpacked import STREAM_SIZE
from .blocking import BlockSizes

ALIGN = 64


def aligned_empty(count: int, dtype: np.dtype) -> np.ndarray:
    """An uninitialised 1-D array of ``count`` elements starting on a 64-byte boundary."""
    dtype = np.dtype(dtype)
    raw = np.empty(count * dtype.itemsize + ALIGN, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start : start + count * dtype.itemsize].view(dtype)


class Workspace(NamedTuple):
    """Buffers for one call: A blocks and edge tiles (one per worker), the B slice (shared, or one per worker),
    and the task counters of the parallel drivers (one per worker, each alone on its cache line).  A named
    tuple, which compiled entries take as one argument (``drivers.arguments.workspace_of``)."""

    abuf: np.ndarray
    bbuf: np.ndarray
    scratch: np.ndarray
    counter: np.ndarray
    sums: np.ndarray  # partial sums of the unpacked streaming paths (GEMV, few rows), one per worker


_local = threading.local()


def get(
    dtype: np.dtype, sizes: BlockSizes, mr: int, nr: int, threads: int = 1, private_b: bool = False
) -> Workspace:
    """This Python thread's workspace for these block sizes and workers, allocated on first use.

    ``private_b``: one B slice per worker (each computes products of its own)
    instead of one the workers of a product share.
    """
    cache = getattr(_local, "cache", None)
    if cache is None:
        cache = _local.cache = {}
    key = (np.dtype(dtype).char, sizes, mr, nr, threads, private_b)
    ws = cache.get(key)
    if ws is None:
        # Keep one workspace per (Python thread, dtype, shared or private B slices):
        # memory stays bounded, and products of stacks on threads do not evict
        # the buffers of other parallel products.
        for old in [k for k in cache if k[0] == key[0] and k[-1] == private_b]:
            del cache[old]
        ws = cache[key] = Workspace(
            abuf=aligned_empty(threads * sizes.mc * sizes.kc, dtype),
            bbuf=aligned_empty((threads if private_b else 1) * sizes.kc * sizes.nc, dtype),
            scratch=aligned_empty(threads * mr * nr, dtype),
            # Two sets of task counters and a count of tasks done (``parallel.blocked``).
            counter=aligned_empty((2 * threads + 1) * COUNTER_STRIDE, np.int64),
            sums=aligned_empty(threads * STREAM_SIZE, dtype),
        )
    return ws
