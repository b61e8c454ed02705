"""The PTX of the ladder's kernels, compiled by numba-cuda without running them.

numba-cuda's compiler (NVVM) needs no GPU: ``compile_ptx`` types and compiles a
kernel for a named compute capability, so every machine can check that the kernels
compile for a real device (the simulator runs them as Python and types nothing) and
read what they became: fused multiply-adds, shared-memory loads (scalar or vector)
and local memory, the sign of registers spilled or arrays not promoted to registers.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numba import cuda, from_dtype, types

from .kernels import KERNELS
from .operands import simulated


@dataclass(frozen=True)
class PtxSummary:
    """What one compiled kernel's PTX holds, counted per instruction in the listing."""

    kernel: str
    dtype: str
    a_k_fast: bool
    b_n_fast: bool
    fma: int
    shared_loads: int
    shared_vector_loads: int
    local_accesses: int

    def line(self) -> str:
        layout = f"A {'k' if self.a_k_fast else 'i'}-fast, B {'n' if self.b_n_fast else 'k'}-fast"
        return (
            f"{self.kernel:>13} {self.dtype:<7} {layout:<20} fma {self.fma:4d}   ld.shared {self.shared_loads:4d} "
            f"(vector {self.shared_vector_loads})   local memory {self.local_accesses}"
        )


@contextlib.contextmanager
def _target(cc: tuple[int, int]) -> Iterator[None]:
    """numba-cuda compiles the device functions a kernel calls for the current device's
    compute capability; where there is no GPU, ``cc`` stands in for it."""
    if cuda.is_available():
        yield
        return
    from numba.cuda import dispatcher

    class _Device:
        compute_capability = cc

    original = dispatcher.get_current_device
    dispatcher.get_current_device = _Device
    try:
        yield
    finally:
        dispatcher.get_current_device = original


def ptx(
    name: str, dtype: np.dtype, a_k_fast: bool = True, b_n_fast: bool = True, cc: tuple[int, int] = (9, 0)
) -> str:
    """The PTX of kernel ``name`` accumulating in ``dtype``, for strided operands laid out as given."""
    if simulated():
        raise RuntimeError("PTX needs numba-cuda's compiler: unset NUMBA_ENABLE_CUDASIM")
    ladder, dtype = KERNELS[name], np.dtype(dtype)
    kernel = ladder.builder(dtype, ladder.tiles[dtype], a_k_fast, b_n_fast)
    matrix = types.Array(from_dtype(dtype), 2, "A")
    with _target(cc):
        text, _ = cuda.compile_ptx(kernel.py_func, (matrix, matrix, matrix, types.boolean), cc=cc)
    return text


def summary(name: str, dtype: np.dtype, a_k_fast: bool, b_n_fast: bool, text: str) -> PtxSummary:
    def count(pattern: str) -> int:
        return len(re.findall(pattern, text))

    return PtxSummary(
        name,
        np.dtype(dtype).name,
        a_k_fast,
        b_n_fast,
        count(r"\bfma\.rn\.f(32|64)\b"),
        count(r"\bld\.shared\."),
        count(r"\bld\.shared\.v[24]\."),
        count(r"\b(ld|st)\.local\."),
    )


def layouts(name: str) -> list[tuple[bool, bool]]:
    """The operand layouts a kernel is compiled for: both, or one where it reads any alike."""
    return (
        [(True, True), (False, False), (True, False), (False, True)]
        if KERNELS[name].layout_aware
        else [(True, True)]
    )
