"""The prepacked layout of B in NumPy, both ways: for products before ``PACK`` is compiled.

``drivers.blocked.pack_all`` writes every (JC, PC) slice of B at ``jc * k + pc * width``
(``packed_slice``; ``width``: the slice's columns rounded up to NR), each slice as
``width / NR`` panels of ``depth x NR`` elements, row by row, the columns past the last
zero.  ``pack_into`` writes the same elements (``tests/test_warmup.py`` compares them with the
compiled packing on every kernel) at a few times its cost: ``pack`` uses it while ``PACK``
compiles in another process (``warmup``).  ``unpack`` reads B back for the first-use driver.
"""

from __future__ import annotations

import numpy as np


def _slices(k: int, n: int, nr: int, kc: int, nc: int):
    """(pc, depth, jc, cols, width, start) of every slice of the packed layout."""
    for jc in range(0, n, nc):
        cols = min(nc, n - jc)
        width = -(-cols // nr) * nr
        for pc in range(0, k, kc):
            yield pc, min(kc, k - pc), jc, cols, width, jc * k + pc * width


def pack_into(b: np.ndarray, nr: int, kc: int, nc: int, data: np.ndarray) -> None:
    """Pack B (k x n, any strides) into ``data`` in the prepacked layout."""
    k, n = b.shape
    for pc, depth, jc, cols, width, start in _slices(k, n, nr, kc, nc):
        panels = data[start : start + depth * width].reshape(width // nr, depth, nr)
        block = np.zeros((depth, width), b.dtype)
        block[:, :cols] = b[pc : pc + depth, jc : jc + cols]
        panels[...] = block.reshape(depth, width // nr, nr).transpose(1, 0, 2)


def unpack(data: np.ndarray, k: int, n: int, nr: int, kc: int, nc: int) -> np.ndarray:
    """B (k x n, C order) read back from ``data`` in the prepacked layout."""
    b = np.empty((k, n), data.dtype)
    for pc, depth, jc, cols, width, start in _slices(k, n, nr, kc, nc):
        panels = data[start : start + depth * width].reshape(width // nr, depth, nr)
        b[pc : pc + depth, jc : jc + cols] = panels.transpose(1, 0, 2).reshape(depth, width)[:, :cols]
    return b
