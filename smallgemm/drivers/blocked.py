"""The five-loop driver (JC, PC, IC, JR, IR) around the microkernel.

For each NC-column slice of C (JC) and each KC slice of the common dimension
(PC), the KC x NC slice of B is packed once into a shared buffer (one task per
NR-column panel) and then row-block tasks run: a task packs an MC-row block of A
into its own buffer and sweeps the macro-kernel (JR, IR) over a group of the
slice's column panels.  Tasks only partition *which* elements are computed,
never *how*: every element of C is an FMA chain over each KC block in
increasing k, blocks merged in increasing order, so the result is bitwise the
same however tasks are scheduled.

The driver knows block sizes, packed buffers and MR/NR; it does not know NumPy
broadcasting or the ISA (both are decided above it, in ``plan``).
"""

from typing import NamedTuple

import numpy as np
from numba import njit

from ..kernels import microkernel
from ..kernels.microkernel import direct_microkernel, merge_tile, tile_start
from ..kernels.shared import PACK_B_GROUP
from ..simd import (
    ACCUMULATE,
    CONTINUE,
    OVERWRITE,
    SCALE,
    address,
    advance,
    multiply_add,
    one_of,
    panel_row,
    panel_row_count,
    short_rows_shape,
    tile_cols,
    tile_rank1_panels,
    tile_rows,
    tile_short_rows,
)
from ..simd.linked import linked
from ..simd.records import matrix, merge, moved, product
from ..simd.subroutine import subroutine
from .arguments import operand, workspace_of
from .packing import pack_a, pack_b_panels


@subroutine
def merge_mode(pc, beta):
    """How the unpacked drivers merge the KC block starting at ``pc`` into C (see simd.OVERWRITE):
    a later block adds its own sum (ACCUMULATE), which only products that are not exact do,
    since exact ones take all of k as one block.  The blocked loops use ``block_merge``."""
    if pc > 0:
        return ACCUMULATE
    if beta == 0:
        return OVERWRITE
    return SCALE


@subroutine
def continued(alpha, beta, like):
    """Whether C = alpha*A.B + beta*C is a continued chain (alpha == beta == 1, gemm's way to
    accumulate): each element's FMA chain goes on from C's value (``like``: a pointer of the dtype)."""
    one = one_of(like)
    return alpha == one and beta == one


@subroutine
def block_merge(pc, depth, k, alpha, beta, c):
    """(mode, alpha) of the blocked drivers' KC block [pc, pc + depth) of k: each element's
    FMA chain goes on from C across the blocks (CONTINUE), C holding the raw chain between
    them (alpha 1) and the last block applying alpha.  With alpha == beta == 1 the chain
    goes on from C's own value from the first block (gemm's continued chain).  Any other
    beta != 0 takes one block here: the plan computes a longer product into a buffer
    first.  ``c``: a pointer of the dtype."""
    if pc > 0 or continued(alpha, beta, c):
        mode = CONTINUE
    elif beta == 0:
        mode = OVERWRITE
    else:
        mode = SCALE
    return mode, alpha if pc + depth >= k else one_of(c)


def _main_tile_cuts_short_rows(shape, *rest) -> bool:
    return shape.shape.short_rows > 0


@linked(where=_main_tile_cuts_short_rows)
def short_rows_tile(shape, depth, abuf, a_off, bbuf, b_off, c, rows, cols, merging, scratch):
    """A short last row panel (at most the main tile's ``short_rows`` rows) times one packed B
    panel: a tile that high reading the packed panel with its MR stride, same FMA chains, same
    bits.  A routine of its own, compiled only when a block ends in such a panel (300 rows of
    the AVX-512 kernel's 14-row tile end in 6: a first 300^3 product does not reach it), and
    only for a kernel whose main tile has ``short_rows``; called once per panel of ``depth`` x
    NR multiply-adds."""
    direct_microkernel(
        short_rows_shape(shape),
        depth,
        matrix(abuf, a_off, 1, tile_rows(shape)),
        matrix(bbuf, b_off, tile_cols(shape, bbuf), 1),
        c,
        rows,
        cols,
        merging,
        scratch,
    )


@linked
def macro_kernel(shape, rows, cols, depth, abuf, a_off, bbuf, b_off, c, merging, scratch):
    """JR and IR loops: every MR x NR tile of a packed A block times packed B panels into C (a
    ``Matrix``) by ``merging`` (a ``Merge``); a short last row panel on ``short_rows_tile``."""
    mr = tile_rows(shape)
    nr = tile_cols(shape, bbuf)
    for jr in range(0, cols, nr):
        live_cols = min(nr, cols - jr)
        for ir in range(0, rows, mr):
            live_rows = min(mr, rows - ir)
            a_at, b_at, c_tile = a_off + ir * depth, b_off + jr * depth, moved(c, ir, jr)
            if live_rows <= tile_short_rows(shape) < mr:
                short_rows_tile(
                    shape, depth, abuf, a_at, bbuf, b_at, c_tile, live_rows, live_cols, merging, scratch
                )
            else:
                microkernel(
                    shape, depth, abuf, a_at, bbuf, b_at, c_tile, live_rows, live_cols, merging, scratch
                )


@subroutine
def panels_in_time(shape, rows, j_start, j_end, depth, abuf, b, panels, group, c, merging, scratch):
    """Columns [j_start, j_end) of a packed A block's product, ``group`` NR-column
    B panels at a time: each group is packed into ``panels`` (room for ``group``
    panels) just before its only use (B and C are ``Matrix`` records).

    A group of panels reads each row of B as one run (``packing.pack_b_rows``),
    where a lone panel reads one line from each of KC rows a row stride apart
    (two threads, float32 256x2048x2048: eight panels a group 10 % faster than one).
    """
    nr = tile_cols(shape, panels)
    width = group * nr
    for j0 in range(j_start, j_end, width):
        live_cols = min(width, j_end - j0)
        pack_b_panels(
            shape,
            b.data,
            b.offset + j0 * b.cs,
            b.rs,
            b.cs,
            depth,
            live_cols,
            np.intp(0),
            (live_cols + nr - 1) // nr,
            panels,
            False,
        )
        macro_kernel(
            shape, rows, live_cols, depth, abuf, 0, panels, np.intp(0), moved(c, 0, j0), merging, scratch
        )


class StepTasks(NamedTuple):
    """How one (JC, PC) step of the blocked product, ``rows`` x ``cols`` of C over ``depth`` of
    k, is cut into tasks: ``row_blocks`` blocks of rows times ``groups`` groups of
    ``per_group`` B panels (one block of all rows, shared by the workers: ``one_row_block``)."""

    row_blocks: int
    groups: int
    per_group: int
    rows: int
    cols: int
    depth: int


@subroutine
def task_block_group(task, row_blocks):
    """(row block, column group) of row-block task ``task``: tasks run down the row
    blocks of one column group, then the next group.

    Workers claim contiguous ranges of tasks (``parallel.claim``), so a worker
    meets whole column groups: where the pack tasks split alike, the B panels
    it packed itself, whose lines no other core holds when the next slice is
    packed over them.  Block-major order (each worker every group of a few
    row blocks) was 7-10 % slower (two threads, float32 x.T @ g 512x2048x4096
    with memory busy, 400x3000x1000).
    """
    return task % row_blocks, task // row_blocks


@subroutine
def row_block_task(shape, task, cut, a, bbuf, c, merging, abuf, scratch):
    """Task ``task`` of ``cut`` (a ``StepTasks``): pack one row block of A, multiply it by one
    group of B panels (A and C are ``Matrix`` records).

    The ceil(rows/MR) row panels are shared out as evenly as whole panels
    allow: block q holds panels [q*P // row_blocks, (q+1)*P // row_blocks).
    """
    row_blocks, _, panels_per_group, rows, cols, depth = cut
    mr = tile_rows(shape)
    nr = tile_cols(shape, bbuf)
    block, group = task_block_group(task, row_blocks)
    row_panels = (rows + mr - 1) // mr
    ic = mr * (block * row_panels // row_blocks)
    live_rows = min(mr * ((block + 1) * row_panels // row_blocks), rows) - ic
    jr0 = group * panels_per_group * nr
    if jr0 >= cols or live_rows <= 0:
        return
    live_cols = min(panels_per_group * nr, cols - jr0)
    pack_a(shape, a.data, a.offset + ic * a.rs, a.rs, a.cs, live_rows, depth, abuf, np.intp(0))
    macro_kernel(
        shape, live_rows, live_cols, depth, abuf, 0, bbuf, jr0 * depth, moved(c, ic, jr0), merging, scratch
    )


@linked
def gemm_serial(shape, problem, a, b, c, blocks, work, prepacked):
    """C = alpha*A.B + beta*C on one thread (``problem``: a ``Product`` with m, n, k >= 1; A, B
    and C are ``Matrix`` records, ``blocks`` the ``Blocks``, ``work`` a ``Workspace``).

    With ``prepacked``, ``b.data`` already holds every packed slice (``packed_slice``)
    and no packing is done.
    """
    m, n, k, alpha, beta = problem
    mc, nc, kc = blocks
    abuf, bbuf, scratch = work.abuf, work.bbuf, work.scratch
    nr = tile_cols(shape, bbuf)
    # One row block: each group of B panels is packed just before its only use
    # and stays in the L2, instead of the whole slice going out to memory and
    # coming back (256x2048x2048 float32: 7 % faster).  No B slice is kept, so
    # all columns are one slice and A is packed once per KC block.
    one_block = not prepacked and m <= mc
    group = min(PACK_B_GROUP, nc // nr)
    slice_cols = n if one_block else nc
    for jc in range(0, n, slice_cols):  # JC: NC-column slices of B and C
        cols = min(slice_cols, n - jc)
        panels = (cols + nr - 1) // nr
        for pc in range(0, k, kc):  # PC: KC slices of the common dimension
            depth = min(kc, k - pc)
            mode, block_alpha = block_merge(pc, depth, k, alpha, beta, c.data)
            merging = merge(block_alpha, beta, mode)
            b_slice = moved(b, pc, jc)
            if one_block:
                pack_a(shape, a.data, a.offset + pc * a.cs, a.rs, a.cs, m, depth, abuf, np.intp(0))
                panels_in_time(
                    shape,
                    m,
                    np.intp(0),
                    cols,
                    depth,
                    abuf,
                    b_slice,
                    bbuf,
                    group,
                    moved(c, 0, jc),
                    merging,
                    scratch,
                )
                continue
            if prepacked:
                b_panels = advance(b.data, packed_slice(k, jc, pc, panels * nr))
            else:
                b_panels = bbuf
                pack_b_panels(
                    shape, b.data, b_slice.offset, b.rs, b.cs, depth, cols, np.intp(0), panels, bbuf, False
                )
            for ic in range(0, m, mc):  # IC: MC-row blocks of A and C
                # The work of a row_block_task, called directly: measured 3-5 %
                # faster on 1024^3 float32 than going through the task.
                rows = min(mc, m - ic)
                pack_a(
                    shape, a.data, a.offset + ic * a.rs + pc * a.cs, a.rs, a.cs, rows, depth, abuf, np.intp(0)
                )
                macro_kernel(
                    shape,
                    rows,
                    cols,
                    depth,
                    abuf,
                    0,
                    b_panels,
                    np.intp(0),
                    moved(c, ic, jc),
                    merging,
                    scratch,
                )


@subroutine
def packed_slice(k, jc, pc, width):
    """Offset of the (JC, PC) slice in a prepacked B: slices of NC columns one after
    the other, each its KC blocks one after the other (``width``: the slice's
    columns rounded up to NR)."""
    return jc * k + pc * width


@subroutine
def pack_all(shape, b, rs_b, cs_b, k, n, nc, kc, buf):
    """Pack the whole of B (k x n) into ``buf`` in the layout ``packed_slice`` describes."""
    nr = tile_cols(shape, buf)
    for jc in range(0, n, nc):
        cols = min(nc, n - jc)
        width = (cols + nr - 1) // nr * nr
        for pc in range(0, k, kc):
            depth = min(kc, k - pc)
            pack_b_panels(
                shape,
                b,
                pc * rs_b + jc * cs_b,
                rs_b,
                cs_b,
                depth,
                cols,
                np.intp(0),
                width // nr,
                advance(buf, packed_slice(k, jc, pc, width)),
                False,
            )


@njit(cache=True)
def pack_entry(shape, b, nc, kc, buf):
    """Entry from Python: pack a 2-D array (any strides) for ``gemm_serial(prepacked=True)``."""
    size = b.itemsize
    pack_all(
        shape,
        address(b),
        b.strides[0] // size,
        b.strides[1] // size,
        b.shape[0],
        b.shape[1],
        nc,
        kc,
        address(buf),
    )


@njit(cache=True)
def gemm_entry(shape, alpha, beta, a, b, c, blocks, ws):
    """Entry from Python: 2-D arrays of one dtype (any strides), C not overlapping A or B;
    ``blocks``: the ``Blocks`` in force, ``ws`` the workspace."""
    problem = product(a.shape[0], b.shape[1], a.shape[1], alpha, beta)
    gemm_serial(shape, problem, operand(a), operand(b), operand(c), blocks, workspace_of(ws), False)


@njit(cache=True)
def prepacked_entry(shape, alpha, beta, a, packed, n, c, blocks, ws):
    """Entry from Python with B prepacked by ``pack_entry`` (``packed`` holds k x n)."""
    problem = product(a.shape[0], n, a.shape[1], alpha, beta)
    unused = 0  # a prepacked B's strides
    gemm_serial(
        shape,
        problem,
        operand(a),
        matrix(address(packed), 0, unused, unused),
        operand(c),
        blocks,
        workspace_of(ws),
        True,
    )


class PackedB(NamedTuple):
    """A B prepacked by ``pack_entry``: slices of NC columns, each its KC blocks of NR-wide
    panels (``packed_slice``), from ``data``."""

    data: object
    nc: int
    kc: int
    nr: int


@linked
def prepacked_rows_panels(tile, first, last, problem, a, packed, c, scratch):
    """Columns of C in NR-wide panels [first, end) (counted across the NC slices)
    for few rows, reading the prepacked B panels in place (``packed``: a ``PackedB``).

    Each packed panel is a KC x NR row-major block, so the direct microkernel
    reads it like an unpacked B with row stride NR; ``tile`` is NR wide.  One
    row of A (inference with prepacked weights) takes ``panel_row_count(tile)``
    panels of a slice at a time in one row of vectors (``panel_row_tile``): one
    panel alone is two FMA chains per k step, a latency-bound loop.  Same KC
    blocks, FMA chains and merges as every other path.
    """
    m, n, k, alpha, beta = problem
    _, nc, kc, nr = packed
    mr = tile_rows(tile)
    together = panel_row_count(tile) if m == 1 else 1
    panel = first
    while panel < last:
        jc = panel * nr // nc * nc  # NC is a multiple of NR: a panel never straddles two slices
        jr = panel * nr - jc
        cols = min(nc, n - jc)
        width = (cols + nr - 1) // nr * nr
        if together > 1 and panel + together <= min(last, (jc + width) // nr):
            panel_row_tile(
                tile,
                min(together * nr, cols - jr),
                problem,
                a,
                packed,
                jc,
                jr,
                width,
                moved(c, 0, jc + jr),
                scratch,
            )
            panel += together
            continue
        for pc in range(0, k, kc):
            depth = min(kc, k - pc)
            mode, block_alpha = block_merge(pc, depth, k, alpha, beta, c.data)
            merging = merge(block_alpha, beta, mode)
            for ir in range(0, m, mr):
                direct_microkernel(
                    tile,
                    depth,
                    moved(a, ir, pc),
                    matrix(packed.data, packed_slice(k, jc, pc, width) + jr * depth, nr, 1),
                    moved(c, ir, jc + jr),
                    min(mr, m - ir),
                    min(nr, cols - jr),
                    merging,
                    scratch,
                )
        panel += 1


@subroutine(inline=True)
def panel_row_tile(tile, live, problem, a, packed, jc, jr, width, c, scratch):
    """One row of C, ``live`` columns from column ``jr`` of the slice at column ``jc``: the
    packed panels of ``tile``'s width side by side in one row of vectors (``panel_row``),
    each element the FMA chain of ``direct_microkernel`` over each KC block, merged alike."""
    _, _, k, alpha, beta = problem
    _, _, kc, nr = packed
    row = panel_row(tile)
    one = 1  # the tile's rows
    for pc in range(0, k, kc):
        depth = min(kc, k - pc)
        mode, block_alpha = block_merge(pc, depth, k, alpha, beta, c.data)
        b_off = packed_slice(k, jc, pc, width) + jr * depth
        sums = tile_start(row, a.data, c, one, live, mode, scratch)
        for p in range(depth):
            sums = tile_rank1_panels(
                sums, tile, a.data, a.offset + (pc + p) * a.cs, packed.data, b_off + p * nr, depth * nr
            )
        merge_tile(row, sums, c, one, live, merge(block_alpha, beta, mode), scratch)


@njit(cache=True)
def prepacked_rows_entry(tile, alpha, beta, a, packed, n, c, nc, kc, nr, scratch):
    """Entry from Python for ``prepacked_rows_panels`` over all of C."""
    prepacked_rows_panels(
        tile,
        np.intp(0),
        (n + nr - 1) // nr,
        product(a.shape[0], n, a.shape[1], alpha, beta),
        operand(a),
        PackedB(address(packed), nc, kc, nr),
        operand(c),
        address(scratch),
    )


@njit(cache=True)
def scale_add_entry(shape, alpha, sums, beta, c):
    """C = fma(alpha, sums, beta*C) per element, the tiles' SCALE rule with the kernel's
    multiply-add: the end of a product whose chains could not wait in C between KC blocks
    (beta other than 0 and 1; ``strategies.in_two_steps``)."""
    for i in range(c.shape[0]):
        for j in range(c.shape[1]):
            c[i, j] = multiply_add(shape, alpha, sums[i, j], beta * c[i, j])
