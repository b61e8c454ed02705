"""The schedule of a product larger than device memory (seed 003, section 4).

C is computed block by block.  A block of C is ``rows × cols``; it needs the A row
panel of its rows and the B column panel of its columns, each ``depth`` deep (all of
K unless even one tile's panels of full depth do not fit, then K in chunks, each
block's chain continued from chunk to chunk).  The device holds two slots for A
panels, two for B panels and two for C blocks (one where a single panel covers its
matrix, ``slots``): while one block is computed on one CUDA stream, the other stream
copies the next block's panels in and the last block's result out.  ``device_bytes``
is what ``streamed.run`` allocates, to the byte.

Order: row panel by row panel of A; along a row panel, the B column panels go left
to right, then right to left on the next row panel (a serpentine), so an A panel is
copied once and stays for its whole row, and the two B panels at each turn, still in
their slots, are used again (``copies``).  Panel sizes are chosen to copy the least: B is copied once per row
panel, so the row panels are made as tall as the limit allows, for each candidate
width of the column panels; the pair with the least traffic wins.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Panels:
    """The blocking: C blocks of ``rows × cols``, panels ``depth`` deep."""

    rows: int
    cols: int
    depth: int


@dataclass(frozen=True)
class Step:
    """One kernel launch: the C block (i, j) of the panels, over k-chunk ``chunk``."""

    block: int  # the block's number in the order: its C slot and stream
    i: int
    j: int
    chunk: int


def slots(m: int, n: int, k: int, panels: Panels) -> tuple[int, int, int]:
    """Device slots for A panels, B panels and C blocks: two each, so that one is copied
    while the other is used, or one where a single panel or block covers its whole
    matrix (it is copied once and never replaced)."""
    a_slots = 1 if panels.rows >= m and panels.depth >= k else 2
    b_slots = 1 if panels.cols >= n and panels.depth >= k else 2
    c_slots = 1 if panels.rows >= m and panels.cols >= n else 2
    return a_slots, b_slots, c_slots


def device_bytes(m: int, n: int, k: int, itemsizes: tuple[int, int, int], panels: Panels) -> int:
    """Device memory the schedule allocates: ``slots`` of each operand's panel size."""
    sa, sb, sc = itemsizes
    a_slots, b_slots, c_slots = slots(m, n, k, panels)
    return (
        a_slots * panels.rows * panels.depth * sa
        + b_slots * panels.depth * panels.cols * sb
        + c_slots * panels.rows * panels.cols * sc
    )


def copies(m: int, n: int, k: int, panels: Panels) -> tuple[int, int]:
    """The A panels and B panels ``order`` copies in, with two slots each, the least
    recently used refilled.  Along the serpentine an A panel stays for its row; at a
    turn the last two B panels are still there (with K in two chunks, the last block's
    two); with K in more chunks than slots, every block copies its panels anew."""
    rows, cols = -(-m // panels.rows), -(-n // panels.cols)
    chunks = -(-k // panels.depth)
    if chunks == 1:
        return rows, cols + (rows - 1) * max(0, cols - 2)
    if chunks == 2:
        return rows * chunks, (rows * cols - (rows - 1)) * chunks
    return rows * cols * chunks, rows * cols * chunks


def traffic(m: int, n: int, k: int, itemsizes: tuple[int, int, int], panels: Panels) -> float:
    """Bytes copied to and from the device by ``order`` (panels of one size taken as the
    average, edge panels being smaller)."""
    sa, sb, sc = itemsizes
    a_copies, b_copies = copies(m, n, k, panels)
    a_panels = -(-m // panels.rows) * -(-k // panels.depth)
    b_panels = -(-n // panels.cols) * -(-k // panels.depth)
    return a_copies * m * k * sa / a_panels + b_copies * k * n * sb / b_panels + m * n * sc


def _tallest(m: int, fits, tile: int) -> int:
    """The most rows (at most m, a multiple of ``tile`` unless all of m) for which ``fits``."""
    if fits(m):
        return m
    lo, hi = 0, m  # fits(lo) or lo == 0; not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo - lo % tile if lo >= tile else lo


def choose(
    m: int, n: int, k: int, itemsizes: tuple[int, int, int], limit: int, tile_rows: int, tile_cols: int
) -> Panels:
    """The panels that copy the least within ``limit`` bytes of device memory."""
    best = None
    cols = n
    while True:
        rows = _tallest(
            m, lambda r, cols=cols: device_bytes(m, n, k, itemsizes, Panels(r, cols, k)) <= limit, tile_rows
        )
        if rows >= min(m, tile_rows):
            panels = Panels(rows, cols, k)
            cost = traffic(m, n, k, itemsizes, panels)
            if best is None or cost < best[0]:
                best = (cost, panels)
        if cols <= tile_cols:
            break
        cols = max(tile_cols, (cols // 2) - (cols // 2) % tile_cols)
    if best is not None:
        return best[1]
    rows, cols = min(m, tile_rows), min(n, tile_cols)
    depth = _tallest(k, lambda d: device_bytes(m, n, k, itemsizes, Panels(rows, cols, d)) <= limit, 1)
    if depth < 1:
        raise MemoryError(
            f"smallgemm.cuda.matmul: a memory limit of {limit} bytes cannot hold one "
            f"{rows} x {cols} block of C and its panels"
        )
    return Panels(rows, cols, depth)


def order(m: int, n: int, k: int, panels: Panels) -> Iterator[Step]:
    """The launches, in the serpentine order, each block's k-chunks in increasing k."""
    row_panels, col_panels = -(-m // panels.rows), -(-n // panels.cols)
    chunks = max(1, -(-k // panels.depth))
    block = 0
    for i in range(row_panels):
        columns = range(col_panels) if i % 2 == 0 else range(col_panels - 1, -1, -1)
        for j in columns:
            for chunk in range(chunks):
                yield Step(block, i, j, chunk)
            block += 1
