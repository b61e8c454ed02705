"""Which microkernel runs: chosen from the CPU's features, or forced.

Forcing a kernel (``SMALLGEMM_KERNEL`` or :func:`set_kernel`) is how the tests
run all three kernels on one AVX-512 machine; forcing one the CPU cannot run is
an error, never a crash.

Batch invariance (the default) can be given up for matrix-vector row dots
(``SMALLGEMM_BATCH_INVARIANT=0`` or :func:`set_batch_invariant`): the kernel
then carries a row-dots rule that sums lane-wise (``TileShape.lane_sums``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
from collections.abc import Callable, Iterator

from ..kernels import KERNELS, Kernel, kernel_by_name
from ..machine import cpu, settings

_lock = threading.Lock()
_forced: Kernel | None = None
_lane_sums: bool = not settings.BATCH_INVARIANT
# Called after every change of the kernel in force or of batch invariance (``on_change``).
_listeners: list[Callable[[], None]] = []


def on_change(listener: Callable[[], None]) -> None:
    """Call ``listener()`` after every change of what :func:`current` returns: the planner
    then rebuilds its prepared states, and need not ask for the kernel on every call."""
    _listeners.append(listener)


def _changed() -> None:
    for listener in _listeners:
        listener()


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
    _changed()


_lane_wise: dict[str, Kernel] = {}


def _summing_lane_wise(kernel: Kernel) -> Kernel:
    """``kernel`` with a row-dots rule that sums lane-wise, one object per kernel (looked up
    by name: hashing the kernel itself cost 1.4 us of every call)."""
    variant = _lane_wise.get(kernel.name)
    if variant is None:
        variant = _lane_wise[kernel.name] = dataclasses.replace(kernel, gemv=dataclasses.replace(kernel.gemv, lane_sums=True))
    return variant


def current() -> Kernel:
    """The kernel the next call will use (with the lane-wise row dots when batch
    invariance is given up)."""
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


def set_batch_invariant(invariant: bool) -> None:
    """Whether a row of C gets the same bits on every path (True, the default: alone, in
    a batch, in a large product).  False lets a matrix times a vector along contiguous rows
    (``W @ x``, ``x @ W.T`` for one row, with a contiguous vector) sum each row lane-wise
    as BLAS's GEMV does, 1.4-1.8x faster from the L2 or L3; its bits then differ from
    those of the same row in a larger product (they still do not depend on the thread
    count).  Nothing else changes."""
    global _lane_sums
    if not isinstance(invariant, bool):
        raise TypeError(f"batch invariance is True or False, got {invariant!r}")
    with _lock:
        _lane_sums = not invariant
    _changed()


def get_batch_invariant() -> bool:
    """Whether every path gives a row of C the same bits (see :func:`set_batch_invariant`)."""
    return not _lane_sums


@contextlib.contextmanager
def batch_invariant(invariant: bool) -> Iterator[None]:
    """:func:`set_batch_invariant` inside a ``with`` block, restoring the previous setting after."""
    global _lane_sums
    previous = _lane_sums
    set_batch_invariant(invariant)
    try:
        yield
    finally:
        with _lock:
            _lane_sums = previous
        _changed()


if settings.KERNEL is not None:
    set_kernel(settings.KERNEL)
