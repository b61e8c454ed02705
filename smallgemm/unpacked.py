"""Products that skip packing: the microkernel reads A and B where they are.

For small products (and few rows) packing costs more than it saves.  This
driver walks the same KC blocks and MR x NR tiles as the blocked driver and
runs the same tile, FMA chain and merge (``direct_microkernel``), so a product
gives the same bits whichever driver its size selects.  It reads B's rows with
vector loads where they are contiguous; a B with contiguous columns (few rows
only) is packed a small panel at a time (``stream_tiles``).  A may have any
strides.
"""

import numpy as np
from numba import njit

from .driver import merge_mode
from .kernels.microkernel import (
    direct_microkernel,
    direct_steps,
    direct_steps_fetching,
    merge_tile,
    panel_steps_fetching,
    panel_steps_fetching_rows,
)
from .packing import pack_b_panel
from .simd import (
    ACCUMULATE,
    AXPY_ROWS,
    AXPY_ROWS_WIDE,
    LANE_DOT_ROWS,
    OVERWRITE,
    address,
    advance,
    axpy_rows,
    axpy_rows_wide,
    axpy_vector,
    buffer_at,
    dot_pair_zero,
    dot_steps,
    dot_tail,
    dot_zero,
    elements_to_line_boundary,
    elements_to_vector_boundary,
    lane_dot_steps,
    lane_dot_sums,
    lane_dot_tail,
    lane_dot_width,
    lane_dot_zero,
    line_elements,
    multiply_add,
    prefetch_read_l2,
    resident_b,
    resident_depth,
    resident_product,
    row_dots_rule,
    sums_lane_wise,
    tile_cols,
    tile_lanes,
    tile_load,
    tile_rows,
    tile_store,
    tile_zero,
)

# The forms of a product that row dots compute (``row_dots_form``).
NOT_DOTS, DOTS_OF_A_ROWS, DOTS_OF_B_COLUMNS = 0, 1, 2


@njit(cache=True)
def row_dots_form(m, n, cs_a, rs_b, cs_b):
    """Whether a product is a matrix times a vector along contiguous rows, and which:
    DOTS_OF_A_ROWS (``W @ x``: one column of B, A's rows contiguous), DOTS_OF_B_COLUMNS
    (``x @ W.T``: one row of A, B's columns contiguous), or NOT_DOTS."""
    if n == 1 and cs_a == 1:
        return DOTS_OF_A_ROWS
    if m == 1 and rs_b == 1 and cs_b != 1:
        return DOTS_OF_B_COLUMNS
    return NOT_DOTS


# Up to this many rows the few-rows tile (4 x 64 with AVX-512) beats the main
# 14 x 32 tile on unpacked operands: measured 1.6x at m = 16, equal at m = 64.
FEW_TILE_MAX_ROWS = 32


# A resident-B product is up to this many tiles wide: each column strip of B is
# held in registers in turn while all rows of C pass (the strips share A from
# the L1): small products and stacks of them run 1.3-1.7x as fast as through the
# narrow or main tile (AVX-512, one thread; docs/performance.md).
RESIDENT_STRIPS = 4

# A few rows times a B of fewer bytes than this take the main tile unless the
# few-rows tile saves a quarter of the FMAs: from the L1, the few-rows stream
# costs more than the padding rows it saves (AVX2, 6 x 16 main and 4 x 16 few tiles,
# one thread: the main tile takes 0.6 of the stream's time on float32 16x32x16, 1.1 on
# float64 16x64x64, 32 KiB of B; docs/performance.md).
FEW_TILE_MIN_B_BYTES = 32 * 1024

# The kernel's tiles, as ``tile_choice`` names them.
MAIN_TILE, NARROW_TILE, FEW_TILE, GEMV_TILE, RESIDENT_TILE = 0, 1, 2, 3, 4


@njit(cache=True)
def tile_choice(shape, narrow, few, resident, m, n, k, kc, a):
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
    1.26), or B fits in the L1 (FEW_TILE_MIN_B_BYTES) and the few tile saves less
    than a quarter of the FMAs: its stream costs more than it saves.  Then
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
    if m <= FEW_TILE_MAX_ROWS and n > tile_cols(shape, a) and (
        n * k * (64 // line_elements(shape, a)) >= FEW_TILE_MIN_B_BYTES
        or 4 * padded_fmas(few, m, n, a) <= 3 * padded_fmas(shape, m, n, a)
    ):
        return FEW_TILE
    if m <= FEW_TILE_MAX_ROWS and 3 * padded_fmas(narrow, m, n, a) < 2 * padded_fmas(shape, m, n, a):
        return NARROW_TILE
    return MAIN_TILE


@njit(cache=True, inline="always")
def padded_fmas(shape, m, n, a):
    """Vector FMAs per k step for an m x n C in tiles of ``shape``, padding included."""
    rows, cols = tile_rows(shape), tile_cols(shape, a)
    return -(-m // rows) * rows * -(-n // cols) * (cols // tile_lanes(shape, a))


# Columns of C accumulated at once by ``gemv_rows`` (its row buffer: 16 KiB of
# float32, resident in L1 while B streams past).
GEMV_CHUNK = 4096
# From this many bytes of B (beyond what the L3 keeps between calls), the
# single-row stream requests B's rows GEMV_FETCH_AHEAD elements ahead (rounded
# up to whole rows of the chunk, so that the request is for the columns the
# chunk reads next) into the L2: the hardware prefetchers alone leave a 64 MiB
# B at ~65 % of the read bandwidth.  Requests into the L1 (2048 elements
# ahead) cost the L1 lines the row buffer needs; from the L3, any
# request costs more than it gives (L1 32 KiB, L2 1 MiB, L3 32 MiB, one thread:
# B read at 31 GB/s with requests against 23 without at 16 MiB, 43 against 48 at 8 MiB).
GEMV_FETCH_MIN_BYTES = 16 << 20
GEMV_FETCH_AHEAD = 16384
# From this many bytes of B (twice a 32 MiB L3), rows are added
# AXPY_ROWS_WIDE at a time (``axpy_rows_wide``), the requests twice as many rows
# ahead: the row buffer's loads and stores halve.  One thread: 8-row groups 1.01-1.13x
# as fast as 4-row with part of B still in the L3, even with B from memory only; where
# B stays in the L3 they lost (0.80-0.97x).
GEMV_WIDE_MIN_BYTES = 64 << 20
# The requests and the 8-row groups above are for kernels with vectors this many
# bytes wide (AVX-512, where they were measured).  With AVX2 both lose, alone and
# together (one thread, float32 [1,4096] @ [4096,4096]: 3.3-3.6 ms without either,
# 5.1-5.5 with; docs/performance.md); one request per line instead of per 32-byte
# vector kept most of the loss.
GEMV_STREAM_TUNED_VECTOR_BYTES = 64


@njit(cache=True)
def merge_sums(rule, sums, count, c, c_off, cs_c, alpha, beta, mode):
    """Merge ``count`` raw sums of one KC block into C's elements ``c_off + j*cs_c``, by
    the rules of ``tile_write`` (same multiply-adds), so the bits are the tiles'."""
    for j in range(count):
        at = c_off + j * cs_c
        if mode == OVERWRITE:
            c[at] = alpha * sums[j]
        elif mode == ACCUMULATE:
            c[at] = multiply_add(rule, alpha, sums[j], c[at])
        else:
            c[at] = multiply_add(rule, alpha, sums[j], beta * c[at])


@njit(cache=True)
def gemv_rows(rule, n, k, alpha, beta, a, a_off, cs_a, b, b_off, rs_b, c, c_off, cs_c, kc, row):
    """One row of C (m == 1): B streamed row after row, in order, as memory delivers it.

    For each chunk of columns and each KC block, the chunk's partial sums live in
    ``row`` (L1) and every row of B is read once, contiguously: the read
    bandwidth bound, where a register tile walking down B's columns jumps one
    row stride per k.  B's rows are added a group at a time (``axpy_rows``,
    AXPY_ROWS; ``axpy_rows_wide`` from GEMV_WIDE_MIN_BYTES of B), so the row
    buffer is read and written once per group of rows of B: one row at a
    time, its traffic evicts B's lines from a 32 KiB L1 (one thread, float32
    [1,512] @ [512,2048]: 94 us in groups, 128 a row at a time).  Where every row of a B
    the L3 keeps starts at the same place within a vector, the columns before
    a vector boundary are added one by one, so the vector loads never
    straddle two cache lines (float32 [1,512] @ [512,2048], B 16 bytes into a
    line as NumPy allocates it: 1.02-1.38x in paired runs).  Each element is
    still the FMA chain of its KC block in increasing k from zero, merged by
    the usual rules, so the bits are those of every other path.
    """
    lanes = tile_lanes(rule, b)
    zero = alpha - alpha
    item_bytes = 64 // line_elements(rule, b)
    tuned = lanes * item_bytes == GEMV_STREAM_TUNED_VECTOR_BYTES
    fetch = tuned and n * k * item_bytes >= GEMV_FETCH_MIN_BYTES
    wide = tuned and n * k * item_bytes >= GEMV_WIDE_MIN_BYTES
    group = AXPY_ROWS_WIDE if wide else AXPY_ROWS
    # From memory (a B the requests fetch) the lead's columns, added one by one, cost
    # more than split loads: [1,4096] @ [4096,4096] float32 1-10 % slower aligned.
    rows_aligned_alike = rs_b % lanes == 0 and not fetch
    j0 = 0
    while j0 < n:
        # Columns before B's rows reach a vector boundary, taken one by one besides
        # the chunk's columns (the chunk after then starts on a boundary too).
        lead = elements_to_vector_boundary(rule, b, b_off + j0) if rows_aligned_alike else 0
        width = min(GEMV_CHUNK + lead, n - j0)
        lead = min(lead, width)
        whole = lead + (width - lead) // lanes * lanes
        # Sums of column j at sums[j + shift]: the vectors' sums aligned too.
        shift = (lanes - lead) % lanes
        sums = advance(row, shift)
        # The same columns, as many groups of rows ahead as GEMV_FETCH_AHEAD asks of groups of AXPY_ROWS.
        ahead = (GEMV_FETCH_AHEAD * (group // AXPY_ROWS) + width - 1) // width * rs_b
        for pc in range(0, k, kc):
            depth = min(kc, k - pc)
            grouped = depth - depth % group
            for j in range(width):
                sums[j] = zero  # fma(x, b, 0) is the rounded product: the chain's first step
            for p in range(0, grouped, group):
                x_at = a_off + (pc + p) * cs_a
                start = b_off + (pc + p) * rs_b + j0
                for j in range(lead):
                    for q in range(group):
                        sums[j] = multiply_add(rule, a[x_at + q * cs_a], b[start + q * rs_b + j], sums[j])
                for j in range(lead, whole, lanes):
                    if fetch:
                        for q in range(group):
                            prefetch_read_l2(b, start + q * rs_b + j + ahead)
                    if wide:
                        axpy_rows_wide(rule, a, x_at, cs_a, b, start + j, rs_b, sums, j)
                    else:
                        axpy_rows(rule, a, x_at, cs_a, b, start + j, rs_b, sums, j)
                for j in range(whole, width):
                    for q in range(group):
                        sums[j] = multiply_add(rule, a[x_at + q * cs_a], b[start + q * rs_b + j], sums[j])
            for p in range(grouped, depth):
                x = a[a_off + (pc + p) * cs_a]
                start = b_off + (pc + p) * rs_b + j0
                for j in range(lead):
                    sums[j] = multiply_add(rule, x, b[start + j], sums[j])
                for j in range(lead, whole, lanes):
                    axpy_vector(rule, x, b, start + j, sums, j)
                for j in range(whole, width):
                    sums[j] = multiply_add(rule, x, b[start + j], sums[j])
            merge_sums(rule, sums, width, c, c_off + j0 * cs_c, cs_c, alpha, beta, merge_mode(pc, beta))
        j0 += width


# A pair of row blocks (``dot_pair_zero``: two FMA chains side by side) for a
# kernel whose vectors have this many bytes: AVX2's 8 x 8 float32 block is a
# chain of 8 dependent FMAs (4 cycles each) per 64 multiply-adds, the bound of
# the loop (two chains of 4 over the same work, timing only: 1.2-1.5x).  W @ x, one
# thread: a pair 1.1-1.6x as fast as one block (float32 W [2048,512] 165 against
# 202 µs; docs/performance.md).  Not measured on AVX-512 with reloaded splats (two
# 16-row blocks without them lost there).
DOT_PAIR_VECTOR_BYTES = 32
# Rows a multiple of this many bytes apart fall in the same L1 set (a 32 or 48
# KiB L1 of 8 or 12 ways, 64-byte lines); ``plan`` avoids such rows too.
L1_SET_PERIOD_BYTES = 4096
# A pair only where its rows share no L1 set more than this many at a time (the
# ways): float32 rows 4 KiB apart put all 16 in one set and the pair ran 1.3-1.4x
# slower than one block (W [2048,2048] 1354 against 962 µs); 2 KiB apart (8 a set)
# it gained, as above.
DOT_PAIR_MAX_ROWS_PER_SET = 8
# And where the pair reads at most this many rows at once or the matrix is at most
# this many bytes (the L3 keeps it): from memory, 16 float32 rows at once lost to 8
# (W [4000,4000] 6.1 against 5.0 ms) where 8 float64 rows gained.
DOT_PAIR_MAX_STREAMS = 8
DOT_PAIR_MAX_BYTES = 16 << 20


@njit(cache=True)
def dot_pairs_suit(rule, mat, rows, ldm):
    """Whether ``dot_rows`` should take ``rows`` rows of ``mat`` (``ldm`` apart) in pairs
    of row blocks (DOT_PAIR_VECTOR_BYTES, DOT_PAIR_MAX_ROWS_PER_SET, DOT_PAIR_MAX_STREAMS)."""
    lanes = tile_lanes(rule, mat)
    size = 64 // line_elements(rule, mat)
    if lanes * size != DOT_PAIR_VECTOR_BYTES:
        return False
    pair_rows = 2 * lanes
    apart = 1  # rows this far apart share an L1 set
    while apart < pair_rows and (apart * ldm * size) % L1_SET_PERIOD_BYTES != 0:
        apart += 1
    if (pair_rows + apart - 1) // apart > DOT_PAIR_MAX_ROWS_PER_SET:
        return False
    return pair_rows <= DOT_PAIR_MAX_STREAMS or rows * ldm * size <= DOT_PAIR_MAX_BYTES


@njit(cache=True)
def dot_rows(rule, rows, k, alpha, beta, v, v_off, v_stride, mat, m_off, ldm, c, c_off, cs_c, kc, sums):
    """C's elements ``c_off + r*cs_c`` = alpha * (row r of ``mat``) . v + beta * C, r < ``rows``.

    A matrix times a vector where the matrix's rows are contiguous along k:
    ``x @ W.T`` (one row of A, W stored [N, K]: the rows are W's) and ``W @ x``
    (one column of B: the rows are A's).  Each row is read once, front to
    back, LANES rows at a time (``dot_steps``), or two such blocks where their
    chains side by side gain (``dot_pairs_suit``), as a stream the
    prefetchers follow; a tile walking down B's columns instead reads one
    element per row a whole row apart.  Each element is still the FMA chain
    of its KC block in increasing k from zero, merged by the usual rules, so
    the bits are those of every other path.  ``sums`` holds a block's sums.
    With batch invariance given up (a rule with ``lane_sums``), a contiguous
    ``v`` goes to ``dot_rows_lane_wise`` instead.
    """
    paired = dot_pairs_suit(rule, mat, rows, ldm)
    dot_rows_of(rule, paired, rows, k, alpha, beta, v, v_off, v_stride, mat, m_off, ldm, c, c_off, cs_c, kc, sums)


@njit(cache=True)
def dot_rows_of(
    rule, paired, rows, k, alpha, beta, v, v_off, v_stride, mat, m_off, ldm, c, c_off, cs_c, kc, sums
):
    """``dot_rows`` with the choice of pairs made (by the caller: ``dot_rows_parallel``
    makes it once for the whole matrix)."""
    if sums_lane_wise(rule) and v_stride == 1:
        dot_rows_lane_wise(rule, rows, k, alpha, beta, v, v_off, mat, m_off, ldm, c, c_off, cs_c, sums)
        return
    lanes = tile_lanes(rule, mat)
    done = 0
    if paired:
        done = rows - rows % (2 * lanes)
        dot_row_blocks(rule, dot_pair_zero(rule, mat), 2 * lanes, done, k, alpha, beta, v, v_off, v_stride, mat,
                       m_off, ldm, c, c_off, cs_c, kc, sums)
    if done < rows:
        dot_row_blocks(rule, dot_zero(rule, mat), lanes, rows - done, k, alpha, beta, v, v_off, v_stride, mat,
                       m_off + done * ldm, ldm, c, c_off + done * cs_c, cs_c, kc, sums)


@njit(cache=True)
def dot_row_blocks(
    rule, zero, block_rows, rows, k, alpha, beta, v, v_off, v_stride, mat, m_off, ldm, c, c_off, cs_c, kc, sums
):
    """The loops of ``dot_rows`` over dot blocks like ``zero`` (one or a pair of row
    blocks of ``rule``'s vectors: ``block_rows`` rows).

    Where every row starts at the same place within a vector, each KC
    block's steps up to a vector boundary are taken first on their own, so
    the loads after them never straddle two cache lines (NumPy's large arrays
    start 16 bytes into one; float32 W [2048,2048] 1.4-1.5x, [4096,4096] 1.2x).
    """
    lanes = tile_lanes(rule, mat)
    rows_aligned_alike = ldm % lanes == 0
    for r0 in range(0, rows, block_rows):
        live = min(block_rows, rows - r0)
        start = m_off + r0 * ldm
        for pc in range(0, k, kc):
            depth = min(kc, k - pc)
            head = min(depth, elements_to_vector_boundary(rule, mat, start + pc)) if rows_aligned_alike else 0
            block = zero
            if head > 0:
                block = dot_tail(block, v, v_off + pc * v_stride, v_stride, mat, start + pc, ldm, live, head)
            whole = head + (depth - head) // lanes * lanes
            for p in range(pc + head, pc + whole, lanes):
                block = dot_steps(block, v, v_off + p * v_stride, v_stride, mat, start + p, ldm, live)
            if whole < depth:
                p = pc + whole
                block = dot_tail(block, v, v_off + p * v_stride, v_stride, mat, start + p, ldm, live, depth - whole)
            tile_store(block, sums)
            merge_sums(rule, sums, live, c, c_off + r0 * cs_c, cs_c, alpha, beta, merge_mode(pc, beta))


@njit(cache=True)
def dot_rows_lane_wise(rule, rows, k, alpha, beta, v, v_off, mat, m_off, ldm, c, c_off, cs_c, sums):
    """``dot_rows`` summed as BLAS's GEMV sums (the opt-in ``set_batch_invariant(False)``): each
    row's dot product with the contiguous ``v`` in vectors of partial sums along all of k,
    then across the lanes.  A row's bits depend on the row, ``v`` and the kernel only (not
    on the thread count), but differ from the other paths' FMA chain in increasing k.
    """
    step = lane_dot_width(rule, mat)
    whole = k - k % step
    for r0 in range(0, rows, LANE_DOT_ROWS):
        live = min(LANE_DOT_ROWS, rows - r0)
        start = m_off + r0 * ldm
        block = lane_dot_zero(rule, mat)
        for p in range(0, whole, step):
            block = lane_dot_steps(block, v, v_off + p, mat, start + p, ldm, live)
        if whole < k:
            block = lane_dot_tail(block, v, v_off + whole, mat, start + whole, ldm, live, k - whole)
        lane_dot_sums(block, sums)
        merge_sums(rule, sums, live, c, c_off + r0 * cs_c, cs_c, alpha, beta, merge_mode(np.intp(0), beta))


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


@njit(cache=True)
def resident_tiles(resident, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c, cs_c, scratch):
    """A whole product with B in registers (k <= the tile's depth, n <= RESIDENT_STRIPS tile widths).

    One strip of B in the common layouts (A and C rows contiguous) gets its own
    compiled loop, with those strides known at compile time: then no call is
    left in the loop, B stays in registers and the A addresses are constant
    offsets.  Several strips take one loop for any strides.
    """
    if n > tile_cols(resident, a):
        resident_strips(resident, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c, cs_c,
                        scratch)
    elif cs_c == 1:
        if cs_a == 1:
            resident_strip(resident, m, n, k, alpha, beta, a, a_off, rs_a, 1, b, b_off, rs_b, c, c_off, rs_c, 1, scratch)
        else:
            resident_strip(resident, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c, 1,
                           scratch)
    else:
        resident_strip(resident, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c, cs_c, scratch)


@njit(cache=True, inline="always")
def resident_strip(resident, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c, cs_c, scratch):
    """The rows of C, ``rows`` at a time, each the FMA chain over all k from B in registers
    (n <= the tile's width: one strip of B).

    Inlined into its callers: in a stack's loop over products, what does not
    change from one product to the next (B's masks, the row offsets) is then
    computed once, not once per product (a stack of 1000 float32 16x16x16
    products 1.26x as fast, of 8x8x8 1.5x; one thread).
    """
    mr = tile_rows(resident)
    mode = merge_mode(np.intp(0), beta)  # one KC block: k <= depth < KC
    held = resident_b(resident, b, b_off, rs_b, k, n)
    for i in range(0, m, mr):
        rows = min(mr, m - i)
        tile = resident_product(tile_zero(resident, a), held, a, a_off + i * rs_a, rs_a, cs_a, rows, k)
        merge_tile(resident, tile, c, c_off + i * rs_c, rs_c, cs_c, rows, n, alpha, beta, mode, scratch)


@njit(cache=True, inline="always")
def resident_strips(resident, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c, cs_c, scratch):
    """``resident_strip`` for one strip of B's columns after the other (n wider than the tile).

    Inlined, as ``resident_strip``: a stack of float64 16x16x16 products calling it once a
    product took 30 % longer (masks and row offsets computed again for every product).
    """
    nr = tile_cols(resident, a)
    for j in range(0, n, nr):
        resident_strip(resident, m, min(nr, n - j), k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off + j, rs_b,
                       c, c_off + j * cs_c, rs_c, cs_c, scratch)


@njit(cache=True)
def gemm_unpacked(
    shape, narrow, few, gemv, resident, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b, c, c_off,
    rs_c, cs_c, kc, scratch, sums,
):
    """C = alpha*A.B + beta*C without packing the operands whole (requires m, n, k >= 1).

    B's rows must be contiguous (``cs_b == 1``), or its columns for few rows
    (m <= STREAM_ROWS: ``stream_tiles`` packs it on the fly), or n == 1.
    ``sums`` (STREAM_SIZE elements) holds the partial sums of the streaming
    paths.  A matrix times a vector whose rows are contiguous along k (``W @
    x``, ``x @ W.T``) takes ``dot_rows``.
    """
    dots = row_dots_form(m, n, cs_a, rs_b, cs_b)
    if dots == DOTS_OF_A_ROWS:
        dot_rows(gemv, m, k, alpha, beta, b, b_off, rs_b, a, a_off, rs_a, c, c_off, rs_c, kc, sums)
        return
    if dots == DOTS_OF_B_COLUMNS:
        dot_rows(gemv, n, k, alpha, beta, a, a_off, cs_a, b, b_off, cs_b, c, c_off, cs_c, kc, sums)
        return
    if cs_b != 1:
        stream_tiles(few, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b,
                     c, c_off, rs_c, cs_c, kc, sums, scratch, fetches_ahead(few, a, n, k, cs_b))
        return
    choice = tile_choice(shape, narrow, few, resident, m, n, k, kc, a)
    if choice == RESIDENT_TILE:
        resident_tiles(resident, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c, cs_c, scratch)
    elif choice == NARROW_TILE:
        unpacked_tiles(narrow, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c, cs_c, kc, scratch)
    elif choice == FEW_TILE:
        # cs_b (== 1) and fetch (False) as run-time values, as in the call above: one compiled
        # stream_tiles for both (literals would compile another).
        stream_tiles(few, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b, c, c_off, rs_c, cs_c, kc,
                     sums, scratch, fetches_ahead(few, a, n, k, cs_b))
    elif choice == GEMV_TILE:
        gemv_rows(gemv, n, k, alpha, beta, a, a_off, cs_a, b, b_off, rs_b, c, c_off, cs_c, kc, sums)
    else:
        main_tiles(shape, narrow, few, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b, c, c_off, rs_c,
                   cs_c, kc, sums, scratch)


@njit(cache=True)
def gemm_unpacked_stack(
    shape, narrow, few, gemv, resident, m, n, k, alpha, beta, a, offsets_a, rs_a, cs_a, b, offsets_b, rs_b, cs_b,
    c, offsets_c, rs_c, cs_c, kc, scratch, sums,
):
    """``gemm_unpacked`` for each product of a stack (``offsets_*``: where each matrix starts).

    For the resident tile, the tile and the compiled loop for the strides are
    chosen once per stack, not once per product (saving ~10 ns of a ~100 ns
    float32 16x16x16 product); for one strip of B in the common layout the loop
    over products holds ``resident_strip`` inlined.  The main tile is chosen once
    per stack too (saving 8 % of a stack of 1000 float32 16x16x16 products, AVX2).
    """
    count = offsets_c.shape[0]
    choice = tile_choice(shape, narrow, few, resident, m, n, k, kc, a) if cs_b == 1 else FEW_TILE
    if choice == MAIN_TILE and row_dots_form(m, n, cs_a, rs_b, cs_b) == NOT_DOTS:
        for t in range(count):
            main_tiles(shape, narrow, few, m, n, k, alpha, beta, a, offsets_a[t], rs_a, cs_a, b, offsets_b[t], rs_b,
                       cs_b, c, offsets_c[t], rs_c, cs_c, kc, sums, scratch)
        return
    if choice == RESIDENT_TILE:
        if cs_c == 1 and cs_a == 1 and n <= tile_cols(resident, a):
            for t in range(count):
                resident_strip(resident, m, n, k, alpha, beta, a, offsets_a[t], rs_a, 1, b, offsets_b[t], rs_b,
                               c, offsets_c[t], rs_c, 1, scratch)
        elif cs_c == 1 and cs_a == 1:
            for t in range(count):
                resident_strips(resident, m, n, k, alpha, beta, a, offsets_a[t], rs_a, 1, b, offsets_b[t], rs_b,
                                c, offsets_c[t], rs_c, 1, scratch)
        else:
            for t in range(count):
                resident_tiles(resident, m, n, k, alpha, beta, a, offsets_a[t], rs_a, cs_a, b, offsets_b[t], rs_b,
                               c, offsets_c[t], rs_c, cs_c, scratch)
        return
    for t in range(count):
        gemm_unpacked(
            shape, narrow, few, gemv, resident, m, n, k, alpha, beta, a, offsets_a[t], rs_a, cs_a,
            b, offsets_b[t], rs_b, cs_b, c, offsets_c[t], rs_c, cs_c, kc, scratch, sums,
        )


@njit(cache=True, inline="always")
def main_tiles(
    shape, narrow, few, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b, c, c_off, rs_c, cs_c, kc,
    sums, scratch,
):
    """The main tile's loops, with smaller tiles on C's edges where it would mostly compute padding.

    A last column strip no wider than the narrow tile goes to the narrow tile
    (one vector: 100 columns were four 32-column strips, the last with 4 live
    columns, a third more FMAs than useful), and the last rows to the few-rows
    tile where it computes at most half the FMAs (2 live rows of 14 computed 14);
    a third fewer does not pay for the stream (AVX2, float32, one thread: the main
    tile on 4 edge rows takes 0.83-0.92 of the few-rows stream's time).  Edge rows at
    most as many as the few tile's take its direct loops, with fewer padding rows: the
    main tile's 4 live rows of 6 cost more than a full tile (a stack of 1000 float32
    16x16x16: 178 µs with the direct loops against 207, where 12x16x16, no edge, takes
    118); 1 to 3 edge rows gain 5-9 %.
    Every element is still the FMA chain of its KC block in increasing k: the
    bits do not depend on which tile computes it.  Requires ``cs_b == 1``.

    Inlined with ``unpacked_tiles`` into their callers: in a stack's loop over
    products the edge decisions and the tiles' setup are then made once, not once
    per product (a stack of 1000 float32 16x16x16 products 9 % faster, AVX2).
    """
    nr = tile_cols(shape, a)
    mr = tile_rows(shape)
    main_cols = n
    edge_cols = n % nr
    if n > nr and edge_cols <= tile_cols(narrow, a) and edge_cols > 0:
        main_cols = n - edge_cols
        unpacked_tiles(narrow, m, edge_cols, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off + main_cols, rs_b,
                       c, c_off + main_cols * cs_c, rs_c, cs_c, kc, scratch)
    main_rows = m
    edge_rows = m % mr
    few_saves_half = 2 * padded_fmas(few, edge_rows, main_cols, a) <= padded_fmas(shape, edge_rows, main_cols, a)
    if m > mr and edge_rows > 0 and few_saves_half:
        main_rows = m - edge_rows
        # cs_b and fetch as run-time values, as in gemm_unpacked: the same compiled stream_tiles.
        stream_tiles(few, edge_rows, main_cols, k, alpha, beta, a, a_off + main_rows * rs_a, rs_a, cs_a, b, b_off,
                     rs_b, cs_b, c, c_off + main_rows * rs_c, rs_c, cs_c, kc, sums, scratch,
                     fetches_ahead(few, a, main_cols, k, cs_b))
    elif m > mr and edge_rows <= tile_rows(few) and main_cols % tile_cols(few, a) == 0:
        # At most as many edge rows as the few-rows tile has: its direct loops, with fewer
        # padding rows.
        main_rows = m - edge_rows
        unpacked_tiles(few, edge_rows, main_cols, k, alpha, beta, a, a_off + main_rows * rs_a, rs_a, cs_a, b, b_off,
                       rs_b, c, c_off + main_rows * rs_c, rs_c, cs_c, kc, scratch)
    unpacked_tiles(shape, main_rows, main_cols, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c,
                   cs_c, kc, scratch)


@njit(cache=True, inline="always")
def unpacked_tiles(
    shape, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, c, c_off, rs_c, cs_c, kc, scratch
):
    """PC, JR, IR loops over the tiles of ``shape``, each from the unpacked operands
    (inlined: see ``main_tiles``)."""
    mr = tile_rows(shape)
    nr = tile_cols(shape, a)
    for pc in range(0, k, kc):  # PC: the same KC blocks as the blocked driver
        depth = min(kc, k - pc)
        mode = merge_mode(pc, beta)
        for jr in range(0, n, nr):
            for ir in range(0, m, mr):
                direct_microkernel(
                    shape, depth,
                    a, a_off + ir * rs_a + pc * cs_a, rs_a, cs_a,
                    b, b_off + pc * rs_b + jr, rs_b,
                    c, c_off + ir * rs_c + jr * cs_c, rs_c, cs_c,
                    min(mr, m - ir), min(nr, n - jr),
                    alpha, beta, mode, scratch,
                )


# What ``unpacked_entry`` did with a product it was asked to decide on (``small_only``).
SMALL_DONE, SMALL_PLANNED, SMALL_REFUSED = 0, 1, 2


@njit(cache=True, inline="always")
def byte_extent(x):
    """(first byte, one past the last byte) that the elements of ``x`` span; (0, 0) when empty."""
    lo = hi = x.ctypes.data
    for d in range(x.ndim):
        if x.shape[d] == 0:
            return 0, 0
        span = (x.shape[d] - 1) * x.strides[d]
        if span < 0:
            lo += span
        else:
            hi += span
    return lo, hi + x.itemsize


@njit(cache=True, inline="always")
def may_overlap(x, y):
    """Whether the spans of ``x`` and ``y`` meet (NumPy's ``may_share_memory``: bounds only)."""
    x_lo, x_hi = byte_extent(x)
    y_lo, y_hi = byte_extent(y)
    return x_lo < y_hi and y_lo < x_hi


@njit(cache=True, inline="always")
def whole_elements(x):
    """Whether every stride of ``x`` is a whole number of its elements (the drivers' unit)."""
    for d in range(x.ndim):
        if x.strides[d] % x.itemsize:
            return False
    return True


@njit(cache=True, inline="always")
def output_apart(c, a, b):
    """Whether C, an output of the small ways in, has whole-element strides and lies apart
    from A and B (an ``out=`` on an operand goes to the general path's copy)."""
    return whole_elements(c) and not may_overlap(c, a) and not may_overlap(c, b)


@njit(cache=True, inline="always")
def small_product_route(narrow, m, n, k, cs_a, rs_b, cs_b, max_volume, min_stream, few_rows, a):
    """SMALL_DONE when a product whose operands are checked is small enough to be computed
    straight away on the unpacked tiles, else SMALL_PLANNED (see ``unpacked_entry``)."""
    volume = m * n * k
    streamed = k * (m if n == 1 else n)
    along_rows = cs_b == 1 or (m == 1 and rs_b == 1) or (n == 1 and cs_a == 1)
    if volume == 0 or volume > max_volume or streamed >= min_stream or not along_rows:
        return SMALL_PLANNED
    if 1 < n and 2 * n <= tile_cols(narrow, a) and m > few_rows:
        return SMALL_PLANNED
    return SMALL_DONE


@njit(cache=True)
def unpacked_entry(
    shape, narrow, few, gemv, lane_sums, resident, kc, scratch, sums, max_volume, min_stream, few_rows, small_only,
    alpha, beta, a, b, c,
):
    """Entry from Python: C = alpha*A.B + beta*C for 2-D arrays of one dtype, C not
    overlapping A or B; ``lane_sums``: the row-dots rule's flag (``simd.row_dots_rule``).

    With ``small_only`` (matmul's way in for small matrices, where the same checks in
    Python cost more than a 16x16 product) the entry first decides: SMALL_REFUSED when
    the shapes do not match or a stride is not whole elements (the general path says
    what is wrong) or C may overlap A or B (an ``out=``; the general path computes into
    a new array and copies), SMALL_PLANNED for a product the planner must place (more than
    ``max_volume`` multiply-adds, from ``min_stream`` elements streamed, no contiguous
    rows to run along, or a C of more than ``few_rows`` rows and 2 to half the narrow
    tile's columns, which the planner may turn over: ``plan._turns_narrow``), else it
    computes the product: SMALL_DONE.  The arguments before ``alpha`` are the same on
    every call of a prepared state, which binds them once (``plan._Prepared``);
    ``scratch`` and ``sums`` are the addresses of its workspace (``simd.buffer_at``).
    """
    m, k = a.shape
    k_b, n = b.shape
    size = a.itemsize
    rs_a, cs_a, rs_b, cs_b = a.strides[0] // size, a.strides[1] // size, b.strides[0] // size, b.strides[1] // size
    if small_only:
        if k != k_b or c.shape[0] != m or c.shape[1] != n:
            return SMALL_REFUSED
        if not (whole_elements(a) and whole_elements(b) and output_apart(c, a, b)):
            return SMALL_REFUSED
        if small_product_route(narrow, m, n, k, cs_a, rs_b, cs_b, max_volume, min_stream, few_rows,
                               address(a)) == SMALL_PLANNED:
            return SMALL_PLANNED
    origin = np.intp(0)  # a run-time zero: a literal 0 would compile every callee once more
    gemm_unpacked(
        shape, narrow, few, row_dots_rule(gemv, lane_sums), resident, m, n, k, alpha, beta,
        address(a), origin, rs_a, cs_a, address(b), origin, rs_b, cs_b,
        address(c), origin, c.strides[0] // size, c.strides[1] // size,
        kc, buffer_at(scratch, a), buffer_at(sums, a),
    )
    return SMALL_DONE


@njit(cache=True)
def vector_entry(gemv, lane_sums, alpha, beta, v, mat, c, kc, sums, rows_of_mat):
    """Entry from Python for a matrix and a vector (1-D ``v`` and ``c``), ``mat`` with
    contiguous rows: c = mat @ v (``rows_of_mat``, row dots) or c = v @ mat (GEMV rows)."""
    origin = np.intp(0)  # a run-time zero: a literal 0 would compile every callee once more
    rule = row_dots_rule(gemv, lane_sums)
    size = mat.itemsize
    if rows_of_mat:
        dot_rows(rule, mat.shape[0], mat.shape[1], alpha, beta, address(v), origin, v.strides[0] // size,
                 address(mat), origin, mat.strides[0] // size, address(c), origin, c.strides[0] // size, kc,
                 address(sums))
    else:
        gemv_rows(rule, mat.shape[1], mat.shape[0], alpha, beta, address(v), origin, v.strides[0] // size,
                  address(mat), origin, mat.strides[0] // size, address(c), origin, c.strides[0] // size, kc,
                  address(sums))
