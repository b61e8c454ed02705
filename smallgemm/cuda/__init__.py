"""smallgemm on NVIDIA GPUs, in numba-cuda: the GEMM ladder of seeds 000 and 003.

``KERNELS`` names the kernels in ladder order (``naive``, ``shared``, ``bank_free``,
``double_buffer``, ``register``); ``matmul`` multiplies NumPy or device arrays with
any of them, streaming products larger than device memory block by block.  Every
kernel computes each element as one chain of ``cuda.fma`` in increasing k, so a
product has the bits of ``smallgemm.matmul`` on the CPU (exact mode), whatever the
kernel or blocking.  Install with ``pip install smallgemm[cuda]``; without a GPU,
numba-cuda's simulator runs the kernels (``NUMBA_ENABLE_CUDASIM=1``), slowly.
Docs: ``docs/gpu.md``.
"""

from __future__ import annotations

from .kernels import KERNELS
from .product import matmul

__all__ = ["KERNELS", "matmul"]
