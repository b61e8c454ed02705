"""Which microkernel runs: chosen from the CPU's features, or forced.

Forcing a kernel (``SMALLGEMM_KERNEL`` or :func:`set_kernel`) is how the tests
run all three kernels on one AVX-512 machine; forcing one the CPU cannot run is
an error, never a crash.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator

from . import cpu, settings
from .kernels import KERNELS, Kernel, kernel_by_name

_lock = threading.Lock()
_forced: Kernel | None = None


@functools.lru_cache(maxsize=None)
def detect() -> Kernel:
    """The fastest kernel the host supports (the first of KERNELS that runs here)."""
    features = cpu.features()
    for kernel in KERNELS:
        if kernel.runs_on(features):
            return kernel
    return KERNELS[-1]


def _checked(name: str) -> Kernel:
    kernel = kernel_by_name(name)
    missing = [f for f in kernel.requires if f not in cpu.features()]
    if missing:
        raise ValueError(
            f"kernel {name!r} needs CPU features {', '.join(missing)}, which this CPU "
            f"({cpu.model_name()}) does not have"
        )
    return kernel


def set_kernel(name: str | None) -> None:
    """Force the microkernel by name (``avx512``, ``avx2``, ``portable``); None restores detection."""
    global _forced
    kernel = None if name is None else _checked(name)
    with _lock:
        _forced = kernel


def current() -> Kernel:
    """The kernel the next call will use."""
    return _forced if _forced is not None else detect()


def get_kernel() -> str:
    """Name of the kernel the next call will use."""
    return current().name


@contextlib.contextmanager
def use_kernel(name: str | None) -> Iterator[None]:
    """Force a kernel inside a ``with`` block, restoring the previous choice after."""
    global _forced
    previous = _forced
    set_kernel(name)
    try:
        yield
    finally:
        with _lock:
            _forced = previous


if settings.KERNEL is not None:
    set_kernel(settings.KERNEL)
