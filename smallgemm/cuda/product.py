"""``smallgemm.cuda.matmul``: the product of two matrices on an NVIDIA GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda
from numpy.lib.stride_tricks import as_strided

from ..api.matmul import out_shape_error, promoted
from . import schedule, streamed
from .kernels import KERNELS
from .operands import Operand, copy_matrix, fill_zeros, may_share_memory, operand, to_device

# Device memory the product leaves free when it sizes itself by the free memory.
_HEADROOM = 0.9


def matmul(a: Any, b: Any, out: Any = None, kernel: str = "register", memory_limit: int | None = None) -> Any:
    """``a @ b`` computed on the GPU by the ladder's ``kernel`` (``KERNELS``).

    ``a`` and ``b`` are 1-D or 2-D, float32 or float64 (the result has NumPy's dtype),
    each a NumPy array (copied to the device), a numba device array, or another
    library's device array (CuPy, PyTorch: ``__cuda_array_interface__``), with any
    strides.  The result is a NumPy array where both operands are NumPy arrays, else
    a device array (a CuPy array where an operand is one); ``out`` (NumPy or device,
    of the result's shape and dtype) receives it instead.

    Each element is one chain of fused multiply-adds in increasing k, designed to give
    on a GPU the bits of ``smallgemm.matmul`` in exact mode, for every kernel (checked
    so far in numba-cuda's simulator only: docs/gpu.md).

    NumPy operands whose device copies (A, B and C) do not fit in ``memory_limit``
    bytes (default: 90 % of the device's free memory) are multiplied block by block, panels
    streamed through two CUDA streams, the device arrays within ``memory_limit``
    (docs/gpu.md); the bits are the same.
    """
    if kernel not in KERNELS:
        raise ValueError(
            f"smallgemm.cuda.matmul: unknown kernel {kernel!r}; the kernels are {', '.join(KERNELS)}"
        )
    left, right = operand(a, "a"), operand(b, "b")
    shape, squeeze = _checked_shapes(left, right)
    dtype = np.result_type(left.dtype, right.dtype)
    target = None if out is None else _checked_out(out, shape, dtype)
    ladder = KERNELS[kernel]
    a2, b2 = _as_matrix(left, row=True), _as_matrix(right, row=False)
    m, k = a2.shape
    n = b2.shape[1]
    on_device = left.on_device or right.on_device
    if not on_device and k > 0 and m * n > 0:
        limit = _limit(memory_limit)
        sizes = (left.dtype.itemsize, right.dtype.itemsize, dtype.itemsize)
        if schedule.device_bytes(m, n, k, sizes, schedule.Panels(m, n, k)) > limit:
            panels = schedule.choose(m, n, k, sizes, limit, *_tile(ladder, dtype))
            c = np.empty((m, n), dtype)
            streamed.run(ladder, a2, b2, c, panels)
            return _delivered(c, target, shape, squeeze, left.cupy or right.cupy)
    da = a2 if left.on_device else to_device(a2)
    db = b2 if right.on_device else to_device(b2)
    direct = (
        target is not None
        and target.on_device
        and not (may_share_memory(target.array, da) or may_share_memory(target.array, db))
    )
    dc = _as_matrix(target, row=squeeze[0]) if direct else cuda.device_array((m, n), dtype)
    if k == 0:
        fill_zeros(dc)  # NumPy's empty sum
    else:
        ladder.launch(da, db, dc)
    if direct:
        return target.array
    return _delivered(dc if on_device else dc.copy_to_host(), target, shape, squeeze, left.cupy or right.cupy)


def _checked_shapes(left: Operand, right: Operand) -> tuple[tuple[int, ...], tuple[bool, bool]]:
    """The result's shape and which operands are vectors; matmul's ValueError otherwise."""
    for number, x in enumerate((left, right)):
        if len(x.shape) == 0:
            raise ValueError(
                f"matmul: Input operand {number} does not have enough dimensions (has 0, gufunc core "
                "with signature (n?,k),(k,m?)->(n?,m?) requires 1)"
            )
        if len(x.shape) > 2:
            raise ValueError(
                f"smallgemm.cuda.matmul: operands are 1-D or 2-D, got shapes {left.shape} and {right.shape}"
            )
    # Shape-only stand-ins (no memory) for the CPU API's checks and wording.
    stand_a, stand_b = (as_strided(np.empty(1, np.int8), x.shape, (0,) * len(x.shape)) for x in (left, right))
    pa, pb, vector_a, vector_b = promoted(stand_a, stand_b)
    shape = (pa.shape[0],) * (not vector_a) + (pb.shape[1],) * (not vector_b)
    return shape, (vector_a, vector_b)


def _checked_out(out, shape: tuple[int, ...], dtype: np.dtype) -> Operand:
    if not (
        isinstance(out, np.ndarray)
        or getattr(out, "__cuda_ndarray__", False)
        or hasattr(out, "__cuda_array_interface__")
    ):
        raise TypeError(f"matmul: out must be a numpy array or a device array, got {type(out).__name__}")
    target = operand(out, "out")
    if target.shape != shape:
        raise out_shape_error(target.shape, shape)
    if target.dtype != dtype:
        raise TypeError(f"matmul: out has dtype {target.dtype}; the product's is {dtype}")
    if not target.on_device and not target.array.flags.writeable:
        raise ValueError("matmul: out is read-only")
    return target


def _as_matrix(x: Operand, row: bool):
    """The operand as a matrix: a vector as a row (first operand) or a column (second)."""
    if len(x.shape) == 2:
        return x.array
    return x.array.reshape((1, -1) if row else (-1, 1))


def _tile(ladder, dtype: np.dtype) -> tuple[int, int]:
    tiles = ladder.tiles[dtype]
    return tiles.rows, tiles.cols


def _limit(memory_limit: int | None) -> float:
    if memory_limit is not None:
        if memory_limit <= 0:
            raise ValueError(f"smallgemm.cuda.matmul: memory_limit must be positive, got {memory_limit}")
        return memory_limit
    return cuda.current_context().get_memory_info().free * _HEADROOM


def _delivered(c, target: Operand | None, shape: tuple[int, ...], squeeze: tuple[bool, bool], cupy: bool):
    """The M × N result ``c`` (host or device) in the caller's shape, or copied into ``out``."""
    if target is None:
        result = c.reshape(shape)
        if cupy and not isinstance(result, np.ndarray):
            import cupy as cp  # an operand is a CuPy array, so CuPy is installed

            return cp.asarray(result)
        return result
    if not target.on_device:
        target.array[...] = (c if isinstance(c, np.ndarray) else c.copy_to_host()).reshape(shape)
    else:
        source = to_device(c) if isinstance(c, np.ndarray) else c
        copy_matrix(source, _as_matrix(target, row=squeeze[0]))
    return target.array
