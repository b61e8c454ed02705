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
    store_word,
    word_at,
    words_at,
)
from ..simd.subroutine import subroutine
from ..simd.workers import on_workers
from .blocked import gemm_serial
from .parallel import claim, gemm_parallel, reset_counters, unpacked_parallel_product
from .unpacked import (
    SMALL_DONE,
    SMALL_PLANNED,
    SMALL_REFUSED,
    STREAM_SIZE,
    byte_span,
    gemm_unpacked_stack,
    small_product_route,
    spans_meet,
)


@njit(cache=True)
def batch_entry(
    shape, narrow, few, gemv, lane_sums, resident, alpha, beta, a, b, c, offsets_a, offsets_b, offsets_c, unpacked,
    mc, nc, kc, abuf, bbuf, scratch, sums,
):
    """C[t] = alpha*A[t].B[t] + beta*C[t] for every t; a, b, c are the first matrices;
    ``lane_sums``: the row-dots rule's flag (``simd.row_dots_rule``)."""
    m, n, k, rs_a, cs_a, rs_b, cs_b, rs_c, cs_c = stack_geometry(a, b, c)
    stack_run(
        shape, narrow, few, row_dots_rule(gemv, lane_sums), resident, alpha, beta, m, n, k,
        address(a), rs_a, cs_a, address(b), rs_b, cs_b, address(c), rs_c, cs_c,
        address(offsets_a), address(offsets_b), address(offsets_c), offsets_c.shape[0], unpacked, mc, nc, kc,
        address(abuf), address(bbuf), address(scratch), address(sums),
    )


# The int64 values bound to a prepared state's ``stack_call`` builtin, in this order
# (``prepared.Prepared``): the row-dots rule's lane-wise flag; KC; the addresses of the
# workspace's scratch tile and sums; the small-product limits; the stack's limits for
# threads (``rules.stack_worth_threads``); the address of ``numpy.ndarray``, the one type of
# A, B and C the routine reads, and of ``True``; and the address of a buffer for the
# matrices' offsets, three runs of STACK_CALL_PRODUCTS.
STACK_CONTEXT = (
    "lane_sums", "kc", "scratch", "sums", "max_volume", "min_stream", "few_rows", "column_tiles",
    "parallel_volume", "product_overhead", "array_type", "true", "offsets",
)
(
    STACK_LANE_SUMS, STACK_KC, STACK_SCRATCH, STACK_SUMS, STACK_MAX_VOLUME, STACK_MIN_STREAM, STACK_FEW_ROWS,
    STACK_COLUMN_TILES, STACK_PARALLEL_VOLUME, STACK_PRODUCT_OVERHEAD, STACK_ARRAY_TYPE, STACK_TRUE, STACK_OFFSETS,
) = range(len(STACK_CONTEXT))
# The most products a stack may hold on the small way in: its offsets buffer's length.  A
# longer stack is planned (``strategies.compute``), whose Python costs ~3 us more: under 2 %.
STACK_CALL_PRODUCTS = 2048
# What ``stack_call`` is called with: A, B, C (3-D arrays of one float dtype) and whether
# threads may run (``True`` or ``False``).
STACK_ARGUMENTS = 4


@linked
def stack_call(shape, narrow, few, gemv, resident, like, context, arguments, count, answer):
    """matmul's way in for two stacks along one batch axis, called from Python as a builtin
    (``simd.fastcall``) with (A, B, C, threads): C[t] = A[t].B[t] for every t, one product
    after the other, when each is small (``unpacked.small_product_route``) and the stack
    is not worth the threads (``threads``: several workers may run; from
    ``parallel_volume`` multiply-adds in all, each product counted with
    ``product_overhead`` more: ``rules.stack_worth_threads``): SMALL_DONE; else
    SMALL_PLANNED, nothing computed, for ``strategies.compute``; or SMALL_REFUSED,
    nothing computed, for A, B or C that is not a 3-D ``ndarray`` (the caller checks the
    dimensions and dtypes of A and B), stacks whose shapes do not match, strides or an
    address of no whole number of elements, or a C (an ``out=``) of another shape or that
    may overlap A or B.  The checks cost more in Python than ten 16x16 products."""
    if count != STACK_ARGUMENTS:
        store_word(answer, SMALL_REFUSED)
        return
    objects = (word_at(arguments), word_at(arguments + 8), word_at(arguments + 16))
    array_type = word_at(context + 8 * STACK_ARRAY_TYPE)
    for obj in objects:
        if word_at(obj + OBJECT_TYPE) != array_type or int32_at(obj + ARRAY_NDIM) != 3:
            store_word(answer, SMALL_REFUSED)  # before reading a field that only arrays have
            return
    a_object, b_object, c_object = objects
    a_shape, b_shape = word_at(a_object + ARRAY_SHAPE), word_at(b_object + ARRAY_SHAPE)
    c_shape = word_at(c_object + ARRAY_SHAPE)
    products, m, k = word_at(a_shape), word_at(a_shape + 8), word_at(a_shape + 16)
    n = word_at(b_shape + 16)
    if (
        word_at(b_shape) != products
        or word_at(b_shape + 8) != k
        or word_at(c_shape) != products
        or word_at(c_shape + 8) != m
        or word_at(c_shape + 16) != n
        or products * m * n * k == 0
    ):
        store_word(answer, SMALL_REFUSED)
        return
    size = element_size(like)
    data = (word_at(a_object + ARRAY_DATA), word_at(b_object + ARRAY_DATA), word_at(c_object + ARRAY_DATA))
    strides = (
        word_at(a_object + ARRAY_STRIDES), word_at(b_object + ARRAY_STRIDES), word_at(c_object + ARRAY_STRIDES)
    )
    for i in range(3):
        if data[i] % size:
            store_word(answer, SMALL_REFUSED)
            return
        for d in range(3):
            if word_at(strides[i] + 8 * d) % size:
                store_word(answer, SMALL_REFUSED)
                return
    a_bytes = (word_at(strides[0]), word_at(strides[0] + 8), word_at(strides[0] + 16))
    b_bytes = (word_at(strides[1]), word_at(strides[1] + 8), word_at(strides[1] + 16))
    c_bytes = (word_at(strides[2]), word_at(strides[2] + 8), word_at(strides[2] + 16))
    c_span = byte_span(data[2], (products, m, n), c_bytes, size)
    if spans_meet(c_span, byte_span(data[0], (products, m, k), a_bytes, size)) or spans_meet(
        c_span, byte_span(data[1], (products, k, n), b_bytes, size)
    ):
        store_word(answer, SMALL_REFUSED)
        return
    rs_a, cs_a, rs_b, cs_b = a_bytes[1] // size, a_bytes[2] // size, b_bytes[1] // size, b_bytes[2] // size
    route = small_product_route(
        narrow, m, n, k, cs_a, rs_b, cs_b, word_at(context + 8 * STACK_MAX_VOLUME),
        word_at(context + 8 * STACK_MIN_STREAM), word_at(context + 8 * STACK_FEW_ROWS),
        word_at(context + 8 * STACK_COLUMN_TILES), like,
    )
    threads = word_at(arguments + 24) == word_at(context + 8 * STACK_TRUE)
    work = products * (m * n * k + word_at(context + 8 * STACK_PRODUCT_OVERHEAD))
    if (
        route == SMALL_PLANNED
        or (threads and work >= word_at(context + 8 * STACK_PARALLEL_VOLUME))
        or products > STACK_CALL_PRODUCTS
    ):
        store_word(answer, SMALL_PLANNED)
        return
    offsets = words_at(word_at(context + 8 * STACK_OFFSETS))
    for t in range(products):
        offsets[t] = t * (a_bytes[0] // size)
        offsets[STACK_CALL_PRODUCTS + t] = t * (b_bytes[0] // size)
        offsets[2 * STACK_CALL_PRODUCTS + t] = t * (c_bytes[0] // size)
    gemm_unpacked_stack(
        shape, narrow, few, row_dots_rule(gemv, word_at(context + 8 * STACK_LANE_SUMS) != 0), resident, m, n, k,
        one_of(like), zero_of(like), buffer_at(data[0], like), offsets, rs_a, cs_a,
        buffer_at(data[1], like), advance(offsets, STACK_CALL_PRODUCTS), rs_b, cs_b,
        buffer_at(data[2], like), advance(offsets, 2 * STACK_CALL_PRODUCTS), c_bytes[1] // size, c_bytes[2] // size,
        word_at(context + 8 * STACK_KC), buffer_at(word_at(context + 8 * STACK_SCRATCH), like),
        buffer_at(word_at(context + 8 * STACK_SUMS), like), products,
    )
    store_word(answer, SMALL_DONE)


stack_call_address = address_of(stack_call)


@njit(cache=True)
def small_stack_entry(shape, narrow, few, gemv, resident, like):
    """The address of ``stack_call`` for these tiles and ``like``'s dtype, linked first: the
    prepared state makes a builtin of it (``simd.fastcall``)."""
    unset = np.intp(0)
    return stack_call_address(shape, narrow, few, gemv, resident, address(like), unset, unset, unset, unset)


@subroutine(inline=True)
def stack_geometry(a, b, c):
    """(m, n, k, and the row and column strides of A, B and C in elements) of a stack's first product."""
    size = a.itemsize
    return (
        a.shape[0], b.shape[1], a.shape[1], a.strides[0] // size, a.strides[1] // size,
        b.strides[0] // size, b.strides[1] // size, c.strides[0] // size, c.strides[1] // size,
    )


@subroutine
def stack_run(
    shape, narrow, few, gemv, resident, alpha, beta, m, n, k, a, rs_a, cs_a, b, rs_b, cs_b, c, rs_c, cs_c,
    offsets_a, offsets_b, offsets_c, count, unpacked, mc, nc, kc, abuf, bbuf, scratch, sums,
):
    """``count`` products of a stack (or of a run of it) one after the other: the t-th
    reads A, B and C at ``offsets_*[t]`` elements from ``a``, ``b`` and ``c``."""
    if unpacked:
        gemm_unpacked_stack(
            shape, narrow, few, gemv, resident, m, n, k, alpha, beta, a, offsets_a, rs_a, cs_a,
            b, offsets_b, rs_b, cs_b, c, offsets_c, rs_c, cs_c, kc, scratch, sums, count,
        )
        return
    for t in range(count):
        gemm_serial(
            shape, m, n, k, alpha, beta, a, offsets_a[t], rs_a, cs_a, b, offsets_b[t], rs_b, cs_b,
            c, offsets_c[t], rs_c, cs_c, mc, nc, kc, abuf, bbuf, scratch, False,
        )


@njit(cache=True, nogil=True)  # the GIL released while it computes
def batch_tasks_entry(
    shape, narrow, few, gemv, lane_sums, resident, alpha, beta, a, b, c, offsets_a, offsets_b, offsets_c, unpacked,
    mc, nc, kc, workers, abuf, bbuf, scratch, sums, counter,
):
    """``batch_entry`` on ``workers`` workers, the products as tasks handed out by the
    task counters; each worker has its own A block, B slice, edge tile and sums."""
    count = offsets_c.shape[0]
    tasks = min(count, UNPACKED_TASKS_PER_WORKER * workers) if unpacked else count
    m, n, k, rs_a, cs_a, rs_b, cs_b, rs_c, cs_c = stack_geometry(a, b, c)
    reset_counters(address(counter), workers)
    batch_worker(
        workers, shape, narrow, few, row_dots_rule(gemv, lane_sums), resident, alpha, beta, m, n, k,
        address(a), rs_a, cs_a, address(b), rs_b, cs_b, address(c), rs_c, cs_c,
        address(offsets_a), address(offsets_b), address(offsets_c), count, tasks, unpacked, mc, nc, kc,
        address(abuf), address(bbuf), address(scratch), address(sums), address(counter),
    )


@on_workers
def batch_worker(
    w, workers, shape, narrow, few, gemv, resident, alpha, beta, m, n, k, a, rs_a, cs_a, b, rs_b, cs_b, c, rs_c, cs_c,
    offsets_a, offsets_b, offsets_c, count, tasks, unpacked, mc, nc, kc, abuf, bbuf, scratch, sums, counter,
):
    """One worker of ``batch_tasks_entry``: runs of the stack's products, with its own workspace."""
    my_abuf = advance(abuf, w * mc * kc)
    my_bbuf = advance(bbuf, w * kc * nc)
    my_scratch = advance(scratch, w * tile_rows(shape) * tile_cols(shape, scratch))
    my_sums = advance(sums, w * STREAM_SIZE)
    task, turn = claim(counter, tasks, workers, w, 0)
    while task >= 0:
        first, end = task * count // tasks, (task + 1) * count // tasks
        stack_run(
            shape, narrow, few, gemv, resident, alpha, beta, m, n, k, a, rs_a, cs_a, b, rs_b, cs_b, c, rs_c, cs_c,
            advance(offsets_a, first), advance(offsets_b, first), advance(offsets_c, first), end - first, unpacked,
            mc, nc, kc, my_abuf, my_bbuf, my_scratch, my_sums,
        )
        task, turn = claim(counter, tasks, workers, w, turn)


@njit(cache=True, nogil=True)  # as batch_tasks_entry
def batch_each_parallel_entry(
    shape, narrow, few, gemv, lane_sums, resident, alpha, beta, one, zero, a, b, c, offsets_a, offsets_b, offsets_c,
    unpacked, mc, nc, kc, shared_rows, workers, abuf, bbuf, scratch, sums, partial, counter, log_b, log_rows,
):
    """The products of a stack one after the other, each on all ``workers`` workers (the
    parallel drivers a lone product takes): for fewer large products than the workers
    could share out evenly.  ``partial``: split-K room for one product; ``log_*``: the
    tests' task logs (empty in normal calls: ``tasks.record``)."""
    m, n, k, rs_a, cs_a, rs_b, cs_b, rs_c, cs_c = stack_geometry(a, b, c)
    rule = row_dots_rule(gemv, lane_sums)
    for t in range(offsets_c.shape[0]):
        pa = advance(address(a), offsets_a[t])
        pb = advance(address(b), offsets_b[t])
        pc = advance(address(c), offsets_c[t])
        if unpacked:
            unpacked_parallel_product(
                shape, narrow, few, rule, resident, m, n, k, alpha, beta, one, zero, pa, rs_a, cs_a, pb, rs_b, cs_b,
                pc, rs_c, cs_c, kc, workers, address(scratch), address(sums), address(partial), partial.shape[0],
                address(counter),
            )
        else:
            gemm_parallel(
                shape, m, n, k, alpha, beta, pa, rs_a, cs_a, pb, rs_b, cs_b, pc, rs_c, cs_c,
                mc, nc, kc, shared_rows, workers, address(abuf), address(bbuf), address(scratch), address(counter),
                address(log_b), log_b.shape[0], address(log_rows), log_rows.shape[0], False,
            )
