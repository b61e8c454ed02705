"""The tile shapes of the GPU kernels: one configuration per kernel and dtype.

A thread block computes a ``rows × cols`` tile of C, stepping through k ``depth`` at a
time; each of its threads computes ``thread_rows × thread_cols`` elements of the tile.
The block is ``(cols // thread_cols, rows // thread_rows)`` threads.  These are the
shapes of the source documents (seed 000: 128 × 128 × 8 tiles, 8 × 8 per thread);
they are not yet tuned on a GPU of this project's (docs/gpu.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tiles:
    """The tile of C one thread block computes, the k-step, and each thread's share."""

    rows: int
    cols: int
    depth: int
    thread_rows: int = 1
    thread_cols: int = 1

    def __post_init__(self) -> None:
        if self.rows % self.thread_rows or self.cols % self.thread_cols:
            raise ValueError(f"{self}: a thread's share must divide the block's tile")

    @property
    def block(self) -> tuple[int, int]:
        """Threads per block, as CUDA's (x, y): x along the columns of C, y along its rows."""
        return self.cols // self.thread_cols, self.rows // self.thread_rows

    @property
    def threads(self) -> int:
        x, y = self.block
        return x * y

    def grid(self, m: int, n: int) -> tuple[int, int]:
        """Thread blocks that cover an ``m × n`` C, as CUDA's (x, y)."""
        return max(1, -(-n // self.cols)), max(1, -(-m // self.rows))
