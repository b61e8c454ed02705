"""The few-rows stream: B (rows or columns contiguous) packed a strip at a time just
before the few-rows tile uses it, with its sums kept in the workspace.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..driver import merge_mode
from ..kernels.microkernel import (
    direct_steps,
    direct_steps_fetching,
    merge_tile,
    panel_steps_fetching,
    panel_steps_fetching_rows,
)
from ..packing import pack_b_panel
from ..simd import (
    advance,
    elements_to_line_boundary,
    line_elements,
    tile_cols,
    tile_load,
    tile_rows,
    tile_store,
    tile_zero,
)
from .row_dots import GEMV_CHUNK


# The row stream (``stream_tiles``): rows of B taken at a time so that one strip
# of them (a tile wide) holds this many bytes (then the tiles' partial sums go to
# the stream buffer and the next column strip reads the same rows: ``strip_rows``),
# columns whose partial sums the buffer holds at once, and rows of A per sweep.
# 8 KiB is 32 rows of the AVX-512 tile's strips (256 bytes), measured on two AVX-512
# CPUs (docs/performance.md); the AVX2 tile's strips are one line, and 128 rows of
# them beat 32 (one thread, float32 [16,512] @ [512,2048]: 1.17x; 64 rows 1.11x).
STREAM_STRIP_BYTES = 8192
STREAM_COLS = 1024
STREAM_ROWS = 32
# A single row tile (m <= MR) streaming a B whose rows span this many bytes or more
# (from memory rather than the L3) takes at most STREAM_FROM_MEMORY_ROWS rows of B a
# group: the lines it requests two strips ahead are then still there when it reads
# them (AVX2, 128-row groups otherwise, one thread, float32 [4,1024] @ [1024,16384]:
# 4.60 ms against 8.39 with 128 rows; docs/performance.md).  From the L3 (16 MiB:
# 0.85 against 0.80 ms), or with several row tiles ([8,4096] @ [4096,4096]: 6.78
# against 6.00), 32-row groups lose.
STREAM_FROM_MEMORY_MIN_BYTES = 32 << 20
STREAM_FROM_MEMORY_ROWS = 32
# The row stream starts its strips on cache lines (``stream_tiles``) only where B's
# rows lie at least this many bytes apart: rows that close share no L1 sets, lines
# split between two strips cost little, and the lead columns' strip of their own
# costs a whole pass of the row tiles (AVX2, one thread, B 16 bytes into a line, with /
# without the lead strip: float32 [4,512] @ [512,2048], 8 KiB rows, 207 / 364 µs, but
# [8,128] @ [128,128], 512-byte rows, 6.44 / 5.62).
STREAM_LEAD_MIN_ROW_BYTES = 2048
# From this many row tiles per sweep, a strip of contiguous B rows is kept in
# the L1 panel for the other tiles: its ``strip_rows`` rows lie a row stride
# apart (8 KiB for n = 2048 float32), so they share a few L1 sets and evict
# each other between tiles.  The first tile stores the rows it reads into the
# panel (``direct_steps`` with ``kept``); a separate copy first waits on memory
# (float32 [16,512] @ [512,2048], µs: no panel 365, separate copy 337, kept 288-300).
# The second tile then requests the next strip while it computes from the
# panel (``panel_steps_fetching``: 4-7 % faster, m = 8 to 32, one thread); every
# later tile requesting all of it lost that, but the later tiles sharing its rows
# out (each requests every (tiles - 1)-th row) gain 4-8 % more (m = 12 to 32; m = 8
# has one later tile).
STREAM_PACK_MIN_TILES = 2
# A row tile that takes each strip alone (rows within one tile's height) requests
# the strip this many strips ahead while it computes (``direct_steps_fetching``):
# no later tile would, and the prefetchers do not follow rows a stride apart.
# (AVX2, one thread, float32 [4,512] @ [512,8192]: 1238 µs two strips ahead, 1368
# one ahead, 1577 without).
FETCH_DISTANCE = 2
# Rows of a B whose rows are not contiguous (``x @ W.T``) packed at once into
# the panel, one strip wide, so that the panel holds this many bytes
# (``strip_rows``): W's rows are then read in long runs, which the
# prefetchers follow, where runs of 128 bytes (32 rows), a thousand rows apart,
# left it waiting on the L3.  For the AVX-512 few-rows tile (64 float32
# columns) that is 128 rows, runs of 512 bytes (one thread, [16,512] @ W.T,
# W [2048,512]: 376 µs against 458 with 32 rows); 512 rows (a panel in the L2)
# read the L3 faster still but lost 25 % in the L2.  The AVX2 tile's strips are
# a quarter as wide (16 float32, 8 float64), and its panel of the same bytes takes
# 512 rows, a whole KC block (one thread, float32 [32,512] @ W.T: 1049 µs against
# 1196 with 128 rows and requests ahead; float64 alike; docs/performance.md).
TRANSPOSED_PANEL_BYTES = 32768
# While the row tiles of a sweep compute from a transposed strip's panel, they
# request the W rows of the next strip into the L2, when the whole B is larger
# than TRANSPOSED_FETCH_MIN_BYTES and the panel's runs of each W row are at
# most TRANSPOSED_FETCH_MAX_RUN bytes.  Float32, one thread, paired runs in
# one process: [8,512] / [16,512] @ W.T, W [2048,512] (4 MiB), 10-15 %
# faster, [16,4096] @ W.T, W [4096,4096], 16 %; two threads unchanged; W
# [512,512] (1 MiB, in the L2) lost 8 % to requests that find their lines
# already there; float64 (1 KiB runs) lost 0-5 %, and 7-9 % with requests
# into the L1.
TRANSPOSED_FETCH_MIN_BYTES = 1 << 20
TRANSPOSED_FETCH_MAX_RUN = 512
# The stream buffer: partial sums of STREAM_ROWS rows x STREAM_COLS columns (or
# one GEMV chunk, with its lead columns and the shift that aligns its vectors:
# fewer than 16 each), then the panel: a strip kept by the first row tile
# (STREAM_STRIP_BYTES), or a transposed strip (TRANSPOSED_PANEL_BYTES); in
# elements of the narrowest dtype, float32.
STREAM_SUMS = max(GEMV_CHUNK + 32, STREAM_ROWS * STREAM_COLS)
STREAM_PANEL = max(STREAM_STRIP_BYTES, TRANSPOSED_PANEL_BYTES) // 4
STREAM_SIZE = STREAM_SUMS + STREAM_PANEL


@njit(cache=True, inline="always")
def strip_rows(strip_bytes, cols, item_bytes):
    """Rows of B the row stream takes at a time for tiles ``cols`` wide so that one strip
    of them holds ``strip_bytes``: STREAM_STRIP_BYTES for a row-major B,
    TRANSPOSED_PANEL_BYTES for a transposed one (runs of each W row)."""
    return max(1, strip_bytes // (cols * item_bytes))


@njit(cache=True)
def fetches_ahead(tile, a, n, k, cs_b):
    """Whether ``stream_tiles`` should request a transposed B's next strip
    (``fetch``) in a product whose B is k x n (TRANSPOSED_FETCH_MIN_BYTES)."""
    size = 64 // line_elements(tile, a)
    large = n * k * size > TRANSPOSED_FETCH_MIN_BYTES
    return cs_b != 1 and large and strip_rows(TRANSPOSED_PANEL_BYTES, tile_cols(tile, a), size) * size <= TRANSPOSED_FETCH_MAX_RUN


@njit(cache=True)
def stream_tiles(
    tile, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b, c, c_off, rs_c, cs_c, kc, sums, scratch,
    fetch,
):
    """The unpacked product with B read along its rows (few rows): ``stream_strips`` on
    column strips that start on cache lines.

    NumPy's large arrays start 16 bytes into a line, so a strip of B one line wide
    (the AVX2 few-rows tile) spans two: where every row of B starts at the same place
    within a line, the columns before the first line boundary are a strip of their
    own, where B's rows lie far enough apart to share L1 sets
    (STREAM_LEAD_MIN_ROW_BYTES).  Each element keeps its FMA chain: the same bits.
    AVX2, one thread, float32 [4,512] @ [512,2048]: about 1.9x as fast as with strips
    across line boundaries (docs/performance.md).
    """
    lead = 0
    line = line_elements(tile, b)
    if cs_b == 1 and rs_b % line == 0 and rs_b * (64 // line) >= STREAM_LEAD_MIN_ROW_BYTES:
        lead = elements_to_line_boundary(tile, b, b_off)
    if lead + tile_cols(tile, b) > n:  # too narrow for a strip after the lead: one pass
        lead = 0
    if lead > 0:
        stream_strips(tile, m, lead, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b, c, c_off, rs_c, cs_c,
                      kc, sums, scratch, fetch)
    stream_strips(tile, m, n - lead, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off + lead, rs_b, cs_b, c,
                  c_off + lead * cs_c, rs_c, cs_c, kc, sums, scratch, fetch)


@njit(cache=True)
def stream_strips(
    tile, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b, c, c_off, rs_c, cs_c, kc, sums, scratch,
    fetch,
):
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
    strip (STREAM_PACK_MIN_TILES), stored by the first tile as it reads it.
    """
    mr = tile_rows(tile)
    nr = tile_cols(tile, a)
    tile_size = mr * nr
    strips = STREAM_COLS // nr
    panel = advance(sums, STREAM_SUMS)
    sweep = max(mr, STREAM_ROWS // mr * mr)
    size = 64 // line_elements(tile, b)
    group = strip_rows(STREAM_STRIP_BYTES if cs_b == 1 else TRANSPOSED_PANEL_BYTES, nr, size)
    if cs_b == 1 and m <= mr and k * abs(rs_b) * size >= STREAM_FROM_MEMORY_MIN_BYTES:
        group = min(group, STREAM_FROM_MEMORY_ROWS)
    for i0 in range(0, m, sweep):
        height = min(sweep, m - i0)
        tiles = (height + mr - 1) // mr
        keep_strip = cs_b == 1 and height > (STREAM_PACK_MIN_TILES - 1) * mr
        for j0 in range(0, n, STREAM_COLS):
            width = min(STREAM_COLS, n - j0)
            for pc in range(0, k, kc):
                depth = min(kc, k - pc)
                mode = merge_mode(pc, beta)
                for p0 in range(0, depth, group):
                    steps = min(group, depth - p0)
                    last = p0 + steps == depth
                    for jr in range(0, width, nr):
                        cols = min(nr, width - jr)
                        b_at = b_off + (pc + p0) * rs_b + (j0 + jr) * cs_b
                        next_at = b_at + nr * cs_b  # the next strip
                        src, rs_src = b, rs_b
                        if cs_b != 1:
                            pack_b_panel(tile, b, b_at, rs_b, cs_b, steps, cols, panel, np.intp(0))
                            src, b_at, rs_src = panel, 0, nr
                        for ir in range(0, height, mr):
                            rows = min(mr, height - ir)
                            sharer = ir // mr
                            held = advance(sums, (sharer * strips + jr // nr) * tile_size)
                            tile_sum = tile_zero(tile, a) if p0 == 0 else tile_load(tile, held)
                            a_at = a_off + (i0 + ir) * rs_a + (pc + p0) * cs_a
                            if keep_strip and ir == 0:  # read B, keep its rows in the panel for the next tiles
                                tile_sum = direct_steps(tile, tile_sum, steps, a, a_at, rs_a, cs_a, rows, b, b_at, rs_b,
                                                        cols, panel)
                                src, b_at, rs_src = panel, 0, nr
                            elif keep_strip and jr + nr < width:  # and request the next strip
                                tile_sum = panel_steps_fetching(tile, tile_sum, steps, a, a_at, rs_a, cs_a, rows, panel,
                                                                b, next_at, rs_b, sharer - 1, tiles - 1)
                            elif cs_b == 1 and tiles == 1 and cols == nr and jr + FETCH_DISTANCE * nr < width:
                                tile_sum = direct_steps_fetching(tile, tile_sum, steps, a, a_at, rs_a, cs_a, rows, b, b_at,
                                                                 rs_b, b_at + FETCH_DISTANCE * nr)
                            elif fetch and tiles > 1 and cols == nr and jr + 2 * nr <= width:  # W's next rows
                                tile_sum = panel_steps_fetching_rows(
                                    tile, tile_sum, steps, a, a_at, rs_a, cs_a, rows, panel, b, next_at, cs_b,
                                    sharer * nr // tiles, (sharer + 1) * nr // tiles, max(1, steps * tiles // nr),
                                )
                            else:
                                tile_sum = direct_steps(tile, tile_sum, steps, a, a_at, rs_a, cs_a, rows, src, b_at, rs_src,
                                                        cols, None)
                            if last:
                                merge_tile(tile, tile_sum, c, c_off + (i0 + ir) * rs_c + (j0 + jr) * cs_c, rs_c, cs_c,
                                           rows, cols, alpha, beta, mode, scratch)
                            else:
                                tile_store(tile_sum, held)
