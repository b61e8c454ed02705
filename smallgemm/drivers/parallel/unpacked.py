"""The unpacked product on several workers: strips of B or rows of A as tasks, row dots
shared out, and the entry that follows ``unpacked.unpacked_route``.
"""

from __future__ import annotations

from typing import NamedTuple

from numba import njit

from ...kernels.shared import TASKS_PER_WORKER
from ...simd import (
    address,
    advance,
    multiply_add,
    one_of,
    tile_cols,
    tile_lanes,
    tile_rows,
    zero_of,
)
from ...simd.linked import linked
from ...simd.records import (
    Workspace,
    advanced,
    first_column,
    first_row,
    matrix,
    moved,
    product,
    transposed,
)
from ...simd.subroutine import subroutine
from ...simd.workers import on_workers
from ..arguments import kernel_tiles, operand, workspace_of
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


class StripTasks(NamedTuple):
    """How ``unpacked_parallel`` cuts a product: chunks of ``row_chunk`` rows times ``strips``
    column strips of whole NR-wide panels (``panels`` of width ``nr`` in all), ``tasks``
    (chunk, strip) pairs over KC blocks of ``kc``; with ``split`` each KC block is a task of
    its own (split-K); ``fetch``: the stream requests a transposed B's next strips."""

    row_chunk: int
    strips: int
    panels: int
    nr: int
    tasks: int
    kc: int
    split: bool
    fetch: bool


@subroutine
def tile_geometry(tile_of, tiles, like):
    """(MR, NR) of the tile ``tile_of`` names: FEW_TILE, NARROW_TILE or NARROW_STREAM, GEMV_TILE,
    else the main tile: the grain of ``unpacked_parallel``'s tasks."""
    if tile_of == FEW_TILE:
        return tile_rows(tiles.few), tile_cols(tiles.few, like)
    if tile_of == NARROW_TILE or tile_of == NARROW_STREAM:
        return tile_rows(tiles.narrow), tile_cols(tiles.narrow, like)
    if tile_of == GEMV_TILE:
        return tile_rows(tiles.gemv), tile_cols(tiles.gemv, like)
    return tile_rows(tiles.main), tile_cols(tiles.main, like)


@subroutine
def unpacked_task(tile_of, tiles, problem, a, b, c, kc, work, fetch):
    """One task of ``unpacked_parallel``, ``problem`` (a ``Product``) on ``Matrix`` records: the
    few-rows stream (on the few-rows or the narrow tile) with ``fetch`` decided for the whole
    product (a task's strip alone may be too small to request ahead), else the serial
    unpacked path."""
    m, n, k, alpha, beta = problem
    if tile_of == FEW_TILE:
        stream_tiles(tiles.few, m, n, k, alpha, beta, a, b, c, kc, work, fetch)
    elif tile_of == NARROW_STREAM:
        narrow_stream_tiles(tiles.narrow, m, n, k, alpha, beta, a, b, c, kc, work, fetch)
    else:
        unpacked_part(tiles, m, n, k, alpha, beta, a, b, c, kc, work)


@linked
def unpacked_parallel(tile_of, tiles, problem, a, b, c, kc, workers, work, partial, partial_size, counter):
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
    m, n, k, alpha, beta = problem
    mr, nr = tile_geometry(tile_of, tiles, a.data)
    fetch = fetches_ahead(tiles.few, a.data, n, k, b.cs)
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
    wanted = TASKS_PER_WORKER * workers if b.cs != 1 else workers
    # Strips of whole panels, as even as possible (sizes differ by one panel at
    # most): with 2 workers, [16,512] @ W.T, W [2048,512], has 32 panels in
    # six strips of 5-6, where strips of 5 left a seventh of 2 and one worker
    # a task more.
    strips = min(panels, max(1, (wanted + row_tasks - 1) // row_tasks))
    tasks = row_tasks * strips
    k_blocks = (k + kc - 1) // kc
    split = tasks < wanted and k_blocks > 1 and partial_size >= k_blocks * m * n
    reset_counters(counter, workers)
    cut = StripTasks(row_chunk, strips, panels, nr, tasks, kc, split, fetch)
    unpacked_worker(workers, tile_of, tiles, problem, a, b, c, work, partial, counter, cut)
    if split:  # on this thread: split-K takes only products of few tasks, m x n x KC blocks adds here
        for i in range(m):
            for j in range(n):
                at = c.offset + i * c.rs + j * c.cs
                t = partial[i * n + j]
                if beta == 0:
                    c.data[at] = alpha * t
                else:
                    c.data[at] = multiply_add(tiles.main, alpha, t, beta * c.data[at])
                for block in range(1, k_blocks):
                    c.data[at] = multiply_add(
                        tiles.main, alpha, partial[block * m * n + i * n + j], c.data[at]
                    )


@on_workers
def unpacked_worker(w, workers, tile_of, tiles, problem, a, b, c, work, partial, counter, cut):
    """One worker of ``unpacked_parallel``: (row chunk, column strip) tasks as ``cut`` (a
    ``StripTasks``) says, or with its ``split`` (chunk, strip, KC block) tasks, each block's raw
    sum into its slice of ``partial``."""
    m, n, k, alpha, beta = problem
    row_chunk, strips, panels, nr, tasks, kc, split, fetch = cut
    scratch_size = tile_rows(tiles.main) * tile_cols(tiles.main, a.data)  # the largest tile's (workspace.get)
    mine = Workspace(
        work.abuf, work.bbuf, advance(work.scratch, w * scratch_size), advance(work.sums, w * STREAM_SIZE)
    )
    k_blocks = (k + kc - 1) // kc
    total = tasks * k_blocks if split else tasks
    one, zero = one_of(a.data), zero_of(a.data)
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
                tile_of,
                tiles,
                product(rows, cols, min(kc, k - p0), one, zero),
                moved(a, i0, p0),
                moved(b, p0, j0),
                matrix(partial, block * m * n + i0 * n + j0, n, 1),
                kc,
                mine,
                fetch,
            )
        else:
            unpacked_task(
                tile_of,
                tiles,
                product(rows, cols, k, alpha, beta),
                moved(a, i0, 0),
                moved(b, 0, j0),
                moved(c, i0, j0),
                kc,
                mine,
                fetch,
            )
        task, turn = claim(counter, total, workers, w, turn)


@subroutine
def even_run(task, tasks, units, unit, limit):
    """(first, end): the elements of run ``task`` of ``tasks`` runs of whole ``unit``-element
    units, ``units`` in all, as even as possible; the last ends at ``limit``."""
    return task * units // tasks * unit, min((task + 1) * units // tasks * unit, limit)


@subroutine
def dot_rows_parallel(rule, rows, k, alpha, beta, v, mat, c, kc, workers, sums, counter):
    """``unpacked.dot_rows`` on ``workers`` workers: runs of whole row blocks (or pairs of
    them) as tasks.

    Each worker starts on its own contiguous run of rows (``claim``), so call
    after call it reads the same rows of the matrix, which its caches may
    still hold.  Rows are independent sums: the bits are those of one thread.
    """
    paired = dot_pairs_suit(rule, mat.data, rows, mat.rs)  # made once for the whole matrix
    reset_counters(counter, workers)
    dot_rows_worker(workers, rule, paired, product(rows, 1, k, alpha, beta), v, mat, c, kc, sums, counter)


@on_workers
def dot_rows_worker(w, workers, rule, paired, problem, v, mat, c, kc, sums, counter):
    """One worker of ``dot_rows_parallel``: runs of whole row blocks (pairs of them where
    ``paired``), ``problem`` the ``Product`` of ``mat``'s rows and ``v`` (n = 1)."""
    rows, _, k, alpha, beta = problem
    block_rows = (2 if paired else 1) * tile_lanes(rule, mat.data)
    blocks = (rows + block_rows - 1) // block_rows
    tasks = min(blocks, TASKS_PER_WORKER * workers)
    my_sums = advance(sums, w * STREAM_SIZE)
    task, turn = claim(counter, tasks, workers, w, 0)
    while task >= 0:
        first, end = even_run(task, tasks, blocks, block_rows, rows)
        dot_rows_of(
            rule,
            paired,
            end - first,
            k,
            alpha,
            beta,
            v,
            moved(mat, first, 0),
            advanced(c, first),
            kc,
            my_sums,
        )
        task, turn = claim(counter, tasks, workers, w, turn)


@njit(cache=True, nogil=True)  # the GIL released while it computes
def unpacked_parallel_entry(tiles, alpha, beta, a, b, c, kc, workers, ws, partial):
    """Entry from Python for the parallel unpacked driver (see ``unpacked_parallel``): ``tiles``
    the prepared state's (``arguments.kernel_tiles``), ``ws`` its workspace, ``partial`` the
    split-K room."""
    problem = product(a.shape[0], b.shape[1], a.shape[1], alpha, beta)
    unpacked_parallel_product(
        kernel_tiles(tiles),
        problem,
        operand(a),
        operand(b),
        operand(c),
        kc,
        workers,
        workspace_of(ws),
        address(partial),
        partial.shape[0],
        address(ws.counter),
    )


@linked
def unpacked_parallel_product(tiles, problem, a, b, c, kc, workers, work, partial, partial_size, counter):
    """One unpacked product on ``workers`` workers, with the tile ``gemm_unpacked`` would choose
    (``unpacked_parallel``: ``partial`` holds ``partial_size`` elements)."""
    m, n, k, alpha, beta = problem
    # unpacked_route's rule, through its two parts: inlined here, as gemm_unpacked inlines it,
    # it cost this entry 10 % more compile time.
    choice = unpacked_form(m, n, a.cs, b.rs, b.cs)
    if choice == TILES:
        choice = tile_choice(
            tiles.main, tiles.narrow, tiles.few, tiles.gemv, tiles.resident, m, n, k, kc, a.data
        )
    if choice == DOTS_OF_A_ROWS:
        dot_rows_parallel(
            tiles.gemv,
            m,
            k,
            alpha,
            beta,
            first_column(b),
            a,
            first_column(c),
            kc,
            workers,
            work.sums,
            counter,
        )
    elif choice == DOTS_OF_B_COLUMNS:
        dot_rows_parallel(
            tiles.gemv,
            n,
            k,
            alpha,
            beta,
            first_row(a),
            transposed(b),
            first_row(c),
            kc,
            workers,
            work.sums,
            counter,
        )
    else:
        if choice == TRANSPOSING_STREAM:  # the few-rows tile's stream, strips shared out
            choice = FEW_TILE
        elif choice == RESIDENT_TILE:  # a resident-B product is too small for threads: the narrow tile
            choice = NARROW_TILE
        unpacked_parallel(choice, tiles, problem, a, b, c, kc, workers, work, partial, partial_size, counter)
