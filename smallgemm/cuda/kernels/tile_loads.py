"""Device functions shared by the square-tile kernels (bank_free, double_buffer).

A ``t × t`` tile starting at (r0, c0) of a global array is read one element per
thread, consecutive threads (x) walking the array's fast axis so that a warp's
loads are coalesced; the element then goes to its place in a shared tile whose
rows are padded to ``t + 1`` words, so that the column a transposed load writes
falls in ``t`` different banks.  Elements outside the array read as zero (they
only ever meet rows or columns of C that are not stored).
"""

from __future__ import annotations

from numba import cuda


def tile_reader(real, last_axis_fast: bool):
    """A device function ``read(x, r0, c0, tx, ty) -> (value, row, col)``: the element
    of ``x`` thread (tx, ty) loads for the tile at (r0, c0), and its place in the tile."""

    @cuda.jit(device=True)
    def read(x, r0, c0, tx, ty):
        row, col = (ty, tx) if last_axis_fast else (tx, ty)
        r, c = r0 + row, c0 + col
        value = real(x[r, c]) if r < x.shape[0] and c < x.shape[1] else real(0)
        return value, row, col

    return read
