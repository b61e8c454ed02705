"""The blocked product on several workers: row-block tasks over shared packed B slices,
one shared A block, and the prepacked products' tasks.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ...kernels.shared import TASKS_PER_WORKER
from ...simd import address, advance, panel_row_count, tile_cols, tile_rows
from ...simd.linked import linked
from ...simd.subroutine import subroutine
from ...simd.workers import on_workers
from ..blocked import block_merge, packed_slice, panels_in_time, prepacked_rows_panels, row_block_task
from ..packing import pack_a, pack_b_panels
from .tasks import (
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
def gemm_parallel(
    shape, m, n, k, alpha, beta, a, rs_a, cs_a, b, rs_b, cs_b, c, rs_c, cs_c,
    mc, nc, kc, shared_rows, workers, abuf, bbuf, scratch, counter, log_b, logged_b, log_rows, logged_rows, prepacked,
):
    """C = alpha*A.B + beta*C with ``workers`` workers (requires m, n, k >= 1).

    Up to ``shared_rows`` rows of A (and no more than the workers' A buffers
    hold together) are one block that all workers share (``one_row_block``).
    With ``prepacked``, ``b`` already holds every packed slice
    (``blocked.packed_slice``): the row-block tasks read them in place.
    ``counter``: the task counters; ``log_b`` / ``log_rows``: the tests' task logs,
    ``logged_b`` / ``logged_rows`` counts long (none in normal calls: ``tasks.record``).
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
            mode, block_alpha = block_merge(pc, depth, k, alpha, beta, c)
            if prepacked:
                row_tasks_parallel(
                    shape, row_blocks, groups, per_group, m, cols, depth, a, pc * cs_a, rs_a, cs_a,
                    advance(b, packed_slice(k, jc, pc, panels * nr)), c, jc * cs_c, rs_c, cs_c,
                    block_alpha, beta, mode, mc, kc, workers, abuf, scratch, counter, log_rows, logged_rows,
                )
                continue
            b_slice = pc * rs_b + jc * cs_b
            if one_block:
                one_row_block(
                    shape, m, cols, depth, a, pc * cs_a, rs_a, cs_a, b, b_slice, rs_b, cs_b,
                    c, jc * cs_c, rs_c, cs_c, block_alpha, beta, mode, kc, group, workers,
                    abuf, bbuf, scratch, counter, log_b, logged_b, log_rows, logged_rows,
                )
                continue
            pack_b_parallel(shape, b, b_slice, rs_b, cs_b, depth, cols, panels, groups, workers, bbuf, counter,
                            log_b, logged_b)
            row_tasks_parallel(
                shape, row_blocks, groups, per_group, m, cols, depth, a, pc * cs_a, rs_a, cs_a, bbuf,
                c, jc * cs_c, rs_c, cs_c, block_alpha, beta, mode, mc, kc, workers, abuf, scratch, counter, log_rows,
                logged_rows,
            )


@subroutine
def pack_b_parallel(shape, b, b_off, rs_b, cs_b, depth, cols, panels, groups, workers, bbuf, counter, log_b, logged_b):
    """Pack a B slice of ``panels`` NR panels on ``workers`` workers, a few panels per task."""
    per_task = pack_task_panels(panels, workers)
    streaming = panels_read_by_others(groups, workers)
    reset_counters(counter, workers)
    pack_b_worker(workers, shape, b, b_off, rs_b, cs_b, depth, cols, panels, per_task, streaming, bbuf, counter,
                  log_b, logged_b)


@on_workers
def pack_b_worker(w, workers, shape, b, b_off, rs_b, cs_b, depth, cols, panels, per_task, streaming, bbuf, counter, log_b,
                  logged_b):
    """One worker of ``pack_b_parallel``: pack tasks of ``per_task`` panels until none is left."""
    pack_tasks = (panels + per_task - 1) // per_task
    task, turn = claim(counter, pack_tasks, workers, w, 0)
    while task >= 0:
        record(log_b, logged_b, task)
        pack_b_panels(shape, b, b_off, rs_b, cs_b, depth, cols, task * per_task, min((task + 1) * per_task, panels),
                      bbuf, streaming)
        task, turn = claim(counter, pack_tasks, workers, w, turn)


@subroutine
def row_tasks_parallel(
    shape, row_blocks, groups, per_group, m, cols, depth, a, a_off, rs_a, cs_a, b_panels, c, c_off, rs_c, cs_c,
    alpha, beta, mode, mc, kc, workers, abuf, scratch, counter, log_rows, logged_rows,
):
    """IC (and column groups of JR) as tasks over one packed B slice (``b_panels``):
    each worker packs the row blocks it takes into its own part of ``abuf``."""
    reset_counters(counter, workers)
    row_task_worker(
        workers, shape, row_blocks, groups, per_group, m, cols, depth, a, a_off, rs_a, cs_a, b_panels, c, c_off,
        rs_c, cs_c, alpha, beta, mode, mc, kc, abuf, scratch, counter, log_rows, logged_rows,
    )


@on_workers
def row_task_worker(
    w, workers, shape, row_blocks, groups, per_group, m, cols, depth, a, a_off, rs_a, cs_a, b_panels, c, c_off, rs_c, cs_c,
    alpha, beta, mode, mc, kc, abuf, scratch, counter, log_rows, logged_rows,
):
    """One worker of ``row_tasks_parallel``."""
    mr = tile_rows(shape)
    nr = tile_cols(shape, abuf)
    row_tasks = row_blocks * groups
    my_abuf = advance(abuf, w * mc * kc)
    my_scratch = advance(scratch, w * mr * nr)
    task, turn = claim(counter, row_tasks, workers, w, 0)
    while task >= 0:
        record(log_rows, logged_rows, task)
        row_block_task(
            shape, task, row_blocks, groups, per_group, m, cols, depth,
            a, a_off, rs_a, cs_a, b_panels, c, c_off, rs_c, cs_c,
            alpha, beta, mode, my_abuf, my_scratch,
        )
        task, turn = claim(counter, row_tasks, workers, w, turn)


@subroutine
def one_row_block(
    shape, m, cols, depth, a, a_off, rs_a, cs_a, b, b_off, rs_b, cs_b, c, c_off, rs_c, cs_c,
    alpha, beta, mode, kc, group, workers, abuf, bbuf, scratch, counter, log_a, logged_a, log_panels, logged_panels,
):
    """One (JC, PC) step when all of A's rows are one block (m <= MC).

    The A block is packed once, its MR-row panels handed out as tasks, into a
    buffer every worker reads; then each group of ``group`` B panels is a task,
    packed by the worker that takes it, into its own buffer, just before its
    only use (``blocked.panels_in_time``): the B slice never goes out to memory
    and comes back (``gemm_serial`` does the same on one thread).  Groups no
    larger than leaves TASKS_PER_WORKER tasks per worker (``one_row_group``),
    so that the last tasks end together: one group per worker lost to one
    panel per task (two threads, ``[256,2048] @ [2048,2048]`` float32: 6.1
    against 5.7 ms).
    """
    reset_counters(counter, workers)
    pack_a_worker(workers, shape, m, depth, a, a_off, rs_a, cs_a, abuf, counter, log_a, logged_a)
    reset_counters(counter, workers)
    panel_group_worker(
        workers, shape, m, cols, depth, b, b_off, rs_b, cs_b, c, c_off, rs_c, cs_c, alpha, beta, mode, kc, group,
        abuf, bbuf, scratch, counter, log_panels, logged_panels,
    )


@on_workers
def pack_a_worker(w, workers, shape, m, depth, a, a_off, rs_a, cs_a, abuf, counter, log_a, logged_a):
    """One worker of ``one_row_block``'s first part: MR-row panels of the A block packed into ``abuf``."""
    mr = tile_rows(shape)
    row_panels = (m + mr - 1) // mr
    task, turn = claim(counter, row_panels, workers, w, 0)
    while task >= 0:
        record(log_a, logged_a, task)
        i0 = task * mr
        pack_a(shape, a, a_off + i0 * rs_a, rs_a, cs_a, min(mr, m - i0), depth, abuf, i0 * depth)
        task, turn = claim(counter, row_panels, workers, w, turn)


@on_workers
def panel_group_worker(
    w, workers, shape, m, cols, depth, b, b_off, rs_b, cs_b, c, c_off, rs_c, cs_c, alpha, beta, mode, kc, group,
    abuf, bbuf, scratch, counter, log_panels, logged_panels,
):
    """One worker of ``one_row_block``'s second part: groups of ``group`` B panels, each packed
    just before its product with the shared A block."""
    mr = tile_rows(shape)
    nr = tile_cols(shape, bbuf)
    width = group * nr
    tasks = (cols + width - 1) // width
    my_bbuf = advance(bbuf, w * kc * width)
    my_scratch = advance(scratch, w * mr * nr)
    task, turn = claim(counter, tasks, workers, w, 0)
    while task >= 0:
        record(log_panels, logged_panels, task)
        panels_in_time(
            shape, m, task * width, min((task + 1) * width, cols), depth, abuf,
            b, b_off, rs_b, cs_b, my_bbuf, group, c, c_off, rs_c, cs_c, alpha, beta, mode, my_scratch,
        )
        task, turn = claim(counter, tasks, workers, w, turn)


@njit(cache=True, nogil=True)  # the GIL released while it computes
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
        mc, nc, kc, shared_rows, workers, address(abuf), address(bbuf), address(scratch), address(counter),
        address(log_b), log_b.shape[0], address(log_rows), log_rows.shape[0], False,
    )


@njit(cache=True, nogil=True)  # as parallel_entry
def prepacked_parallel_entry(shape, alpha, beta, a, packed, n, c, mc, nc, kc, workers, abuf, scratch, counter):
    """Entry from Python with B prepacked by ``blocked.pack_entry`` (``packed`` holds k x n)."""
    origin = np.intp(0)  # B's unused strides, no shared rows and no task logs
    size = a.itemsize
    gemm_parallel(
        shape, a.shape[0], n, a.shape[1], alpha, beta,
        address(a), a.strides[0] // size, a.strides[1] // size, address(packed), origin, origin,
        address(c), c.strides[0] // size, c.strides[1] // size,
        mc, nc, kc, origin, workers, address(abuf), address(packed), address(scratch), address(counter),
        address(counter), origin, address(counter), origin, True,
    )


@njit(cache=True, nogil=True)  # as parallel_entry
def prepacked_rows_parallel(tile, alpha, beta, a, packed, n, c, nc, kc, nr, workers, scratch, counter):
    """``blocked.prepacked_rows_panels`` on ``workers`` workers: groups of NR panels as tasks
    (for one row, whole runs of the panels its one-row tile takes side by side)."""
    m, k = a.shape
    size = a.itemsize
    together = panel_row_count(tile) if m == 1 else 1
    panels = (n + nr - 1) // nr
    groups, per_group = column_groups((panels + together - 1) // together, TASKS_PER_WORKER * workers)
    per_group *= together  # groups of whole runs of ``together`` panels
    reset_counters(address(counter), workers)
    prepacked_rows_worker(
        workers, tile, groups, per_group, together, m, n, k, alpha, beta,
        address(a), a.strides[0] // size, a.strides[1] // size, address(packed),
        address(c), c.strides[0] // size, c.strides[1] // size, nc, kc, nr, address(scratch), address(counter),
    )


@on_workers
def prepacked_rows_worker(
    w, workers, tile, groups, per_group, together, m, n, k, alpha, beta, a, rs_a, cs_a, packed, c, rs_c, cs_c,
    nc, kc, nr, scratch, counter,
):
    """One worker of ``prepacked_rows_parallel``: groups of ``per_group`` panels."""
    mr = max(tile_rows(tile), together)  # rows of NR elements of a worker's scratch
    panels = (n + nr - 1) // nr
    my_scratch = advance(scratch, w * mr * nr)
    task, turn = claim(counter, groups, workers, w, 0)
    while task >= 0:
        prepacked_rows_panels(
            tile, task * per_group, min((task + 1) * per_group, panels), m, n, k, alpha, beta,
            a, rs_a, cs_a, packed, c, rs_c, cs_c, nc, kc, nr, my_scratch,
        )
        task, turn = claim(counter, groups, workers, w, turn)
