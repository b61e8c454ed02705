"""How the unpacked driver computes a product: the layout's way (``unpacked_form``: row
dots, the transposing stream or tiles) and which tile suits it (``tile_choice``).
"""

from __future__ import annotations

from ...kernels.shared import ONE_ROW_TILE_MAX_B_BYTES, RESIDENT_STRIPS
from ...simd import (
    address,
    line_elements,
    resident_depth,
    row_dots_rule,
    tile_chosen_up_to,
    tile_cols,
    tile_few_min_b_bytes,
    tile_lanes,
    tile_rows,
    tile_streams_from,
)
from ...simd.subroutine import subroutine
from .row_dots import strips_in_registers

# The kernel's tiles, as ``tile_choice`` names them: FEW_TILE and NARROW_STREAM run the
# few-rows stream (``stream_tiles``) on the few-rows and the narrow tile.
MAIN_TILE, NARROW_TILE, FEW_TILE, GEMV_TILE, RESIDENT_TILE, NARROW_STREAM = 0, 1, 2, 3, 4, 5
# The other ways ``unpacked_route`` may choose: row dots (a matrix times a vector along
# contiguous rows, ``W @ x`` or ``x @ W.T``) and the few-rows stream packing a transposed
# B a strip at a time.
DOTS_OF_A_ROWS, DOTS_OF_B_COLUMNS, TRANSPOSING_STREAM = 6, 7, 8
TILES = -1  # unpacked_form: one of the tiles
TILE_NAMES = (
    "main",
    "narrow",
    "few-rows",
    "GEMV: rows in register strips, or one row",
    "resident B",
    "narrow, all rows in one stream",
)


@subroutine
def tile_choice(shape, narrow, few, gemv, resident, m, n, k, kc, a):
    """Which of the kernel's tiles suits an unpacked product (MAIN_TILE ... RESIDENT_TILE).

    ``resident`` when B's k fits in its registers (k <= depth, n within
    RESIDENT_STRIPS tile widths) and k is one KC block (so its sums are those
    of the blocked path): each strip of B is loaded once per product;
    ``narrow`` (one vector wide) when n fits in it: a 16x16 float32 product
    then computes no padding; ``gemv``
    (1 x 256) for a single row; ``few`` (4 x 64) for a few rows, where the main
    tile would mostly compute copies of the last row, unless n fits one main
    tile (half the few tile would then be padding: float32, one thread, main /
    few, 16x32x128 0.87, 32x32x128 0.73; float64 32x16x128 0.75, but 16x24x128
    1.26), or B is under the few tile's ``min_b_bytes`` and the few tile saves less
    than a quarter of the FMAs: its stream costs more than it saves.  Nor where one row
    tile of the main tile holds all rows, which the few-rows tile computes with as many
    FMAs or more, and B is under ONE_ROW_TILE_MAX_B_BYTES: the main tile then reads B
    once, from the caches.  Up to the GEMV
    tile's ``strips`` rows, with B not read from memory, the rows are held in register
    strips instead (GEMV_TILE, ``row_dots.row_strips``).  Where the
    narrow tile holds the rows of C with little padding (``narrow_streams``), the
    stream runs it instead (NARROW_STREAM): each vector of B is then loaded once per
    k step for 16 rows, and fewer row tiles' partial sums wait in the workspace (AVX-512,
    one thread, float32 m = 13 to 16, k = 512 to 2048, n = 1024 to 4096: 1.10-1.17x as
    fast; m = 9 to 12, 0.88-0.92x; m = 32 1.06x, m = 25 and 28 0.94-0.95x; float64 m = 30
    and 32 1.08-1.17x).  Then
    ``narrow`` again where the main tile's padding rows cost a
    third more FMAs than the narrow tile's extra column strips: 16 rows on a
    14-row main tile compute 28 (AVX-512, one thread: stacks of float64 16x16x16
    1.16x, float32 16x32x32 1.35x as fast; 30 rows, where the narrow tile saves a
    quarter, lost 5 %).
    """
    if n <= RESIDENT_STRIPS * tile_cols(resident, a) and k <= resident_depth(resident) and k <= kc:
        return RESIDENT_TILE
    if n <= tile_cols(narrow, a):
        return NARROW_TILE
    if m == 1:
        return GEMV_TILE
    b_bytes = n * k * (64 // line_elements(shape, a))
    few_saves = padded_fmas(few, m, n, a) < padded_fmas(shape, m, n, a)
    if (
        m <= tile_chosen_up_to(few)
        and n > tile_cols(shape, a)
        and (
            (b_bytes >= tile_few_min_b_bytes(few) and (few_saves or m > tile_rows(shape)))
            or b_bytes >= ONE_ROW_TILE_MAX_B_BYTES
            or 4 * padded_fmas(few, m, n, a) <= 3 * padded_fmas(shape, m, n, a)
        )
    ):
        if strips_in_registers(gemv, m, n, k, a):
            return GEMV_TILE
        return NARROW_STREAM if narrow_streams(narrow, m) else FEW_TILE
    if m <= tile_chosen_up_to(few) and 3 * padded_fmas(narrow, m, n, a) < 2 * padded_fmas(shape, m, n, a):
        return NARROW_TILE
    return MAIN_TILE


@subroutine(inline=True)
def narrow_streams(narrow, m):
    """Whether the few-rows stream of m rows runs the narrow tile (NARROW_STREAM): from the
    kernel's ``stream_from`` rows, where its row tiles pad no more rows than the narrow tile
    has beyond ``stream_from`` (13 to 16 and 29 to 32 rows on AVX-512)."""
    rows, start = tile_rows(narrow), tile_streams_from(narrow)
    return 0 < start <= m and -m % rows <= rows - start


@subroutine
def unpacked_form(m, n, cs_a, rs_b, cs_b):
    """Which way of the unpacked driver a layout takes: row dots for a matrix times a
    vector along contiguous rows (DOTS_OF_A_ROWS: ``W @ x``; DOTS_OF_B_COLUMNS: ``x @
    W.T`` with one row), the TRANSPOSING_STREAM for a B with contiguous columns (few
    rows), else TILES (``tile_choice``).  The one rule that the serial and the parallel
    unpacked products and the strategy table (``strategies``) follow."""
    if n == 1 and cs_a == 1:
        return DOTS_OF_A_ROWS
    if m == 1 and rs_b == 1 and cs_b != 1:
        return DOTS_OF_B_COLUMNS
    if cs_b != 1:
        return TRANSPOSING_STREAM
    return TILES


@subroutine(inline=True)
def unpacked_route(tiles, m, n, k, cs_a, rs_b, cs_b, kc, a):
    """``unpacked_form``, with the tile of ``tile_choice`` in place of TILES (``tiles``: the
    kernel's ``Tiles``)."""
    form = unpacked_form(m, n, cs_a, rs_b, cs_b)
    if form != TILES:
        return form
    return tile_choice(tiles.main, tiles.narrow, tiles.few, tiles.gemv, tiles.resident, m, n, k, kc, a)


@subroutine
def tile_of(shape, narrow, few, gemv, resident, k, kc, a, b):
    """``tile_choice`` for Python callers (``strategies.explain``): a and b are the 2-D operands."""
    rule = row_dots_rule(gemv, False)  # the GEMV tile as the drivers pass it
    return tile_choice(shape, narrow, few, rule, resident, a.shape[0], b.shape[1], k, kc, address(a))


@subroutine(inline=True)
def padded_fmas(shape, m, n, a):
    """Vector FMAs per k step for an m x n C in tiles of ``shape``, padding included."""
    rows, cols = tile_rows(shape), tile_cols(shape, a)
    return -(-m // rows) * rows * -(-n // cols) * (cols // tile_lanes(shape, a))
