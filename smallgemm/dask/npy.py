"""A ``.npy`` file as an array Dask reads blocks from and stores blocks into, on any scheduler."""

from __future__ import annotations

import math
import os

import numpy as np

# Rows of a block that are close together in the file (the gap between two no larger than
# a row) are read together, this many bytes of the file at a time.
_SPAN_BYTES = 1 << 20


class NpyFile:
    """The array in a ``.npy`` file, for ``dask.array.from_array`` and ``dask.array.store``.

    A NumPy memmap pickles its data, so ``da.from_array(np.load(path, mmap_mode="r"))``
    sends the whole array to a ``distributed`` cluster with the graph, and a memmap
    given to ``da.store`` there writes into that copy.  An ``NpyFile`` pickles as its
    path: each block is read from the file (``x[index]``, a new array) or written into it
    (``x[index] = block``, mode ``"r+"``), by whichever process runs the task; the workers
    must see the path (a shared file system).
    Create a file to write with ``numpy.lib.format.open_memmap(path, "w+", dtype, shape)``.

    A block of contiguous slices (what ``dask.array.from_array`` asks for) is read with
    plain file reads into the new array, never through a memory map: a mapped page counts
    in the reading process's RSS, and where the page cache holds the file in large folios
    (Linux 6.18 on ext4, a file just written) a fault maps a whole folio, up to 2 MiB: a
    block of 128 rows of 64 KiB, 3.5 MiB apart, mapped 237 MiB of the file.  Any other
    index is read through a memory map.
    """

    def __init__(self, path: str | os.PathLike, mode: str = "r") -> None:
        if mode not in ("r", "r+"):
            raise ValueError(f"mode must be 'r' or 'r+', got {mode!r}")
        self.path = os.fspath(path)
        self.mode = mode
        array = np.load(self.path, mmap_mode="r")
        self.shape, self.dtype = array.shape, array.dtype
        self._offset = array.offset  # of the data in the file, past the header
        self._fortran = array.ndim > 1 and not array.flags.c_contiguous
        del array

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, index) -> np.ndarray:
        slices = self._slices(index)
        if slices is None:
            return np.array(np.load(self.path, mmap_mode="r")[index])
        if self._fortran:  # the file holds the transpose in C order
            return self._read(self.shape[::-1], slices[::-1]).T
        return self._read(self.shape, slices)

    def _slices(self, index) -> list[slice] | None:
        """``index`` as one slice of step 1 per dimension, None for any other index."""
        index = index if isinstance(index, tuple) else (index,)
        if self.dtype.hasobject or not self.shape or len(index) > len(self.shape):
            return None
        if not all(isinstance(s, slice) and s.step in (None, 1) for s in index):
            return None
        index += (slice(None),) * (len(self.shape) - len(index))
        return [slice(*s.indices(n)[:2]) for s, n in zip(index, self.shape)]

    def _read(self, shape: tuple[int, ...], slices: list[slice]) -> np.ndarray:
        """The block ``slices`` of the C-order array ``shape`` in the file, by plain reads.

        The block is rows of contiguous bytes in the file (dimension ``d``'s slice, every
        later dimension whole), each read into its place in the new array; rows closer
        together than their length are read a span of several at a time into a buffer."""
        out = np.empty([s.stop - s.start for s in slices], self.dtype)
        if out.size == 0:
            return out
        d = len(shape) - 1
        while d > 0 and slices[d] == slice(0, shape[d]):
            d -= 1
        strides = [math.prod(shape[e + 1 :]) * self.dtype.itemsize for e in range(len(shape))]
        rows = out.reshape(-1, math.prod(out.shape[d:])).view(np.uint8)  # C order: one row a line
        row_bytes = rows.shape[1]
        # The rows at one pitch from each other: consecutive indices of dimension d - 1.
        count, pitch = (out.shape[d - 1], strides[d - 1]) if d > 0 else (1, 0)
        per_read = max(1, _SPAN_BYTES // pitch) if 0 < pitch <= 2 * row_bytes else 1
        buffer = np.empty((per_read - 1) * pitch + row_bytes, np.uint8) if per_read > 1 else None
        with open(self.path, "rb", buffering=0) as file:
            for line, first in enumerate(np.ndindex(out.shape[: max(d - 1, 0)])):
                at = self._offset + sum(
                    (i + s.start) * stride for i, s, stride in zip((*first, 0, 0), slices[: d + 1], strides)
                )
                for top in range(0, count, per_read):
                    n = min(per_read, count - top)
                    into = rows[line * count + top : line * count + top + n]
                    if buffer is None:
                        _read_into(file, at + top * pitch, into)
                    else:
                        span = buffer[: (n - 1) * pitch + row_bytes]
                        _read_into(file, at + top * pitch, span)
                        into[...] = np.lib.stride_tricks.as_strided(span, into.shape, (pitch, 1))
        return out

    def __setitem__(self, index, value) -> None:
        if self.mode != "r+":
            raise ValueError(f"{self.path} is open read-only (mode 'r'); open it with mode 'r+' to write")
        array = np.load(self.path, mmap_mode="r+")
        array[index] = value
        array.flush()

    def __repr__(self) -> str:
        return f"NpyFile({self.path!r}, mode={self.mode!r}, shape={self.shape}, dtype={self.dtype})"


def _read_into(file, offset: int, buffer: np.ndarray) -> None:
    """``buffer.nbytes`` bytes of ``file`` from ``offset`` into ``buffer``."""
    view = memoryview(buffer).cast("B")
    file.seek(offset)
    while view:
        n = file.readinto(view)
        if not n:
            raise EOFError(f"{file.name}: the file ends before offset {offset + buffer.nbytes}")
        view = view[n:]
