"""Linked routines that Python calls as builtin functions, with no unboxing.

Numba's entry points unbox every argument on every call: a small product's entry took
~0.4 us of a 16x16 product's ~1.4 us for its 18 arguments. A routine written for this
takes the call's argument vector as CPython hands it to a ``METH_FASTCALL`` builtin,
reads the objects' fields itself (``simd.objects``) and answers an index into a tuple of
Python objects. Its parameters are the types it is compiled for (tile shapes, a typed
pointer for the element type: compile-time only, passed as zeros), then ``context`` (the
address of the int64 values bound to the builtin), ``arguments`` (the address of the
argument vector), ``count`` (its length) and ``answer`` (where it writes the index). A
routine that makes a new object writes the index ``len(answers)`` and the object's address
(a new reference) in the word after it: the builtin returns that object, or, for 0, the
exception the routine left set.

``builtin`` makes the function: a trampoline of a few instructions, compiled here in
each process (a few milliseconds; it holds the routine's address and the answers'),
reads the context array's data pointer from the builtin's ``self``, calls the routine,
and returns the answer with a new reference. The context array is the builtin's
``self``, kept alive by it. The routine trusts its caller for the arguments' types: only
the Python code beside it calls the builtin.
"""

from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.compiler_lock import global_compiler_lock
from numba.core.registry import cpu_target

from .linked import c_arguments, routine_address, routine_call, routine_type
from .objects import ARRAY_DATA

METH_FASTCALL = 0x0080


class _MethodDef(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("function", ctypes.c_void_p),
        ("flags", ctypes.c_int),
        ("doc", ctypes.c_char_p),
    ]


_new_builtin = ctypes.pythonapi.PyCFunction_NewEx
_new_builtin.restype = ctypes.py_object
_new_builtin.argtypes = (ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p)

# (routine address, the answers' ids) -> (method definition, library, answers): kept for the
# process's life, since builtins made from them may live as long.
_trampolines: dict[tuple, tuple] = {}


def address_of(call) -> object:
    """An intrinsic that takes what ``call`` (a ``@linked`` routine's intrinsic) takes and
    returns the routine's address for those argument types, linking it first if need be:
    for a jitted entry whose caller makes a ``builtin`` of it (the entry's compiled code
    then reads the routine's cell, so ``link_callees`` links the routine with it)."""
    routine = call.linked

    def typed(actual: tuple):
        argtypes = c_arguments(actual)
        if argtypes is None:
            return None
        symbol = routine.declare(argtypes)

        def codegen(context, builder, signature, args):
            function = routine_address(builder, symbol, routine_type(context, signature.args))
            return builder.ptrtoint(function, ir.IntType(64))

        return types.int64(*argtypes), codegen

    arity = routine.pyfunc.__code__.co_argcount
    return routine_call(routine, f"address_of_{routine.pyfunc.__name__}", arity, typed)


def builtin(address: int, argtypes: tuple, answers: tuple, context: np.ndarray, name: str):
    """A builtin function calling the routine at ``address`` (compiled for ``argtypes``,
    whose last four are ``context``, ``arguments``, ``count`` and ``answer``) with this int64
    ``context``; it returns ``answers[i]`` for the index ``i`` the routine writes, or the new
    object it made (see the module docstring)."""
    key = (address, tuple(map(id, answers)))
    with global_compiler_lock:  # which finalising a library requires
        if key not in _trampolines:
            _trampolines[key] = _trampoline(address, argtypes, answers, name)
    method = _trampolines[key][0]
    return _new_builtin(ctypes.addressof(method), context, None)


def _trampoline(address: int, argtypes: tuple, answers: tuple, name: str) -> tuple:
    context = cpu_target.target_context
    library = context.codegen().create_library(f"smallgemm.fastcall.{name}")
    module = library.create_ir_module(name)
    pointer = cgutils.voidptr_t
    word = ir.IntType(64)
    function = ir.Function(
        module, ir.FunctionType(pointer, [pointer, pointer.as_pointer(), word]), f"smallgemm_fastcall_{name}"
    )
    builder = ir.IRBuilder(function.append_basic_block())
    self, arguments, count = function.args
    answer = builder.alloca(word, size=2)  # the index; the new object's address
    context_data = builder.load(
        builder.bitcast(builder.gep(self, [ir.Constant(word, ARRAY_DATA)]), word.as_pointer())
    )
    routine = routine_type(context, argtypes)
    fixed = [ir.Constant(t, None) for t in routine.args[:-4]]
    builder.call(
        builder.inttoptr(ir.Constant(word, address), routine.as_pointer()),
        [*fixed, context_data, builder.ptrtoint(arguments, word), count, builder.ptrtoint(answer, word)],
    )
    index = builder.load(answer)
    with builder.if_then(builder.icmp_signed("==", index, ir.Constant(word, len(answers)))):
        builder.ret(builder.inttoptr(builder.load(builder.gep(answer, [ir.Constant(word, 1)])), pointer))
    table = ir.GlobalVariable(module, ir.ArrayType(word, len(answers)), f"{function.name}.answers")
    table.initializer = ir.Constant(ir.ArrayType(word, len(answers)), [id(a) for a in answers])
    table.global_constant = True
    chosen = builder.inttoptr(builder.load(builder.gep(table, [ir.Constant(word, 0), index])), pointer)
    increment = cgutils.get_or_insert_function(module, ir.FunctionType(ir.VoidType(), [pointer]), "Py_IncRef")
    builder.call(increment, [chosen])
    builder.ret(chosen)
    library.add_ir_module(module)
    library.finalize()
    method = _MethodDef(name.encode(), library.get_pointer_to_function(function.name), METH_FASTCALL, None)
    return method, library, answers
