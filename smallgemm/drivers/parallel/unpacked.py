"""The unpacked product on several workers: strips of B or rows of A as tasks, row dots
shared out, and the entry that follows ``unpacked.unpacked_route``.
"""

from __future__ import annotations

from numba import njit

from ...kernels.shared import TASKS_PER_WORKER
from ...simd import (
    address,
    advance,
    multiply_add,
    row_dots_rule,
    tile_cols,
    tile_lanes,
    tile_rows,
)
from ...simd.linked import linked
from ...simd.subroutine import subroutine
from ...simd.workers import on_workers
from ..unpacked import (
    DOTS_OF_A_ROWS,
    DOTS_OF_B_COLUMNS,
    FEW_TILE,
    GEMV_TILE,
    NARROW_STREAM,
    NARROW_TILE,
    RESIDENT_TILE,
    STREAM_SIZE,
    TILES,
    TRANSPOSING_STREAM,
    dot_pairs_suit,
    dot_rows_of,
    fetches_ahead,
    narrow_stream_tiles,
    stream_tiles,
    tile_choice,
    unpacked_form,
    unpacked_part,
)
from .tasks import claim, reset_counters


@subroutine
def tile_geometry(tile_of, shape, narrow, few, gemv, a):
    """(MR, NR) of the tile ``tile_of`` names: FEW_TILE, NARROW_TILE or NARROW_STREAM, GEMV_TILE,
    else the main ``shape``: the grain of ``unpacked_parallel``'s tasks."""
    if tile_of == FEW_TILE:
        return tile_rows(few), tile_cols(few, a)
    if tile_of == NARROW_TILE or tile_of == NARROW_STREAM:
        return tile_rows(narrow), tile_cols(narrow, a)
    if tile_of == GEMV_TILE:
        return tile_rows(gemv), tile_cols(gemv, a)
    return tile_rows(shape), tile_cols(shape, a)


@subroutine
def unpacked_task(
    tile_of, shape, narrow, few, gemv, resident, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b,
    c, c_off, rs_c, cs_c, kc, scratch, sums, fetch,
):
    """One task of ``unpacked_parallel``: the few-rows stream (on the few-rows or the narrow
    tile) with ``fetch`` decided for the whole product (a task's strip alone may be too
    small to request ahead), else the serial unpacked path."""
    if tile_of == FEW_TILE:
        stream_tiles(few, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b, c, c_off, rs_c, cs_c, kc,
                     sums, scratch, fetch)
    elif tile_of == NARROW_STREAM:
        narrow_stream_tiles(narrow, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b, c, c_off, rs_c,
                            cs_c, kc, sums, scratch, fetch)
    else:
        unpacked_part(shape, narrow, few, gemv, resident, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b,
                      cs_b, c, c_off, rs_c, cs_c, kc, scratch, sums)


@linked
def unpacked_parallel(
    tile_of, shape, narrow, few, gemv, resident, m, n, k, alpha, beta, one, zero, a, rs_a, cs_a, b, rs_b, cs_b, c,
    rs_c, cs_c, kc, workers, scratch, sums, partial, partial_size, counter,
):
    """The unpacked driver (few rows) on ``workers`` workers, in tasks cut to the tile
    ``tile_of`` names (``tile_geometry``).

    Tasks are (row chunk, column strip) pairs handed out by the counter, each
    computed with the worker's own workspace: by the few-rows stream (FEW_TILE, a
    transposed B's strips requested ahead where the whole B is large:
    ``fetches_ahead``), else by ``unpacked_part``, the serial path of that part of C.  When
    they are too few to keep the workers busy and k spans several KC blocks,
    the blocks are split too (split-K): each (chunk, strip, KC block) task writes
    its block's raw tile sum into its own slice of ``partial``, then the slices
    are merged into C in increasing block order with the very rules of the
    serial path (OVERWRITE / SCALE, then ACCUMULATE).  The number of slices is
    the number of KC blocks, whatever the thread count: the bits never change.
    ``partial`` holds ``partial_size`` elements; ``counter``: the task counters.
    """
    mr, nr = tile_geometry(tile_of, shape, narrow, few, gemv, a)
    fetch = fetches_ahead(few, a, n, k, cs_b)
    row_chunk = mr * max(1, 64 // mr)
    row_tasks = (m + row_chunk - 1) // row_chunk
    panels = (n + nr - 1) // nr
    # A B with contiguous rows streams in runs as long as a task's strip is
    # wide: one strip per worker (runs of 1024 columns for n = 2048 on two,
    # where three per worker left ~350) streams faster from the L3, more than
    # the finer tasks' balance gave back.  Two threads, paired runs in one
    # process, [1|4|8|16|32,512] @ [512,2048] 24 / 15 / 12 / 5 / 4 % faster,
    # [4,4096] @ [4096,4096] 10 %; a transposed B (its runs are W's rows) lost
    # 0-5 % and keeps the finer tasks.
    wanted = TASKS_PER_WORKER * workers if cs_b != 1 else workers
    # Strips of whole panels, as even as possible (sizes differ by one panel at
    # most): with 2 workers, [16,512] @ W.T, W [2048,512], has 32 panels in
    # six strips of 5-6, where strips of 5 left a seventh of 2 and one worker
    # a task more.
    strips = min(panels, max(1, (wanted + row_tasks - 1) // row_tasks))
    tasks = row_tasks * strips
    k_blocks = (k + kc - 1) // kc
    split = tasks < wanted and k_blocks > 1 and partial_size >= k_blocks * m * n
    reset_counters(counter, workers)
    unpacked_worker(
        workers, tile_of, shape, narrow, few, gemv, resident, m, n, k, alpha, beta, one, zero, a, rs_a, cs_a,
        b, rs_b, cs_b, c, rs_c, cs_c, kc, scratch, sums, partial, counter, row_chunk, strips, panels, nr, tasks, split,
        fetch,
    )
    if split:  # on this thread: split-K takes only products of few tasks, m x n x KC blocks adds here
        for i in range(m):
            for j in range(n):
                at = i * rs_c + j * cs_c
                t = partial[i * n + j]
                if beta == 0:
                    c[at] = alpha * t
                else:
                    c[at] = multiply_add(shape, alpha, t, beta * c[at])
                for block in range(1, k_blocks):
                    c[at] = multiply_add(shape, alpha, partial[block * m * n + i * n + j], c[at])


@on_workers
def unpacked_worker(
    w, workers, tile_of, shape, narrow, few, gemv, resident, m, n, k, alpha, beta, one, zero, a, rs_a, cs_a,
    b, rs_b, cs_b, c, rs_c, cs_c, kc, scratch, sums, partial, counter, row_chunk, strips, panels, nr, tasks, split,
    fetch,
):
    """One worker of ``unpacked_parallel``: (row chunk, column strip) tasks, or with ``split``
    (chunk, strip, KC block) tasks, each block's raw sum into its slice of ``partial``."""
    scratch_size = tile_rows(shape) * tile_cols(shape, a)  # the largest tile's (workspace.get)
    my_scratch = advance(scratch, w * scratch_size)
    my_sums = advance(sums, w * STREAM_SIZE)
    k_blocks = (k + kc - 1) // kc
    total = tasks * k_blocks if split else tasks
    unit = 1  # the partial sums' column stride
    task, turn = claim(counter, total, workers, w, 0)
    while task >= 0:
        block = task // tasks
        rest = task - block * tasks
        chunk = rest // strips
        strip = rest - chunk * strips
        i0 = chunk * row_chunk
        j0 = strip * panels // strips * nr
        rows = min(row_chunk, m - i0)
        cols = min((strip + 1) * panels // strips * nr, n) - j0
        if split:  # the block's raw sum into its slice of ``partial`` (row stride n, unit column stride)
            p0 = block * kc
            unpacked_task(
                tile_of, shape, narrow, few, gemv, resident, rows, cols, min(kc, k - p0), one, zero,
                a, i0 * rs_a + p0 * cs_a, rs_a, cs_a, b, p0 * rs_b + j0 * cs_b, rs_b, cs_b,
                partial, block * m * n + i0 * n + j0, n, unit, kc, my_scratch, my_sums, fetch,
            )
        else:
            unpacked_task(
                tile_of, shape, narrow, few, gemv, resident, rows, cols, k, alpha, beta,
                a, i0 * rs_a, rs_a, cs_a, b, j0 * cs_b, rs_b, cs_b,
                c, i0 * rs_c + j0 * cs_c, rs_c, cs_c, kc, my_scratch, my_sums, fetch,
            )
        task, turn = claim(counter, total, workers, w, turn)


@subroutine
def even_run(task, tasks, units, unit, limit):
    """(first, end): the elements of run ``task`` of ``tasks`` runs of whole ``unit``-element
    units, ``units`` in all, as even as possible; the last ends at ``limit``."""
    return task * units // tasks * unit, min((task + 1) * units // tasks * unit, limit)


@subroutine
def dot_rows_parallel(rule, rows, k, alpha, beta, v, v_off, v_stride, mat, m_off, ldm, c, c_off, cs_c, kc, workers,
                      sums, counter):
    """``unpacked.dot_rows`` on ``workers`` workers: runs of whole row blocks (or pairs of
    them) as tasks.

    Each worker starts on its own contiguous run of rows (``claim``), so call
    after call it reads the same rows of the matrix, which its caches may
    still hold.  Rows are independent sums: the bits are those of one thread.
    """
    paired = dot_pairs_suit(rule, mat, rows, ldm)  # made once for the whole matrix
    block_rows = (2 if paired else 1) * tile_lanes(rule, mat)
    blocks = (rows + block_rows - 1) // block_rows
    tasks = min(blocks, TASKS_PER_WORKER * workers)
    reset_counters(counter, workers)
    dot_rows_worker(workers, rule, paired, block_rows, blocks, tasks, rows, k, alpha, beta, v, v_off, v_stride, mat,
                    m_off, ldm, c, c_off, cs_c, kc, sums, counter)


@on_workers
def dot_rows_worker(w, workers, rule, paired, block_rows, blocks, tasks, rows, k, alpha, beta, v, v_off, v_stride, mat,
                    m_off, ldm, c, c_off, cs_c, kc, sums, counter):
    """One worker of ``dot_rows_parallel``: runs of whole row blocks."""
    my_sums = advance(sums, w * STREAM_SIZE)
    task, turn = claim(counter, tasks, workers, w, 0)
    while task >= 0:
        first, end = even_run(task, tasks, blocks, block_rows, rows)
        dot_rows_of(rule, paired, end - first, k, alpha, beta, v, v_off, v_stride, mat, m_off + first * ldm,
                    ldm, c, c_off + first * cs_c, cs_c, kc, my_sums)
        task, turn = claim(counter, tasks, workers, w, turn)

@njit(cache=True, nogil=True)  # the GIL released while it computes
def unpacked_parallel_entry(
    shape, narrow, few, gemv, lane_sums, resident, alpha, beta, one, zero, a, b, c, kc, workers, scratch, sums, partial,
    counter,
):
    """Entry from Python for the parallel unpacked driver (see ``unpacked_parallel``); ``lane_sums``:
    the row-dots rule's flag (``simd.row_dots_rule``)."""
    size = a.itemsize
    m, k = a.shape
    n = b.shape[1]
    unpacked_parallel_product(
        shape, narrow, few, row_dots_rule(gemv, lane_sums), resident, m, n, k, alpha, beta, one, zero,
        address(a), a.strides[0] // size, a.strides[1] // size, address(b), b.strides[0] // size, b.strides[1] // size,
        address(c), c.strides[0] // size, c.strides[1] // size, kc, workers, address(scratch), address(sums),
        address(partial), partial.shape[0], address(counter),
    )


@linked
def unpacked_parallel_product(
    shape, narrow, few, gemv, resident, m, n, k, alpha, beta, one, zero, a, rs_a, cs_a, b, rs_b, cs_b, c, rs_c, cs_c,
    kc, workers, scratch, sums, partial, partial_size, counter,
):
    """One unpacked product on ``workers`` workers, with the tile ``gemm_unpacked`` would choose
    (``unpacked_parallel``: ``partial`` holds ``partial_size`` elements)."""
    origin = 0
    args = (
        shape, narrow, few, gemv, resident, m, n, k, alpha, beta, one, zero, a, rs_a, cs_a, b, rs_b, cs_b, c, rs_c, cs_c, kc,
        workers, scratch, sums, partial, partial_size, counter,
    )
    # unpacked_route's rule, through its two parts: inlined here, as gemm_unpacked inlines it,
    # it cost this entry 10 % more compile time.
    choice = unpacked_form(m, n, cs_a, rs_b, cs_b)
    if choice == TILES:
        choice = tile_choice(shape, narrow, few, gemv, resident, m, n, k, kc, a)
    if choice == DOTS_OF_A_ROWS:
        dot_rows_parallel(gemv, m, k, alpha, beta, b, origin, rs_b, a, origin, rs_a, c, origin, rs_c, kc, workers, sums,
                          counter)
    elif choice == DOTS_OF_B_COLUMNS:
        dot_rows_parallel(gemv, n, k, alpha, beta, a, origin, cs_a, b, origin, cs_b, c, origin, cs_c, kc, workers, sums,
                          counter)
    elif choice == TRANSPOSING_STREAM:  # the few-rows tile's stream, strips shared out
        unpacked_parallel(FEW_TILE, *args)
    elif choice == RESIDENT_TILE:  # a resident-B product is too small for threads: the narrow tile
        unpacked_parallel(NARROW_TILE, *args)
    else:
        unpacked_parallel(choice, *args)
