"""Tasks for the workers: how a product is cut (``task_split``, column groups, pack
tasks), the counters workers claim tasks from (home ranges first), and the tests' task log.
"""

from __future__ import annotations

import numpy as np

from ...kernels.shared import PACK_B_GROUP, TASKS_PER_WORKER
from ...simd import address, advance, atomic_fetch_add
from ...simd.subroutine import subroutine


@subroutine
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
    (``blocked.task_block_group``): cut into row blocks, x.T @ g ``512x2048x4096``
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


@subroutine
def column_groups(panels, count):
    """(groups, panels per group): ``panels`` NR panels in about ``count`` even groups."""
    groups = min(panels, max(1, count))
    per_group = (panels + groups - 1) // groups
    return (panels + per_group - 1) // per_group, per_group


@subroutine
def pack_task_panels(panels, workers):
    """NR panels per task when ``workers`` pack a B slice of ``panels`` panels: groups
    of PACK_B_GROUP (``packing.pack_b_rows``) where that leaves TASKS_PER_WORKER
    tasks per worker, fewer panels where it does not."""
    return max(1, min(PACK_B_GROUP, panels // (TASKS_PER_WORKER * workers)))


@subroutine
def one_row_group(panels, nc, nr, workers):
    """B panels per task of ``one_row_block``: about as many as a pack task
    takes (``pack_task_panels``), evened out so that the tasks come in a
    multiple of the workers where that can be, and no more than each worker's
    share of the B buffer (NC columns) holds."""
    most = max(1, min(pack_task_panels(panels, workers), nc // (workers * nr)))
    tasks = ((panels + most - 1) // most + workers - 1) // workers * workers
    return (panels + tasks - 1) // tasks


@subroutine
def panels_read_by_others(groups, workers):
    """Whether the row-block tasks of a B slice read panels that other workers
    packed: fewer column groups than workers, so each panel is read by several
    (``blocked.task_block_group``).  The slices are then packed with streaming
    stores (``packing.pack_b_rows``): they halve the packing of a float32 1024^3
    slice on two threads whose cores sit on different L3s (140 against 300 us;
    137 against 150 on one L3).  Where each worker reads only the panels it
    packed, streaming would send the slice to memory and back (x.T @ g,
    512x2048x4096, two groups: 3 % slower)."""
    return groups < workers


# int64 slots between two workers' counters: each alone on its cache line.
COUNTER_STRIDE = 8


@subroutine
def reset_counters(counter, workers):
    """Zero every worker's task counter before a new set of tasks."""
    for w in range(workers):
        counter[w * COUNTER_STRIDE] = 0


@subroutine
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


@subroutine
def record(log, logged, task):
    """Test hook: count that ``task`` ran in the task log at pointer ``log``, which holds
    ``logged`` counts (none in normal calls)."""
    if logged > 0:
        atomic_fetch_add(advance(log, task), 1)
