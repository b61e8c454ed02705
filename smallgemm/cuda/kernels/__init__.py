"""The ladder of GPU kernels, in the order of the source documents (seed 000, seed 003).

``KERNELS`` maps each name to its ``LadderKernel``, in ladder order: every step keeps
the one before and adds one idea.  All compute the same bits (``ladder``).
"""

from __future__ import annotations

from . import bank_free, double_buffer, naive, register, shared
from .ladder import LadderKernel

KERNELS: dict[str, LadderKernel] = {
    module.KERNEL.name: module.KERNEL for module in (naive, shared, bank_free, double_buffer, register)
}

__all__ = ["KERNELS", "LadderKernel"]
