"""Numba's on-disk cache, kept coherent across the modules of a package.

Numba stamps a cached function with the contents of its own source file only
(documented limitation: "changes in symbols defined in another file are not
detected").  A compiled entry point holds the code of every jitted function it
calls, inlined from other modules, and the module-level constants they read,
frozen at compile time; so after an edit or an upgrade that changes only a
callee, the caller's cache still loads the old callee.  Here that was a
segmentation fault (a stale two-thread entry point reading buffers the new
planner had sized differently).

``watch(root)`` gives every cached function defined under ``root`` one stamp:
a hash of all the ``.py`` files under ``root`` (but the subpackages that cache
nothing).  Any change to any of them invalidates the whole package's cache,
which then recompiles once.  Where the
cache lives (``__pycache__``, ``NUMBA_CACHE_DIR``, the user-wide directory) is
still decided by Numba's own locators.

It also saves those functions' cache entries under an exclusive file lock.
Numba numbers a new entry's data file after reading the index, then writes the
index: two processes compiling different signatures of one function at once
(two test workers, two servers started together on an empty cache) can pick
the same number, and the index then maps one signature to the other's machine
code, which crashes the process that loads it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os

from numba.core import caching

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt

# Numba's list of cache locator classes, tried in order for each cached
# function (``CacheImpl`` in recent Numba releases, ``_CacheImpl`` in older ones).
_CACHE_IMPL = getattr(caching, "CacheImpl", None) or caching._CacheImpl

_watched_roots: list[str] = []


# Subpackages of the root that hold no function Numba caches and that no cached
# function imports (the GPU ladder, Dask, neural networks): an edit there leaves the
# CPU entries' cache valid.
UNCACHED_SUBPACKAGES = frozenset({"cuda", "dask", "nn"})


@functools.cache
def source_fingerprint(root: str) -> str:
    """A hash of the relative paths and contents of every ``.py`` file under ``root``, but
    those in ``UNCACHED_SUBPACKAGES`` directly under it."""
    digest = hashlib.sha256()
    for folder, subfolders, files in os.walk(root):  # top-down: the pruned, sorted folders next
        skipped = {"__pycache__"} | (UNCACHED_SUBPACKAGES if folder == root else set())
        subfolders[:] = sorted(d for d in subfolders if d not in skipped)
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, root).encode())
            with open(path, "rb") as source:
                digest.update(hashlib.sha256(source.read()).digest())
    return digest.hexdigest()


def _watched_root(py_file: str) -> str | None:
    """The watched root that holds ``py_file``, if any."""
    path = os.path.realpath(py_file)
    for root in _watched_roots:
        if path.startswith(root + os.sep):
            return root
    return None


class PackageStampLocator:
    """The locator Numba would have chosen for a function, with the source stamp
    of its whole package instead of its one file."""

    def __init__(self, inner, root: str):
        self._inner = inner
        self._root = root

    def __getattr__(self, name: str):
        """The inner locator's other attributes (Numba reads ``_py_file`` to warn about an
        uncachable function)."""
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)

    def ensure_cache_path(self) -> None:
        self._inner.ensure_cache_path()

    def get_cache_path(self) -> str:
        return self._inner.get_cache_path()

    def get_disambiguator(self) -> str:
        return self._inner.get_disambiguator()

    def get_source_stamp(self) -> str:
        return source_fingerprint(self._root)

    @classmethod
    def from_function(cls, py_func, py_file):
        root = _watched_root(py_file)
        if root is None:
            return None  # not ours: Numba's next locator decides
        for other in _CACHE_IMPL._locator_classes:
            if other is not cls:
                inner = other.from_function(py_func, py_file)
                if inner is not None:
                    return cls(inner, root)
        return None


@contextlib.contextmanager
def exclusive(path: str):
    """Hold an exclusive lock on the file ``path`` (created if missing) against other processes."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
        yield
    finally:
        os.close(fd)  # releases the lock


_numba_save = caching.IndexDataCacheFile.save


def _save_exclusively(cache_file, key, data):
    """``IndexDataCacheFile.save``, under the index's lock for the functions of a watched root
    (their stamp is a root's fingerprint): reading the index, numbering the new data file
    and writing both happen as one step.  Other functions are saved as Numba does."""
    if cache_file._source_stamp not in _watched_stamps():
        return _numba_save(cache_file, key, data)
    with exclusive(cache_file._index_path + ".lock"):
        return _numba_save(cache_file, key, data)


def _watched_stamps() -> set[str]:
    return {source_fingerprint(root) for root in _watched_roots}


def watch(root: str) -> None:
    """Stamp every cached function defined under ``root`` with all of ``root``'s sources.

    Call it before the first jitted function under ``root`` is defined (Numba
    picks a function's cache locator when it is decorated)."""
    root = os.path.realpath(root)
    if root not in _watched_roots:
        _watched_roots.append(root)
    if PackageStampLocator not in _CACHE_IMPL._locator_classes:
        _CACHE_IMPL._locator_classes.insert(0, PackageStampLocator)
    caching.IndexDataCacheFile.save = _save_exclusively


def describe(root: str) -> dict:
    """Where the functions of the modules at the top of the watched ``root`` are cached,
    and the source stamp their cache is valid for (``None`` where nothing is cacheable)."""
    locator = PackageStampLocator.from_function(describe, os.path.join(os.path.realpath(root), "__init__.py"))
    if locator is None:
        return {"directory": None, "stamp": source_fingerprint(os.path.realpath(root))}
    return {"directory": locator.get_cache_path(), "stamp": locator.get_source_stamp()}
