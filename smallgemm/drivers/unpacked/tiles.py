"""The tile loops over unpacked operands, resident B, and ``gemm_unpacked``: one product
(or a stack of them) on the route ``unpacked_route`` chooses.
"""

from __future__ import annotations

import numpy as np

from ...kernels.microkernel import direct_microkernel, merge_tile
from ...simd import CONTINUE, resident_b, resident_product, tile_cols, tile_rows, tile_zero
from ...simd.linked import linked
from ...simd.records import first_column, first_row, matrix_of, merge, moved, transposed, unit_columns
from ...simd.subroutine import subroutine
from ..blocked import continued, merge_mode
from .route import (
    DOTS_OF_A_ROWS,
    DOTS_OF_B_COLUMNS,
    FEW_TILE,
    GEMV_TILE,
    MAIN_TILE,
    NARROW_STREAM,
    NARROW_TILE,
    RESIDENT_TILE,
    TRANSPOSING_STREAM,
    padded_fmas,
    unpacked_route,
)
from .row_dots import dot_rows, gemv_rows
from .stream import fetches_ahead, narrow_stream_tiles, stream_tiles


@linked
def resident_tiles(resident, m, n, k, alpha, beta, a, b, c, scratch):
    """A whole product with B in registers (k <= the tile's depth, n <= RESIDENT_STRIPS tile
    widths); A, B and C are ``Matrix`` records.

    One strip of B in the common layouts (A and C rows contiguous) gets its own
    compiled loop, with those strides known at compile time: then no call is
    left in the loop, B stays in registers and the A addresses are constant
    offsets.  Several strips take one loop for any strides.
    """
    if n > tile_cols(resident, a.data):
        resident_strips(resident, m, n, k, alpha, beta, a, b, c, scratch)
    elif c.cs == 1:
        if a.cs == 1:
            resident_strip(resident, m, n, k, alpha, beta, unit_columns(a), b, unit_columns(c), scratch)
        else:
            resident_strip(resident, m, n, k, alpha, beta, a, b, unit_columns(c), scratch)
    else:
        resident_strip(resident, m, n, k, alpha, beta, a, b, c, scratch)


@subroutine(inline=True)
def resident_strip(resident, m, n, k, alpha, beta, a, b, c, scratch):
    """The rows of C, ``rows`` at a time, each the FMA chain over all k from B in registers
    (n <= the tile's width: one strip of B).

    Inlined into its callers: in a stack's loop over products, what does not
    change from one product to the next (B's masks, the row offsets) is then
    computed once, not once per product (a stack of 1000 float32 16x16x16
    products 1.26x as fast, of 8x8x8 1.5x; one thread).
    """
    mr = tile_rows(resident)
    merging = merge(alpha, beta, merge_mode(np.intp(0), beta))  # one KC block: k <= depth < KC
    held = resident_b(resident, b.data, b.offset, b.rs, k, n)
    for i in range(0, m, mr):
        rows = min(mr, m - i)
        tile = resident_product(
            tile_zero(resident, a.data), held, a.data, a.offset + i * a.rs, a.rs, a.cs, rows, k
        )
        merge_tile(resident, tile, moved(c, i, 0), rows, n, merging, scratch)


@subroutine(inline=True)
def resident_strips(resident, m, n, k, alpha, beta, a, b, c, scratch):
    """``resident_strip`` for one strip of B's columns after the other (n wider than the tile).

    Inlined, as ``resident_strip``: a stack of float64 16x16x16 products calling it once a
    product took 30 % longer (masks and row offsets computed again for every product).
    """
    nr = tile_cols(resident, a.data)
    for j in range(0, n, nr):
        resident_strip(
            resident, m, min(nr, n - j), k, alpha, beta, a, moved(b, 0, j), moved(c, 0, j), scratch
        )


@subroutine
def gemm_unpacked(tiles, m, n, k, alpha, beta, a, b, c, kc, work):
    """C = alpha*A.B + beta*C without packing the operands whole (requires m, n, k >= 1):
    A, B and C are ``Matrix`` records, ``tiles`` the kernel's ``Tiles``, ``work`` a ``Workspace``.

    B's rows must be contiguous (``b.cs == 1``), or its columns for few rows
    (m <= STREAM_ROWS: ``stream_tiles`` packs it on the fly), or n == 1.
    ``work.sums`` (STREAM_SIZE elements) holds the partial sums of the streaming
    paths.  A matrix times a vector whose rows are contiguous along k (``W @
    x``, ``x @ W.T``) takes ``dot_rows``.

    The route, then a call by name to the routine that computes it, so a first product
    compiles only its own.  Compiled into UNPACKED's entry (a call by name to this router
    made the 16x16 call 2-3 % slower); the parallel driver's tasks and a stack's products on
    the routes without a tile loop call it by name (``unpacked_part``).
    """
    if continued(alpha, beta, a.data):
        chain_tile_loops(tiles, m, n, k, alpha, beta, a, b, c, kc, work.scratch)
        return
    choice = unpacked_route(tiles, m, n, k, a.cs, b.rs, b.cs, kc, a.data)
    if choice == DOTS_OF_A_ROWS:
        dot_rows(tiles.gemv, m, k, alpha, beta, first_column(b), a, first_column(c), kc, work.sums)
    elif choice == DOTS_OF_B_COLUMNS:
        dot_rows(tiles.gemv, n, k, alpha, beta, first_row(a), transposed(b), first_row(c), kc, work.sums)
    elif choice == TRANSPOSING_STREAM:
        stream_tiles(
            tiles.few, m, n, k, alpha, beta, a, b, c, kc, work, fetches_ahead(tiles.few, a.data, n, k, b.cs)
        )
    elif choice == RESIDENT_TILE:
        resident_tiles(tiles.resident, m, n, k, alpha, beta, a, b, c, work.scratch)
    elif choice == NARROW_TILE:
        tile_loops(tiles.narrow, m, n, k, alpha, beta, a, b, c, kc, work.scratch)
    elif choice == FEW_TILE:
        # b.cs (== 1) and fetch (False) as run-time values, as in the call above: one compiled
        # stream_tiles for both (literals would compile another).
        stream_tiles(
            tiles.few, m, n, k, alpha, beta, a, b, c, kc, work, fetches_ahead(tiles.few, a.data, n, k, b.cs)
        )
    elif choice == NARROW_STREAM:
        narrow_stream_tiles(
            tiles.narrow,
            m,
            n,
            k,
            alpha,
            beta,
            a,
            b,
            c,
            kc,
            work,
            fetches_ahead(tiles.few, a.data, n, k, b.cs),
        )
    elif choice == GEMV_TILE:
        gemv_rows(tiles.gemv, m, n, k, alpha, beta, a, b, c, kc, work.sums)
    else:
        main_tile_loops(tiles, m, n, k, alpha, beta, a, b, c, kc, work)


@linked
def tile_loops(shape, m, n, k, alpha, beta, a, b, c, kc, scratch):
    """``unpacked_tiles`` called by name: one tile's loops, compiled once per tile."""
    unpacked_tiles(shape, m, n, k, alpha, beta, a, b, c, kc, scratch)


@linked
def main_tile_loops(tiles, m, n, k, alpha, beta, a, b, c, kc, work):
    """``main_tiles`` for one product, each edge tile's loops called by name: a first product
    compiles only the tiles it runs."""
    main_rows, main_cols, rows_way = main_edges(tiles.main, tiles.narrow, tiles.few, m, n, a.data)
    b_right, c_right = moved(b, 0, main_cols), moved(c, 0, main_cols)  # the last columns
    a_below, c_below = moved(a, main_rows, 0), moved(c, main_rows, 0)  # the last rows
    edge = m - main_rows
    if main_cols < n:
        tile_loops(tiles.narrow, m, n - main_cols, k, alpha, beta, a, b_right, c_right, kc, work.scratch)
    if rows_way == ROWS_STREAMED:
        fetch = fetches_ahead(tiles.few, a.data, main_cols, k, b.cs)
        stream_tiles(tiles.few, edge, main_cols, k, alpha, beta, a_below, b, c_below, kc, work, fetch)
    elif rows_way == ROWS_IN_FEW:
        tile_loops(tiles.few, edge, main_cols, k, alpha, beta, a_below, b, c_below, kc, work.scratch)
    tile_loops(tiles.main, main_rows, main_cols, k, alpha, beta, a, b, c, kc, work.scratch)


@linked
def chain_tile_loops(tiles, m, n, k, alpha, beta, a, b, c, kc, scratch):
    """A continued chain (alpha == beta == 1: each element's FMA chain goes on from C) on the
    tiles whose loops start from C (``unpacked_tiles``): the narrow tile for n within its
    width, else the main tile with its edges (``main_edges``) on the narrow and the few-rows
    tiles' loops, never the stream, whose partial sums start from zero.  Requires B's rows
    contiguous (``b.cs == 1``, or n == 1).  The bits of the blocked path's continued chain."""
    if n <= tile_cols(tiles.narrow, a.data):
        tile_loops(tiles.narrow, m, n, k, alpha, beta, a, b, c, kc, scratch)
        return
    main_rows, main_cols, rows_way = main_edges(tiles.main, tiles.narrow, tiles.few, m, n, a.data)
    b_right, c_right = moved(b, 0, main_cols), moved(c, 0, main_cols)  # the last columns
    a_below, c_below = moved(a, main_rows, 0), moved(c, main_rows, 0)  # the last rows
    if main_cols < n:
        tile_loops(tiles.narrow, m, n - main_cols, k, alpha, beta, a, b_right, c_right, kc, scratch)
    if rows_way != ROWS_IN_MAIN:
        tile_loops(tiles.few, m - main_rows, main_cols, k, alpha, beta, a_below, b, c_below, kc, scratch)
    tile_loops(tiles.main, main_rows, main_cols, k, alpha, beta, a, b, c, kc, scratch)


@linked
def unpacked_part(tiles, m, n, k, alpha, beta, a, b, c, kc, work):
    """``gemm_unpacked`` called by name: one task of the parallel unpacked driver, compiled once."""
    gemm_unpacked(tiles, m, n, k, alpha, beta, a, b, c, kc, work)


@linked
def gemm_unpacked_stack(tiles, m, n, k, alpha, beta, a, b, c, kc, work, count):
    """``gemm_unpacked`` for each of the ``count`` products of a stack (A, B and C are
    ``Stack`` records).

    The route is chosen once per stack, not once per product; the main, narrow and resident
    tiles each have a loop over the products with the tile's loops inlined
    (``main_tiles_stack``, ``narrow_tiles_stack``, ``resident_stack``: a stack's first product
    compiles only its own), the other routes go through ``unpacked_part``, so no stack loop
    holds a second copy of ``gemm_unpacked``.
    """
    choice = unpacked_route(tiles, m, n, k, a.cs, b.rs, b.cs, kc, a.data)
    if choice == MAIN_TILE:
        main_tiles_stack(tiles, m, n, k, alpha, beta, a, b, c, kc, work, count)
    elif choice == RESIDENT_TILE:
        resident_stack(tiles.resident, m, n, k, alpha, beta, a, b, c, work.scratch, count)
    elif choice == NARROW_TILE:
        narrow_tiles_stack(tiles.narrow, m, n, k, alpha, beta, a, b, c, kc, work.scratch, count)
    else:  # the other routes (row dots, streams) call a linked routine per product anyway
        for t in range(count):
            unpacked_part(
                tiles, m, n, k, alpha, beta, matrix_of(a, t), matrix_of(b, t), matrix_of(c, t), kc, work
            )


@linked
def main_tiles_stack(tiles, m, n, k, alpha, beta, a, b, c, kc, work, count):
    """The main tile's loops for each product of a stack, ``main_tiles`` inlined: the edge
    decisions and the tiles' setup, the same for every product, are made once.  Calling
    ``main_tile_loops`` per product instead, a stack of 1000 float32 16x16x16 products took
    175-182 against 128-129 µs (the AVX2 kernel forced on one Zen 4 core), 20x20x20 on AVX-512
    416-420 against 393-395 µs."""
    for t in range(count):
        main_tiles(tiles, m, n, k, alpha, beta, matrix_of(a, t), matrix_of(b, t), matrix_of(c, t), kc, work)


@linked
def narrow_tiles_stack(narrow, m, n, k, alpha, beta, a, b, c, kc, scratch, count):
    """The narrow tile's loops for each product of a stack, inlined (as ``main_tiles_stack``)."""
    for t in range(count):
        unpacked_tiles(
            narrow, m, n, k, alpha, beta, matrix_of(a, t), matrix_of(b, t), matrix_of(c, t), kc, scratch
        )


@linked
def resident_stack(resident, m, n, k, alpha, beta, a, b, c, scratch, count):
    """B held in registers for each product of a stack: the compiled loop for the strides is
    chosen once per stack, not once per product (saving ~10 ns of a ~100 ns float32 16x16x16
    product); for the common layout the loop over products holds ``resident_strip(s)``
    inlined."""
    if c.cs == 1 and a.cs == 1 and n <= tile_cols(resident, a.data):
        for t in range(count):
            x, y, z = unit_columns(matrix_of(a, t)), matrix_of(b, t), unit_columns(matrix_of(c, t))
            resident_strip(resident, m, n, k, alpha, beta, x, y, z, scratch)
    elif c.cs == 1 and a.cs == 1:
        for t in range(count):
            x, y, z = unit_columns(matrix_of(a, t)), matrix_of(b, t), unit_columns(matrix_of(c, t))
            resident_strips(resident, m, n, k, alpha, beta, x, y, z, scratch)
    else:
        for t in range(count):
            x, y, z = matrix_of(a, t), matrix_of(b, t), matrix_of(c, t)
            resident_tiles(resident, m, n, k, alpha, beta, x, y, z, scratch)


# How ``main_edges`` has the rows past the main tile's last full row tile computed.
ROWS_IN_MAIN, ROWS_STREAMED, ROWS_IN_FEW = 0, 1, 2


@subroutine(inline=True)
def main_edges(shape, narrow, few, m, n, a):
    """(main_rows, main_cols, rows_way): the part of C that the main tile computes, the
    rest going to smaller tiles where it would mostly compute padding.

    A last column strip no wider than the narrow tile goes to the narrow tile
    (one vector: 100 columns were four 32-column strips, the last with 4 live
    columns, a third more FMAs than useful), and the last rows to the few-rows
    stream (ROWS_STREAMED) where it computes at most half the FMAs (2 live rows of 14
    computed 14); a third fewer does not pay for the stream (AVX2, float32, one thread:
    the main tile on 4 edge rows takes 0.83-0.92 of the few-rows stream's time).  Edge
    rows that the few tile computes with fewer FMAs take its direct loops (ROWS_IN_FEW),
    one or several of its row tiles: the main tile's 4 live rows of 6 cost more than a
    full tile (a stack of 1000 float32 16x16x16: 178 µs with the direct loops against 207,
    where 12x16x16, no edge, takes 118); 1 to 3 edge rows gain 5-9 %; 8 edge rows of
    AVX-512's 14-row tile on two 4-row tiles: float32 64^3 4.2-4.5 µs against 4.9 on the
    main tile, float64 8.5-8.9 against 9.0-9.7 (one thread, Intel Xeon; ``python
    benchmarks/source_variants.py benchmarks/kernel_settings.json edge_rows_avx512``).  Every element is still
    the FMA chain of its KC block in increasing k: the bits do not depend on which tile
    computes it.
    """
    nr = tile_cols(shape, a)
    mr = tile_rows(shape)
    main_cols = n
    edge_cols = n % nr
    if n > nr and edge_cols <= tile_cols(narrow, a) and edge_cols > 0:
        main_cols = n - edge_cols
    edge_rows = m % mr
    if m > mr and edge_rows > 0:
        if 2 * padded_fmas(few, edge_rows, main_cols, a) <= padded_fmas(shape, edge_rows, main_cols, a):
            return m - edge_rows, main_cols, ROWS_STREAMED
        few_fmas = padded_fmas(few, edge_rows, main_cols, a)
        if few_fmas < padded_fmas(shape, edge_rows, main_cols, a) and main_cols % tile_cols(few, a) == 0:
            return m - edge_rows, main_cols, ROWS_IN_FEW
    return m, main_cols, ROWS_IN_MAIN


@subroutine(inline=True)
def main_tiles(tiles, m, n, k, alpha, beta, a, b, c, kc, work):
    """The main tile's loops and their edges (``main_edges``), the edge tiles' loops inlined.
    Requires ``b.cs == 1``.

    Inlined with ``unpacked_tiles`` into the stack loop (``main_tiles_stack``); one product
    calls the loops by name instead (``main_tile_loops``).
    """
    main_rows, main_cols, rows_way = main_edges(tiles.main, tiles.narrow, tiles.few, m, n, a.data)
    b_right, c_right = moved(b, 0, main_cols), moved(c, 0, main_cols)  # the last columns
    a_below, c_below = moved(a, main_rows, 0), moved(c, main_rows, 0)  # the last rows
    edge = m - main_rows
    if main_cols < n:
        unpacked_tiles(tiles.narrow, m, n - main_cols, k, alpha, beta, a, b_right, c_right, kc, work.scratch)
    if rows_way == ROWS_STREAMED:
        # b.cs and fetch as run-time values, as in gemm_unpacked: the same compiled stream_tiles.
        fetch = fetches_ahead(tiles.few, a.data, main_cols, k, b.cs)
        stream_tiles(tiles.few, edge, main_cols, k, alpha, beta, a_below, b, c_below, kc, work, fetch)
    elif rows_way == ROWS_IN_FEW:
        unpacked_tiles(tiles.few, edge, main_cols, k, alpha, beta, a_below, b, c_below, kc, work.scratch)
    unpacked_tiles(tiles.main, main_rows, main_cols, k, alpha, beta, a, b, c, kc, work.scratch)


@subroutine(inline=True)
def unpacked_tiles(shape, m, n, k, alpha, beta, a, b, c, kc, scratch):
    """PC, JR, IR loops over the tiles of ``shape``, each from the unpacked operands
    (inlined into the stack loop: see ``main_tiles``; by name elsewhere: ``tile_loops``)."""
    mr = tile_rows(shape)
    nr = tile_cols(shape, a.data)
    for pc in range(0, k, kc):  # PC: the same KC blocks as the blocked driver
        depth = min(kc, k - pc)
        # A continued chain starts each tile from C (``tile_start``), in every KC block.
        merging = merge(alpha, beta, CONTINUE if continued(alpha, beta, a.data) else merge_mode(pc, beta))
        for jr in range(0, n, nr):
            for ir in range(0, m, mr):
                direct_microkernel(
                    shape,
                    depth,
                    moved(a, ir, pc),
                    moved(b, pc, jr),
                    moved(c, ir, jr),
                    min(mr, m - ir),
                    min(nr, n - jr),
                    merging,
                    scratch,
                )
