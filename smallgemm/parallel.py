"""The five-loop driver on several threads, with an atomic task counter.

For each NC x KC slice of B (JC, PC loops, never parallel: PC carries the sum):

1. the slice is packed once, panel by panel, into one buffer all threads read
   (it lives in the shared L3);
2. row-block tasks (an MC-row block of A and C, times a group of the slice's
   NR-column panels) are handed out by fetch-and-add on atomic counters, so a
   thread that finishes early takes the next task and all finish together.
   Each thread packs its A block into its own part of the A buffer.

The tasks are cut into one contiguous range per worker, each with its own
counter (``claim``): a worker takes its own range first, then helps the
others.  Call after call the same worker meets the same rows and columns, so
what its caches kept from the last call is what it reads next.

Tasks only choose *which* tiles a thread computes, never *how*: every element
is the same FMA chain per KC block, blocks merged in increasing order, so the
result is bitwise identical for any number of threads and any schedule.

``workers`` is the number of logical workers (``prange`` iterations); it may
exceed Numba's pool, whose threads then run several workers in turn.
"""

import numpy as np
from numba import njit, prange

from .driver import merge_mode, packed_slice, panels_in_time, prepacked_rows_panels, row_block_task
from .packing import PACK_B_GROUP, pack_a, pack_b_panels
from .simd import (
    address,
    advance,
    atomic_fetch_add,
    line_elements,
    multiply_add,
    row_dots_rule,
    tile_cols,
    tile_lanes,
    tile_rows,
)
from .unpacked import (
    DOTS_OF_A_ROWS,
    DOTS_OF_B_COLUMNS,
    FEW_TILE,
    GEMV_TILE,
    NARROW_TILE,
    RESIDENT_TILE,
    STREAM_SIZE,
    dot_pairs_suit,
    dot_rows_of,
    fetches_ahead,
    gemv_rows,
    row_dots_form,
    stream_tiles,
    tile_choice,
)

# At least this many row-block tasks per worker, so that uneven tasks even out
# (seed 001); when rows are too few for that, columns are split too.
TASKS_PER_WORKER = 3


@njit(cache=True)
def task_split(m, cols, mc, mr, nr, workers):
    """(row blocks, column groups, panels per group) for the row-block tasks.

    Row blocks hold at most MC rows and share the MR-row panels evenly (see
    ``row_block_task``); their number is a multiple of the worker count where
    the rows allow, so that no worker is left alone with a last short block.
    A slice of fewer panels than the tasks wanted, or no wider than A is tall,
    is cut into that many row blocks (where the rows allow) rather than into
    column groups, each of which would pack its rows of A again (two threads,
    float32 ``1024x64x64``: 47 us in row blocks against 61 in column groups).
    A wider slice keeps its column groups, each worker's own B panels
    (``driver.task_block_group``): cut into row blocks, x.T @ g ``512x2048x4096``
    took 49 ms against 47.  When that still gives fewer than TASKS_PER_WORKER
    tasks per worker, the columns are split too.  None of this changes a sum:
    only KC does.
    """
    row_panels = (m + mr - 1) // mr
    row_blocks = (m + mc - 1) // mc
    panels = (cols + nr - 1) // nr
    wanted = TASKS_PER_WORKER * workers
    if panels < wanted or cols <= m:
        row_blocks = max(row_blocks, wanted)
    row_blocks = min(row_panels, (row_blocks + workers - 1) // workers * workers)
    groups, per_group = column_groups(panels, (wanted + row_blocks - 1) // row_blocks)
    return row_blocks, groups, per_group


@njit(cache=True)
def column_groups(panels, count):
    """(groups, panels per group): ``panels`` NR panels in about ``count`` even groups."""
    groups = min(panels, max(1, count))
    per_group = (panels + groups - 1) // groups
    return (panels + per_group - 1) // per_group, per_group


@njit(cache=True)
def pack_task_panels(panels, workers):
    """NR panels per task when ``workers`` pack a B slice of ``panels`` panels: groups
    of PACK_B_GROUP (``packing.pack_b_rows``) where that leaves TASKS_PER_WORKER
    tasks per worker, fewer panels where it does not."""
    return max(1, min(PACK_B_GROUP, panels // (TASKS_PER_WORKER * workers)))


@njit(cache=True)
def one_row_group(panels, nc, nr, workers):
    """B panels per task of ``one_row_block``: about as many as a pack task
    takes (``pack_task_panels``), evened out so that the tasks come in a
    multiple of the workers where that can be, and no more than each worker's
    share of the B buffer (NC columns) holds."""
    most = max(1, min(pack_task_panels(panels, workers), nc // (workers * nr)))
    tasks = ((panels + most - 1) // most + workers - 1) // workers * workers
    return (panels + tasks - 1) // tasks


@njit(cache=True)
def panels_read_by_others(groups, workers):
    """Whether the row-block tasks of a B slice read panels that other workers
    packed: fewer column groups than workers, so each panel is read by several
    (``driver.task_block_group``).  The slices are then packed with streaming
    stores (``packing.pack_b_rows``): they halve the packing of a float32 1024^3
    slice on two threads whose cores sit on different L3s (140 against 300 us;
    137 against 150 on one L3).  Where each worker reads only the panels it
    packed, streaming would send the slice to memory and back (x.T @ g,
    512x2048x4096, two groups: 3 % slower)."""
    return groups < workers


# int64 slots between two workers' counters: each alone on its cache line.
COUNTER_STRIDE = 8


@njit(cache=True)
def reset_counters(counter, workers):
    """Zero every worker's task counter before a new set of tasks."""
    for w in range(workers):
        counter[w * COUNTER_STRIDE] = 0


@njit(cache=True)
def claim(counter, total, workers, w, turn):
    """(task, turn): the next of ``total`` tasks for worker ``w``, or (-1, turn) when none is left.

    Tasks are cut into one contiguous range per worker, each with its own
    counter: a worker takes its own range in order first (so, call after call,
    the same worker and its caches meet the same columns of B), then helps the
    others by fetch-and-add on their counters (``turn``: how many ranges it has
    finished).  Each task is handed out exactly once.
    """
    while turn < workers:
        owner = (w + turn) % workers
        first = owner * total // workers
        end = (owner + 1) * total // workers
        task = first + atomic_fetch_add(advance(address(counter), owner * COUNTER_STRIDE), 1)
        if task < end:
            return task, turn
        turn += 1
    return -1, turn


# The task log of normal calls: empty, nothing recorded (tests pass real ones).
NO_LOG = np.zeros(0, dtype=np.int64)


@njit(cache=True)
def record(log, task):
    """Test hook: count that ``task`` ran (``log`` is empty in normal calls)."""
    if log.shape[0] > 0:
        atomic_fetch_add(advance(address(log), task), 1)


@njit(cache=True, parallel=True)
def gemm_parallel(
    shape, m, n, k, alpha, beta, a, rs_a, cs_a, b, rs_b, cs_b, c, rs_c, cs_c,
    mc, nc, kc, shared_rows, workers, abuf, bbuf, scratch, counter, log_b, log_rows, prepacked,
):
    """C = alpha*A.B + beta*C with ``workers`` workers (requires m, n, k >= 1).

    Up to ``shared_rows`` rows of A (and no more than the workers' A buffers
    hold together) are one block that all workers share (``one_row_block``).
    With ``prepacked``, ``b`` already holds every packed slice
    (``driver.packed_slice``): the row-block tasks read them in place.
    """
    mr = tile_rows(shape)
    nr = tile_cols(shape, bbuf)
    # One row block, a B panel per worker fits the buffer, and B has panels
    # enough to keep the workers busy: no B slice is shared (``one_row_block``),
    # so all columns are one slice and A is packed once per KC block.  With few
    # panels (a narrow B) the row-block tasks share out better, and each worker
    # reads the rows of A it packed itself (``task_split``).
    one_block = (not prepacked and m <= max(mc, min(shared_rows, workers * mc)) and workers * nr <= nc
                 and (n + nr - 1) // nr >= TASKS_PER_WORKER * workers)
    slice_cols = n if one_block else nc
    for jc in range(0, n, slice_cols):  # JC
        cols = min(slice_cols, n - jc)
        panels = (cols + nr - 1) // nr
        row_blocks, groups, per_group = task_split(m, cols, mc, mr, nr, workers)
        group = one_row_group(panels, nc, nr, workers)
        for pc in range(0, k, kc):  # PC
            depth = min(kc, k - pc)
            mode = merge_mode(pc, beta)
            if prepacked:
                row_tasks_parallel(
                    shape, row_blocks, groups, per_group, m, cols, depth, a, pc * cs_a, rs_a, cs_a,
                    advance(b, packed_slice(k, jc, pc, panels * nr)), c, jc * cs_c, rs_c, cs_c,
                    alpha, beta, mode, mc, kc, workers, abuf, scratch, counter, log_rows,
                )
                continue
            b_slice = pc * rs_b + jc * cs_b
            if one_block:
                one_row_block(
                    shape, m, cols, depth, a, pc * cs_a, rs_a, cs_a, b, b_slice, rs_b, cs_b,
                    c, jc * cs_c, rs_c, cs_c, alpha, beta, mode, kc, group, workers,
                    abuf, bbuf, scratch, counter, log_b, log_rows,
                )
                continue
            per_task = pack_task_panels(panels, workers)
            pack_tasks = (panels + per_task - 1) // per_task
            streaming = panels_read_by_others(groups, workers)
            reset_counters(counter, workers)
            for w in prange(workers):  # pack the B slice, a few NR panels per task
                task, turn = claim(counter, pack_tasks, workers, w, 0)
                while task >= 0:
                    record(log_b, task)
                    pack_b_panels(shape, b, b_slice, rs_b, cs_b, depth, cols, task * per_task,
                                  min((task + 1) * per_task, panels), bbuf, streaming)
                    task, turn = claim(counter, pack_tasks, workers, w, turn)
            row_tasks_parallel(
                shape, row_blocks, groups, per_group, m, cols, depth, a, pc * cs_a, rs_a, cs_a, bbuf,
                c, jc * cs_c, rs_c, cs_c, alpha, beta, mode, mc, kc, workers, abuf, scratch, counter, log_rows,
            )


@njit(cache=True, parallel=True)
def row_tasks_parallel(
    shape, row_blocks, groups, per_group, m, cols, depth, a, a_off, rs_a, cs_a, b_panels, c, c_off, rs_c, cs_c,
    alpha, beta, mode, mc, kc, workers, abuf, scratch, counter, log_rows,
):
    """IC (and column groups of JR) as tasks over one packed B slice (``b_panels``):
    each worker packs the row blocks it takes into its own part of ``abuf``."""
    mr = tile_rows(shape)
    nr = tile_cols(shape, abuf)
    row_tasks = row_blocks * groups
    reset_counters(counter, workers)
    for w in prange(workers):
        my_abuf = advance(abuf, w * mc * kc)
        my_scratch = advance(scratch, w * mr * nr)
        task, turn = claim(counter, row_tasks, workers, w, 0)
        while task >= 0:
            record(log_rows, task)
            row_block_task(
                shape, task, row_blocks, groups, per_group, m, cols, depth,
                a, a_off, rs_a, cs_a, b_panels, c, c_off, rs_c, cs_c,
                alpha, beta, mode, my_abuf, my_scratch,
            )
            task, turn = claim(counter, row_tasks, workers, w, turn)


@njit(cache=True, parallel=True)
def one_row_block(
    shape, m, cols, depth, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b, c, c_off, rs_c, cs_c,
    alpha, beta, mode, kc, group, workers, abuf, bbuf, scratch, counter, log_a, log_panels,
):
    """One (JC, PC) step when all of A's rows are one block (m <= MC).

    The A block is packed once, its MR-row panels handed out as tasks, into a
    buffer every worker reads; then each group of ``group`` B panels is a task,
    packed by the worker that takes it, into its own buffer, just before its
    only use (``driver.panels_in_time``): the B slice never goes out to memory
    and comes back (``gemm_serial`` does the same on one thread).  Groups no
    larger than leaves TASKS_PER_WORKER tasks per worker (``one_row_group``),
    so that the last tasks end together: one group per worker lost to one
    panel per task (two threads, ``[256,2048] @ [2048,2048]`` float32: 6.1
    against 5.7 ms).
    """
    mr = tile_rows(shape)
    nr = tile_cols(shape, bbuf)
    row_panels = (m + mr - 1) // mr
    reset_counters(counter, workers)
    for w in prange(workers):
        task, turn = claim(counter, row_panels, workers, w, 0)
        while task >= 0:
            record(log_a, task)
            i0 = task * mr
            pack_a(shape, a, a_off + i0 * rs_a, rs_a, cs_a, min(mr, m - i0), depth, abuf, i0 * depth)
            task, turn = claim(counter, row_panels, workers, w, turn)
    width = group * nr
    tasks = (cols + width - 1) // width
    reset_counters(counter, workers)
    for w in prange(workers):
        my_bbuf = advance(bbuf, w * kc * width)
        my_scratch = advance(scratch, w * mr * nr)
        task, turn = claim(counter, tasks, workers, w, 0)
        while task >= 0:
            record(log_panels, task)
            panels_in_time(
                shape, m, task * width, min((task + 1) * width, cols), depth, abuf,
                b, b_off, rs_b, cs_b, my_bbuf, group, c, c_off, rs_c, cs_c, alpha, beta, mode, my_scratch,
            )
            task, turn = claim(counter, tasks, workers, w, turn)


@njit(cache=True)
def parallel_entry(
    shape, alpha, beta, a, b, c, mc, nc, kc, shared_rows, workers, abuf, bbuf, scratch, counter, log_b, log_rows,
):
    """Entry from Python: 2-D arrays of one dtype (any strides), C not overlapping A or B."""
    size = a.itemsize
    gemm_parallel(
        shape, a.shape[0], b.shape[1], a.shape[1], alpha, beta,
        address(a), a.strides[0] // size, a.strides[1] // size,
        address(b), b.strides[0] // size, b.strides[1] // size,
        address(c), c.strides[0] // size, c.strides[1] // size,
        mc, nc, kc, shared_rows, workers, address(abuf), address(bbuf), address(scratch), counter, log_b, log_rows,
        False,
    )


@njit(cache=True)
def prepacked_parallel_entry(shape, alpha, beta, a, packed, n, c, mc, nc, kc, workers, abuf, scratch, counter):
    """Entry from Python with B prepacked by ``driver.pack_entry`` (``packed`` holds k x n)."""
    # Run-time zeros (B's unused strides, no shared rows) and empty logs typed as
    # parallel_entry's: literals or the read-only global NO_LOG would compile
    # every callee, the row-block tasks included, once more.
    origin = np.intp(0)
    no_log = np.empty(0, dtype=np.int64)
    size = a.itemsize
    gemm_parallel(
        shape, a.shape[0], n, a.shape[1], alpha, beta,
        address(a), a.strides[0] // size, a.strides[1] // size, address(packed), origin, origin,
        address(c), c.strides[0] // size, c.strides[1] // size,
        mc, nc, kc, origin, workers, address(abuf), address(packed), address(scratch), counter, no_log, no_log, True,
    )


@njit(cache=True, parallel=True)
def prepacked_rows_parallel(tile, alpha, beta, a, packed, n, c, nc, kc, nr, workers, scratch, counter):
    """``driver.prepacked_rows_panels`` on ``workers`` workers: groups of NR panels as tasks."""
    m, k = a.shape
    size = a.itemsize
    mr = tile_rows(tile)
    panels = (n + nr - 1) // nr
    groups, per_group = column_groups(panels, TASKS_PER_WORKER * workers)
    reset_counters(counter, workers)
    for w in prange(workers):
        my_scratch = advance(address(scratch), w * mr * nr)
        task, turn = claim(counter, groups, workers, w, 0)
        while task >= 0:
            prepacked_rows_panels(
                tile, task * per_group, min((task + 1) * per_group, panels), m, n, k, alpha, beta,
                address(a), a.strides[0] // size, a.strides[1] // size, address(packed),
                address(c), c.strides[0] // size, c.strides[1] // size, nc, kc, nr, my_scratch,
            )
            task, turn = claim(counter, groups, workers, w, turn)


@njit(cache=True)
def stream_geometry(tile_of, shape, narrow, few, gemv, a, n, k, cs_b):
    """(MR, NR, ``fetches_ahead``) of the stream tile ``tile_of`` names (``stream_tile_of``)."""
    if tile_of == FEW_TILE:
        return tile_rows(few), tile_cols(few, a), fetches_ahead(few, a, n, k, cs_b)
    if tile_of == NARROW_TILE:
        return tile_rows(narrow), tile_cols(narrow, a), fetches_ahead(narrow, a, n, k, cs_b)
    if tile_of == GEMV_TILE:
        return tile_rows(gemv), tile_cols(gemv, a), fetches_ahead(gemv, a, n, k, cs_b)
    return tile_rows(shape), tile_cols(shape, a), fetches_ahead(shape, a, n, k, cs_b)


@njit(cache=True)
def stream_tile_of(
    tile_of, shape, narrow, few, gemv, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b,
    c, c_off, rs_c, cs_c, kc, sums, scratch, fetch,
):
    """``stream_tiles`` with the tile ``tile_of`` names: FEW_TILE, NARROW_TILE, GEMV_TILE,
    else the main ``shape``.  A run-time choice, so that one parallel driver serves every
    tile: compiled once per kernel and dtype, not once per tile (each costs seconds)."""
    if tile_of == FEW_TILE:
        stream_tiles(few, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b, c, c_off, rs_c, cs_c, kc,
                     sums, scratch, fetch)
    elif tile_of == NARROW_TILE:
        stream_tiles(narrow, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b, c, c_off, rs_c, cs_c,
                     kc, sums, scratch, fetch)
    elif tile_of == GEMV_TILE:
        stream_tiles(gemv, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b, c, c_off, rs_c, cs_c, kc,
                     sums, scratch, fetch)
    else:
        stream_tiles(shape, m, n, k, alpha, beta, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b, c, c_off, rs_c, cs_c,
                     kc, sums, scratch, fetch)


@njit(cache=True, parallel=True)
def unpacked_parallel(
    tile_of, shape, narrow, few, gemv, m, n, k, alpha, beta, one, zero, a, rs_a, cs_a, b, rs_b, cs_b, c, rs_c, cs_c,
    kc, workers, scratch, sums, partial, counter,
):
    """The unpacked driver (few rows) on ``workers`` workers, with the stream tile
    ``tile_of`` names (``stream_tile_of``).

    Tasks are (row chunk, column strip) pairs handed out by the counter, each
    computed by ``stream_tiles`` with the worker's own stream buffer.  When
    they are too few to keep the workers busy and k spans several KC blocks,
    the blocks are split too (split-K): each (chunk, strip, KC block) task writes
    its block's raw tile sum into its own slice of ``partial``, then the slices
    are merged into C in increasing block order with the very rules of the
    serial path (OVERWRITE / SCALE, then ACCUMULATE).  The number of slices is
    the number of KC blocks, whatever the thread count: the bits never change.
    """
    mr, nr, fetch = stream_geometry(tile_of, shape, narrow, few, gemv, a, n, k, cs_b)
    scratch_size = tile_rows(shape) * tile_cols(shape, a)  # the largest tile's (workspace.get)
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
    split = tasks < wanted and k_blocks > 1 and partial.shape[0] >= k_blocks * m * n
    total = tasks * k_blocks if split else tasks
    unit = np.intp(1)  # the partial sums' column stride: a literal 1 would compile stream_tiles once more
    reset_counters(counter, workers)
    for w in prange(workers):
        my_scratch = advance(scratch, w * scratch_size)
        my_sums = advance(sums, w * STREAM_SIZE)
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
                stream_tile_of(
                    tile_of, shape, narrow, few, gemv, rows, cols, min(kc, k - p0), one, zero,
                    a, i0 * rs_a + p0 * cs_a, rs_a, cs_a, b, p0 * rs_b + j0 * cs_b, rs_b, cs_b,
                    address(partial), block * m * n + i0 * n + j0, n, unit, kc, my_sums, my_scratch, fetch,
                )
            else:
                stream_tile_of(
                    tile_of, shape, narrow, few, gemv, rows, cols, k, alpha, beta,
                    a, i0 * rs_a, rs_a, cs_a, b, j0 * cs_b, rs_b, cs_b,
                    c, i0 * rs_c + j0 * cs_c, rs_c, cs_c, kc, my_sums, my_scratch, fetch,
                )
            task, turn = claim(counter, total, workers, w, turn)
    if split:
        for i in prange(m):
            for j in range(n):
                at = i * rs_c + j * cs_c
                t = partial[i * n + j]
                if beta == 0:
                    c[at] = alpha * t
                else:
                    c[at] = multiply_add(shape, alpha, t, beta * c[at])
                for block in range(1, k_blocks):
                    c[at] = multiply_add(shape, alpha, partial[block * m * n + i * n + j], c[at])


@njit(cache=True)
def even_run(task, tasks, units, unit, limit):
    """(first, end): the elements of run ``task`` of ``tasks`` runs of whole ``unit``-element
    units, ``units`` in all, as even as possible; the last ends at ``limit``."""
    return task * units // tasks * unit, min((task + 1) * units // tasks * unit, limit)


@njit(cache=True, parallel=True)
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
    for w in prange(workers):
        my_sums = advance(sums, w * STREAM_SIZE)
        task, turn = claim(counter, tasks, workers, w, 0)
        while task >= 0:
            first, end = even_run(task, tasks, blocks, block_rows, rows)
            dot_rows_of(rule, paired, end - first, k, alpha, beta, v, v_off, v_stride, mat, m_off + first * ldm,
                        ldm, c, c_off + first * cs_c, cs_c, kc, my_sums)
            task, turn = claim(counter, tasks, workers, w, turn)


# From this many bytes of B, one row of A on several workers runs ``gemv_rows`` on each
# worker's columns rather than the 1 x 256 tile on strips: its prefetch keeps more of
# memory's bandwidth (two threads, [1,k] @ [k,n] float32: even at 8 MiB of B, 1.27x at
# 64 MiB); from the L2 and the L3 the tile's sums in registers cost less than a row in the L1.
GEMV_ROWS_PARALLEL_MIN_BYTES = 8 << 20


@njit(cache=True)
def streams_rows(gemv, a, n, k, workers):
    """Whether one row of A times a k x n B (rows contiguous) takes ``gemv_rows_parallel``:
    B of GEMV_ROWS_PARALLEL_MIN_BYTES or more, and a vector of columns for every worker."""
    lanes = tile_lanes(gemv, a)
    size = 64 // line_elements(gemv, a)
    return n * k * size >= GEMV_ROWS_PARALLEL_MIN_BYTES and (n + lanes - 1) // lanes >= workers


@njit(cache=True, parallel=True)
def gemv_rows_parallel(rule, n, k, alpha, beta, a, cs_a, b, rs_b, c, cs_c, kc, workers, sums, counter):
    """``unpacked.gemv_rows`` (one row of A, B's rows contiguous) on ``workers`` workers:
    one run of whole vectors of columns per worker, so each streams its part of every
    row of B, the same part call after call.  Columns are independent sums: the bits
    are those of one thread."""
    lanes = tile_lanes(rule, b)
    vectors = (n + lanes - 1) // lanes
    tasks = min(vectors, workers)
    reset_counters(counter, workers)
    for w in prange(workers):
        my_sums = advance(sums, w * STREAM_SIZE)
        task, turn = claim(counter, tasks, workers, w, 0)
        while task >= 0:
            first, end = even_run(task, tasks, vectors, lanes, n)
            gemv_rows(rule, end - first, k, alpha, beta, a, np.intp(0), cs_a, b, first, rs_b, c, first * cs_c, cs_c, kc,
                      my_sums)
            task, turn = claim(counter, tasks, workers, w, turn)


@njit(cache=True)
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
        address(c), c.strides[0] // size, c.strides[1] // size, kc, workers, address(scratch), address(sums), partial,
        counter,
    )


@njit(cache=True)
def unpacked_parallel_product(
    shape, narrow, few, gemv, resident, m, n, k, alpha, beta, one, zero, a, rs_a, cs_a, b, rs_b, cs_b, c, rs_c, cs_c,
    kc, workers, scratch, sums, partial, counter,
):
    """One unpacked product on ``workers`` workers, with the tile ``gemm_unpacked`` would choose."""
    origin = np.intp(0)  # a run-time zero: a literal 0 would compile every callee once more
    args = (
        shape, narrow, few, gemv, m, n, k, alpha, beta, one, zero, a, rs_a, cs_a, b, rs_b, cs_b, c, rs_c, cs_c, kc,
        workers, scratch, sums, partial, counter,
    )
    dots = row_dots_form(m, n, cs_a, rs_b, cs_b)  # as gemm_unpacked
    if dots == DOTS_OF_A_ROWS:
        dot_rows_parallel(gemv, m, k, alpha, beta, b, origin, rs_b, a, origin, rs_a, c, origin, rs_c, kc, workers, sums,
                          counter)
        return
    if dots == DOTS_OF_B_COLUMNS:
        dot_rows_parallel(gemv, n, k, alpha, beta, a, origin, cs_a, b, origin, cs_b, c, origin, cs_c, kc, workers, sums,
                          counter)
        return
    choice = tile_choice(shape, narrow, few, resident, m, n, k, kc, a)
    if cs_b != 1:  # B transposed: the few-rows tile, as gemm_unpacked
        unpacked_parallel(FEW_TILE, *args)
    elif choice == RESIDENT_TILE:  # a resident-B product is too small for threads: the narrow tile
        unpacked_parallel(NARROW_TILE, *args)
    elif choice == GEMV_TILE and streams_rows(gemv, a, n, k, workers):
        gemv_rows_parallel(gemv, n, k, alpha, beta, a, cs_a, b, rs_b, c, cs_c, kc, workers, sums, counter)
    else:
        unpacked_parallel(choice, *args)
