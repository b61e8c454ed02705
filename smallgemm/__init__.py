"""smallgemm: a BLIS-style CPU matrix product for NumPy, written in Numba.

Public API: ``matmul`` (a drop-in ``numpy.matmul``), ``gemm`` (BLAS-style,
scipy's calling convention), kernel selection, thread settings, ``info`` and
``peak`` (the machine's measured limits), and the exact-products setting.
"""

import os as _os

from .machine import threading_layer as _threading_layer
from .version import __version__  # noqa: F401

_threading_layer.load_tbb()  # before Numba chooses its layer: TBB is fork-safe, GNU OpenMP is not

from .machine import compile_cache as _compile_cache

_compile_cache.watch(_os.path.dirname(__file__))  # before any jitted function is defined

from .api.explain import explain
from .api.gemm import gemm
from .api.info import info
from .api.matmul import matmul
from .api.packed import PackedMatrix, pack
from .api.peak import peak
from .machine import threadpool_controller  # noqa: F401  (registers with threadpoolctl)
from .machine.threads import get_num_threads, num_threads, set_num_threads
from .plan.dispatch import (
    batch_invariant,
    exact,
    get_batch_invariant,
    get_exact,
    get_kernel,
    set_batch_invariant,
    set_exact,
    set_kernel,
    use_kernel,
)
from .plan.in_force import set_config_loader as _set_config_loader
from .plan.warmup import get_first_use, set_first_use
from .tune.record import apply_configured as _apply_configured

_set_config_loader(_apply_configured)  # tuned block sizes, from SMALLGEMM_CONFIG or the user's cache

__all__ = [
    "PackedMatrix",
    "batch_invariant",
    "exact",
    "explain",
    "gemm",
    "get_batch_invariant",
    "get_exact",
    "get_first_use",
    "get_kernel",
    "get_num_threads",
    "info",
    "matmul",
    "num_threads",
    "pack",
    "peak",
    "set_batch_invariant",
    "set_exact",
    "set_first_use",
    "set_kernel",
    "set_num_threads",
    "use_kernel",
]
