"""smallgemm: a BLIS-style CPU matrix product for NumPy, written in Numba."""

from .api import gemm
from .dispatch import get_kernel, set_kernel, use_kernel

__all__ = ["gemm", "get_kernel", "set_kernel", "use_kernel"]
__version__ = "0.1.0"
