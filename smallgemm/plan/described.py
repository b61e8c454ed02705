"""What ``explain`` says of a strategy row: its tile and its tasks on several workers.

Each row of the tables carries these functions (``Strategy.tile``, ``Strategy.tasks``),
so ``explain`` reads them from the row it chose and never switches on a row's name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..drivers.parallel import task_split
from ..drivers.unpacked import TILE_NAMES, tile_of

if TYPE_CHECKING:
    from .strategies import Problem


def no_tile(p: Problem) -> str:
    """Rows that multiply nothing."""
    return "none"


def main_tile(p: Problem) -> str:
    """The blocked loops: the kernel's main MR x NR tile on packed panels."""
    return p.prep.kernel.tile_name(p.dtype)


def panel_rows_tile(p: Problem) -> str:
    """Fewer rows than MR times a packed B: the panel-rows tile, one packed panel wide."""
    kernel = p.prep.kernel
    return f"{kernel.panel_rows().rows}x{kernel.nr(p.dtype)} (one packed panel wide)"


def row_dots_tile(p: Problem) -> str:
    """A matrix times a vector along contiguous rows."""
    return "row dots on the GEMV tile"


def few_rows_tile(p: Problem) -> str:
    """The transposing stream: B packed a strip at a time for the few-rows tile."""
    return TILE_NAMES[2]


def routed_tile(p: Problem) -> str:
    """The unpacked drivers: the tile their route chooses for this product."""
    kernel = p.prep.kernel
    return TILE_NAMES[
        tile_of(
            kernel.shape,
            kernel.narrow,
            kernel.few,
            kernel.gemv,
            kernel.resident,
            p.k,
            p.prep.sizes.kc,
            p.a,
            p.b,
        )
    ]


def chain_tiles(p: Problem) -> str:
    """A continued chain on the direct tiles (``unpacked.chain_tile_loops``), which start each
    chain from C: the narrow tile where n fits it, else the main tile and its edges."""
    if p.n <= p.prep.narrow_cols:
        return TILE_NAMES[1]
    return f"{TILE_NAMES[0]}, its edges on the narrow and few-rows tiles"


def strip_tasks(p: Problem, workers: int) -> str:
    """The unpacked and prepacked drivers on threads."""
    return "strips of B or rows of A as tasks from an atomic counter"


def row_block_tasks(p: Problem, workers: int) -> str:
    """The blocked loops on threads: row blocks by column groups of each JC slice."""
    sizes = p.prep.sizes_for_depth(p.k)
    kernel = p.prep.kernel
    blocks, groups, _ = task_split(
        p.m, min(p.n, sizes.nc), sizes.mc, kernel.mr(), kernel.nr(p.dtype), workers
    )
    return (
        f"row-block tasks from an atomic counter: {blocks} row blocks x {groups} column groups "
        f"per JC slice (parallel.task_split)"
    )


def whole_product_tasks(p: Problem, workers: int) -> str:
    """A stack shared out: each product is one task."""
    return "whole products as tasks"


def each_product_tasks(p: Problem, workers: int) -> str:
    """A stack whose products each take every worker, one after the other."""
    return "each product on every worker"
