"""A microkernel: its register tiles, the CPU features it needs, and its configuration."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..simd import TileShape
from .config import KernelConfig

# Rows of the panel-wide tile used on prepacked B panels for few rows.
PANEL_ROWS = 4


@dataclass(frozen=True)
class Kernel:
    """One microkernel: its name, register tiles, the CPU features it needs, and its tuning."""

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
    config: KernelConfig

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
