"""Routines compiled once per signature and called by name: the engine's large pieces.

Numba links a jitted callee's LLVM module into every caller and optimises and
compiles it again there: each entry point paid again for every driver and tile loop
it calls (docs/design.md, "How compiled code is organised").  A routine declared
``@linked`` is instead compiled once per argument types, as a C-ABI function
(``numba.cfunc``, cached on disk like any jitted function), and its callers call it
through a cell: a pointer-sized global registered with LLVM under a name made of the
routine's name and its argument types (``llvmlite.binding.add_symbol``), which holds
the routine's address once it is linked.  A caller holds a load of the cell and a call.

A caller finds an empty cell at most once: it then calls ``ensure`` (a C callback into
Python, taking the GIL), which compiles the routine (or loads it from the cache) and
fills the cell.  So compiling or loading a caller costs only its own code, and a
product compiles only the routines its route reaches (``lazily``).  Workers link what
they reach as they reach it: a thread that starts workers lets go of the GIL while they
run (``simd.workers``).  Code compiled or loaded outside ``lazily`` (a user's ``@njit``
function calling ``smallgemm.njit.matmul``, ``python -m smallgemm compile``) has every
routine it may reach linked first (``link_callees``).

A caller loaded from the cache in another process needs its cells registered before
its machine code is loaded: every cached compile result that calls routines carries
their names and argument types (``_reduce_with_links``), and loading it registers them
first (``_rebuild_linking``).

A routine takes what a C function can: pointers, integers, floats, booleans, the opaque
tile-shape types and records of them (``simd.records``: named tuples, which LLVM passes
as structures, a field in a register as a separate argument would be); it returns nothing.  A call costs a few
nanoseconds: a routine is a tile loop or more, never one tile's step.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import os
import sys
import traceback
from contextlib import AbstractContextManager

import llvmlite.binding as llvm
from llvmlite import ir
from numba import cfunc, types
from numba.core import caching, cgutils, codegen
from numba.core.compiler_lock import global_compiler_lock
from numba.extending import intrinsic

from .optimised_once import engine_code
from .thread_flag import ThreadFlag

# Every loop starts on a 64-byte boundary: where the JIT places a routine then leaves the
# speed of its loops alone (unaligned, one build of the row stream ran 4-9 % slower than
# another with the same loops, one core of AMD Zen 4).
llvm.set_option("", "--align-loops=64")

PREFIX = "smallgemm.linked."
ENSURE = "smallgemm.linked.ensure"  # the C callback a caller calls on finding a cell empty
_MARK = "smallgemm-linked-v2"  # a cached payload that carries the routines it calls

_routines: dict[str, Linked] = {}  # routine name -> routine
_symbols: dict[str, tuple[str, tuple]] = {}  # cell symbol -> (routine name, argument types)
_cells_at: dict[int, tuple[Linked, tuple]] = {}  # cell address -> (routine, argument types)
# Numba's compiler lock, held while compiling and loading: linking takes it too, so that a run
# that links a routine and a compile that declares one take the locks in the same order.
_lock = global_compiler_lock
_lazy_flag = ThreadFlag()  # whether code compiled or loaded now may fill its cells when it runs


def lazily(lazy: bool = True) -> AbstractContextManager[None]:
    """Within: code compiled or loaded leaves the routines it calls to its first call of each
    (``lazy``), or has them all linked first (not ``lazy``)."""
    return _lazy_flag.held(lazy)


def _lazy() -> bool:
    return _lazy_flag.value


class Linked:
    """A routine compiled once per signature (``link``) and called through its cell (``declare``)."""

    def __init__(self, pyfunc):
        self.pyfunc = pyfunc
        self.name = f"{pyfunc.__module__}.{pyfunc.__qualname__}"
        self.compiled: dict[tuple, object] = {}  # argument types -> numba CFunc
        self.cells: dict[tuple, ctypes.c_void_p] = {}  # argument types -> the cell callers read
        self.complete: set[tuple] = set()  # argument types whose callees are all linked too
        _routines[self.name] = self

    def symbol(self, argtypes: tuple) -> str:
        """The name of the cell that holds the routine's address for ``argtypes``."""
        digest = hashlib.sha256(repr(argtypes).encode()).hexdigest()[:20]
        return f"{PREFIX}{self.name}.{digest}"

    def declare(self, argtypes: tuple) -> str:
        """Register the cell for ``argtypes`` (empty until ``link``); its name."""
        symbol = self.symbol(argtypes)
        if argtypes not in self.cells:
            with _lock:
                if argtypes not in self.cells:
                    cell = ctypes.c_void_p(0)
                    llvm.add_symbol(symbol, ctypes.addressof(cell))
                    _symbols[symbol] = (self.name, argtypes)
                    _cells_at[ctypes.addressof(cell)] = (self, argtypes)
                    self.cells[argtypes] = cell
        return symbol

    def link(self, argtypes: tuple, callees: bool = False) -> object:
        """Compile (or load) the routine for ``argtypes`` and fill its cell; the CFunc.  With
        ``callees`` every routine it may call is linked too, and theirs."""
        self.declare(argtypes)
        with _lock:
            function = self.compiled.get(argtypes)
            if function is None:
                with lazily(not callees), engine_code():
                    function = cfunc(types.void(*argtypes), cache=True)(self.pyfunc)
                if callees:
                    self.complete.add(argtypes)  # compiled or loaded outside ``lazily``: linked
                self.compiled[argtypes] = function
                self.cells[argtypes].value = function.address
            elif callees and argtypes not in self.complete:
                self.complete.add(argtypes)
                link_callees(function._library)
        return function

    def __repr__(self) -> str:
        return f"linked({self.name})"


def linked(pyfunc=None, *, where=None) -> object:
    """Declare ``pyfunc`` (a plain function, jit-compatible) a linked routine; returns the
    intrinsic that jitted code calls it by.  ``where``: as for ``only_where``, for a routine
    that only some kernels run."""
    if pyfunc is None:
        return lambda function: linked(function, where=where)
    return _call(Linked(pyfunc), pyfunc.__name__, where)


def only_where(call, reached) -> object:
    """``call`` (what ``@linked`` returned) for the callers whose route reaches it only with
    some argument types: where ``reached(*argument types)`` is false, the call compiles to
    nothing and declares nothing.  For a way that only some kernels take (their tile types
    say so), which the others would otherwise link without ever running it."""
    routine = call.linked
    return _call(routine, f"{routine.pyfunc.__name__}_where_reached", reached)


def links_of(library) -> list[tuple[str, tuple]]:
    """The routines (name, argument types) whose cells a compiled library reads."""
    stored = getattr(library, "_smallgemm_links", None)  # loaded from the cache
    if stored is not None:
        return stored
    return [_symbols[v.name] for v in library._final_module.global_variables if v.name in _symbols]


def link_callees(library) -> None:
    """Link every routine that a compiled library may reach, and theirs: for code that must
    compile nothing at its first call."""
    for name, argtypes in links_of(library):
        routine(name).link(argtypes, callees=True)


def routine(name: str) -> Linked:
    """The routine of this name, importing the module that defines it if need be."""
    if name not in _routines:
        importlib.import_module(name.rsplit(".", 1)[0])
    return _routines[name]


def _call(routine: Linked, name: str, reached):
    """The intrinsic that calls ``routine`` through its cell (``_typed``)."""
    return routine_call(
        routine, name, routine.pyfunc.__code__.co_argcount, lambda actual: _typed(routine, actual, reached)
    )


def routine_call(routine: Linked, name: str, arity: int, typed) -> object:
    """An intrinsic named ``name`` that takes ``arity`` arguments and is typed by
    ``typed(argument types)``: (signature, codegen), or None where it does not apply."""
    parameters = ", ".join(f"a{i}" for i in range(arity))
    # An intrinsic's typing function takes its arguments by name: one of the routine's arity.
    source = f"def typer(typingctx, {parameters}):\n    return typed(({parameters},))\n"
    namespace = {"typed": typed}
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
    argtypes = c_arguments(actual)
    if argtypes is None:
        return None
    if reached is not None and not reached(*argtypes):
        return types.void(*argtypes), _nothing
    symbol = routine.declare(argtypes)

    def codegen(context, builder, signature, args):
        function_type = routine_type(context, signature.args)
        builder.call(routine_address(builder, symbol, function_type), args)
        return context.get_dummy_value()

    return types.void(*argtypes), codegen


def c_arguments(actual: tuple) -> tuple | None:
    """The argument types a routine is compiled for (literals dropped), or None where one is
    not a C argument: a routine takes pointers, scalars and records of them."""
    argtypes = tuple(types.unliteral(t) for t in actual)
    if not all(_c_value(t) for t in argtypes):
        return None
    return argtypes


def _c_value(t) -> bool:
    """Whether a routine may take a value of type ``t``: not an array; a tuple only as a record
    (``simd.records``: a named tuple of such values, which LLVM passes as a structure)."""
    if isinstance(t, types.Array):
        return False
    if isinstance(t, types.BaseTuple):
        return isinstance(t, (types.NamedTuple, types.NamedUniTuple)) and all(_c_value(field) for field in t)
    return True


def cell_in(module: ir.Module, symbol: str, function_type: ir.FunctionType) -> ir.GlobalVariable:
    """The cell ``symbol``, holding a function of ``function_type``, declared in ``module``."""
    cell = module.globals.get(symbol)
    if cell is None:
        cell = ir.GlobalVariable(module, function_type.as_pointer(), symbol)
        cell.linkage = "external"
    return cell


def routine_type(context, argtypes: tuple) -> ir.FunctionType:
    """The C type of a routine taking ``argtypes``."""
    return ir.FunctionType(context.get_value_type(types.void), [context.get_value_type(t) for t in argtypes])


def routine_address(builder, symbol: str, function_type: ir.FunctionType):
    """The routine in the cell ``symbol``, read where ``builder`` is: linked first if the cell is empty."""
    module = builder.module
    cell = cell_in(module, symbol, function_type)
    with builder.if_then(cgutils.is_null(builder, builder.load(cell)), likely=False):
        ensure = cgutils.get_or_insert_function(
            module, ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t]), ENSURE
        )
        builder.call(ensure, [builder.bitcast(cell, cgutils.voidptr_t)])
    return builder.load(cell)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _ensure(cell_address):
    """A caller found this cell empty: link its routine (the calling thread takes the GIL here)."""
    try:
        routine_of_cell, argtypes = _cells_at[cell_address]
        routine_of_cell.link(argtypes)
    except BaseException:  # nothing can be raised through the caller's machine code
        traceback.print_exc()
        sys.stderr.write("smallgemm: a compiled routine could not be linked; the process stops\n")
        sys.stderr.flush()
        os._exit(70)


llvm.add_symbol(ENSURE, ctypes.cast(_ensure, ctypes.c_void_p).value)

_reduce = caching.CompileResultCacheImpl.reduce
_rebuild = caching.CompileResultCacheImpl.rebuild
_finalize = codegen.CPUCodeLibrary.finalize


def _reduce_with_links(self, cres):
    payload = _reduce(self, cres)
    links = links_of(cres.library)
    return (_MARK, links, payload) if links else payload


def _rebuild_linking(self, target_context, payload):
    if not (isinstance(payload, tuple) and len(payload) == 3 and payload[0] == _MARK):
        return _rebuild(self, target_context, payload)
    _, links, payload = payload
    for name, argtypes in links:
        routine(name).declare(argtypes)
    cres = _rebuild(self, target_context, payload)
    cres.library._smallgemm_links = links
    if not _lazy():
        link_callees(cres.library)
    return cres


def _finalize_linking(self):
    _finalize(self)
    if not _lazy():
        link_callees(self)


caching.CompileResultCacheImpl.reduce = _reduce_with_links
caching.CompileResultCacheImpl.rebuild = _rebuild_linking
codegen.CPUCodeLibrary.finalize = _finalize_linking
