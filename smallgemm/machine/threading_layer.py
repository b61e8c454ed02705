"""Numba's threading layer: TBB where it can be loaded, and threads that survive ``fork``.

Numba chooses its layer when the first parallel region starts: TBB, then OpenMP,
then workqueue, unless ``NUMBA_THREADING_LAYER`` names one.  What each promises,
and what smallgemm does about it:

=========  ===========  =========  ===================================================
layer      thread-safe  fork-safe  in smallgemm
=========  ===========  =========  ===================================================
tbb        yes          yes        the layer smallgemm loads; forked children keep
                                   their threads
omp (GNU)  yes          no         a child forked after a parallel region in its
                                   parent (or an ancestor) runs its products on one
                                   thread: GNU OpenMP's pool is gone in the child, and
                                   Numba terminates a child that starts a region
workqueue  no           yes        one parallel product at a time (``runners.in_parallel``);
                                   concurrent callers run on their own thread
=========  ===========  =========  ===================================================

The ``tbb`` wheel installs ``libtbb.so.12`` in the environment's ``lib/``, which the
dynamic loader does not search, so Numba's TBB pool fails to import in a pip
environment and Numba falls back to GNU OpenMP.  :func:`load_tbb` loads the wheel's
library with ``RTLD_GLOBAL`` before Numba chooses; the pool then finds it by its
soname.  A layer the user named in ``NUMBA_THREADING_LAYER`` is left as named.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
import sys

import numba

# Numba's TBB pool links against this soname (numba.np.ufunc.parallel).
if sys.platform == "win32":
    TBB_LIBRARY = "tbb12.dll"
elif sys.platform == "darwin":
    TBB_LIBRARY = "libtbb.12.dylib"
else:
    TBB_LIBRARY = "libtbb.so.12"

# NUMBA_THREADING_LAYER values under which Numba may choose TBB.
_LAYERS_THAT_MAY_TAKE_TBB = ("default", "tbb", "safe", "threadsafe", "forksafe")

# Where load_tbb loaded libtbb from, if it did.
_tbb_loaded_from: str | None = None
# Set in a forked child whose parent had started GNU OpenMP's pool: the layer cannot run here.
_pool_lost_in_fork = False


def started() -> str | None:
    """The layer Numba runs parallel regions on, or None before the first one."""
    try:
        return numba.threading_layer()
    except ValueError:
        return None


def describe() -> str:
    """The layer in use, or the configured one and "(not started)"."""
    layer = started()
    if layer is None:
        loaded = f", libtbb loaded from {_tbb_loaded_from}" if _tbb_loaded_from else ""
        return f"{numba.config.THREADING_LAYER} (not started{loaded})"
    if _pool_lost_in_fork:
        return f"{layer} (forked after it started: one thread)"
    return layer


def threads_usable() -> bool:
    """Whether parallel regions can run in this process (False only in a child forked after
    GNU OpenMP's pool started in an ancestor)."""
    return not _pool_lost_in_fork


def _tbb_in_wheel() -> str | None:
    """The path of the ``tbb`` distribution's runtime library, if that distribution is installed."""
    try:
        files = importlib.metadata.distribution("tbb").files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name == TBB_LIBRARY:
            path = str(file.locate())
            if os.path.exists(path):
                return os.path.realpath(path)
    return None


def load_tbb() -> str | None:
    """Make Numba's TBB layer loadable before Numba chooses a layer.

    Returns where ``libtbb`` was loaded from ("system" when the loader finds it
    unaided), or None when it was not loaded: TBB is not installed, the layer has
    already started, or ``NUMBA_THREADING_LAYER`` names a layer that is not TBB.
    """
    global _tbb_loaded_from
    if started() is not None or str(numba.config.THREADING_LAYER).lower() not in _LAYERS_THAT_MAY_TAKE_TBB:
        return None
    mode = getattr(ctypes, "RTLD_GLOBAL", 0)
    for path in (_tbb_in_wheel(), TBB_LIBRARY):  # the wheel's, then the loader's search path
        if path is None:
            continue
        try:
            ctypes.CDLL(path, mode=mode)
        except OSError:
            continue  # a broken install: the next place, then Numba's next layer
        _tbb_loaded_from = "system" if path == TBB_LIBRARY else path
        return _tbb_loaded_from
    return None


def _after_fork_in_child() -> None:
    global _pool_lost_in_fork
    if sys.platform.startswith("linux") and started() == "omp":
        _pool_lost_in_fork = True


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)
