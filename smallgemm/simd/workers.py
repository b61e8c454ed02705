"""Routines that several workers run at once, on Numba's thread pool, with no ``prange``.

Every parallel loop of the engine has one form: each of ``workers`` workers claims
tasks from shared counters until none is left.  Written as a ``prange`` loop, each cost
its function a second compile: Numba outlines the loop's body into a gufunc that it
types, lowers and optimises as a function of its own, after running its parfor passes
over the whole caller (0.2-0.35 s a loop, docs/design.md).  Here the body is a linked
routine, compiled once like any other, and the loop is a few instructions emitted with
each call.

``@on_workers`` declares ``body(w, workers, *args)`` a linked routine and returns the
intrinsic that runs it: ``body(workers, *args)`` calls ``body(w, workers, *args)`` for
every ``w`` in ``range(workers)``, at once on the pool's threads, and returns when every
call has.  The call stores the routine's address, ``workers`` and ``args`` in a record on
the caller's stack and hands it, with a kernel emitted beside the call, to Numba's
``parallel_for`` (the threading layer's C entry, the one Numba's gufuncs launch through).
The layer cuts ``range(workers)`` into shares, one per thread at most, and the kernel runs
the worker numbers of its share.  With one worker, or one thread, the calling thread runs
them all.

The calling thread lets go of the GIL while the workers run, if it holds it: a worker
takes it to link a routine it reaches first (``linked``).  The pool starts at the first
call that needs it (``_start``), as Numba's starts at the first ``prange`` loop.
"""

from __future__ import annotations

import ctypes
import os
import sys
import traceback

import llvmlite.binding as llvm
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.np.ufunc import parallel as numba_parallel

from .linked import Linked, c_arguments, cell_in, routine_address, routine_call, routine_type

_INT = ir.IntType(64)
_INT32 = ir.IntType(32)
_BYTES = cgutils.voidptr_t
# Cells that hold the threading layer's entries once the pool has started (``_start``).
_PARALLEL_FOR = ctypes.c_void_p(0)
_NUM_THREADS = ctypes.c_void_p(0)
_PARALLEL_FOR_CELL = "smallgemm.on_workers.parallel_for"
_NUM_THREADS_CELL = "smallgemm.on_workers.get_num_threads"
_START = "smallgemm.on_workers.start"


def on_workers(pyfunc) -> object:
    """Declare ``pyfunc(w, workers, *args)`` one worker's part of a parallel loop; returns the
    intrinsic that runs it on workers, called as ``(workers, *args)``."""
    routine = Linked(pyfunc)
    arity = pyfunc.__code__.co_argcount - 1
    return routine_call(routine, pyfunc.__name__, arity, lambda actual: _typed(routine, actual))


def _typed(routine: Linked, actual: tuple):
    workers_type, rest = actual[0], c_arguments(actual[1:])
    if not isinstance(workers_type, types.Integer) or rest is None:
        return None
    argtypes = (types.intp, types.intp, *rest)
    symbol = routine.declare(argtypes)

    def codegen(context, builder, signature, args):
        body_type = routine_type(context, argtypes)
        body = routine_address(builder, symbol, body_type)  # linked here, before any worker starts
        workers = context.cast(builder, args[0], workers_type, types.intp)
        record_type = ir.LiteralStructType(
            [body_type.as_pointer()] + [context.get_value_type(t) for t in argtypes[1:]]
        )
        record = cgutils.alloca_once(builder, record_type)
        for i, value in enumerate([body, workers, *args[1:]]):
            builder.store(value, cgutils.gep_inbounds(builder, record, 0, i))
        kernel = _kernel(builder.module, symbol, record_type)
        _run(builder, kernel, workers, builder.bitcast(record, _BYTES))
        return context.get_dummy_value()

    return types.void(workers_type, *rest), codegen


def _kernel(module: ir.Module, symbol: str, record_type: ir.LiteralStructType) -> ir.Function:
    """The function ``parallel_for`` calls with a share of the workers: ``(args, dimensions,
    steps, record)``, where ``dimensions[0]`` counts the share and ``args[0]``, a null pointer
    moved on by one byte a worker, holds its first worker number."""
    name = f"smallgemm.on_workers.{symbol}"
    kernel = module.globals.get(name)
    if kernel is not None:
        return kernel
    kernel_type = ir.FunctionType(
        ir.VoidType(), [_BYTES.as_pointer(), _INT.as_pointer(), _INT.as_pointer(), _BYTES]
    )
    kernel = ir.Function(module, kernel_type, name)
    kernel.linkage = "internal"
    args, dimensions, _, data = kernel.args
    builder = ir.IRBuilder(kernel.append_basic_block())
    count = builder.load(dimensions)
    first = builder.ptrtoint(builder.load(args), _INT)
    record = builder.bitcast(data, record_type.as_pointer())
    body, *fields = (
        builder.load(cgutils.gep_inbounds(builder, record, 0, i)) for i in range(len(record_type))
    )
    with cgutils.for_range(builder, count, intp=_INT) as loop:
        builder.call(body, [builder.add(first, loop.index), *fields])
    builder.ret_void()
    return kernel


def _run(builder: ir.IRBuilder, kernel: ir.Function, workers, record) -> None:
    """Call ``kernel`` on workers 0 .. ``workers`` - 1: on the pool where it has more than one
    thread for them, else here."""
    module = builder.module
    parallel_for_type = ir.FunctionType(ir.VoidType(), [_BYTES] * 5 + [_INT] * 3)
    parallel_for_cell = cell_in(module, _PARALLEL_FOR_CELL, parallel_for_type)
    num_threads_cell = cell_in(module, _NUM_THREADS_CELL, ir.FunctionType(_INT, []))
    threads = cgutils.alloca_once_value(builder, _INT(1))
    with builder.if_then(builder.icmp_signed(">", workers, _INT(1))):
        with builder.if_then(cgutils.is_null(builder, builder.load(parallel_for_cell)), likely=False):
            builder.call(_function(module, _START, ir.VoidType(), []), [])
        available = builder.call(builder.load(num_threads_cell), [])
        builder.store(
            builder.select(builder.icmp_signed("<", available, workers), available, workers), threads
        )
    args = cgutils.alloca_once_value(builder, _BYTES(None))
    dimensions = cgutils.alloca_once_value(builder, workers)
    steps = cgutils.alloca_once_value(builder, _INT(1))
    with builder.if_else(builder.icmp_signed(">", builder.load(threads), _INT(1))) as (on_pool, here):
        with on_pool:
            held = builder.icmp_signed(
                "!=", builder.call(_function(module, "PyGILState_Check", _INT32, []), []), _INT32(0)
            )
            state = cgutils.alloca_once_value(builder, _BYTES(None))
            with builder.if_then(held):
                builder.store(builder.call(_function(module, "PyEval_SaveThread", _BYTES, []), []), state)
            pointers = [builder.bitcast(p, _BYTES) for p in (kernel, args, dimensions, steps)]
            builder.call(
                builder.load(parallel_for_cell), [*pointers, record, _INT(0), _INT(1), builder.load(threads)]
            )
            with builder.if_then(held):
                builder.call(
                    _function(module, "PyEval_RestoreThread", ir.VoidType(), [_BYTES]), [builder.load(state)]
                )
        with here:
            builder.call(kernel, [args, dimensions, steps, record])


def _function(module: ir.Module, name: str, result: ir.Type, parameters: list) -> ir.Function:
    return cgutils.get_or_insert_function(module, ir.FunctionType(result, parameters), name)


@ctypes.CFUNCTYPE(None)
def _start():
    """Start Numba's thread pool (its threading layer chosen then) and fill the cells."""
    try:
        numba_parallel._launch_threads()
        _NUM_THREADS.value = llvm.address_of_symbol("get_num_threads")
        _PARALLEL_FOR.value = llvm.address_of_symbol("numba_parallel_for")  # last: callers test this cell
    except BaseException:  # nothing can be raised through the caller's machine code
        traceback.print_exc()
        sys.stderr.write("smallgemm: Numba's thread pool could not start; the process stops\n")
        sys.stderr.flush()
        os._exit(70)


llvm.add_symbol(_PARALLEL_FOR_CELL, ctypes.addressof(_PARALLEL_FOR))
llvm.add_symbol(_NUM_THREADS_CELL, ctypes.addressof(_NUM_THREADS))
llvm.add_symbol(_START, ctypes.cast(_start, ctypes.c_void_p).value)
