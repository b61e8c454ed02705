"""Which microkernel runs: chosen from the CPU's features, or forced.

Forcing a kernel (``SMALLGEMM_KERNEL`` or :func:`set_kernel`) is how the tests
run all three kernels on one AVX-512 machine; forcing one the CPU cannot run is
an error, never a crash.

Exact products (the default: each element one FMA chain in increasing k) can be
given up (``SMALLGEMM_EXACT=0`` or :func:`set_exact`): the kernel then carries a
row-dots rule that sums lane-wise (``TileShape.lane_sums``), and the unpacked
drivers split k into KC blocks, on threads too (split-K).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import warnings
from collections.abc import Callable, Iterator

from ..kernels import KERNELS, Kernel, kernel_by_name
from ..machine import cpu, settings

_lock = threading.Lock()
_forced: Kernel | None = None
_lane_sums: bool = not settings.EXACT  # not exact: the kernel's lane-wise variant
# Called after every change of the kernel in force or of the exact mode (``on_change``).
_listeners: list[Callable[[], None]] = []


def on_change(listener: Callable[[], None]) -> None:
    """Call ``listener()`` after every change of what :func:`current` returns: the planner
    then rebuilds its prepared states, and need not ask for the kernel on every call."""
    _listeners.append(listener)


def _changed() -> None:
    for listener in _listeners:
        listener()


@functools.cache
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
    _changed()


_lane_wise: dict[str, Kernel] = {}


def _summing_lane_wise(kernel: Kernel) -> Kernel:
    """``kernel`` with a row-dots rule that sums lane-wise, one object per kernel (looked up
    by name: hashing the kernel itself cost 1.4 us of every call)."""
    variant = _lane_wise.get(kernel.name)
    if variant is None:
        variant = _lane_wise[kernel.name] = dataclasses.replace(
            kernel, gemv=dataclasses.replace(kernel.gemv, lane_sums=True)
        )
    return variant


def current() -> Kernel:
    """The kernel the next call will use (with the lane-wise row dots when exact products
    are given up)."""
    kernel = _forced if _forced is not None else detect()
    return _summing_lane_wise(kernel) if _lane_sums else kernel


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
        _changed()


def set_exact(exact: bool) -> None:
    """Whether every element of C is one FMA chain in increasing k (True, the default): the
    same bits on every kernel, block size, thread count, batch and path.  False lets a
    matrix times a vector along contiguous rows (``W @ x``, ``x @ W.T`` for one row) sum
    each row lane-wise as BLAS's GEMV does (1.4-1.8x faster from the L2 or L3), and the
    unpacked drivers sum k in KC blocks, split between threads when C has few columns
    (split-K).  Results stay independent of the thread count in both modes."""
    global _lane_sums
    if not isinstance(exact, bool):
        raise TypeError(f"exact is True or False, got {exact!r}")
    with _lock:
        _lane_sums = not exact
    _changed()


def get_exact() -> bool:
    """Whether products are exact (see :func:`set_exact`)."""
    return not _lane_sums


@contextlib.contextmanager
def exact(exact: bool) -> Iterator[None]:
    """:func:`set_exact` inside a ``with`` block, restoring the previous setting after."""
    global _lane_sums
    previous = _lane_sums
    set_exact(exact)
    try:
        yield
    finally:
        with _lock:
            _lane_sums = previous
        _changed()


def _renamed(old: str) -> None:
    warnings.warn(
        f"smallgemm.{old} is deprecated: use smallgemm.{old.replace('batch_invariant', 'exact')}",
        DeprecationWarning,
        stacklevel=3,
    )


def set_batch_invariant(invariant: bool) -> None:
    """Deprecated name of :func:`set_exact`."""
    _renamed("set_batch_invariant")
    set_exact(invariant)


def get_batch_invariant() -> bool:
    """Deprecated name of :func:`get_exact`."""
    _renamed("get_batch_invariant")
    return get_exact()


def batch_invariant(invariant: bool):
    """Deprecated name of :func:`exact`."""
    _renamed("batch_invariant")
    return exact(invariant)


if settings.KERNEL is not None:
    set_kernel(settings.KERNEL)
