"""Routines compiled once per signature and called by name: the engine's large pieces.

Numba links a jitted callee's LLVM module into every caller and optimises and
compiles it again there: each entry point paid again for every driver and tile loop
it calls (docs/design.md, "How compiled code is organised").  A routine declared
``@linked`` is instead compiled once per argument types, as a C-ABI function
(``numba.cfunc``, cached on disk like any jitted function), whose address is
registered with LLVM under a name made of the routine's name and its argument types
(``llvmlite.binding.add_symbol``); a caller holds a call to that name only.

The call is an ``@intrinsic``: typing a call links the routine for the call's argument
types (compiling it, or loading it from the cache) before the caller is compiled.  A
caller loaded from the cache in another process needs its names registered before
its machine code is: every cached compile result carries the routines it calls by
name, and loading it links them first (``_reduce_with_links`` / ``_rebuild_linking``).

A routine takes and returns what a C function can: pointers, integers, floats,
booleans and the opaque tile-shape types; it returns nothing.  A call costs a few
nanoseconds: a routine is a tile loop or more, never one tile's step.
"""

from __future__ import annotations

import hashlib
import importlib
import threading

import llvmlite.binding as llvm
from llvmlite import ir
from numba import cfunc, types
from numba.core import caching, cgutils
from numba.extending import intrinsic

# Every loop starts on a 64-byte boundary: where the JIT places a routine then leaves the
# speed of its loops alone (unaligned, one build of the row stream ran 4-9 % slower than
# another with the same loops, one core of AMD Zen 4).
llvm.set_option("", "--align-loops=64")

PREFIX = "smallgemm.linked."
_MARK = "smallgemm-linked-v1"  # a cached payload that carries the routines it calls

_routines: dict[str, Linked] = {}  # routine name -> routine
_symbols: dict[str, tuple[str, tuple]] = {}  # symbol -> (routine name, argument types)
_lock = threading.RLock()


class Linked:
    """A routine compiled once per signature (``link``) and called by name (``call``)."""

    def __init__(self, pyfunc, parallel: bool):
        self.pyfunc = pyfunc
        self.parallel = parallel
        self.name = f"{pyfunc.__module__}.{pyfunc.__qualname__}"
        self.compiled: dict[tuple, object] = {}  # argument types -> numba CFunc
        _routines[self.name] = self

    def symbol(self, argtypes: tuple) -> str:
        digest = hashlib.sha256(repr(argtypes).encode()).hexdigest()[:20]
        return f"{PREFIX}{self.name}.{digest}"

    def link(self, argtypes: tuple) -> str:
        """Compile (or load) the routine for ``argtypes`` and register its name; the name."""
        symbol = self.symbol(argtypes)
        if argtypes in self.compiled:
            return symbol
        with _lock:
            if argtypes not in self.compiled:
                function = cfunc(types.void(*argtypes), cache=True, parallel=self.parallel)(self.pyfunc)
                llvm.add_symbol(symbol, function.address)
                _symbols[symbol] = (self.name, argtypes)
                self.compiled[argtypes] = function
        return symbol

    def __repr__(self) -> str:
        return f"linked({self.name})"


def linked(pyfunc=None, *, parallel: bool = False, where=None) -> object:
    """Declare ``pyfunc`` (a plain function, jit-compatible) a linked routine; returns the
    intrinsic that jitted code calls it by.  ``@linked(parallel=True)``: a routine that runs
    ``prange`` loops, itself or in the jitted functions it calls (compiled as Numba's
    ``parallel=True`` functions are, their thread pool started when it is linked).
    ``where``: as for ``only_where``, for a routine that only some kernels run."""
    if pyfunc is None:
        return lambda function: linked(function, parallel=parallel, where=where)
    return _call(Linked(pyfunc, parallel), pyfunc.__name__, where)


def only_where(call, reached) -> object:
    """``call`` (what ``@linked`` returned) for the callers whose route reaches it only with
    some argument types: where ``reached(*argument types)`` is false, the call compiles to
    nothing and links nothing.  For a way that only some kernels take (their tile types say
    so), which the others would otherwise compile without ever running it."""
    routine = call.linked
    return _call(routine, f"{routine.pyfunc.__name__}_where_reached", reached)


def _call(routine: Linked, name: str, reached):
    """The intrinsic that calls ``routine`` by name (``_typed``)."""
    arity = routine.pyfunc.__code__.co_argcount
    parameters = ", ".join(f"a{i}" for i in range(arity))
    # An intrinsic's typing function takes its arguments by name: one of the routine's arity.
    source = f"def typer(typingctx, {parameters}):\n    return _typed(routine, ({parameters},), reached)\n"
    namespace = {"_typed": _typed, "routine": routine, "reached": reached}
    exec(source, namespace)
    typer = namespace["typer"]
    typer.__name__ = typer.__qualname__ = name
    typer.__module__ = routine.pyfunc.__module__
    call = intrinsic(typer)
    call.linked = routine
    return call


def _nothing(context, builder, signature, args):
    return context.get_dummy_value()


def _typed(routine: Linked, actual: tuple, reached):
    argtypes = tuple(types.unliteral(t) for t in actual)
    for t in argtypes:
        if isinstance(t, (types.Array, types.BaseTuple)):
            return None  # not a C argument: the routine takes pointers and scalars
    if reached is not None and not reached(*argtypes):
        return types.void(*argtypes), _nothing
    symbol = routine.link(argtypes)

    def codegen(context, builder, signature, args):
        function_type = ir.FunctionType(
            context.get_value_type(types.void), [context.get_value_type(t) for t in signature.args]
        )
        function = cgutils.get_or_insert_function(builder.module, function_type, symbol)
        builder.call(function, args)
        return context.get_dummy_value()

    return types.void(*argtypes), codegen


def _links_of(library) -> list[tuple[str, tuple]]:
    """The linked routines (name, argument types) that a compiled library calls by name."""
    module = getattr(library, "_final_module", None)
    if module is None:
        return []
    found = []
    for function in module.functions:
        if function.is_declaration and function.name in _symbols:
            found.append(_symbols[function.name])
    return found


_reduce = caching.CompileResultCacheImpl.reduce
_rebuild = caching.CompileResultCacheImpl.rebuild


def _reduce_with_links(self, cres):
    payload = _reduce(self, cres)
    links = _links_of(cres.library)
    return (_MARK, links, payload) if links else payload


def _rebuild_linking(self, target_context, payload):
    if isinstance(payload, tuple) and len(payload) == 3 and payload[0] == _MARK:
        _, links, payload = payload
        for name, argtypes in links:
            if name not in _routines:  # defined in a module not imported yet
                importlib.import_module(name.rsplit(".", 1)[0])
            _routines[name].link(argtypes)
    return _rebuild(self, target_context, payload)


caching.CompileResultCacheImpl.reduce = _reduce_with_links
caching.CompileResultCacheImpl.rebuild = _rebuild_linking
