"""Compiled entry points called without Numba's per-call type dispatch.

Numba's dispatcher types every argument on every call (~3 us for a TileShape,
~0.1 us per array).  Each entry is instead compiled once per (kernel, dtype)
for arrays of *any* layout (Numba's 'A' layout) and its native entry point is
called directly: one specialisation covers C-, F- and arbitrarily strided
operands, which also keeps cold compile time down.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import from_dtype, types

from .simd import TileShapeType


def _argument_types(kinds: tuple[str, ...], kernel, dtype: np.dtype) -> tuple:
    scalar = from_dtype(dtype)
    table = {
        "shape": TileShapeType(kernel.shape),
        "narrow": TileShapeType(kernel.narrow),
        "few": TileShapeType(kernel.few),
        "gemv": TileShapeType(kernel.gemv),
        "resident": TileShapeType(kernel.resident),
        "panel_rows": TileShapeType(kernel.panel_rows()),
        "scalar": scalar,
        "matrix": types.Array(scalar, 2, "A", readonly=True),
        "out": types.Array(scalar, 2, "A"),
        "stack": types.Array(scalar, 3, "A", readonly=True),
        "out_stack": types.Array(scalar, 3, "A"),
        "vector": types.Array(scalar, 1, "A", readonly=True),
        "out_vector": types.Array(scalar, 1, "A"),
        "buffer": types.Array(scalar, 1, "C"),
        "int": types.int64,
        "bool": types.boolean,
        "offsets": types.Array(types.int64, 1, "C", readonly=True),
        "counter": types.Array(types.int64, 1, "C"),
        "log": types.Array(types.int64, 1, "C"),
    }
    return tuple(table[k] for k in kinds)


class Entry:
    """One jitted entry function and the kinds of its arguments, in order.

    Kinds: ``shape`` / ``narrow`` / ``few`` / ``gemv`` / ``resident`` / ``panel_rows`` (the kernel's TileShapes;
    ``gemv``'s ``lane_sums`` is not in its type: entries take it as a ``bool``), ``scalar`` (of the dtype),
    ``matrix`` (2-D input, any layout), ``out`` (2-D output, any layout),
    ``stack`` / ``out_stack`` (3-D input / output, any layout),
    ``vector`` / ``out_vector`` (1-D input / output, any stride),
    ``buffer`` (1-D contiguous workspace), ``int``, ``bool``, ``offsets``
    (1-D contiguous int64 array).
    """

    def __init__(self, dispatcher, kinds: tuple[str, ...]):
        self.dispatcher = dispatcher
        self.kinds = kinds
        self._compiled: dict = {}
        self._lock = threading.Lock()

    def ready(self, kernel, dtype: np.dtype) -> bool:
        """Whether this kernel and dtype's entry point was compiled (or loaded) already."""
        return (kernel.name, dtype.char) in self._compiled

    def get(self, kernel, dtype: np.dtype):
        """The native entry point for this kernel (a ``kernels.Kernel``) and dtype."""
        key = (kernel.name, dtype.char)  # the row-dots rule's lane_sums is a run-time argument
        fn = self._compiled.get(key)
        if fn is None:
            with self._lock:  # compile (or load from the cache) once, even under threads
                fn = self._compiled.get(key)
                if fn is None:
                    fn = self._compiled[key] = self.dispatcher.compile(_argument_types(self.kinds, kernel, dtype))
        return fn
