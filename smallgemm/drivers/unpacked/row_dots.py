"""Row dots and the single-row stream: a matrix with contiguous rows times one vector
(``W @ x``, ``x @ W.T`` with one row), and one or a few rows times B (GEMV rows, register
strips).
"""

from __future__ import annotations

import numpy as np

from ...kernels.shared import GEMV_CHUNK
from ...simd import (
    ACCUMULATE,
    AXPY_ROWS,
    AXPY_ROWS_WIDE,
    CONTINUE,
    LANE_DOT_ROWS,
    OVERWRITE,
    STRIP_ROWS,
    advance,
    axpy_rows,
    axpy_rows_wide,
    axpy_vector,
    dot_pair_max_bytes,
    dot_pair_max_rows_per_set,
    dot_pair_max_streams,
    dot_pair_zero,
    dot_steps,
    dot_tail,
    dot_zero,
    elements_to_vector_boundary,
    lane_dot_steps,
    lane_dot_sums,
    lane_dot_tail,
    lane_dot_width,
    lane_dot_zero,
    line_elements,
    multiply_add,
    prefetch_read_l2,
    row_fetch_ahead,
    row_fetch_l3_min_bytes,
    row_fetch_min_bytes,
    row_fetch_wide_min_bytes,
    strip_sums,
    strip_width,
    sums_lane_wise,
    tile_dot_pairs,
    tile_lanes,
    tile_store,
    tile_strips,
    tile_wide_groups,
)
from ...simd.linked import linked
from ...simd.records import advanced, first_row, matrix, merge, moved
from ...simd.subroutine import subroutine
from ..blocked import merge_mode


@subroutine
def merge_sums(rule, sums, count, c, merging):
    """Merge ``count`` raw sums of one KC block into the first ``count`` elements of C (a
    ``Vector``) by ``merging`` (a ``Merge``), by the rules of ``tile_write`` (same
    multiply-adds), so the bits are the tiles'."""
    alpha, beta, mode = merging
    for j in range(count):
        at = c.offset + j * c.stride
        if mode == OVERWRITE or mode == CONTINUE:
            c.data[at] = alpha * sums[j]
        elif mode == ACCUMULATE:
            c.data[at] = multiply_add(rule, alpha, sums[j], c.data[at])
        else:
            c.data[at] = multiply_add(rule, alpha, sums[j], beta * c.data[at])


@subroutine
def strips_in_registers(rule, m, n, k, b):
    """Whether ``gemv_rows`` holds m rows of C in register strips (``row_strips``): up to the
    kernel's GEMV tile's ``strips`` rows, and B under the bytes from which its single-row
    stream requests B ahead (``row_fetch.min_bytes``: B read from memory, where the strips'
    rows a stride apart wait on it); one row not from its ``row_fetch.l3_min_bytes`` (the
    stream's requests then fetch B from the L3 faster than the strips read it)."""
    from_memory, from_l3 = row_fetch_min_bytes(rule), row_fetch_l3_min_bytes(rule)
    b_bytes = n * k * (64 // line_elements(rule, b))
    if m == 1 and from_l3 > 0 and b_bytes >= from_l3:
        return False
    return m <= tile_strips(rule) and (from_memory == 0 or b_bytes < from_memory)


@linked
def gemv_rows(rule, m, n, k, alpha, beta, a, b, c, kc, row):
    """m rows of C times B with contiguous rows (``Matrix`` records): in register strips (``row_strips``) where
    ``strips_in_registers``, else one row (m == 1; the route takes no more rows here) with B
    streamed row after row, in order, as memory delivers it.

    For each chunk of columns and each KC block, the chunk's partial sums live in
    ``row`` (L1) and every row of B is read once, contiguously: the read
    bandwidth bound, where a register tile walking down B's columns jumps one
    row stride per k.  B's rows are added a group at a time (``axpy_rows``,
    AXPY_ROWS; ``axpy_rows_wide`` from the tile's ``row_fetch.wide_min_bytes`` of B, or at any
    size where it sets ``wide_groups``), so the row
    buffer is read and written once per group of rows of B: one row at a
    time, its traffic evicts B's lines from a 32 KiB L1 (one thread, float32
    [1,512] @ [512,2048]: 94 us in groups, 128 a row at a time).  Where every row of a B
    the L3 keeps starts at the same place within a vector, the columns before
    a vector boundary are added one by one, so the vector loads never
    straddle two cache lines (float32 [1,512] @ [512,2048], B 16 bytes into a
    line as NumPy allocates it: 1.02-1.38x in paired runs).  Each element is
    still the FMA chain of its KC block in increasing k from zero, merged by
    the usual rules, so the bits are those of every other path.
    """
    if strips_in_registers(rule, m, n, k, b.data):
        row_strips(rule, m, n, k, alpha, beta, a, b, c, kc, row)
        return
    x, x_off, cs_x = first_row(a)
    w, w_off, rs_w = b.data, b.offset, b.rs
    lanes = tile_lanes(rule, w)
    zero = alpha - alpha
    item_bytes = 64 // line_elements(rule, w)
    # The kernel's choice (its GEMV tile's ``row_fetch``; 0: none).
    fetch_from, wide_from = row_fetch_min_bytes(rule), row_fetch_wide_min_bytes(rule)
    from_l3 = row_fetch_l3_min_bytes(rule)
    b_bytes = n * k * item_bytes
    fetch = (fetch_from > 0 and b_bytes >= fetch_from) or (from_l3 > 0 and b_bytes >= from_l3)
    wide = tile_wide_groups(rule) != 0 or (wide_from > 0 and b_bytes >= wide_from)
    group = AXPY_ROWS_WIDE if wide else AXPY_ROWS
    # From memory (a B the requests fetch) the lead's columns, added one by one, cost
    # more than split loads: [1,4096] @ [4096,4096] float32 1-10 % slower aligned.
    rows_aligned_alike = rs_w % lanes == 0 and not fetch
    j0 = 0
    while j0 < n:
        # Columns before B's rows reach a vector boundary, taken one by one besides
        # the chunk's columns (the chunk after then starts on a boundary too).
        lead = elements_to_vector_boundary(rule, w, w_off + j0) if rows_aligned_alike else 0
        width = min(GEMV_CHUNK + lead, n - j0)
        lead = min(lead, width)
        whole = lead + (width - lead) // lanes * lanes
        # Sums of column j at sums[j + shift]: the vectors' sums aligned too.
        shift = (lanes - lead) % lanes
        sums = advance(row, shift)
        # The same columns, as many groups of rows ahead as the tile's ``row_fetch.ahead``
        # elements ask of groups of AXPY_ROWS.
        ahead = (row_fetch_ahead(rule) * (group // AXPY_ROWS) + width - 1) // width * rs_w
        for pc in range(0, k, kc):
            depth = min(kc, k - pc)
            grouped = depth - depth % group
            for j in range(width):
                sums[j] = zero  # fma(x, b, 0) is the rounded product: the chain's first step
            for p in range(0, grouped, group):
                x_at = x_off + (pc + p) * cs_x
                start = w_off + (pc + p) * rs_w + j0
                for j in range(lead):
                    for q in range(group):
                        sums[j] = multiply_add(rule, x[x_at + q * cs_x], w[start + q * rs_w + j], sums[j])
                for j in range(lead, whole, lanes):
                    if fetch:
                        for q in range(group):
                            prefetch_read_l2(w, start + q * rs_w + j + ahead)
                    if wide:
                        axpy_rows_wide(rule, x, x_at, cs_x, w, start + j, rs_w, sums, j)
                    else:
                        axpy_rows(rule, x, x_at, cs_x, w, start + j, rs_w, sums, j)
                for j in range(whole, width):
                    for q in range(group):
                        sums[j] = multiply_add(rule, x[x_at + q * cs_x], w[start + q * rs_w + j], sums[j])
            for p in range(grouped, depth):
                x_p = x[x_off + (pc + p) * cs_x]
                start = w_off + (pc + p) * rs_w + j0
                for j in range(lead):
                    sums[j] = multiply_add(rule, x_p, w[start + j], sums[j])
                for j in range(lead, whole, lanes):
                    axpy_vector(rule, x_p, w, start + j, sums, j)
                for j in range(whole, width):
                    sums[j] = multiply_add(rule, x_p, w[start + j], sums[j])
            merge_sums(
                rule, sums, width, advanced(first_row(c), j0), merge(alpha, beta, merge_mode(pc, beta))
            )
        j0 += width


@subroutine
def row_strips(rule, m, n, k, alpha, beta, a, b, c, kc, sums):
    """m rows of C (``Matrix`` records, as A and B), STRIP_ROWS at a time, a strip of columns at a time (``strip_sums``), each
    element's sum in a register across its KC block, then merged into C by the usual rules.

    A strip spans the GEMV tile's vectors for one row (256 float32 columns on AVX-512), fewer
    for more rows (``simd.strip_vectors``: 11, 7 and 5 vectors for 2, 3 and 4 rows).  The first
    strip starts at column 0, the next ones on the vector boundaries of B's rows (where they all
    start alike within a vector), so their loads split no line: the second goes back over up
    to LANES - 1 columns, which get the same chains again and are merged once; the last takes
    up to a vector more than a strip, so going back costs no pass over B of its own, and its
    last vector is masked.  Against the row buffer (one row) and the few-rows stream, B's rows
    are read a strip at a time a row stride apart, which the prefetchers follow from the
    caches (one AMD Zen 4 core: float32 [1,512] @ [512,2048] 57-58 against 66-70 us, [2,512] @
    [512,2048] 61 against 99.5 us on the stream; docs/performance.md).
    """
    lanes = tile_lanes(rule, b.data)
    lead = elements_to_vector_boundary(rule, b.data, b.offset) if b.rs % lanes == 0 else 0
    for i in range(0, m, STRIP_ROWS):
        rows = min(STRIP_ROWS, m - i)
        strip = strip_width(rule, rows, b.data)
        ld = strip + lanes  # the strip's sums, a row apart in ``sums``
        for pc in range(0, k, kc):
            depth = min(kc, k - pc)
            merging = merge(alpha, beta, merge_mode(pc, beta))
            j = merged = 0
            while j < n:
                columns = n - j if n - j <= strip + lanes else strip
                strip_sums(
                    rule, rows, moved(a, i, pc), moved(b, pc, j), depth, matrix(sums, 0, ld, 1), columns
                )
                for r in range(rows):
                    merge_sums(
                        rule,
                        advance(sums, r * ld + merged - j),
                        j + columns - merged,
                        first_row(moved(c, i + r, merged)),
                        merging,
                    )
                j = merged = j + columns
                if j < n:
                    j -= (j - lead) % lanes


# Rows a multiple of this many bytes apart fall in the same L1 set (a 32 or 48
# KiB L1 of 8 or 12 ways, 64-byte lines); ``plan.rules`` avoids such rows too.
L1_SET_PERIOD_BYTES = 4096


@subroutine
def dot_pairs_suit(rule, mat, rows, ldm):
    """Whether ``dot_rows`` should take ``rows`` rows of ``mat`` (``ldm`` apart) in pairs
    of row blocks: where the kernel's GEMV tile sets ``dot_pairs``, within its limits."""
    lanes = tile_lanes(rule, mat)
    size = 64 // line_elements(rule, mat)
    if tile_dot_pairs(rule) == 0:
        return False
    pair_rows = 2 * lanes
    apart = 1  # rows this far apart share an L1 set
    while apart < pair_rows and (apart * ldm * size) % L1_SET_PERIOD_BYTES != 0:
        apart += 1
    if (pair_rows + apart - 1) // apart > dot_pair_max_rows_per_set(rule):
        return False
    return pair_rows <= dot_pair_max_streams(rule) or rows * ldm * size <= dot_pair_max_bytes(rule)


@subroutine
def dot_rows(rule, rows, k, alpha, beta, v, mat, c, kc, sums):
    """C's first ``rows`` elements (``c``, a ``Vector``) = alpha * (row r of ``mat``) . v + beta * C
    (``v`` a ``Vector``, ``mat`` a ``Matrix`` whose rows are contiguous).

    A matrix times a vector where the matrix's rows are contiguous along k:
    ``x @ W.T`` (one row of A, W stored [N, K]: the rows are W's) and ``W @ x``
    (one column of B: the rows are A's).  Each row is read once, front to
    back, LANES rows at a time (``dot_steps``), or two such blocks where their
    chains side by side gain (``dot_pairs_suit``), as a stream the
    prefetchers follow; a tile walking down B's columns instead reads one
    element per row a whole row apart.  Each element is still the FMA chain
    of its KC block in increasing k from zero, merged by the usual rules, so
    the bits are those of every other path.  ``sums`` holds a block's sums.
    With exact products given up (a rule with ``lane_sums``), a contiguous
    ``v`` goes to ``dot_rows_lane_wise`` instead.
    """
    paired = dot_pairs_suit(rule, mat.data, rows, mat.rs)
    dot_rows_of(rule, paired, rows, k, alpha, beta, v, mat, c, kc, sums)


@linked
def dot_rows_of(rule, paired, rows, k, alpha, beta, v, mat, c, kc, sums):
    """``dot_rows`` with the choice of pairs made (by the caller: ``dot_rows_parallel``
    makes it once for the whole matrix).  Linked, so that the serial path and the
    parallel driver's tasks call one compiled copy of its row-block loops."""
    if sums_lane_wise(rule) and v.stride == 1:
        dot_rows_lane_wise(rule, rows, k, alpha, beta, v, mat, c, sums)
        return
    lanes = tile_lanes(rule, mat.data)
    done = 0
    if paired:
        done = rows - rows % (2 * lanes)
        dot_row_pairs(rule, done, k, alpha, beta, v, mat, c, kc, sums)
    if done < rows:
        dot_row_blocks(
            rule,
            dot_zero(rule, mat.data),
            lanes,
            rows - done,
            k,
            alpha,
            beta,
            v,
            moved(mat, done, 0),
            advanced(c, done),
            kc,
            sums,
        )


def _kernel_takes_pairs(rule, *rest) -> bool:
    return rule.shape.dot_pairs is not None


@linked(where=_kernel_takes_pairs)
def dot_row_pairs(rule, rows, k, alpha, beta, v, mat, c, kc, sums):
    """``dot_row_blocks`` on pairs of row blocks (``rows`` a multiple of a pair's rows), compiled
    only for a kernel whose GEMV tile sets ``dot_pairs``: ``dot_pairs_suit`` is false on the others."""
    pair_rows = 2 * tile_lanes(rule, mat.data)
    dot_row_blocks(rule, dot_pair_zero(rule, mat.data), pair_rows, rows, k, alpha, beta, v, mat, c, kc, sums)


@subroutine
def dot_row_blocks(rule, zero, block_rows, rows, k, alpha, beta, v, mat, c, kc, sums):
    """The loops of ``dot_rows`` over dot blocks like ``zero`` (one or a pair of row
    blocks of ``rule``'s vectors: ``block_rows`` rows).

    Where every row starts at the same place within a vector, each KC
    block's steps up to a vector boundary are taken first on their own, so
    the loads after them never straddle two cache lines (NumPy's large arrays
    start 16 bytes into one; float32 W [2048,2048] 1.4-1.5x, [4096,4096] 1.2x).
    """
    x, x_off, x_stride = v
    w, ldm = mat.data, mat.rs
    lanes = tile_lanes(rule, w)
    rows_aligned_alike = ldm % lanes == 0
    for r0 in range(0, rows, block_rows):
        live = min(block_rows, rows - r0)
        start = mat.offset + r0 * ldm
        for pc in range(0, k, kc):
            depth = min(kc, k - pc)
            head = min(depth, elements_to_vector_boundary(rule, w, start + pc)) if rows_aligned_alike else 0
            block = zero
            if head > 0:
                block = dot_tail(block, x, x_off + pc * x_stride, x_stride, w, start + pc, ldm, live, head)
            whole = head + (depth - head) // lanes * lanes
            for p in range(pc + head, pc + whole, lanes):
                block = dot_steps(block, x, x_off + p * x_stride, x_stride, w, start + p, ldm, live)
            if whole < depth:
                p = pc + whole
                block = dot_tail(
                    block, x, x_off + p * x_stride, x_stride, w, start + p, ldm, live, depth - whole
                )
            tile_store(block, sums)
            merge_sums(rule, sums, live, advanced(c, r0), merge(alpha, beta, merge_mode(pc, beta)))


@subroutine
def dot_rows_lane_wise(rule, rows, k, alpha, beta, v, mat, c, sums):
    """``dot_rows`` summed as BLAS's GEMV sums (the opt-in ``set_batch_invariant(False)``): each
    row's dot product with the contiguous ``v`` in vectors of partial sums along all of k,
    then across the lanes.  A row's bits depend on the row, ``v`` and the kernel only (not
    on the thread count), but differ from the other paths' FMA chain in increasing k.
    """
    x, x_off = v.data, v.offset
    w, ldm = mat.data, mat.rs
    step = lane_dot_width(rule, w)
    whole = k - k % step
    merging = merge(alpha, beta, merge_mode(np.intp(0), beta))
    for r0 in range(0, rows, LANE_DOT_ROWS):
        live = min(LANE_DOT_ROWS, rows - r0)
        start = mat.offset + r0 * ldm
        block = lane_dot_zero(rule, w)
        for p in range(0, whole, step):
            block = lane_dot_steps(block, x, x_off + p, w, start + p, ldm, live)
        if whole < k:
            block = lane_dot_tail(block, x, x_off + whole, w, start + whole, ldm, live, k - whole)
        lane_dot_sums(block, sums)
        merge_sums(rule, sums, live, advanced(c, r0), merging)
