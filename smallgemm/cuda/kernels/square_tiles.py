"""Device functions shared by the square-tile kernels (shared, bank_free, double_buffer).

``tile_chain``: each thread's chain over a staged pair of tiles.  ``tile_reader``: a ``t × t`` tile starting at (r0, c0) of a global array is read one element per
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


def tile_chain(t: int):
    """A device function ``advance(sa, sb, y, x, left, acc) -> acc``: the chain of element
    (y, x) over the k of a staged ``t × t`` pair of tiles, ``min(t, left)`` steps (a last tile
    is never run past K, not even on its zero padding: ``fma(0, 0, -0.0)`` is ``+0.0``).  A
    whole tile's loop has a constant trip count, which the compiler unrolls."""

    @cuda.jit(device=True)
    def advance(sa, sb, y, x, left, acc):
        if left >= t:
            for k in range(t):
                acc = cuda.fma(sa[y, k], sb[k, x], acc)
        else:
            for k in range(left):
                acc = cuda.fma(sa[y, k], sb[k, x], acc)
        return acc

    return advance
