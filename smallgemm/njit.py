"""smallgemm's products for ``@numba.njit`` code: ``matmul(a, b, out)`` and
``gemm(alpha, a, b, beta, c)`` (``smallgemm/api/njit.py`` says how they choose their kernel,
allocate, use threads and report errors).  Importing this module compiles nothing."""

from .api.njit import gemm, matmul

__all__ = ["gemm", "matmul"]
