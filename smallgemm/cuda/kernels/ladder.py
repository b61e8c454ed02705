"""What a kernel of the ladder is: its name, its idea, its tiles, and how it is launched.

Every kernel has the signature ``kernel(a, b, c, accumulate)``: ``c`` (M × N) gets
``a`` (M × K) times ``b`` (K × N), each element one chain of ``cuda.fma`` in
increasing k, started from 0, or from the element of ``c`` where ``accumulate`` is
true (the chain continued, as the CPU engine's ``gemm(1, a, b, 1, c)``).  No k-step
past K is taken, not even on zeros: ``fma(0, 0, -0.0)`` is ``+0.0``.  Operands are
read through their strides, whatever they are; ``fast`` kernels are compiled for the
axis along which each operand's elements are adjacent, so that a warp's loads from
global memory are coalesced for transposed operands too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache

import numpy as np

from ..tiles import Tiles

# build(dtype, tiles, a_k_fast, b_n_fast) -> a numba-cuda kernel
# CUDA's limit on a grid's blocks along y (x allows 2**31 - 1).
MAX_GRID_Y = 65535
Builder = Callable[[np.dtype, Tiles, bool, bool], Callable]


@dataclass(frozen=True, eq=False)
class LadderKernel:
    """One step of the ladder: the kernel's builder and its tiles for each dtype."""

    name: str
    idea: str
    tiles: Mapping[np.dtype, Tiles]
    builder: Builder
    # Whether the compiled kernel depends on the operands' layout (a_k_fast, b_n_fast).
    layout_aware: bool = False

    def compiled(self, dtype: np.dtype, a_k_fast: bool, b_n_fast: bool) -> Callable:
        """The kernel that accumulates in ``dtype``, for operands laid out as given."""
        if not self.layout_aware:
            a_k_fast = b_n_fast = True
        return _compiled(self, np.dtype(dtype), a_k_fast, b_n_fast)

    def launch(self, a, b, c, accumulate: bool = False, stream=0) -> None:
        """Enqueue ``c = a @ b`` (or ``c += a @ b`` as one chain, with ``accumulate``) on
        ``stream``; ``a``, ``b`` and ``c`` are device arrays, ``c`` of the accumulation dtype."""
        m, n = c.shape
        if m == 0 or n == 0:
            return
        dtype = np.dtype(c.dtype)
        tiles = self.tiles[dtype]
        kernel = self.compiled(dtype, fast_axis_is_last(a), fast_axis_is_last(b))
        rows = MAX_GRID_Y * tiles.rows  # a grid has at most 65535 blocks along y: taller C in parts
        for start in range(0, m, rows):
            stop = min(m, start + rows)
            part_a, part_c = (a, c) if stop - start == m else (a[start:stop], c[start:stop])
            kernel[tiles.grid(stop - start, n), tiles.block, stream](part_a, b, part_c, accumulate)


def fast_axis_is_last(x) -> bool:
    """True when the elements of a 2-D array are adjacent along its last axis (C order)."""
    rows, cols = (abs(s) for s in x.strides)
    return x.shape[1] > 1 and (cols <= rows or x.shape[0] == 1)


@cache
def _compiled(kernel: LadderKernel, dtype: np.dtype, a_k_fast: bool, b_n_fast: bool) -> Callable:
    return kernel.builder(dtype, kernel.tiles[dtype], a_k_fast, b_n_fast)
