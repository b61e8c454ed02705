"""The few-rows stream: B (rows or columns contiguous) packed a strip at a time just
before the few-rows tile uses it, with its sums kept in the workspace.
"""

from __future__ import annotations

import numpy as np

from ...kernels.microkernel import (
    direct_steps,
    direct_steps_fetching,
    merge_tile,
    panel_steps_fetching,
    panel_steps_fetching_rows,
    read_into,
)
from ...kernels.shared import (
    GEMV_CHUNK,
    STREAM_COLS,
    STREAM_FROM_MEMORY_MIN_BYTES,
    STREAM_FROM_MEMORY_ROWS,
    STREAM_ROWS,
    STREAM_STRIP_MAX_BYTES,
    TRANSPOSED_PANEL_BYTES,
)
from ...simd import (
    advance,
    elements_to_line_boundary,
    line_elements,
    stream_fetch_distance,
    stream_fetch_min_bytes,
    stream_keep_from_tiles,
    stream_lead_min_row_bytes,
    stream_strip_bytes,
    stream_transposed_fetch_max_run,
    stream_transposed_fetch_min_bytes,
    tile_cols,
    tile_load,
    tile_rows,
    tile_store,
    tile_streams_from,
    tile_zero,
)
from ...simd.linked import linked, only_where
from ...simd.records import matrix, merge, moved
from ...simd.subroutine import subroutine
from ..blocked import merge_mode
from ..packing import pack_b_panel

# The stream buffer: partial sums of STREAM_ROWS rows x STREAM_COLS columns (or
# one GEMV chunk, with its lead columns and the shift that aligns its vectors:
# fewer than 16 each), then the panel: a strip kept by the first row tile (the tile's
# ``strip_bytes``, at most STREAM_STRIP_MAX_BYTES) and the narrow tile's copy of A, or a
# transposed strip (TRANSPOSED_PANEL_BYTES); in elements of the narrowest dtype, float32.
STREAM_SUMS = max(GEMV_CHUNK + 32, STREAM_ROWS * STREAM_COLS)
STREAM_PANEL = max(STREAM_STRIP_MAX_BYTES, TRANSPOSED_PANEL_BYTES) // 4
STREAM_SIZE = STREAM_SUMS + STREAM_PANEL


@subroutine(inline=True)
def strip_rows(strip_bytes, cols, item_bytes):
    """Rows of B the row stream takes at a time for tiles ``cols`` wide so that one strip
    of them holds ``strip_bytes``: the tile's ``stream.strip_bytes`` for a row-major B,
    TRANSPOSED_PANEL_BYTES for a transposed one (runs of each W row)."""
    return max(1, strip_bytes // (cols * item_bytes))


@subroutine
def fetches_ahead(tile, a, n, k, cs_b):
    """Whether ``stream_tiles`` should request a transposed B's next strip
    (``fetch``) in a product whose B is k x n: the kernel's ``transposed_fetch_*`` settings."""
    size = 64 // line_elements(tile, a)
    least = stream_transposed_fetch_min_bytes(tile)
    run = strip_rows(TRANSPOSED_PANEL_BYTES, tile_cols(tile, a), size) * size
    return cs_b != 1 and least > 0 and n * k * size > least and run <= stream_transposed_fetch_max_run(tile)


@linked
def stream_tiles(tile, m, n, k, alpha, beta, a, b, c, kc, work, fetch):
    """The unpacked product with B read along its rows (few rows): ``stream_strips`` on
    column strips that start on cache lines.  A, B and C are ``Matrix`` records, ``work`` a
    ``Workspace``.

    NumPy's large arrays start 16 bytes into a line, so a strip of B one line wide
    (the AVX2 few-rows tile, the AVX-512 narrow tile) spans two: where every row of B starts at the same place
    within a line, the columns before the first line boundary are a strip of their
    own, where B's rows lie far enough apart to share L1 sets (the kernel's
    ``lead_min_row_bytes``).  Each element keeps its FMA chain: the same bits.
    AVX2, one thread, float32 [4,512] @ [512,2048]: about 1.9x as fast as with strips
    across line boundaries (docs/performance.md).
    """
    lead = 0
    line = line_elements(tile, b.data)
    lead_from = stream_lead_min_row_bytes(tile)
    if b.cs == 1 and b.rs % line == 0 and 0 < lead_from <= b.rs * (64 // line):
        lead = elements_to_line_boundary(tile, b.data, b.offset)
    if lead + tile_cols(tile, b.data) > n:  # too narrow for a strip after the lead: one pass
        lead = 0
    if lead > 0:
        stream_strips(tile, m, lead, k, alpha, beta, a, b, c, kc, work, fetch)
    stream_strips(tile, m, n - lead, k, alpha, beta, a, moved(b, 0, lead), moved(c, 0, lead), kc, work, fetch)


def _narrow_tile_streams(tile, *rest) -> bool:
    return tile.shape.stream_from > 0


# ``stream_tiles`` on the narrow tile (NARROW_STREAM), compiled only for a kernel whose narrow
# tile streams (``TileShape.stream_from``); ``narrow_streams`` never routes the others there.
narrow_stream_tiles = only_where(stream_tiles, _narrow_tile_streams)


@linked
def stream_strips(tile, m, n, k, alpha, beta, a, b, c, kc, work, fetch):
    """The unpacked product with B read along its rows, strip after strip from column 0.

    A tile walking down one column strip of B for a whole KC block jumps a
    row stride at every step, and with rows several KiB apart the hardware
    prefetchers cannot follow (measured: 45 cycles a step).  Here each group of
    ``strip_rows`` rows of B is swept across a chunk of columns, strip after
    strip, for up to STREAM_ROWS rows of A, so B streams from memory in order;
    the tiles' partial sums wait in ``sums`` (STREAM_SIZE elements, in L2)
    between groups.  Each element is still one FMA chain in increasing k over
    its KC block, from zero, merged by the usual rules: the bits of
    ``unpacked_tiles``.

    A B whose rows are not contiguous (``x @ W.T``, W stored [N, K]) is packed
    on the fly, one strip at a time, into the panel at the end of ``sums``
    (in-register transposes): B is read once, in the order of W's rows,
    instead of being packed whole into memory and read again, ``strip_rows``
    rows at a time (long runs of each of W's rows); with ``fetch``
    (``fetches_ahead``), the row tiles request the next strip's rows while
    they compute.  A B with
    contiguous rows goes to that panel too when several row tiles share each
    strip (the kernel's ``keep_from_tiles``), stored by the first tile as it reads it.

    The narrow tile (NARROW_STREAM: 16 rows a row tile) reads its rows of A from a copy
    in that panel, after the kept strip, each group's rows made contiguous: rows of A
    whose stride is a multiple of 4 KiB all fall in the same L1 sets, and 16 of them
    evicted each other at every step (float32 [16,1024] @ [1024,4096], one thread,
    AVX-512: 2.96 ms with A in place, 1.32 ms from the copy).
    """
    mr = tile_rows(tile)
    nr = tile_cols(tile, a.data)
    tile_size = mr * nr
    strips = STREAM_COLS // nr
    sums, scratch = work.sums, work.scratch
    panel = advance(sums, STREAM_SUMS)
    sweep = max(mr, STREAM_ROWS // mr * mr)
    size = 64 // line_elements(tile, b.data)
    strip_bytes = stream_strip_bytes(tile)
    a_copy = advance(panel, strip_bytes // size)  # after a kept strip of B
    group = strip_rows(strip_bytes if b.cs == 1 else TRANSPOSED_PANEL_BYTES, nr, size)
    keep_from = stream_keep_from_tiles(tile)
    # Strips ahead a lone row tile requests (the tile's ``fetch_distance``, from its ``fetch_min_bytes`` of B).
    ahead = stream_fetch_distance(tile) if k * abs(b.rs) * size >= stream_fetch_min_bytes(tile) else 0
    if b.cs == 1 and m <= mr and k * abs(b.rs) * size >= STREAM_FROM_MEMORY_MIN_BYTES:
        group = min(group, STREAM_FROM_MEMORY_ROWS)
    for i0 in range(0, m, sweep):
        height = min(sweep, m - i0)
        tiles = (height + mr - 1) // mr
        keep_strip = b.cs == 1 and 0 < keep_from <= tiles
        # The narrow tile's copy of A's rows, where it fits in the panel after a kept strip.
        copy_a = (
            tile_streams_from(tile) > 0 and b.cs == 1 and strip_bytes // size + height * group <= STREAM_PANEL
        )
        for j0 in range(0, n, STREAM_COLS):
            width = min(STREAM_COLS, n - j0)
            for pc in range(0, k, kc):
                depth = min(kc, k - pc)
                merging = merge(alpha, beta, merge_mode(pc, beta))
                for p0 in range(0, depth, group):
                    steps = min(group, depth - p0)
                    last = p0 + steps == depth
                    a_block = moved(a, i0, pc + p0)
                    if copy_a:
                        read_into(a_copy, steps, a_block, height, steps)
                        a_block = matrix(a_copy, 0, steps, 1)
                    for jr in range(0, width, nr):
                        cols = min(nr, width - jr)
                        b_strip = moved(b, pc + p0, j0 + jr)
                        next_at = b_strip.offset + nr * b.cs  # the next strip
                        source = b_strip
                        if b.cs != 1:
                            pack_b_panel(
                                tile, b.data, b_strip.offset, b.rs, b.cs, steps, cols, panel, np.intp(0)
                            )
                            source = matrix(panel, 0, nr, 1)
                        for ir in range(0, height, mr):
                            rows = min(mr, height - ir)
                            sharer = ir // mr
                            held = advance(sums, (sharer * strips + jr // nr) * tile_size)
                            tile_sum = tile_zero(tile, a.data) if p0 == 0 else tile_load(tile, held)
                            a_tile = moved(a_block, ir, 0)
                            if (
                                keep_strip and ir == 0
                            ):  # read B, keep its rows in the panel for the next tiles
                                tile_sum = direct_steps(
                                    tile, tile_sum, steps, a_tile, rows, b_strip, cols, panel
                                )
                                source = matrix(panel, 0, nr, 1)
                            elif keep_strip and jr + nr < width:  # and request the next strip
                                first, every = sharer - 1, tiles - 1
                                tile_sum = panel_steps_fetching(
                                    tile,
                                    tile_sum,
                                    steps,
                                    a_tile,
                                    rows,
                                    panel,
                                    b.data,
                                    next_at,
                                    b.rs,
                                    first,
                                    every,
                                )
                            elif (
                                b.cs == 1
                                and tiles == 1
                                and cols == nr
                                and ahead > 0
                                and jr + ahead * nr < width
                            ):
                                fetch_at = b_strip.offset + ahead * nr
                                tile_sum = direct_steps_fetching(
                                    tile, tile_sum, steps, a_tile, rows, b_strip, fetch_at
                                )
                            elif fetch and tiles > 1 and cols == nr and jr + 2 * nr <= width:  # W's next rows
                                first, end = sharer * nr // tiles, (sharer + 1) * nr // tiles
                                every = max(1, steps * tiles // nr)
                                tile_sum = panel_steps_fetching_rows(
                                    tile,
                                    tile_sum,
                                    steps,
                                    a_tile,
                                    rows,
                                    panel,
                                    b.data,
                                    next_at,
                                    b.cs,
                                    first,
                                    end,
                                    every,
                                )
                            else:
                                tile_sum = direct_steps(
                                    tile, tile_sum, steps, a_tile, rows, source, cols, None
                                )
                            if last:
                                merge_tile(
                                    tile, tile_sum, moved(c, i0 + ir, j0 + jr), rows, cols, merging, scratch
                                )
                            else:
                                tile_store(tile_sum, held)
