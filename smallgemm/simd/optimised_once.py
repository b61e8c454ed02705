"""The engine's code is optimised once, in the module that becomes machine code.

Numba runs LLVM's function passes (``-O3``) on every function as it lowers it, and the
module passes (``-O3`` again) on a library when it finalises it, after linking in the IR of
what it calls.  The engine's subroutines are lowered only to be linked into their callers,
and its linked routines and entries are finalised whole, so for them the first round optimises
code that the second optimises again with its callees inlined.  Within ``engine_code()`` the
first round is skipped: it took a tenth of a first threaded product's compile, and the second
round takes a third of that longer without it (docs/design.md, "How compiled code is
organised").  The machine code runs at the same speed and gives the same bits.

Anything else Numba compiles, a user's functions included, is optimised as Numba does.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from numba.core import codegen

from .thread_flag import ThreadFlag

_engine = ThreadFlag()  # whether the code being compiled now is the engine's
_optimize_functions = codegen.CPUCodeLibrary._optimize_functions


def engine_code() -> AbstractContextManager[None]:
    """Within, on this thread: code lowered is optimised only when its library is finalised."""
    return _engine.held()


def _optimize_functions_unless_engine(library, ll_module) -> None:
    if not _engine.value:
        _optimize_functions(library, ll_module)
        return
    # What Numba's function round does besides optimising, which the module passes rely on.
    ll_module.data_layout = library._codegen._data_layout


codegen.CPUCodeLibrary._optimize_functions = _optimize_functions_unless_engine
