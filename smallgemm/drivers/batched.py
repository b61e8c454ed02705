"""Stacks of products with one shape: the batch loop runs in compiled code.

Each matrix of a stack is addressed by an element offset from the first one
(``offsets_*``, from NumPy broadcasting, computed by the caller), so
broadcast batch dimensions cost nothing and no operand is copied.  Every
product is computed exactly as a lone call would compute it, on one thread
or on many: with threads, either the products are the tasks (each computed
whole by the worker that takes it) or each product in turn uses every worker;
neither changes a sum.
"""

from numba import njit

from ..kernels.shared import UNPACKED_TASKS_PER_WORKER
from ..simd import address, advance, buffer_at, row_dots_rule, tile_cols, tile_rows
from ..simd.subroutine import subroutine
from ..simd.workers import on_workers
from .blocked import gemm_serial
from .parallel import claim, gemm_parallel, reset_counters, unpacked_parallel_product
from .unpacked import (
    SMALL_DONE,
    SMALL_PLANNED,
    SMALL_REFUSED,
    STREAM_SIZE,
    gemm_unpacked_stack,
    output_apart,
    small_product_route,
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


@njit(cache=True)
def small_stack_entry(
    shape, narrow, few, gemv, lane_sums, resident, kc, scratch, sums, max_volume, min_stream, few_rows,
    parallel_volume, product_overhead, alpha, beta, workers, a, b, c, offsets_a, offsets_b, offsets_c,
):
    """matmul's way in for two stacks along one batch axis (3-D a and b whose shapes match,
    ``offsets_*`` each matrix's first element): C[t] = alpha*A[t].B[t] + beta*C[t] for every
    t, one product after the other, when each is small (``unpacked.small_product_route``)
    and the stack is not worth ``workers`` threads (from ``parallel_volume`` multiply-adds in
    all, each product counted with ``product_overhead`` more: ``rules.stack_worth_threads``):
    SMALL_DONE; else SMALL_PLANNED, nothing computed, for ``strategies.run_batch``; or
    SMALL_REFUSED, nothing computed, for a C (an ``out=``) of another shape, with strides
    of no whole number of elements, or that may overlap A or B.

    The checks and the slicing of the first matrices cost more in Python than ten 16x16
    products.  The arguments before ``alpha`` are the same on every call of a prepared
    state, which binds them once; ``scratch`` and ``sums`` are its workspace's addresses.
    """
    count, m, k = a.shape
    n = b.shape[2]
    size = a.itemsize
    if c.shape[0] != count or c.shape[1] != m or c.shape[2] != n or not output_apart(c, a, b):
        return SMALL_REFUSED
    rs_a, cs_a, rs_b, cs_b = a.strides[1] // size, a.strides[2] // size, b.strides[1] // size, b.strides[2] // size
    pa = address(a)
    if small_product_route(narrow, m, n, k, cs_a, rs_b, cs_b, max_volume, min_stream, few_rows, pa) == SMALL_PLANNED:
        return SMALL_PLANNED
    if workers > 1 and count * (m * n * k + product_overhead) >= parallel_volume:
        return SMALL_PLANNED
    gemm_unpacked_stack(
        shape, narrow, few, row_dots_rule(gemv, lane_sums), resident, m, n, k, alpha, beta,
        pa, address(offsets_a), rs_a, cs_a, address(b), address(offsets_b), rs_b, cs_b,
        address(c), address(offsets_c), c.strides[1] // size, c.strides[2] // size, kc, buffer_at(scratch, a),
        buffer_at(sums, a), offsets_c.shape[0],
    )
    return SMALL_DONE


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
