"""Microkernel registry: which register tiles exist and which CPU can run each.

A new CPU family is a new row in ``KERNELS`` (and, at most, a new TileShape);
the loops above never change.  ``KERNELS`` is ordered from fastest to most
portable and dispatch takes the first one the CPU supports.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..simd import TileShape
from .microkernel import microkernel

__all__ = ["Kernel", "KERNELS", "kernel_by_name", "microkernel"]


# Rows of the panel-wide tile used on prepacked B panels for few rows.
PANEL_ROWS = 4


@dataclass(frozen=True)
class Kernel:
    """One microkernel: its name, register tile and the CPU features it needs."""

    name: str
    shape: TileShape
    # One vector wide: for products whose n fits one vector (many small
    # matrices), where the full tile would mostly compute padding.
    narrow: TileShape
    # Few rows, many columns (x @ W for one token or a small batch): a short,
    # wide tile reads each row of B once per group of rows of A.
    few: TileShape
    # One row of A (a vector times a matrix): one row of C, many vectors wide;
    # memory-bound, so each loaded vector of B feeds exactly one FMA.
    gemv: TileShape
    # Whole products with k <= depth and n within one row of the tile (stacks of
    # tiny matrices, 16x16x16 float32): B stays in registers for the whole
    # product while its rows of C stream past, ``rows`` at a time.
    resident: TileShape
    requires: tuple[str, ...]
    description: str

    def mr(self) -> int:
        return self.shape.rows

    def nr(self, dtype: np.dtype) -> int:
        return self.shape.cols(np.dtype(dtype).itemsize)

    def tile_name(self, dtype: np.dtype) -> str:
        """BLIS-style name, e.g. ``sgemm_avx512_14x32``."""
        prefix = "s" if np.dtype(dtype) == np.float32 else "d"
        return f"{prefix}gemm_{self.name}_{self.mr()}x{self.nr(dtype)}"

    def panel_rows(self) -> TileShape:
        """A few-rows tile exactly one packed B panel wide (NR): for products with a
        prepacked B and fewer rows than MR, which would otherwise mostly compute
        copies of their last row."""
        s = self.shape
        return TileShape(rows=PANEL_ROWS, vectors=s.vectors, bits=s.bits, fused=s.fused)

    def runs_on(self, features: frozenset[str]) -> bool:
        return all(f in features for f in self.requires)


KERNELS: tuple[Kernel, ...] = (
    Kernel(
        "avx512",
        # 28 of the 32 zmm registers hold the tile; 2 hold the B row, 1 the A element.
        TileShape(rows=14, vectors=2, bits=512, fused=True),
        TileShape(rows=16, vectors=1, bits=512, fused=True),
        TileShape(rows=4, vectors=4, bits=512, fused=True),
        TileShape(rows=1, vectors=16, bits=512, fused=True),
        # 16 zmm hold B, 8 the rows of C.
        TileShape(rows=8, vectors=1, bits=512, fused=True, depth=16),
        ("avx512f", "fma"),
        "AVX-512: 14x32 float32, 14x16 float64",
    ),
    Kernel(
        "avx2",
        # 12 of the 16 ymm registers hold the tile; the 14x32 tile split into ymm
        # halves spills (92 GFLOP/s measured), so AVX2 gets its own shape.
        TileShape(rows=6, vectors=2, bits=256, fused=True),
        TileShape(rows=8, vectors=1, bits=256, fused=True),
        TileShape(rows=4, vectors=2, bits=256, fused=True),
        TileShape(rows=1, vectors=8, bits=256, fused=True),
        TileShape(rows=4, vectors=1, bits=256, fused=True, depth=8),
        ("avx2", "fma"),
        "AVX2+FMA: 6x16 float32, 6x8 float64",
    ),
    Kernel(
        "portable",
        # 128-bit vectors exist on every x86-64 (SSE2) and AArch64 (NEON) CPU;
        # fmuladd lets LLVM fuse only where the target has a fast FMA.
        TileShape(rows=4, vectors=2, bits=128, fused=False),
        TileShape(rows=4, vectors=1, bits=128, fused=False),
        TileShape(rows=2, vectors=2, bits=128, fused=False),
        TileShape(rows=1, vectors=4, bits=128, fused=False),
        TileShape(rows=4, vectors=1, bits=128, fused=False, depth=8),
        (),
        "portable 128-bit: 4x8 float32, 4x4 float64",
    ),
)


def kernel_by_name(name: str) -> Kernel:
    for kernel in KERNELS:
        if kernel.name == name:
            return kernel
    names = ", ".join(k.name for k in KERNELS)
    raise ValueError(f"unknown kernel {name!r}; choose one of: {names}")
