"""How many threads one product may use: a process-wide setting, like a BLAS's.

Set by ``SMALLGEMM_NUM_THREADS``, :func:`set_num_threads`, the
:func:`num_threads` context manager or ``threadpoolctl.threadpool_limits``; the
default is the number of threads Numba's pool has (the cores it sees), except
in the worker processes of a process pool, where it is 1: a pool already puts
one process on each core, and each using every core would oversubscribe them.
The default is decided at each call, not at import: a spawned worker imports
its main module, and with it smallgemm, before it knows it is a worker.  A
setting made in a parent is inherited by the children it forks.  A
value above Numba's pool size is allowed: the work is then cut for that many
workers, which Numba's threads run in turn (results do not depend on it).
Where the threading layer cannot run (a child forked after GNU OpenMP started
in its parent: see ``threading_layer``), products run on one thread whatever
the setting.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import numbers
import threading
from collections.abc import Iterator

import numba

from . import settings, threading_layer

_lock = threading.Lock()
# The setting, or None for the default (SMALLGEMM_NUM_THREADS, else _default).
_num_threads: int | None = settings.NUM_THREADS


def _default() -> int:
    return 1 if multiprocessing.parent_process() is not None else numba.config.NUMBA_NUM_THREADS


def checked(n) -> int:
    """``n`` as a thread count; TypeError or ValueError when it is not a positive integer."""
    if isinstance(n, (bool, float)) or not isinstance(n, numbers.Integral):
        raise TypeError(f"the number of threads must be an integer, got {type(n).__name__} {n!r}")
    if n < 1:
        raise ValueError(f"the number of threads must be at least 1, got {n}")
    return int(n)


def set_num_threads(n: int) -> None:
    """Use at most ``n`` threads per product, in every Python thread."""
    global _num_threads
    n = checked(n)
    with _lock:
        _num_threads = n


def get_num_threads() -> int:
    """The number of threads a product may use."""
    n = _num_threads
    return _default() if n is None else n


def workers() -> int:
    """The threads the next product will use: the setting, or 1 where the threading layer cannot run."""
    if not threading_layer.threads_usable():
        return 1
    n = _num_threads  # get_num_threads, inline: a small stack asks on every call
    return _default() if n is None else n


@contextlib.contextmanager
def num_threads(n: int) -> Iterator[None]:
    """Use ``n`` threads inside a ``with`` block; the previous setting is restored after."""
    global _num_threads
    n = checked(n)
    with _lock:
        previous = _num_threads
        _num_threads = n
    try:
        yield
    finally:
        with _lock:
            _num_threads = previous


def pool_size() -> int:
    """OS threads in Numba's pool (the most that can run at once)."""
    return numba.config.NUMBA_NUM_THREADS
