"""Reading Python objects from compiled code: the fields of NumPy arrays and Python floats;
and making a new array (``new_array``).

A compiled function that Python calls directly (``simd.fastcall``) receives its
arguments as object pointers, without Numba's unboxing (~0.03 us an argument, ~0.05 an
array). It reads what it needs at these byte offsets: NumPy's ``PyArrayObject_fields``
(public since NumPy 1.7, unchanged in 2.x) and CPython's ``PyFloatObject``, each after
the 16-byte object header of CPython's default build. ``layout_holds`` checks them
against live objects when this module is imported, which fails with ImportError on a
build that lays them out otherwise (CPython's free-threaded build, which Numba does not
support either).
"""

from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .types import float_pointer

OBJECT_TYPE = 8  # PyTypeObject *ob_type
ARRAY_DATA = 16  # char *data
ARRAY_NDIM = 24  # int nd
ARRAY_SHAPE = 32  # npy_intp *dimensions
ARRAY_STRIDES = 40  # npy_intp *strides (bytes)
FLOAT_VALUE = 16  # double ob_fval


def layout_holds() -> bool:
    """Whether live arrays and floats have their fields at these offsets."""
    probe = np.empty((3, 5), np.float32)[:, ::2]
    value = 0.625

    def read(obj, offset, ctype):
        return ctype.from_address(id(obj) + offset).value

    def read_words(obj, offset, count):
        at = read(obj, offset, ctypes.c_void_p)
        return tuple((ctypes.c_int64 * count).from_address(at))

    return (
        read(probe, OBJECT_TYPE, ctypes.c_void_p) == id(np.ndarray)
        and read(probe, ARRAY_DATA, ctypes.c_void_p) == probe.ctypes.data
        and read(probe, ARRAY_NDIM, ctypes.c_int32) == probe.ndim
        and read_words(probe, ARRAY_SHAPE, 2) == probe.shape
        and read_words(probe, ARRAY_STRIDES, 2) == probe.strides
        and read(value, FLOAT_VALUE, ctypes.c_double) == value
    )


def _integer_at(bits: int):
    """An intrinsic ``f(at)``: the ``bits``-bit integer at the integer address ``at``, as an int64."""

    def typer(typingctx, at):
        if not isinstance(at, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            value = builder.load(builder.inttoptr(args[0], ir.IntType(bits).as_pointer()))
            return value if bits == 64 else builder.sext(value, ir.IntType(64))

        return types.int64(at), codegen

    return intrinsic(lambda typingctx, at: typer(typingctx, at))


word_at = _integer_at(64)
word_at.__doc__ = "word_at(at): the 64-bit integer at the integer address ``at``."
int32_at = _integer_at(32)
int32_at.__doc__ = "int32_at(at): the 32-bit integer at the integer address ``at``, widened."


@intrinsic
def words_at(typingctx, at):
    """The 64-bit integers from the integer address ``at``, as a pointer."""
    if not isinstance(at, types.Integer):
        return None
    pointer = types.CPointer(types.int64)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(pointer))

    return pointer(at), codegen


@intrinsic
def element_from_double_at(typingctx, at, like):
    """The double at the integer address ``at``, rounded to the element type of the
    pointer ``like`` (as NumPy converts a Python float)."""
    dtype = float_pointer(like)
    if not isinstance(at, types.Integer) or dtype is None:
        return None

    def codegen(context, builder, signature, args):
        value = builder.load(builder.inttoptr(args[0], ir.DoubleType().as_pointer()))
        return context.cast(builder, value, types.float64, dtype)

    return dtype(at, like), codegen


@intrinsic
def store_word(typingctx, at, value):
    """Store the integer ``value`` as 64 bits at the integer address ``at``."""
    if not isinstance(at, types.Integer) or not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        pointer = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        builder.store(context.cast(builder, args[1], signature.args[1], types.int64), pointer)
        return context.get_dummy_value()

    return types.void(at, value), codegen


# NumPy's C API, as its capsule holds it: the index of ``PyArray_NewFromDescr`` in the table
# (numpy/_core/include/numpy/__multiarray_api.h; the same since NumPy 1.x).
NEW_FROM_DESCR_INDEX = 94


def numpy_api_function(index: int) -> int:
    """The address of function ``index`` of NumPy's C API table."""
    try:
        from numpy._core import _multiarray_umath
    except ImportError:  # NumPy 1.x
        from numpy.core import _multiarray_umath
    capsule = _multiarray_umath._ARRAY_API
    pointer_of = ctypes.pythonapi.PyCapsule_GetPointer
    pointer_of.restype, pointer_of.argtypes = ctypes.c_void_p, (ctypes.py_object, ctypes.c_char_p)
    return ctypes.c_void_p.from_address(pointer_of(capsule, None) + 8 * index).value


@intrinsic
def new_array(typingctx, new_from_descr, array_type, descr, ndim, d0, d1, d2):
    """A new C-ordered array of ``ndim`` (0 to 3) dimensions ``d0, d1, d2`` (the first
    ``ndim`` of them), whose elements the caller writes: the address of a new reference,
    or 0 with the exception NumPy set (MemoryError; ValueError for a size past its limit).
    ``new_from_descr``: the address of NumPy's ``PyArray_NewFromDescr``
    (``numpy_api_function``); ``array_type``: of
    ``numpy.ndarray``; ``descr``: of its dtype, which the call takes a reference to.  The
    caller holds the GIL."""
    if not all(isinstance(t, types.Integer) for t in (new_from_descr, array_type, descr, ndim, d0, d1, d2)):
        return None

    def codegen(context, builder, signature, args):
        word, pointer = ir.IntType(64), ir.IntType(8).as_pointer()
        function, subtype, dtype, count, *dims = (
            context.cast(builder, value, t, types.int64) for value, t in zip(args, signature.args)
        )
        shape = cgutils.alloca_once(builder, word, size=3)
        for i, dim in enumerate(dims):
            builder.store(dim, builder.gep(shape, [ir.Constant(word, i)]))
        increment = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [pointer]), "Py_IncRef"
        )
        builder.call(increment, [builder.inttoptr(dtype, pointer)])  # the reference the call steals
        function_type = ir.FunctionType(
            pointer,
            [
                pointer,
                pointer,
                ir.IntType(32),
                word.as_pointer(),
                word.as_pointer(),
                pointer,
                ir.IntType(32),
                pointer,
            ],
        )
        made = builder.call(
            builder.inttoptr(function, function_type.as_pointer()),
            [
                builder.inttoptr(subtype, pointer),
                builder.inttoptr(dtype, pointer),
                builder.trunc(count, ir.IntType(32)),
                shape,
                ir.Constant(word.as_pointer(), None),
                ir.Constant(pointer, None),
                ir.Constant(ir.IntType(32), 0),
                ir.Constant(pointer, None),
            ],
        )
        return builder.ptrtoint(made, word)

    return types.int64(new_from_descr, array_type, descr, ndim, d0, d1, d2), codegen


if not layout_holds():
    raise ImportError(
        "smallgemm reads NumPy arrays and Python floats at the offsets of CPython's default build, "
        "and this interpreter lays them out otherwise"
    )
