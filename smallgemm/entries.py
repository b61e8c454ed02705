"""The compiled entry points, each with the roles of its arguments (``entry.Entry``).

One entry per driver and way in; ``Entry.get(kernel, dtype)`` compiles (or loads) it
for one kernel and dtype, with its arguments typed by role.
"""

from __future__ import annotations

from .batched import batch_each_parallel_entry, batch_entry, batch_tasks_entry, small_stack_entry
from .driver import gemm_entry, pack_entry, prepacked_entry, prepacked_rows_entry
from .entry import Entry
from .parallel import parallel_entry, prepacked_parallel_entry, prepacked_rows_parallel, unpacked_parallel_entry
from .unpacked import unpacked_entry, vector_entry

BLOCKED = Entry(
    gemm_entry,
    ("shape", "scalar", "scalar", "matrix", "matrix", "out", "int", "int", "int", "buffer", "buffer", "buffer"),
)
UNPACKED = Entry(
    unpacked_entry,
    ("shape", "narrow", "few", "gemv", "bool", "resident", "int", "int", "int", "int", "int", "int", "bool",
     "scalar", "scalar", "matrix", "matrix", "out"),
)
VECTOR = Entry(
    vector_entry, ("gemv", "bool", "scalar", "scalar", "vector", "matrix", "out_vector", "int", "buffer", "bool")
)
PARALLEL = Entry(
    parallel_entry,
    ("shape", "scalar", "scalar", "matrix", "matrix", "out", "int", "int", "int", "int", "int",
     "buffer", "buffer", "buffer", "counter", "log", "log"),
)
PACK = Entry(pack_entry, ("shape", "matrix", "int", "int", "buffer"))
PREPACKED = Entry(
    prepacked_entry,
    ("shape", "scalar", "scalar", "matrix", "buffer", "int", "out", "int", "int", "int", "buffer", "buffer", "buffer"),
)
PREPACKED_ROWS = Entry(
    prepacked_rows_entry,
    ("panel_rows", "scalar", "scalar", "matrix", "buffer", "int", "out", "int", "int", "int", "buffer"),
)
PREPACKED_PARALLEL = Entry(
    prepacked_parallel_entry,
    ("shape", "scalar", "scalar", "matrix", "buffer", "int", "out", "int", "int", "int", "int", "buffer", "buffer",
     "counter"),
)
PREPACKED_ROWS_PARALLEL = Entry(
    prepacked_rows_parallel,
    ("panel_rows", "scalar", "scalar", "matrix", "buffer", "int", "out", "int", "int", "int", "int", "buffer",
     "counter"),
)
UNPACKED_PARALLEL = Entry(
    unpacked_parallel_entry,
    ("shape", "narrow", "few", "gemv", "bool", "resident", "scalar", "scalar", "scalar", "scalar", "matrix", "matrix",
     "out", "int", "int", "buffer", "buffer", "buffer", "counter"),
)
BATCHED = Entry(
    batch_entry,
    ("shape", "narrow", "few", "gemv", "bool", "resident", "scalar", "scalar", "matrix", "matrix", "out",
     "offsets", "offsets", "offsets", "bool", "int", "int", "int", "buffer", "buffer", "buffer", "buffer"),
)
SMALL_STACK = Entry(
    small_stack_entry,
    ("shape", "narrow", "few", "gemv", "bool", "resident", "int", "int", "int", "int", "int", "int", "int",
     "scalar", "scalar", "int", "stack", "stack", "out_stack", "offsets", "offsets", "offsets"),
)
BATCH_TASKS = Entry(
    batch_tasks_entry,
    ("shape", "narrow", "few", "gemv", "bool", "resident", "scalar", "scalar", "matrix", "matrix", "out",
     "offsets", "offsets", "offsets", "bool", "int", "int", "int", "int", "buffer", "buffer", "buffer", "buffer",
     "counter"),
)
BATCH_EACH_PARALLEL = Entry(
    batch_each_parallel_entry,
    ("shape", "narrow", "few", "gemv", "bool", "resident", "scalar", "scalar", "scalar", "scalar", "matrix", "matrix",
     "out", "offsets", "offsets", "offsets", "bool", "int", "int", "int", "int", "int", "buffer", "buffer", "buffer",
     "buffer", "buffer", "counter", "log", "log"),
)
