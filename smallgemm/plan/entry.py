"""Compiled entry points called without Numba's per-call type dispatch.

Numba's dispatcher types every argument on every call (~3 us for a TileShape,
~0.1 us per array).  Each entry is instead compiled once per (kernel, dtype)
for arrays of *any* layout (Numba's 'A' layout) and its native entry point is
called directly: one specialisation covers C-, F- and arbitrarily strided
operands, which also keeps cold compile time down.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import threading
from types import MappingProxyType

import numpy as np
from numba import from_dtype, types

from ..simd import TileShapeType
from ..simd import linked as linked_routines
from ..simd.optimised_once import engine_code
from ..simd.records import Blocks
from .workspace import Workspace

KINDS = frozenset(
    {
        "shape",
        "narrow",
        "few",
        "gemv",
        "resident",
        "tiles",
        "panel_rows",
        "scalar",
        "matrix",
        "out",
        "buffer",
        "int",
        "bool",
        "offsets",
        "stack_offsets",
        "counter",
        "log",
        "logs",
        "blocks",
        "workspace",
    }
)
"""The kinds an argument may be declared as (the keys of ``entry_types``'s table)."""


def entry_types(kinds: tuple[str, ...], kernel, dtype: np.dtype) -> tuple:
    """The Numba types of arguments of these kinds for the kernel and dtype."""
    scalar = from_dtype(dtype)
    shape, narrow, few, gemv, resident = (
        TileShapeType(tile)
        for tile in (kernel.shape, kernel.narrow, kernel.few, kernel.gemv, kernel.resident)
    )
    buffer = types.Array(scalar, 1, "C")
    offsets = types.Array(types.int64, 1, "C", readonly=True)
    log = types.Array(types.int64, 1, "C")
    table = {
        "shape": shape,
        "narrow": narrow,
        "few": few,
        "gemv": gemv,
        "resident": resident,
        "tiles": types.Tuple((shape, narrow, few, gemv, types.boolean, resident)),
        "panel_rows": TileShapeType(kernel.panel_rows()),
        "scalar": scalar,
        "matrix": types.Array(scalar, 2, "A", readonly=True),
        "out": types.Array(scalar, 2, "A"),
        "buffer": buffer,
        "int": types.int64,
        "bool": types.boolean,
        "offsets": offsets,
        "stack_offsets": types.UniTuple(offsets, 3),
        "counter": log,
        "log": log,
        "logs": types.UniTuple(log, 2),
        "blocks": types.NamedUniTuple(types.int64, 3, Blocks),
        "workspace": types.NamedTuple((buffer, buffer, buffer, log, buffer), Workspace),
    }
    return tuple(table[k] for k in kinds)


class Entry:
    """One jitted entry function and its arguments' roles: each argument by name, with its kind.

    Declared as ``Entry(dispatcher, name=kind, ...)``, the names exactly the jitted function's
    parameters in order (checked against ``dispatcher.py_func``'s signature, so a declaration
    cannot drift from its function); ``roles`` is that ordered name -> kind mapping and ``kinds``
    the kinds alone, in order, from which each (kernel, dtype)'s specialisation is typed.  The
    compiled entry point is called positionally, in the same order.

    Kinds: ``shape`` / ``narrow`` / ``few`` / ``gemv`` / ``resident`` / ``panel_rows`` (the kernel's TileShapes;
    ``gemv``'s ``lane_sums`` is not in its type: entries take it as a ``bool``), ``tiles`` (the prepared
    state's tuple of them: main, narrow, few, GEMV, ``lane_sums``, resident), ``scalar`` (of the dtype),
    ``matrix`` (2-D input, any layout), ``out`` (2-D output, any layout),
    ``buffer`` (1-D contiguous workspace), ``int``, ``bool``, ``offsets``
    (1-D contiguous int64 array), ``stack_offsets`` (three of them: A's, B's and C's), ``counter`` /
    ``log`` (1-D contiguous int64 arrays written to), ``logs`` (two logs: pack tasks, row tasks),
    ``blocks`` (a ``records.Blocks``: ``BlockSizes.blocks``), ``workspace`` (a ``workspace.Workspace``).
    """

    def __init__(self, dispatcher, /, **roles: str):
        func = dispatcher.py_func
        name = f"{func.__module__}.{func.__qualname__}"
        parameters = inspect.signature(func).parameters.values()
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        others = [p.name for p in parameters if p.kind not in positional]
        if others:
            raise TypeError(f"entry {name}: parameters {others} cannot be passed positionally")
        _check_names(name, tuple(roles), tuple(p.name for p in parameters))
        unknown = {arg: kind for arg, kind in roles.items() if kind not in KINDS}
        if unknown:
            raise TypeError(f"entry {name}: unknown kinds {unknown}; known: {sorted(KINDS)}")
        self.dispatcher = dispatcher
        self.roles = MappingProxyType(dict(roles))
        self.kinds = tuple(roles.values())
        # The native entry points this process compiled or loaded, by (kernel name, dtype char).
        self.loaded: dict = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        args = ", ".join(f"{arg}={kind!r}" for arg, kind in self.roles.items())
        return f"Entry({self.dispatcher.py_func.__qualname__}, {args})"

    def ready(self, kernel, dtype: np.dtype) -> bool:
        """Whether this kernel and dtype's entry point was compiled (or loaded) already."""
        return (kernel.name, dtype.char) in self.loaded

    def cached(self, kernel, dtype: np.dtype) -> bool:
        """Whether this kernel and dtype's entry point is loaded, or compiled in Numba's on-disk
        cache (from which ``get`` loads it in a fraction of a second), without loading it."""
        if self.ready(kernel, dtype):
            return True
        cache = self.dispatcher._cache  # Numba's FunctionCache: the index maps signatures to data files
        try:
            key = cache._index_key(
                entry_types(self.kinds, kernel, dtype), self.dispatcher.targetctx.codegen()
            )
            cache_file = cache._cache_file
            data_name = cache_file._load_index().get(key)
        except (AttributeError, OSError):  # no cache (NullCache), or none readable
            return False
        # Numba writes the index before the data file (each by an atomic rename): an entry
        # another process is saving is cached once its data file is there.
        return data_name is not None and os.path.exists(os.path.join(cache_file._cache_path, data_name))

    def get(self, kernel, dtype: np.dtype):
        """The native entry point for this kernel (a ``kernels.Kernel``) and dtype."""
        key = (kernel.name, dtype.char)  # the row-dots rule's lane_sums is a run-time argument
        fn = self.loaded.get(key)
        if fn is None:
            with self._lock:  # compile (or load from the cache) once, even under threads
                fn = self.loaded.get(key)
                if fn is None:
                    # Routines are linked at their first call.
                    with linked_routines.lazily(), engine_code():
                        fn = self.dispatcher.compile(entry_types(self.kinds, kernel, dtype))
                    self.loaded[key] = fn
        return fn

    def link_routines(self, kernel, dtype: np.dtype) -> None:
        """Compile (or load) this kernel and dtype's entry point and every linked routine it may
        reach (``get`` leaves most to the first call that reaches them).

        An entry compiled here goes to the on-disk cache after those routines: a process that
        finds the entry there (``cached``: the first-use tier loads it then) finds what its
        products reach there too, and compiles nothing at their first calls."""
        with self._saved_last() as save:
            self.get(kernel, dtype)
            linked_routines.link_callees(self._library(kernel, dtype))
            save()

    @contextlib.contextmanager
    def _saved_last(self):
        """Within: the dispatcher's compiles are saved to the on-disk cache only when the
        function yielded is called."""
        cache = self.dispatcher._cache
        deferred = []
        cache.save_overload = lambda signature, result: deferred.append((signature, result))
        try:
            yield lambda: [type(cache).save_overload(cache, *pending) for pending in deferred]
        finally:
            del cache.save_overload

    def _library(self, kernel, dtype: np.dtype):
        """The compiled code of this kernel and dtype's entry point (compiled by ``get``)."""
        return self.dispatcher.overloads[entry_types(self.kinds, kernel, dtype)].library


def _check_names(entry: str, declared: tuple[str, ...], parameters: tuple[str, ...]) -> None:
    """TypeError unless the declared argument names are the function's parameters, in order."""
    if declared == parameters:
        return
    missing = [p for p in parameters if p not in declared]
    extra = [d for d in declared if d not in parameters]
    if missing or extra:
        detail = f"not declared: {missing}; not parameters: {extra}"
    else:
        at = next(i for i, (d, p) in enumerate(zip(declared, parameters)) if d != p)
        detail = (
            f"out of order from position {at}: {declared[at]!r} declared, {parameters[at]!r} in the function"
        )
    raise TypeError(
        f"entry {entry}: declared arguments ({', '.join(declared)}) are not the function's parameters "
        f"({', '.join(parameters)}): {detail}"
    )
