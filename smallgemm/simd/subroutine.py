"""Subroutines: jitted helpers compiled once per argument types into LLVM IR that callers link in.

Numba compiles a jitted function called from jitted code as a program of its own: it
optimises the function's module, emits its machine code, writes a wrapper for Python
callers and stores it all in the on-disk cache, although its callers use only its IR,
which they link in and optimise again with their own code.  Across the engine's 41
helpers this was a quarter of a cold compile (docs/design.md, "How compiled code is
organised").  A helper declared ``@subroutine`` is typed and lowered once per argument
types in a process, as Numba's own ``compile_subroutine`` lowers an implementation, and
left as IR: each caller that reaches it links that IR in when it is finalised, where
LLVM inlines it or keeps one copy.  Nothing of it is written to the on-disk cache: the
entries and routines that call it are cached with its code inside them, so it is
compiled again only when a caller is.

``@subroutine(inline=True)`` marks the function ``alwaysinline`` for LLVM: the code of
a tile's steps stays in its caller's loop, as Numba's ``inline="always"`` kept it, but
is typed and lowered once rather than once per call site.

A subroutine called from Python runs a jitted copy of the function (``njit(cache=True)``,
compiled at its first such call): the tests and ``explain`` call a few helpers so.
"""

from __future__ import annotations

import llvmlite.binding as llvm
from numba import njit, types
from numba.core import compiler
from numba.core.compiler_lock import global_compiler_lock
from numba.core.extending import _Intrinsic
from numba.core.registry import cpu_target

from .optimised_once import engine_code


class Subroutine:
    """A function compiled to IR once per argument types (``compile``), for callers to link in."""

    def __init__(self, pyfunc, inline: bool):
        self.pyfunc = pyfunc
        self.inline = inline
        self.compiled: dict[tuple, tuple] = {}  # argument types -> (compile result, IR to link)

    def compile(self, typingctx, argtypes: tuple) -> tuple:
        """The compile result and the linkable IR of the function for ``argtypes``."""
        found = self.compiled.get(argtypes)
        if found is None:
            with global_compiler_lock:
                found = self.compiled.get(argtypes)
                if found is None:
                    found = self.compiled[argtypes] = self._lower(typingctx, argtypes)
        return found

    def _lower(self, typingctx, argtypes: tuple) -> tuple:
        targetctx = cpu_target.target_context
        library = targetctx.codegen().create_library(self.pyfunc.__qualname__)
        flags = compiler.Flags()
        flags.nrt = True
        flags.no_compile = True  # IR only: no machine code, no wrappers
        flags.no_cpython_wrapper = True
        flags.no_cfunc_wrapper = True
        flags.forceinline = self.inline
        with engine_code():  # optimised in each caller's module, with the caller
            result = compiler.compile_internal(
                typingctx, targetctx, library, self.pyfunc, argtypes, None, flags, {}
            )
        return result, _LinkableIR(library)


class _LinkableIR:
    """A subroutine's IR with that of all it calls, as a library that a caller's library links in
    when it is finalised (Numba's ``CodeLibrary.add_linking_library`` takes it: it is never
    finalised itself)."""

    def __init__(self, library):
        self.name = library.name
        self._reload_init = set(library._reload_init)
        module = library._final_module.clone()
        # LLVM links a callee's definition into a module only where the module calls it at that
        # moment: a module that holds its callees' definitions is linked whole, whatever the
        # caller's other callees and whichever calls its optimiser removed.
        for callee in dict.fromkeys(library._linking_libraries):
            module.link_in(callee._get_module_for_linking(), preserve=True)
            self._reload_init.update(callee._reload_init)
        for function in module.functions:
            if not function.is_declaration and function.linkage == llvm.Linkage.external:
                # One definition kept however many callers' copies meet in one module; unused,
                # it is dropped.
                function.linkage = "linkonce_odr"
        self._module = module

    def _ensure_finalized(self) -> None:
        """Nothing to finalise: callers take the IR as it is."""

    def _get_module_for_linking(self):
        return self._module


class SubroutineCall(_Intrinsic):
    """The intrinsic jitted code calls a subroutine by; called from Python, it runs the
    subroutine's jitted copy (``python_copy``, compiled at the first such call)."""

    subroutine: Subroutine
    python_copy = None

    def __call__(self, *args):
        copy = self.python_copy
        if copy is None:
            copy = self.python_copy = njit(cache=True)(self.py_func)
        return copy(*args)


def subroutine(pyfunc=None, *, inline: bool = False):
    """Declare ``pyfunc`` (a plain function, jit-compatible, positional parameters) a
    subroutine; returns what jitted code calls it by.  ``inline``: LLVM always inlines it."""
    if pyfunc is None:
        return lambda function: subroutine(function, inline=inline)
    routine = Subroutine(pyfunc, inline)
    arity = pyfunc.__code__.co_argcount
    parameters = ", ".join(f"a{i}" for i in range(arity))
    # An intrinsic's typing function takes its arguments by name: one of the function's arity.
    source = f"def typer(typingctx, {parameters}):\n    return _typed(routine, typingctx, ({parameters},))\n"
    namespace = {"_typed": _typed, "routine": routine}
    exec(source, namespace)
    typer = namespace["typer"]
    typer.__name__ = typer.__qualname__ = pyfunc.__name__
    typer.__module__ = pyfunc.__module__
    typer.__doc__ = pyfunc.__doc__
    call = SubroutineCall(pyfunc.__name__, typer)
    call._register()
    call.subroutine = routine
    call.py_func = pyfunc
    return call


def _typed(routine: Subroutine, typingctx, actual: tuple):
    argtypes = tuple(types.unliteral(t) for t in actual)
    result, linkable = routine.compile(typingctx, argtypes)

    def codegen(context, builder, signature, args):
        context.active_code_library.add_linking_library(linkable)
        return context.call_internal(builder, result.fndesc, signature, args)

    return result.signature.return_type(*argtypes), codegen
