"""The compiled entry points, each with the roles of its arguments (``entry.Entry``).

One entry per driver and way in, its arguments declared by name and kind in the jitted
function's parameter order (``Entry`` checks the names against the function);
``Entry.get(kernel, dtype)`` compiles (or loads) it for one kernel and dtype, with its
arguments typed by kind.
"""

from __future__ import annotations

from ..drivers.batched import batch_each_parallel_entry, batch_entry, batch_tasks_entry, small_stack_entry
from ..drivers.blocked import gemm_entry, pack_entry, prepacked_entry, prepacked_rows_entry, scale_add_entry
from ..drivers.chain import chain_entry
from ..drivers.parallel import (
    parallel_entry,
    prepacked_parallel_entry,
    prepacked_rows_parallel,
    unpacked_parallel_entry,
)
from ..drivers.unpacked import unpacked_entry
from .entry import Entry

BLOCKED = Entry(
    gemm_entry,
    shape="shape",
    alpha="scalar",
    beta="scalar",
    a="matrix",
    b="matrix",
    c="out",
    blocks="blocks",
    ws="workspace",
)
UNPACKED = Entry(
    unpacked_entry, shape="shape", narrow="narrow", few="few", gemv="gemv", resident="resident", like="buffer"
)
PARALLEL = Entry(
    parallel_entry,
    shape="shape",
    alpha="scalar",
    beta="scalar",
    a="matrix",
    b="matrix",
    c="out",
    blocks="blocks",
    shared_rows="int",
    workers="int",
    ws="workspace",
    logs="logs",
)
PACK = Entry(pack_entry, shape="shape", b="matrix", nc="int", kc="int", buf="buffer")
PREPACKED = Entry(
    prepacked_entry,
    shape="shape",
    alpha="scalar",
    beta="scalar",
    a="matrix",
    packed="buffer",
    n="int",
    c="out",
    blocks="blocks",
    ws="workspace",
)
PREPACKED_ROWS = Entry(
    prepacked_rows_entry,
    tile="panel_rows",
    alpha="scalar",
    beta="scalar",
    a="matrix",
    packed="buffer",
    n="int",
    c="out",
    nc="int",
    kc="int",
    nr="int",
    scratch="buffer",
)
PREPACKED_PARALLEL = Entry(
    prepacked_parallel_entry,
    shape="shape",
    alpha="scalar",
    beta="scalar",
    a="matrix",
    packed="buffer",
    n="int",
    c="out",
    blocks="blocks",
    workers="int",
    ws="workspace",
)
PREPACKED_ROWS_PARALLEL = Entry(
    prepacked_rows_parallel,
    tile="panel_rows",
    alpha="scalar",
    beta="scalar",
    a="matrix",
    packed="buffer",
    n="int",
    c="out",
    nc="int",
    kc="int",
    nr="int",
    workers="int",
    ws="workspace",
)
UNPACKED_PARALLEL = Entry(
    unpacked_parallel_entry,
    tiles="tiles",
    alpha="scalar",
    beta="scalar",
    a="matrix",
    b="matrix",
    c="out",
    kc="int",
    workers="int",
    ws="workspace",
    partial="buffer",
)
BATCHED = Entry(
    batch_entry,
    tiles="tiles",
    a="matrix",
    b="matrix",
    c="out",
    offsets="stack_offsets",
    unpacked="bool",
    blocks="blocks",
    ws="workspace",
)
SMALL_STACK = Entry(
    small_stack_entry,
    shape="shape",
    narrow="narrow",
    few="few",
    gemv="gemv",
    resident="resident",
    like="buffer",
)
BATCH_TASKS = Entry(
    batch_tasks_entry,
    tiles="tiles",
    a="matrix",
    b="matrix",
    c="out",
    offsets="stack_offsets",
    unpacked="bool",
    blocks="blocks",
    workers="int",
    ws="workspace",
)
BATCH_EACH_PARALLEL = Entry(
    batch_each_parallel_entry,
    tiles="tiles",
    a="matrix",
    b="matrix",
    c="out",
    offsets="stack_offsets",
    unpacked="bool",
    blocks="blocks",
    shared_rows="int",
    workers="int",
    ws="workspace",
    partial="buffer",
    logs="logs",
)
SCALE_ADD = Entry(scale_add_entry, shape="shape", alpha="scalar", sums="matrix", beta="scalar", c="out")
FIRST_USE = Entry(
    chain_entry,
    shape="shape",
    alpha="scalar",
    beta="scalar",
    a="matrix",
    b="matrix",
    c="out",
    offsets_a="offsets",
    offsets_b="offsets",
    offsets_c="offsets",
    continue_chain="bool",
)

ALL: dict[str, Entry] = {name: value for name, value in globals().items() if isinstance(value, Entry)}
"""Every entry by its name here (``python -m smallgemm compile --entry``, ``info``)."""

_NAMES = {id(entry): name for name, entry in ALL.items()}


def name_of(entry: Entry) -> str:
    """The entry's name in ``ALL``."""
    return _NAMES[id(entry)]
