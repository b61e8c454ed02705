"""Stacks of products with one shape: the batch loop runs in compiled code.

Each matrix of a stack is addressed by an element offset from the first one
(``offsets_*``, from NumPy broadcasting, computed by the caller), so
broadcast batch dimensions cost nothing and no operand is copied.  Every
product is computed exactly as a lone call would compute it, on one thread
or on many: with threads, either the products are the tasks (each computed
whole by the worker that takes it) or each product in turn uses every worker;
neither changes a sum.
"""

import numpy as np
from numba import njit

from ..kernels.shared import UNPACKED_TASKS_PER_WORKER
from ..simd import (
    address,
    advance,
    buffer_at,
    element_size,
    one_of,
    row_dots_rule,
    tile_cols,
    tile_rows,
    zero_of,
)
from ..simd.fastcall import address_of
from ..simd.linked import linked
from ..simd.objects import (
    ARRAY_DATA,
    ARRAY_NDIM,
    ARRAY_SHAPE,
    ARRAY_STRIDES,
    OBJECT_TYPE,
    int32_at,
    new_array,
    store_word,
    word_at,
    words_at,
)
from ..simd.records import Tiles, Workspace, later_matrices, matrix_of, product, stack
from ..simd.subroutine import subroutine
from ..simd.workers import on_workers
from .arguments import kernel_tiles, stack_operands, task_logs, workspace_of
from .blocked import gemm_serial
from .parallel import claim, gemm_parallel, reset_counters, unpacked_parallel_product
from .unpacked import (
    SMALL_DONE,
    SMALL_MADE,
    SMALL_PLANNED,
    SMALL_REFUSED,
    SMALL_WAY_CONTEXT,
    STREAM_SIZE,
    byte_span,
    gemm_unpacked_stack,
    small_product_route,
    spans_meet,
    workspace_at,
)


@njit(cache=True)
def batch_entry(tiles, a, b, c, offsets, unpacked, blocks, ws):
    """C[t] = A[t].B[t] for every t: ``a``, ``b``, ``c`` are the first matrices, ``offsets``
    the matrices' element offsets from them (three 1-D arrays); ``tiles``: the prepared state's
    (``arguments.kernel_tiles``), ``blocks`` its ``Blocks``, ``ws`` its workspace."""
    x, y, z = stack_operands(a, b, c, offsets)
    count = offsets[2].shape[0]
    stack_run(kernel_tiles(tiles), stack_product(a, b), x, y, z, count, unpacked, blocks, workspace_of(ws))


# The int64 values bound to a prepared state's ``stack_call`` builtin, in this order
# (``prepared.Prepared``): the small ways in's (``unpacked.SMALL_WAY_CONTEXT``); the stack's
# limits for threads (``stack_shared_out``); the address of ``True``; and the address of a
# buffer for the matrices' offsets, three runs of STACK_CALL_PRODUCTS.
STACK_CONTEXT = (*SMALL_WAY_CONTEXT, "parallel_volume", "product_overhead", "true", "offsets")
(
    STACK_LANE_SUMS,
    STACK_KC,
    STACK_ABUF,
    STACK_BBUF,
    STACK_SCRATCH,
    STACK_SUMS,
    STACK_MAX_VOLUME,
    STACK_MIN_STREAM,
    STACK_FEW_ROWS,
    STACK_NARROW_MIN_DEPTH,
    STACK_NARROW_MIN_A,
    STACK_ARRAY_TYPE,
    STACK_NEW_ARRAY,
    STACK_DESCR,
    STACK_PARALLEL_VOLUME,
    STACK_PRODUCT_OVERHEAD,
    STACK_TRUE,
    STACK_OFFSETS,
) = range(len(STACK_CONTEXT))
# The most products a stack may hold on the small way in: its offsets buffer's length.  A
# longer stack is planned (``strategies.compute``), whose Python costs ~3 us more: under 2 %.
STACK_CALL_PRODUCTS = 2048
# What ``stack_call`` is called with: A, B, C (3-D arrays of one float dtype) and whether
# threads may run (``True`` or ``False``); or A, B and that, to make C.
STACK_ARGUMENTS = 4
STACK_MAKE_ARGUMENTS = 3


@subroutine(inline=True)
def stack_shared_out(count, volume, product_overhead, parallel_volume):
    """Whether a stack of ``count`` products of ``volume`` multiply-adds each is worth sharing
    out whole between threads: its multiply-adds, each product counted with
    ``product_overhead`` more, from ``parallel_volume`` (the kernel's
    ``stack_product_overhead`` and ``parallel_min_stack_volume``).  The rule of the compiled
    small way in (``stack_call``) and of the strategy table's stack rows, which run this
    source as Python (``rules.stack_worth_threads``)."""
    return count * (volume + product_overhead) >= parallel_volume


@linked
def stack_call(shape, narrow, few, gemv, resident, like, context, arguments, count, answer):
    """matmul's way in for two stacks along one batch axis, called from Python as a builtin
    (``simd.fastcall``) with (A, B, C, threads): C[t] = A[t].B[t] for every t, one product
    after the other, when each is small (``unpacked.small_product_route``, which reads ``A.T @
    x`` swapped, as for a lone product) and the stack
    is not worth the threads (``threads``: several workers may run; from
    ``parallel_volume`` multiply-adds in all, each product counted with
    ``product_overhead`` more: ``stack_shared_out``): SMALL_DONE; else
    SMALL_PLANNED, nothing computed, for ``strategies.compute``; or SMALL_REFUSED,
    nothing computed, for A, B or C that is not a 3-D ``ndarray`` (the caller checks the
    dimensions and dtypes of A and B), stacks whose shapes do not match, strides or an
    address of no whole number of elements, or a C (an ``out=``) of another shape or that
    may overlap A or B.  The checks cost more in Python than ten 16x16 products.  Called
    with (A, B, threads) (STACK_MAKE_ARGUMENTS), it decides the same and makes C itself,
    C-ordered, once it knows the stack is computed here: the builtin then returns it
    (SMALL_MADE)."""
    makes = count == STACK_MAKE_ARGUMENTS
    if count != STACK_ARGUMENTS and not makes:
        store_word(answer, SMALL_REFUSED)
        return
    a_object, b_object = word_at(arguments), word_at(arguments + 8)
    c_object = a_object if makes else word_at(arguments + 16)  # C read once made, below
    threads = word_at(arguments + (16 if makes else 24)) == word_at(context + 8 * STACK_TRUE)
    array_type = word_at(context + 8 * STACK_ARRAY_TYPE)
    for obj in (a_object, b_object, c_object):
        if word_at(obj + OBJECT_TYPE) != array_type or int32_at(obj + ARRAY_NDIM) != 3:
            store_word(answer, SMALL_REFUSED)  # before reading a field that only arrays have
            return
    a_shape, b_shape = word_at(a_object + ARRAY_SHAPE), word_at(b_object + ARRAY_SHAPE)
    c_shape = word_at(c_object + ARRAY_SHAPE)
    products, m, k = word_at(a_shape), word_at(a_shape + 8), word_at(a_shape + 16)
    n = word_at(b_shape + 16)
    c_fits = makes or (
        word_at(c_shape) == products and word_at(c_shape + 8) == m and word_at(c_shape + 16) == n
    )
    if word_at(b_shape) != products or word_at(b_shape + 8) != k or not c_fits or products * m * n * k == 0:
        store_word(answer, SMALL_REFUSED)
        return
    size = element_size(like)
    data = (word_at(a_object + ARRAY_DATA), word_at(b_object + ARRAY_DATA), word_at(c_object + ARRAY_DATA))
    strides = (
        word_at(a_object + ARRAY_STRIDES),
        word_at(b_object + ARRAY_STRIDES),
        word_at(c_object + ARRAY_STRIDES),
    )
    for i in range(2 if makes else 3):
        if data[i] % size:
            store_word(answer, SMALL_REFUSED)
            return
        for d in range(3):
            if word_at(strides[i] + 8 * d) % size:
                store_word(answer, SMALL_REFUSED)
                return
    a_bytes = (word_at(strides[0]), word_at(strides[0] + 8), word_at(strides[0] + 16))
    b_bytes = (word_at(strides[1]), word_at(strides[1] + 8), word_at(strides[1] + 16))
    if makes:
        c_bytes = (m * n * size, n * size, size)
    else:
        c_bytes = (word_at(strides[2]), word_at(strides[2] + 8), word_at(strides[2] + 16))
        c_span = byte_span(data[2], (products, m, n), c_bytes, size)
        if spans_meet(c_span, byte_span(data[0], (products, m, k), a_bytes, size)) or spans_meet(
            c_span, byte_span(data[1], (products, k, n), b_bytes, size)
        ):
            store_word(answer, SMALL_REFUSED)
            return
    rs_a, cs_a, rs_b, cs_b = a_bytes[1] // size, a_bytes[2] // size, b_bytes[1] // size, b_bytes[2] // size
    limits = context + 8 * STACK_MAX_VOLUME
    chained = False  # C = A.B
    route, swapped = small_product_route(narrow, m, n, k, rs_a, cs_a, rs_b, cs_b, limits, chained, like)
    shared_out = stack_shared_out(
        products,
        m * n * k,
        word_at(context + 8 * STACK_PRODUCT_OVERHEAD),
        word_at(context + 8 * STACK_PARALLEL_VOLUME),
    )
    if route == SMALL_PLANNED or (threads and shared_out) or products > STACK_CALL_PRODUCTS:
        store_word(answer, SMALL_PLANNED)
        return
    c_data = data[2]
    if makes:
        c_object = new_array(
            word_at(context + 8 * STACK_NEW_ARRAY),
            array_type,
            word_at(context + 8 * STACK_DESCR),
            3,
            products,
            m,
            n,
        )
        store_word(answer, SMALL_MADE)
        store_word(answer + 8, c_object)
        if c_object == 0:
            return  # the builtin raises the exception NumPy set
        c_data = word_at(c_object + ARRAY_DATA)
    offsets = words_at(word_at(context + 8 * STACK_OFFSETS))
    for t in range(products):
        offsets[t] = t * (a_bytes[0] // size)
        offsets[STACK_CALL_PRODUCTS + t] = t * (b_bytes[0] // size)
        offsets[2 * STACK_CALL_PRODUCTS + t] = t * (c_bytes[0] // size)
    tiles = Tiles(
        shape, narrow, few, row_dots_rule(gemv, word_at(context + 8 * STACK_LANE_SUMS) != 0), resident
    )
    a_data, a_offsets, b_data, b_offsets = data[0], offsets, data[1], advance(offsets, STACK_CALL_PRODUCTS)
    rs_c, cs_c = c_bytes[1] // size, c_bytes[2] // size
    if swapped:  # C^T = B^T A^T: each element the same chain of FMAs
        m, n, a_data, a_offsets, b_data, b_offsets = n, m, b_data, b_offsets, a_data, a_offsets
        rs_a, cs_a, rs_b, cs_b, rs_c, cs_c = cs_b, rs_b, cs_a, rs_a, cs_c, rs_c
    gemm_unpacked_stack(
        tiles,
        m,
        n,
        k,
        one_of(like),
        zero_of(like),
        stack(buffer_at(a_data, like), a_offsets, rs_a, cs_a),
        stack(buffer_at(b_data, like), b_offsets, rs_b, cs_b),
        stack(buffer_at(c_data, like), advance(offsets, 2 * STACK_CALL_PRODUCTS), rs_c, cs_c),
        word_at(context + 8 * STACK_KC),
        workspace_at(context + 8 * STACK_ABUF, like),
        products,
    )
    if not makes:
        store_word(answer, SMALL_DONE)


stack_call_address = address_of(stack_call)


@njit(cache=True)
def small_stack_entry(shape, narrow, few, gemv, resident, like):
    """The address of ``stack_call`` for these tiles and ``like``'s dtype, linked first: the
    prepared state makes a builtin of it (``simd.fastcall``)."""
    unset = np.intp(0)
    return stack_call_address(shape, narrow, few, gemv, resident, address(like), unset, unset, unset, unset)


@subroutine(inline=True)
def stack_product(a, b):
    """The ``Product`` C = A.B of a stack whose first matrices are the 2-D arrays ``a`` and ``b``."""
    return product(a.shape[0], b.shape[1], a.shape[1], one_of(address(a)), zero_of(address(a)))


@subroutine
def stack_run(tiles, problem, a, b, c, count, unpacked, blocks, work):
    """``count`` products of a stack (or of a run of it) one after the other, each ``problem``
    (a ``Product``) from the ``Stack`` records ``a``, ``b``, ``c``."""
    m, n, k, alpha, beta = problem
    if unpacked:
        gemm_unpacked_stack(tiles, m, n, k, alpha, beta, a, b, c, blocks.kc, work, count)
        return
    for t in range(count):
        gemm_serial(
            tiles.main, problem, matrix_of(a, t), matrix_of(b, t), matrix_of(c, t), blocks, work, False
        )


@njit(cache=True, nogil=True)  # the GIL released while it computes
def batch_tasks_entry(tiles, a, b, c, offsets, unpacked, blocks, workers, ws):
    """``batch_entry`` on ``workers`` workers, the products as tasks handed out by the
    task counters; each worker has its own A block, B slice, edge tile and sums."""
    x, y, z = stack_operands(a, b, c, offsets)
    count, counter = offsets[2].shape[0], address(ws.counter)
    reset_counters(counter, workers)
    problem = stack_product(a, b)
    batch_worker(
        workers, kernel_tiles(tiles), problem, x, y, z, count, unpacked, blocks, workspace_of(ws), counter
    )


@subroutine
def stack_tasks(count, unpacked, workers):
    """Tasks a stack of ``count`` products is cut into: runs of products on the unpacked tiles
    (UNPACKED_TASKS_PER_WORKER a worker), else one product a task."""
    return min(count, UNPACKED_TASKS_PER_WORKER * workers) if unpacked else count


@on_workers
def batch_worker(w, workers, tiles, problem, a, b, c, count, unpacked, blocks, work, counter):
    """One worker of ``batch_tasks_entry``: runs of the stack's products, with its own workspace."""
    mine = Workspace(
        advance(work.abuf, w * blocks.mc * blocks.kc),
        advance(work.bbuf, w * blocks.kc * blocks.nc),
        advance(work.scratch, w * tile_rows(tiles.main) * tile_cols(tiles.main, work.scratch)),
        advance(work.sums, w * STREAM_SIZE),
    )
    tasks = stack_tasks(count, unpacked, workers)
    task, turn = claim(counter, tasks, workers, w, 0)
    while task >= 0:
        first, end = task * count // tasks, (task + 1) * count // tasks
        stack_run(
            tiles,
            problem,
            later_matrices(a, first),
            later_matrices(b, first),
            later_matrices(c, first),
            end - first,
            unpacked,
            blocks,
            mine,
        )
        task, turn = claim(counter, tasks, workers, w, turn)


@njit(cache=True, nogil=True)  # as batch_tasks_entry
def batch_each_parallel_entry(
    tiles, a, b, c, offsets, unpacked, blocks, shared_rows, workers, ws, partial, logs
):
    """The products of a stack one after the other, each on all ``workers`` workers (the
    parallel drivers a lone product takes): for fewer large products than the workers
    could share out evenly.  ``partial``: split-K room for one product; ``logs``: the
    tests' task logs (empty in normal calls: ``tasks.record``)."""
    kernel = kernel_tiles(tiles)
    problem = stack_product(a, b)
    stacks = stack_operands(a, b, c, offsets)
    work = workspace_of(ws)
    for t in range(offsets[2].shape[0]):
        x, y, z = matrix_of(stacks[0], t), matrix_of(stacks[1], t), matrix_of(stacks[2], t)
        if unpacked:
            unpacked_parallel_product(
                kernel,
                problem,
                x,
                y,
                z,
                blocks.kc,
                workers,
                work,
                address(partial),
                partial.shape[0],
                address(ws.counter),
            )
        else:
            gemm_parallel(
                kernel.main,
                problem,
                x,
                y,
                z,
                blocks,
                shared_rows,
                workers,
                work,
                address(ws.counter),
                task_logs(logs),
                False,
            )
