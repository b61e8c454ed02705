"""The kernels: one module per kernel with its register tiles and tuning (``avx512``,
``avx2``, ``portable``), the microkernel they share, and the registry.

A new ISA is one module here (a ``Kernel`` with its ``KernelConfig``) and one row in
``KERNELS``; the loops above never change.  ``KERNELS`` is ordered from fastest to
most portable and dispatch takes the first one the CPU supports.
"""

from __future__ import annotations

from .avx2 import KERNEL as AVX2
from .avx512 import KERNEL as AVX512
from .config import NEVER, BySize, KernelConfig, VendorCorrection
from .kernel import Kernel
from .microkernel import microkernel
from .portable import KERNEL as PORTABLE

__all__ = [
    "KERNELS",
    "NEVER",
    "BySize",
    "Kernel",
    "KernelConfig",
    "VendorCorrection",
    "kernel_by_name",
    "microkernel",
]

KERNELS: tuple[Kernel, ...] = (AVX512, AVX2, PORTABLE)


def kernel_by_name(name: str) -> Kernel:
    for kernel in KERNELS:
        if kernel.name == name:
            return kernel
    names = ", ".join(k.name for k in KERNELS)
    raise ValueError(f"unknown kernel {name!r}; choose one of: {names}")
