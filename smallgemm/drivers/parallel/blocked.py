"""The blocked product on several workers: row-block tasks over shared packed B slices,
one shared A block, and the prepacked products' tasks.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ...kernels.shared import TASKS_PER_WORKER
from ...simd import address, advance, atomic_fetch_add, panel_row_count, tile_cols, tile_rows
from ...simd.linked import linked
from ...simd.records import TaskLogs, matrix, merge, moved, product
from ...simd.subroutine import subroutine
from ...simd.workers import on_workers
from ..arguments import operand, task_logs, workspace_of
from ..blocked import (
    PackedB,
    StepTasks,
    block_merge,
    packed_slice,
    panels_in_time,
    prepacked_rows_panels,
    row_block_task,
)
from ..packing import pack_a, pack_b_panels
from .tasks import (
    COUNTER_STRIDE,
    claim,
    column_groups,
    one_row_group,
    pack_task_panels,
    panels_read_by_others,
    record,
    reset_counters,
    task_split,
)


@linked
def gemm_parallel(shape, problem, a, b, c, blocks, shared_rows, workers, work, counter, logs, prepacked):
    """C = alpha*A.B + beta*C with ``workers`` workers (``problem``: a ``Product`` with m, n, k
    >= 1; A, B and C are ``Matrix`` records, ``blocks`` the ``Blocks``, ``work`` a ``Workspace``).

    Up to ``shared_rows`` rows of A (and no more than the workers' A buffers
    hold together) are one block that all workers share (``one_row_block``).
    With ``prepacked``, ``b.data`` already holds every packed slice
    (``blocked.packed_slice``): the row-block tasks read them in place.
    ``counter``: the task counters; ``logs``: the tests' ``TaskLogs`` (none in normal
    calls: ``tasks.record``).
    """
    m, n, k, alpha, beta = problem
    mc, nc, kc = blocks
    mr = tile_rows(shape)
    nr = tile_cols(shape, work.bbuf)
    # One row block, a B panel per worker fits the buffer, and B has panels
    # enough to keep the workers busy: no B slice is shared (``one_row_block``),
    # so all columns are one slice and A is packed once per KC block.  With few
    # panels (a narrow B) the row-block tasks share out better, and each worker
    # reads the rows of A it packed itself (``task_split``).
    one_block = (
        not prepacked
        and m <= max(mc, min(shared_rows, workers * mc))
        and workers * nr <= nc
        and (n + nr - 1) // nr >= TASKS_PER_WORKER * workers
    )
    slice_cols = n if one_block else nc
    for jc in range(0, n, slice_cols):  # JC
        cols = min(slice_cols, n - jc)
        panels = (cols + nr - 1) // nr
        row_blocks, groups, per_group = task_split(m, cols, mc, mr, nr, workers)
        group = one_row_group(panels, nc, nr, workers)
        for pc in range(0, k, kc):  # PC
            depth = min(kc, k - pc)
            mode, block_alpha = block_merge(pc, depth, k, alpha, beta, c.data)
            merging = merge(block_alpha, beta, mode)
            a_block, c_slice = moved(a, 0, pc), moved(c, 0, jc)
            cut = StepTasks(row_blocks, groups, per_group, m, cols, depth)
            if one_block:
                one_cut = StepTasks(1, (panels + group - 1) // group, group, m, cols, depth)
                b_slice = moved(b, pc, jc)
                one_row_block(
                    shape, one_cut, a_block, b_slice, c_slice, merging, blocks, workers, work, counter, logs
                )
                continue
            if prepacked:
                b_panels = advance(b.data, packed_slice(k, jc, pc, panels * nr))
                row_tasks_parallel(
                    shape, cut, a_block, b_panels, c_slice, merging, blocks, workers, work, counter, logs
                )
            else:
                packed_row_tasks_parallel(
                    shape,
                    cut,
                    a_block,
                    moved(b, pc, jc),
                    c_slice,
                    merging,
                    blocks,
                    workers,
                    work,
                    counter,
                    logs,
                )


@subroutine
def packed_row_tasks_parallel(shape, cut, a, b, c, merging, blocks, workers, work, counter, logs):
    """A B slice (a ``Matrix``, ``cut.cols`` wide and ``cut.depth`` deep) packed into ``work.bbuf``
    a few panels a task, then the row-block tasks over it (``row_tasks``), in one parallel
    region: a worker that runs out of pack tasks waits for the packs the others claimed, not
    for the others to arrive; the first worker packs them all if the other is late.  Two
    regions, one for each set of tasks, cost a second start and join of the workers (two
    threads, float32 64^3 with its threshold forced: ~11 us a region)."""
    reset_counters(counter, 2 * workers + 1)  # the pack tasks', the row tasks' and the packs done
    pack_then_row_worker(workers, shape, cut, a, b, c, merging, blocks, work, counter, logs)


@on_workers
def pack_then_row_worker(w, workers, shape, cut, a, b, c, merging, blocks, work, counter, logs):
    """One worker of ``packed_row_tasks_parallel``: pack tasks until none is left, then, once
    every pack task is done (``tasks_done``), row tasks."""
    nr = tile_cols(shape, work.bbuf)
    panels = (cut.cols + nr - 1) // nr
    per_task = pack_task_panels(panels, workers)
    pack_tasks = (panels + per_task - 1) // per_task
    streaming = panels_read_by_others(cut.groups, workers)
    packs_done = advance(address(counter), 2 * workers * COUNTER_STRIDE)
    task, turn = claim(counter, pack_tasks, workers, w, 0)
    while task >= 0:
        record(logs.packs, logs.packs_count, task)
        pack_b_panels(
            shape,
            b.data,
            b.offset,
            b.rs,
            b.cs,
            cut.depth,
            cut.cols,
            task * per_task,
            min((task + 1) * per_task, panels),
            work.bbuf,
            streaming,
        )
        atomic_fetch_add(packs_done, 1)
        task, turn = claim(counter, pack_tasks, workers, w, turn)
    tasks_done(packs_done, pack_tasks)
    row_tasks(
        w,
        workers,
        shape,
        cut,
        a,
        work.bbuf,
        c,
        merging,
        blocks,
        work,
        advance(counter, workers * COUNTER_STRIDE),
        logs,
    )


@subroutine
def row_tasks_parallel(shape, cut, a, b_panels, c, merging, blocks, workers, work, counter, logs):
    """IC (and column groups of JR) as tasks over one packed B slice (``b_panels``), as
    ``cut`` (a ``StepTasks``) says: each worker packs the row blocks it takes into its own
    part of ``work.abuf``."""
    reset_counters(counter, workers)
    row_task_worker(workers, shape, cut, a, b_panels, c, merging, blocks, work, counter, logs)


@on_workers
def row_task_worker(w, workers, shape, cut, a, b_panels, c, merging, blocks, work, counter, logs):
    """One worker of ``row_tasks_parallel``."""
    row_tasks(w, workers, shape, cut, a, b_panels, c, merging, blocks, work, counter, logs)


@subroutine(inline=True)
def row_tasks(w, workers, shape, cut, a, b_panels, c, merging, blocks, work, counter, logs):
    """Worker ``w``'s row-block tasks over a packed B slice, claimed from ``counter``."""
    mr = tile_rows(shape)
    nr = tile_cols(shape, work.abuf)
    row_tasks = cut.row_blocks * cut.groups
    my_abuf = advance(work.abuf, w * blocks.mc * blocks.kc)
    my_scratch = advance(work.scratch, w * mr * nr)
    task, turn = claim(counter, row_tasks, workers, w, 0)
    while task >= 0:
        record(logs.rows, logs.rows_count, task)
        row_block_task(shape, task, cut, a, b_panels, c, merging, my_abuf, my_scratch)
        task, turn = claim(counter, row_tasks, workers, w, turn)


@subroutine
def one_row_block(shape, cut, a, b, c, merging, blocks, workers, work, counter, logs):
    """One (JC, PC) step when all of A's rows are one block (m <= MC): ``cut`` (a
    ``StepTasks``) has one row block and groups of ``per_group`` B panels.

    The A block is packed once, its MR-row panels handed out as tasks, into a
    buffer every worker reads; then each group of B panels is a task,
    packed by the worker that takes it, into its own buffer, just before its
    only use (``blocked.panels_in_time``): the B slice never goes out to memory
    and comes back (``gemm_serial`` does the same on one thread).  Groups no
    larger than leaves TASKS_PER_WORKER tasks per worker (``one_row_group``),
    so that the last tasks end together: one group per worker lost to one
    panel per task (two threads, ``[256,2048] @ [2048,2048]`` float32: 6.1
    against 5.7 ms).  The A panels are logged as pack tasks, the groups as row tasks.
    """
    reset_counters(counter, 2 * workers + 1)  # the A panels', the groups' and the panels packed
    pack_a_then_groups_worker(workers, shape, cut, a, b, c, merging, blocks, work, counter, logs)


@on_workers
def pack_a_then_groups_worker(w, workers, shape, cut, a, b, c, merging, blocks, work, counter, logs):
    """One worker of ``one_row_block``: MR-row panels of the A block packed into ``work.abuf``
    until none is left, then, once every panel is packed (``tasks_done``), groups of
    ``cut.per_group`` B panels, each packed just before its product with the A block: both
    in one parallel region, as ``packed_row_tasks_parallel``."""
    mr = tile_rows(shape)
    nr = tile_cols(shape, work.bbuf)
    m, depth = cut.rows, cut.depth
    row_panels = (m + mr - 1) // mr
    packed = advance(address(counter), 2 * workers * COUNTER_STRIDE)
    task, turn = claim(counter, row_panels, workers, w, 0)
    while task >= 0:
        record(logs.packs, logs.packs_count, task)
        i0 = task * mr
        pack_a(shape, a.data, a.offset + i0 * a.rs, a.rs, a.cs, min(mr, m - i0), depth, work.abuf, i0 * depth)
        atomic_fetch_add(packed, 1)
        task, turn = claim(counter, row_panels, workers, w, turn)
    tasks_done(packed, row_panels)
    width = cut.per_group * nr
    groups = (cut.cols + width - 1) // width
    my_bbuf = advance(work.bbuf, w * blocks.kc * width)
    my_scratch = advance(work.scratch, w * mr * nr)
    group_counter = advance(counter, workers * COUNTER_STRIDE)
    task, turn = claim(group_counter, groups, workers, w, 0)
    while task >= 0:
        record(logs.rows, logs.rows_count, task)
        panels_in_time(
            shape,
            m,
            task * width,
            min((task + 1) * width, cut.cols),
            depth,
            work.abuf,
            b,
            my_bbuf,
            cut.per_group,
            c,
            merging,
            my_scratch,
        )
        task, turn = claim(group_counter, groups, workers, w, turn)


@subroutine(inline=True)
def tasks_done(done, total):
    """Wait until the count at ``done`` (an int64 address the workers add 1 to as each task
    ends, a locked add that drains the task's streaming stores first) reaches ``total``."""
    while atomic_fetch_add(done, 0) < total:
        pass


@njit(cache=True, nogil=True)  # the GIL released while it computes
def parallel_entry(shape, alpha, beta, a, b, c, blocks, shared_rows, workers, ws, logs):
    """Entry from Python: 2-D arrays of one dtype (any strides), C not overlapping A or B;
    ``logs``: the tests' two task logs (empty in normal calls)."""
    problem = product(a.shape[0], b.shape[1], a.shape[1], alpha, beta)
    gemm_parallel(
        shape,
        problem,
        operand(a),
        operand(b),
        operand(c),
        blocks,
        shared_rows,
        workers,
        workspace_of(ws),
        address(ws.counter),
        task_logs(logs),
        False,
    )


@njit(cache=True, nogil=True)  # as parallel_entry
def prepacked_parallel_entry(shape, alpha, beta, a, packed, n, c, blocks, workers, ws):
    """Entry from Python with B prepacked by ``blocked.pack_entry`` (``packed`` holds k x n)."""
    problem = product(a.shape[0], n, a.shape[1], alpha, beta)
    none = np.intp(0)  # B's unused strides, no shared rows and no task logs
    counter = address(ws.counter)
    gemm_parallel(
        shape,
        problem,
        operand(a),
        matrix(address(packed), 0, none, none),
        operand(c),
        blocks,
        none,
        workers,
        workspace_of(ws),
        counter,
        TaskLogs(counter, none, counter, none),
        True,
    )


@njit(cache=True, nogil=True)  # as parallel_entry
def prepacked_rows_parallel(tile, alpha, beta, a, packed, n, c, nc, kc, nr, workers, ws):
    """``blocked.prepacked_rows_panels`` on ``workers`` workers: groups of NR panels as tasks
    (for one row, whole runs of the panels its one-row tile takes side by side)."""
    m, k = a.shape
    together = panel_row_count(tile) if m == 1 else 1
    panels = (n + nr - 1) // nr
    groups, per_group = column_groups((panels + together - 1) // together, TASKS_PER_WORKER * workers)
    per_group *= together  # groups of whole runs of ``together`` panels
    counter = address(ws.counter)
    reset_counters(counter, workers)
    prepacked_rows_worker(
        workers,
        tile,
        groups,
        per_group,
        together,
        product(m, n, k, alpha, beta),
        operand(a),
        PackedB(address(packed), nc, kc, nr),
        operand(c),
        address(ws.scratch),
        counter,
    )


@on_workers
def prepacked_rows_worker(
    w, workers, tile, groups, per_group, together, problem, a, packed, c, scratch, counter
):
    """One worker of ``prepacked_rows_parallel``: groups of ``per_group`` panels."""
    nr = packed.nr
    mr = max(tile_rows(tile), together)  # rows of NR elements of a worker's scratch
    panels = (problem.n + nr - 1) // nr
    my_scratch = advance(scratch, w * mr * nr)
    task, turn = claim(counter, groups, workers, w, 0)
    while task >= 0:
        prepacked_rows_panels(
            tile,
            task * per_group,
            min((task + 1) * per_group, panels),
            problem,
            a,
            packed,
            c,
            my_scratch,
        )
        task, turn = claim(counter, groups, workers, w, turn)
