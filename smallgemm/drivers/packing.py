"""Packing: copy blocks of A and B into the panel order the microkernel reads.

Operands are (pointer, element offset, row stride, column stride) with any
signs and sizes of strides, so a transpose is a swap of strides and never a
copy.  Edge panels are padded with zeros: the kernel always computes a whole
tile and the driver writes back only the useful part.

Layouts (docs/kernels.md):
  A block rows x depth -> ceil(rows/MR) panels; panel q holds, for p in
    0..depth-1, the MR elements A[q*MR + 0..MR-1, p]           (MR*depth each)
  B slice depth x cols -> ceil(cols/NR) panels; panel q holds, for p in
    0..depth-1, the NR elements B[p, q*NR + 0..NR-1]           (depth*NR each)
"""

from ..kernels.shared import PACK_A_COLUMN_PANELS, PACK_B_AHEAD, PACK_B_GROUP, PACK_B_ROWS_AHEAD
from ..simd import (
    copy_column,
    copy_vector,
    copy_vector_streaming,
    line_elements,
    pack_a_rows_block,
    pack_b_cols_block,
    prefetch_read,
    store_fence,
    tile_cols,
    tile_lanes,
    tile_rows,
    zero_of,
)
from ..simd.linked import linked
from ..simd.subroutine import subroutine


@linked
def pack_a(shape, a, a_off, rs, cs, rows, depth, buf, buf_off):
    """Pack the ``rows x depth`` block of A at ``a_off`` into MR-row panels."""
    mr = tile_rows(shape)
    lanes = tile_lanes(shape, a)
    zero = zero_of(buf)
    if rs == 1:
        # Columns of A are contiguous (A column-major or transposed): a vector copy
        # per panel column, PACK_A_COLUMN_PANELS panels at a time down each column
        # of A.  Plain whole vectors (MR rounded up to the vector width) where rows
        # of A follow the panel's and the panel has a next column to overwrite what
        # they write past it; else masked loads and exact stores, zero padding
        # included.
        step = PACK_A_COLUMN_PANELS * mr
        wide = (mr + lanes - 1) // lanes * lanes
        for g0 in range(0, rows, step):
            for p in range(depth):
                for i0 in range(g0, min(g0 + step, rows), mr):
                    at = buf_off + i0 * depth + p * mr
                    if i0 + wide <= rows and p + 1 < depth:
                        for first in range(0, mr, lanes):
                            copy_vector(shape, a, a_off + i0 + p * cs + first, buf, at + first)
                    else:
                        copy_column(shape, a, a_off + i0 + p * cs, min(mr, rows - i0), buf, at)
        return
    for i0 in range(0, rows, mr):
        panel = buf_off + i0 * depth
        live = min(mr, rows - i0)
        src = a_off + i0 * rs
        p0 = 0
        if cs == 1 and live == mr:
            # Rows of A are contiguous: LANES k at a time, MR vector loads
            # transposed in registers (~3x faster than the scalar gather).
            while p0 + lanes <= depth:
                pack_a_rows_block(shape, a, src + p0, rs, buf, panel + p0 * mr)
                p0 += lanes
        # Gather one element from each of the MR rows per k: MR sequential
        # read streams and contiguous writes (25 % faster than row by row,
        # which writes with a stride of MR).
        for p in range(p0, depth):
            col = src + p * cs
            for i in range(live):
                buf[panel + p * mr + i] = a[col + i * rs]
        if live < mr:
            for p in range(depth):
                for i in range(live, mr):
                    buf[panel + p * mr + i] = zero


@subroutine
def pack_b_panel(shape, b, b_off, rs, cs, depth, live, buf, panel):
    """Pack one NR-column panel (``live`` <= NR real columns) of a ``depth``-row B slice."""
    nr = tile_cols(shape, b)
    if live == nr and cs == 1:
        # Rows of B are contiguous: whole vectors straight into the panel.
        lanes = tile_lanes(shape, b)
        for p in range(depth):
            for j in range(0, nr, lanes):
                prefetch_read(b, b_off + (p + PACK_B_AHEAD) * rs + j)
                copy_vector(shape, b, b_off + p * rs + j, buf, panel + p * nr + j)
        return
    zero = zero_of(buf)
    if rs == 1:
        # Columns of B are contiguous (B transposed): LANES x LANES blocks through
        # in-register transposes for a full panel, LANES columns at a time down
        # the depth (LANES streams along k for the prefetchers, not NR), then
        # read along the columns.
        p0 = 0
        if live == nr:
            lanes = tile_lanes(shape, b)
            p0 = depth - depth % lanes
            for j in range(0, nr, lanes):
                for p in range(0, p0, lanes):
                    pack_b_cols_block(shape, b, b_off + j * cs + p, cs, buf, panel + p * nr + j)
        for j in range(live):
            col = b_off + j * cs
            for p in range(p0, depth):
                buf[panel + p * nr + j] = b[col + p]
    else:
        for p in range(depth):
            row = b_off + p * rs
            for j in range(live):
                buf[panel + p * nr + j] = b[row + j * cs]
    for p in range(depth):
        for j in range(live, nr):
            buf[panel + p * nr + j] = zero


@linked
def pack_b_panels(shape, b, b_off, rs, cs, depth, cols, first, end, buf, streaming):
    """Pack NR-column panels [first, end) of a ``depth x cols`` slice of B, panel q at
    ``q * NR * depth`` in ``buf``: full panels of a B with contiguous rows in groups
    (``pack_b_rows``, ``streaming`` as there), the others one at a time (``pack_b_panel``)."""
    nr = tile_cols(shape, b)
    q = first
    if cs == 1:
        full_end = min(end, cols // nr)
        while q < full_end:
            count = min(PACK_B_GROUP, full_end - q)
            pack_b_rows(shape, b, b_off + q * nr, rs, depth, count, buf, q * nr * depth, streaming)
            q += count
    while q < end:
        j0 = q * nr
        pack_b_panel(shape, b, b_off + j0 * cs, rs, cs, depth, min(nr, cols - j0), buf, j0 * depth)
        q += 1


@subroutine
def pack_b_rows(shape, b, b_off, rs, depth, count, buf, panel, streaming):
    """Pack ``count`` full NR-column panels of B rows that are contiguous, together, row
    by row, the first at ``panel`` in ``buf``.

    Each row of B is read as one run of ``count * NR`` elements, which the
    hardware prefetchers follow; a panel at a time reads one NR-element piece
    from each of KC rows a whole row stride apart, a new page each, and
    with a power-of-two stride every piece falls in the same cache sets.  The
    lines of the row PACK_B_ROWS_AHEAD below are requested as each row is read.

    ``streaming``: the panels are written past the caches (non-temporal
    stores), for a buffer whose lines other cores have read: a plain store
    must first take each line back from them (packing a 1024^3 float32 slice
    on two threads took 300 us into such a buffer, 85 into one no other core
    had read; streamed, 140).  ``buf`` must then be aligned to the vector
    (the workspace's buffers are aligned to 64 bytes).
    """
    nr = tile_cols(shape, b)
    lanes = tile_lanes(shape, b)
    line = line_elements(shape, b)
    width = count * nr
    for p in range(depth):
        row = b_off + p * rs
        for e in range(0, width, line):
            prefetch_read(b, row + PACK_B_ROWS_AHEAD * rs + e)
        for q in range(count):
            at = panel + q * nr * depth + p * nr
            for j in range(0, nr, lanes):
                if streaming:
                    copy_vector_streaming(shape, b, row + q * nr + j, buf, at + j)
                else:
                    copy_vector(shape, b, row + q * nr + j, buf, at + j)
    if streaming:
        store_fence()
