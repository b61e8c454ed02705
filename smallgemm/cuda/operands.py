"""Where an operand lives: host memory (NumPy), a numba device array, or another
library's device array (CuPy, PyTorch) seen through ``__cuda_array_interface__``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import cuda
from numba.core import config

_FAST = (np.dtype(np.float32), np.dtype(np.float64))


@dataclass(frozen=True)
class Operand:
    """An operand as the product reads it: ``array`` is a NumPy array or a numba device array."""

    array: object
    on_device: bool
    # The operand came from CuPy: a result on the device is handed back as a CuPy array.
    cupy: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.array.dtype)


def operand(x, name: str) -> Operand:
    """``x`` as an ``Operand``; TypeError unless its dtype is float32 or float64."""
    if getattr(x, "__cuda_ndarray__", False):
        result = Operand(x, True)
    elif hasattr(x, "__cuda_array_interface__"):
        result = Operand(cuda.as_cuda_array(x), True, type(x).__module__.split(".")[0] == "cupy")
    else:
        result = Operand(np.asarray(x), False)
    if result.dtype not in _FAST:
        raise TypeError(
            f"matmul: {name} has dtype {result.dtype}; smallgemm.cuda supports float32 and float64"
        )
    return result


def simulated() -> bool:
    """Whether numba-cuda's simulator stands in for a GPU (``NUMBA_ENABLE_CUDASIM=1``): there
    ``cuda.fma`` rounds the product and the sum apart, so the bits are not a GPU's."""
    return bool(config.ENABLE_CUDASIM)


def to_device(x: np.ndarray, stream=0):
    """A host array on the device, copied with its layout where it is C or F contiguous."""
    if not (x.flags.c_contiguous or x.flags.f_contiguous):
        x = np.ascontiguousarray(x)
    return cuda.to_device(x, stream=stream)


def may_share_memory(x, y) -> bool:
    """Whether two device arrays may overlap (their address ranges intersect)."""
    x_range, y_range = _extent(x), _extent(y)
    if x_range is None or y_range is None:  # numba's simulator: device arrays wrap NumPy arrays
        return np.may_share_memory(np.asarray(x._ary), np.asarray(y._ary))
    return x_range[0] < y_range[1] and y_range[0] < x_range[1]


def _extent(x) -> tuple[int, int] | None:
    interface = getattr(x, "__cuda_array_interface__", None)
    if interface is None:
        return None
    start = interface["data"][0]
    strides = interface["strides"] or tuple(np.cumprod((1, *tuple(x.shape[:0:-1])))[::-1] * x.dtype.itemsize)
    low = sum(min(0, (d - 1) * s) for d, s in zip(x.shape, strides))
    high = sum(max(0, (d - 1) * s) for d, s in zip(x.shape, strides)) + x.dtype.itemsize
    return start + low, start + high


@cuda.jit
def _copy(source, target):
    j, i = cuda.grid(2)
    if i < target.shape[0] and j < target.shape[1]:
        target[i, j] = source[i, j]


@cuda.jit
def _zeros(target):
    j, i = cuda.grid(2)
    if i < target.shape[0] and j < target.shape[1]:
        target[i, j] = 0


_BLOCK = (16, 16)


def _grid(shape: tuple[int, int]) -> tuple[int, int]:
    return max(1, -(-shape[1] // _BLOCK[0])), max(1, -(-shape[0] // _BLOCK[1]))


def copy_matrix(source, target) -> None:
    """``target[:, :] = source`` for device matrices of one shape, any strides."""
    if target.size:
        _copy[_grid(target.shape), _BLOCK](source, target)


def fill_zeros(target) -> None:
    """``target[:, :] = 0`` for a device matrix of any strides."""
    if target.size:
        _zeros[_grid(target.shape), _BLOCK](target)
