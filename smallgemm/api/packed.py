"""Prepacked operands: a B packed once, multiplied many times.

``pack(w)`` copies a weight matrix into the panel layout the kernels read
(every KC x NC slice, NR-column panels, zero padded), like MKL's
``cblas_sgemm_pack`` or oneDNN's prepacked weights.  ``matmul(x, packed)`` and
``gemm(alpha, x, packed)`` then skip packing B entirely.  The packed copy is
tied to the kernel and block sizes it was made for; the result has the same
bits as the unpacked call (packing only copies values).

Memory cost: ``k * n_pad`` elements, n_pad being each NC-column slice rounded
up to a multiple of NR (the kernel's tile width: 32 float32 / 16 float64 with
AVX-512), so at most ``k * (NR - 1)`` elements more than ``b`` per slice.
"""

from __future__ import annotations

import numpy as np

from ..kernels import kernel_by_name
from ..plan import dispatch, in_force, packed_layout, runners
from ..plan.workspace import aligned_empty


class PackedMatrix:
    """B (k x n, after the optional transpose) packed for one kernel and block sizes."""

    def __init__(
        self, data: np.ndarray, shape: tuple[int, int], kernel_name: str, kc: int, nc: int, trans: bool
    ):
        self.data = data
        self.shape = shape
        self.dtype = data.dtype
        self.kernel_name = kernel_name
        self.kc = kc
        self.nc = nc
        self.trans = trans

    @property
    def nbytes(self) -> int:
        """Bytes held by the packed copy."""
        return self.data.nbytes

    def __repr__(self) -> str:
        return (
            f"PackedMatrix(shape={self.shape}, dtype={self.dtype}, kernel={self.kernel_name!r}, "
            f"trans={self.trans}, nbytes={self.nbytes})"
        )

    def unpacked(self) -> np.ndarray:
        """B again (k x n, C order), read back from the panels: for the first-use driver
        (``plan.warmup``), which reads operands as matrices."""
        nr = kernel_by_name(self.kernel_name).nr(self.dtype)
        return packed_layout.unpack(self.data, *self.shape, nr, self.kc, self.nc)

    def check_usable(self) -> None:
        """Raise ValueError unless the current kernel and block sizes are the ones packed for."""
        kernel = dispatch.current()
        if kernel.name != self.kernel_name:
            raise ValueError(
                f"this operand was packed for the {self.kernel_name!r} kernel but {kernel.name!r} is in "
                f"use; pack it again"
            )
        sizes = in_force.block_sizes(kernel, self.dtype)
        if (sizes.kc, sizes.nc) != (self.kc, self.nc):
            raise ValueError(
                f"this operand was packed with KC={self.kc}, NC={self.nc} but KC={sizes.kc}, NC={sizes.nc} "
                f"are in force; pack it again"
            )


def pack(b, trans: bool = False) -> PackedMatrix:
    """Pack ``b`` (or ``b.T`` with ``trans``) once for many products with it as the right operand.

    ``b`` must be a 2-D float32 or float64 array; see the module docstring for
    the memory cost.
    """
    arr = np.asarray(b)
    if arr.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"pack: b has dtype {arr.dtype}; only float32 and float64 are supported")
    if arr.ndim != 2:
        raise ValueError(f"pack: b must be 2-D, got an array of shape {arr.shape}")
    if any(s % arr.itemsize for s in arr.strides):
        arr = np.ascontiguousarray(arr)
    op = arr.T if trans else arr
    k, n = op.shape
    kernel = dispatch.current()
    sizes = in_force.block_sizes(kernel, arr.dtype)
    nr = kernel.nr(arr.dtype)
    padded = sum(-(-min(sizes.nc, n - jc) // nr) * nr for jc in range(0, n, sizes.nc))
    data = aligned_empty(max(1, k * padded), arr.dtype)
    if k and n:
        runners.pack_operand(kernel, op, sizes, data)
    return PackedMatrix(data, (k, n), kernel.name, sizes.kc, sizes.nc, bool(trans))
