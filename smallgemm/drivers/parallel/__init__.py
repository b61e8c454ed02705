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

``workers`` is the number of logical workers (``simd.workers``); it may
exceed Numba's pool, whose threads then run several workers in turn.
"""

from __future__ import annotations

from .blocked import (  # noqa: F401
    gemm_parallel,
    one_row_block,
    parallel_entry,
    prepacked_parallel_entry,
    prepacked_rows_parallel,
    row_tasks_parallel,
)
from .tasks import (  # noqa: F401
    COUNTER_STRIDE,
    NO_LOG,
    claim,
    column_groups,
    one_row_group,
    pack_task_panels,
    panels_read_by_others,
    record,
    reset_counters,
    task_split,
)
from .unpacked import (  # noqa: F401
    dot_rows_parallel,
    even_run,
    tile_geometry,
    unpacked_parallel,
    unpacked_parallel_entry,
    unpacked_parallel_product,
    unpacked_task,
)
