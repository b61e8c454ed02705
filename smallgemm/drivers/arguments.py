"""What an entry called from Python makes of its arguments: the records the compiled drivers
take (``simd.records``), built once at the entry.
"""

from __future__ import annotations

from ..simd import address, row_dots_rule
from ..simd.records import Stack, TaskLogs, Tiles, Workspace, matrix
from ..simd.subroutine import subroutine


@subroutine(inline=True)
def operand(x):
    """A 2-D array (any strides of whole elements) as a ``Matrix``."""
    size = x.itemsize
    return matrix(address(x), 0, x.strides[0] // size, x.strides[1] // size)


@subroutine(inline=True)
def stack_operand(x, offsets):
    """A stack's first matrix ``x`` (a 2-D array) and its matrices' element offsets from it (a
    1-D ``intp`` array) as a ``Stack``."""
    size = x.itemsize
    return Stack(address(x), address(offsets), x.strides[0] // size, x.strides[1] // size)


@subroutine(inline=True)
def stack_operands(a, b, c, offsets):
    """The ``Stack`` records of two stacks and their product: A's, B's and C's first matrices,
    and their matrices' offsets (``offsets``: three 1-D ``intp`` arrays, A's, B's, C's)."""
    offsets_a, offsets_b, offsets_c = offsets
    return stack_operand(a, offsets_a), stack_operand(b, offsets_b), stack_operand(c, offsets_c)


@subroutine(inline=True)
def kernel_tiles(tiles):
    """The ``Tiles`` of a prepared state's ``tiles`` tuple: (main, narrow, few, GEMV, the
    row-dots rule's ``lane_sums`` flag, resident), the GEMV tile made the rule that flag
    names (``simd.row_dots_rule``)."""
    main, narrow, few, gemv, lane_sums, resident = tiles
    return Tiles(main, narrow, few, row_dots_rule(gemv, lane_sums), resident)


@subroutine(inline=True)
def workspace_of(ws):
    """The ``Workspace`` of a ``plan.workspace.Workspace``'s buffers (its counters apart)."""
    return Workspace(address(ws.abuf), address(ws.bbuf), address(ws.scratch), address(ws.sums))


@subroutine(inline=True)
def task_logs(logs):
    """The ``TaskLogs`` of the tests' two task logs (1-D ``int64`` arrays; empty in normal calls)."""
    packs, rows = logs
    return TaskLogs(address(packs), packs.shape[0], address(rows), rows.shape[0])
