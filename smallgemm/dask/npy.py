"""A ``.npy`` file as an array Dask reads blocks from and stores blocks into, on any scheduler."""

from __future__ import annotations

import os

import numpy as np


class NpyFile:
    """The array in a ``.npy`` file, for ``dask.array.from_array`` and ``dask.array.store``.

    A NumPy memmap pickles its data, so ``da.from_array(np.load(path, mmap_mode="r"))``
    sends the whole array to a ``distributed`` cluster with the graph, and a memmap
    given to ``da.store`` there writes into that copy.  An ``NpyFile`` pickles as its
    path: each block is read from the file (``x[index]``, a copy; the mapping is closed
    again) or written into it (``x[index] = block``, mode ``"r+"``), by whichever
    process runs the task; the workers must see the path (a shared file system).
    Create a file to write with ``numpy.lib.format.open_memmap(path, "w+", dtype, shape)``.
    """

    def __init__(self, path: str | os.PathLike, mode: str = "r") -> None:
        if mode not in ("r", "r+"):
            raise ValueError(f"mode must be 'r' or 'r+', got {mode!r}")
        self.path = os.fspath(path)
        self.mode = mode
        array = np.load(self.path, mmap_mode="r")
        self.shape, self.dtype = array.shape, array.dtype
        del array

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, index) -> np.ndarray:
        return np.array(np.load(self.path, mmap_mode="r")[index])

    def __setitem__(self, index, value) -> None:
        if self.mode != "r+":
            raise ValueError(f"{self.path} is open read-only (mode 'r'); open it with mode 'r+' to write")
        array = np.load(self.path, mmap_mode="r+")
        array[index] = value
        array.flush()

    def __repr__(self) -> str:
        return f"NpyFile({self.path!r}, mode={self.mode!r}, shape={self.shape}, dtype={self.dtype})"
