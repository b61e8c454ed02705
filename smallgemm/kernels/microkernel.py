"""The microkernel: C[rows x cols] (+)= alpha * A_panel(MR x kc) . B_panel(kc x NR).

One body serves every ISA and dtype: the TileShape argument's Numba type fixes
MR, NR, the vector width and the multiply-add rule at compile time.  The
contract (docs/kernels.md):

* ``a`` points at an MR-row packed panel (kc columns of MR elements, zero padded),
  ``b`` at an NR-column packed panel (kc rows of NR elements, zero padded);
* the whole MR x NR tile is always computed, in registers, by an FMA chain in
  increasing k starting from zero, or from C's elements with CONTINUE (the chain
  goes on across KC blocks); only the top-left ``rows x cols`` part is written to C;
* the tile is merged with ``mode`` (simd.OVERWRITE / SCALE / ACCUMULATE /
  CONTINUE); with OVERWRITE, C is never read.
"""

from ..simd import (
    ACCUMULATE,
    CONTINUE,
    OVERWRITE,
    line_elements,
    multiply_add,
    panel_prefetch,
    prefetch_read,
    prefetch_read_l2,
    tile_cols,
    tile_lanes,
    tile_load,
    tile_prefetch,
    tile_rank1,
    tile_rank1_direct,
    tile_read,
    tile_read_part,
    tile_rows,
    tile_step_fmas,
    tile_store,
    tile_write,
    tile_write_part,
    tile_zero,
)
from ..simd.records import moved, unit_columns
from ..simd.subroutine import subroutine
from .shared import C_PREFETCH_FMAS, PREFETCH_STEPS


@subroutine
def microkernel(shape, kc, a, a_off, b, b_off, c, rows, cols, merging, scratch):
    """Compute one tile and merge its useful part into C (see the module docstring): ``a``
    and ``b`` point at packed panels (at ``a_off`` and ``b_off``), ``c`` is a ``Matrix``,
    ``merging`` a ``Merge``."""
    late = max(0, kc - C_PREFETCH_FMAS // tile_step_fmas(shape))
    tile = tile_start(shape, a, c, rows, cols, merging.mode, scratch)
    tile = packed_steps(shape, tile, 0, late, a, a_off, b, b_off)
    if c.cs == 1:
        tile_prefetch(shape, c.data, c.offset, c.rs)
    tile = packed_steps(shape, tile, late, kc, a, a_off, b, b_off)
    merge_tile(shape, tile, c, rows, cols, merging, scratch)


@subroutine(inline=True)
def packed_steps(shape, tile, start, end, a, a_off, b, b_off):
    """``tile`` plus the rank-1 updates of k steps [start, end) of packed panels,
    each requesting its panels' lines PREFETCH_STEPS ahead."""
    mr = tile_rows(shape)
    nr = tile_cols(shape, a)
    for p in range(start, end):
        panel_prefetch(shape, a, a_off + (p + PREFETCH_STEPS) * mr, b, b_off + (p + PREFETCH_STEPS) * nr)
        tile = tile_rank1(tile, a, a_off + p * mr, b, b_off + p * nr)
    return tile


@subroutine
def direct_microkernel(shape, kc, a, b, c, rows, cols, merging, scratch):
    """The microkernel on unpacked operands (``Matrix`` records): A with any strides, B with
    unit-stride rows.

    Same tile, same FMA chain and same merge as ``microkernel``, so the bits are
    the same as the packed path's; edges are handled by masked loads instead of
    zero padding.  Rows of A that are contiguous along k are requested
    PREFETCH_STEPS ahead, a line per row as the steps reach it: the tile reads
    one element from each of MR rows a row stride apart per step, a pattern
    the hardware prefetchers leave to demand misses (one thread: 64^3 and 80^3
    products 15-20 % faster with the requests, [2048,512] @ [512,16] 1.5x).
    """
    tile = tile_start(shape, a.data, c, rows, cols, merging.mode, scratch)
    if a.cs == 1:
        line = line_elements(shape, a.data)
        for p0 in range(0, kc, line):
            for i in range(rows):
                prefetch_read(a.data, a.offset + i * a.rs + p0 + PREFETCH_STEPS)
            tile = direct_steps(
                shape,
                tile,
                min(line, kc - p0),
                moved(unit_columns(a), 0, p0),
                rows,
                moved(b, p0, 0),
                cols,
                None,
            )
    else:
        tile = direct_steps(shape, tile, kc, a, rows, b, cols, None)
    merge_tile(shape, tile, c, rows, cols, merging, scratch)


@subroutine(inline=True)
def direct_steps(shape, tile, steps, a, rows, b, cols, kept):
    """``tile`` plus ``steps`` rank-1 updates from unpacked operands (``Matrix`` records; B's
    rows contiguous), k increasing.

    A full-width tile passes its width as a compile-time constant, so B is read
    with plain vector loads (a masked load costs an ALU slot on some CPUs).
    Unless ``kept`` is None, the rows of B read are stored there as
    ``pack_b_panel`` packs them (``tile_rank1_direct``).
    """
    nr = tile_cols(shape, b.data)
    if cols == nr:
        for p in range(steps):
            tile = tile_rank1_direct(
                tile, a.data, a.offset + p * a.cs, a.rs, rows, b.data, b.offset + p * b.rs, nr, kept, p * nr
            )
    else:
        for p in range(steps):
            tile = tile_rank1_direct(
                tile, a.data, a.offset + p * a.cs, a.rs, rows, b.data, b.offset + p * b.rs, cols, kept, p * nr
            )
    return tile


@subroutine(inline=True)
def direct_steps_fetching(shape, tile, steps, a, rows, b, next_off):
    """``tile`` plus ``steps`` rank-1 updates from a full-width strip of unpacked B rows,
    k increasing, requesting at each step the same row of the strip at ``next_off``.

    For the row stream when one row tile takes each strip alone: its rows lie a row
    stride apart (8 KiB for n = 2048 float32), which the prefetchers do not follow,
    and no later tile would request them.
    """
    nr = tile_cols(shape, b.data)
    line = line_elements(shape, b.data)
    for p in range(steps):
        for e in range(0, nr, line):
            prefetch_read(b.data, next_off + p * b.rs + e)
        tile = tile_rank1_direct(
            tile, a.data, a.offset + p * a.cs, a.rs, rows, b.data, b.offset + p * b.rs, nr, None, 0
        )
    return tile


@subroutine(inline=True)
def panel_steps_fetching(shape, tile, steps, a, rows, panel, next_b, next_off, rs_b, first, every):
    """``tile`` plus ``steps`` rank-1 updates from a full packed strip, k increasing,
    requesting rows ``first``, ``first + every``, ... of the next strip of B
    (row p at ``next_b + next_off + p*rs_b``), each at the step of the same number.

    For the row stream: the strip read from memory by the first row tile is
    in the L1 panel, the next one is not, and a tile computing from the panel
    has load slots to spare while its FMAs run.  The later tiles of a sweep
    share the rows out (``every`` of them), so the requests are spread over
    all their steps instead of crowding the memory queue in one tile.
    """
    nr = tile_cols(shape, panel)
    lanes = tile_lanes(shape, panel)
    wait = first
    for p in range(steps):
        if wait == 0:
            for v in range(0, nr, lanes):
                prefetch_read(next_b, next_off + p * rs_b + v)
            wait = every
        wait -= 1
        tile = tile_rank1_direct(tile, a.data, a.offset + p * a.cs, a.rs, rows, panel, p * nr, nr, None, 0)
    return tile


@subroutine(inline=True)
def panel_steps_fetching_rows(
    shape, tile, steps, a, rows, panel, next_b, next_off, stride, first, end, every
):
    """``tile`` plus ``steps`` rank-1 updates from a full packed strip, k increasing,
    requesting ``steps`` elements of rows ``first`` to ``end`` of the next strip
    (row r at ``next_b + next_off + r*stride``), one row every ``every`` steps,
    into the L2.

    For a transposed B (``x @ W.T``) in the row stream: its next strip is a
    block of W's rows that ``pack_b_panel`` will read, and the row tiles of a
    sweep share the rows out so that the requests spread over all their steps.
    Into the L2 only: the packed panel and these rows do not both fit the L1.
    """
    nr = tile_cols(shape, panel)
    line = line_elements(shape, panel)
    row = first
    wait = 0
    for p in range(steps):
        if wait == 0 and row < end:
            for e in range(0, steps, line):
                prefetch_read_l2(next_b, next_off + row * stride + e)
            row += 1
            wait = every
        wait -= 1
        tile = tile_rank1_direct(tile, a.data, a.offset + p * a.cs, a.rs, rows, panel, p * nr, nr, None, 0)
    return tile


@subroutine(inline=True)
def tile_start(shape, like, c, rows, cols, mode, scratch):
    """The tile a KC block starts from: zeros, or with CONTINUE the ``rows x cols`` of C (a
    ``Matrix``) where the previous block left each element's chain (rows of C with unit
    stride read with vector loads, other layouts through ``scratch``).  ``like``: a pointer
    of the dtype."""
    if mode != CONTINUE:
        return tile_zero(shape, like)
    mr = tile_rows(shape)
    nr = tile_cols(shape, c.data)
    if c.cs == 1:
        if rows == mr and cols == nr:
            return tile_read(shape, c.data, c.offset, c.rs)
        return tile_read_part(shape, c.data, c.offset, c.rs, rows, cols)
    read_into(scratch, nr, c, rows, cols)
    return tile_load(shape, scratch)


@subroutine
def read_into(buf, ld_buf, x, rows, cols):
    """The top-left ``rows x cols`` of ``x`` (a ``Matrix``) into a row-major buffer of row
    stride ``ld_buf``."""
    for i in range(rows):
        for j in range(cols):
            buf[i * ld_buf + j] = x.data[x.offset + i * x.rs + j * x.cs]


@subroutine(inline=True)
def merge_tile(shape, tile, c, rows, cols, merging, scratch):
    """Merge the useful ``rows x cols`` part of a finished tile into C (a ``Matrix``) by
    ``merging`` (a ``Merge``).

    Rows of C with unit stride take vector writes (masked at the edges); other
    layouts go through ``scratch`` and a scalar loop.  Inlined (Numba IR) so
    that a caller whose C has a compile-time column stride of 1 keeps no call,
    and so no spilled registers, in its loop.
    """
    mr = tile_rows(shape)
    nr = tile_cols(shape, c.data)
    alpha, beta, mode = merging
    if c.cs == 1:
        if rows == mr and cols == nr:
            tile_write(tile, c.data, c.offset, c.rs, alpha, beta, mode)
        else:
            tile_write_part(tile, c.data, c.offset, c.rs, rows, cols, alpha, beta, mode)
    else:
        tile_store(tile, scratch)
        write_back(shape, scratch, nr, c, rows, cols, merging)


@subroutine
def write_back(shape, tile, ld_tile, c, rows, cols, merging):
    """Merge the top-left ``rows x cols`` of a row-major tile buffer into C (a ``Matrix``),
    any strides, by ``merging`` (a ``Merge``).

    Same update rules and the same multiply-add as ``tile_write``, so an element
    gets identical bits whether its tile was full or an edge.
    """
    alpha, beta, mode = merging
    for i in range(rows):
        for j in range(cols):
            t = tile[i * ld_tile + j]
            at = c.offset + i * c.rs + j * c.cs
            if mode == OVERWRITE or mode == CONTINUE:
                c.data[at] = alpha * t
            elif mode == ACCUMULATE:
                c.data[at] = multiply_add(shape, alpha, t, c.data[at])
            else:
                c.data[at] = multiply_add(shape, alpha, t, beta * c.data[at])
