"""Few rows: the row stream, GEMV and narrow products, on one thread and several."""

import dataclasses

import numpy as np
import pytest
from conftest import b_layouts, blocked_product, configured, padded_fmas, random_matrix
from reference import assert_close, chain_reference

import smallgemm
from smallgemm import simd
from smallgemm.drivers import unpacked
from smallgemm.kernels import NEVER, BySize, kernel_by_name, shared
from smallgemm.plan import blocking, in_force, rules, runners

# The AVX-512 kernel's thresholds for requests ahead: products past them run on every kernel,
# each requesting ahead or not by its own settings, with the same bits.
ROW_FETCH = kernel_by_name("avx512").gemv.row_fetch
TRANSPOSED_FETCH_MIN_BYTES = kernel_by_name("avx512").few.stream.transposed_fetch_min_bytes


def recorded_workers(monkeypatch, runner: str, position: int) -> list[int]:
    """The worker counts (the argument at ``position``) of the calls to ``runners.<runner>``
    made while the test runs."""
    runs = []
    original = getattr(runners, runner)

    def recording(*args, **kwargs):
        runs.append(args[position])
        return original(*args, **kwargs)

    monkeypatch.setattr(runners, runner, recording)
    return runs


@pytest.fixture
def parallel_runs(monkeypatch):
    """The worker counts of the threaded unpacked products run while the test runs."""
    return recorded_workers(monkeypatch, "run_unpacked_parallel", -1)


def both_sides(threshold: int, k: int) -> tuple[tuple[int, bool], tuple[int, bool]]:
    """(count, whether threads are due) for the most rows or columns of depth ``k`` below
    ``threshold`` elements, then the fewest at or past it."""
    return ((threshold - 1) // k, False), (-(-threshold // k), True)


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 8, 13, 16, 17, 33, 40])
def test_few_rows_against_reference(kernel, dtype, m):
    rng = np.random.default_rng(m)
    k, n = 37, 3 * kernel.few.cols(dtype.itemsize) + 5  # edge columns in every tile shape
    x = random_matrix(rng, (m, k), dtype)
    for _name, w in b_layouts(rng, k, n, dtype):
        assert_close(smallgemm.matmul(x, w), 1.0, x, w)


@pytest.mark.parametrize("m", [2, 13, 17, 32])
def test_few_rows_within_one_main_tile(kernel, dtype, m):
    """Few rows whose output fits one main tile take the main tile, not the few-rows one:
    right against the reference, and the bits of the blocked driver and of each row alone."""
    rng = np.random.default_rng(m)
    narrow, wide = kernel.narrow.cols(dtype.itemsize), kernel.nr(dtype)
    for n in sorted({narrow + 1, wide - 1, wide}):
        k = 37
        x = random_matrix(rng, (m, k), dtype)
        w = random_matrix(rng, (k, n), dtype)
        got = smallgemm.matmul(x, w)
        assert_close(got, 1.0, x, w)
        for i in (0, m - 1):
            np.testing.assert_array_equal(
                smallgemm.matmul(x[i : i + 1], w), got[i : i + 1], err_msg=f"n {n} row {i}"
            )
        np.testing.assert_array_equal(blocked_product(x, w), got, err_msg=f"n {n} blocked")


def test_gemv_across_column_chunks(kernel, dtype):
    """One row with B wider than the GEMV chunk: every chunk right, and the bits of the packed path."""
    rng = np.random.default_rng(4)
    k, n = 70, shared.GEMV_CHUNK + 37
    w = random_matrix(rng, (k, n), dtype)
    big = random_matrix(rng, (400, k), dtype)  # past the unpacked sizes: the blocked driver
    full = smallgemm.matmul(big, w)
    got = smallgemm.matmul(big[3], w)
    assert_close(got[None, :], 1.0, big[3:4], w)
    np.testing.assert_array_equal(got, full[3])
    c = random_matrix(rng, (1, n), dtype)
    assert_close(smallgemm.gemm(2.0, big[3:4], w, beta=-1.0, c=c), 2.0, big[3:4], w, -1.0, c)


@pytest.mark.parametrize("k", [1, simd.AXPY_ROWS - 1, simd.AXPY_ROWS, 2 * simd.AXPY_ROWS + 3, 61])
def test_gemv_rows_of_b_in_groups_across_kc_blocks(kernel, dtype, k):
    """One row streams B's rows a group at a time: KC blocks that end inside a group, a
    depth shorter than a group, edge columns: right, and the blocked driver's bits."""
    rng = np.random.default_rng(k)
    lanes = kernel.gemv.lanes(dtype.itemsize)
    n = 3 * lanes + 5
    in_force.set_block_sizes(
        kernel, dtype, blocking.BlockSizes(mc=kernel.mr(), nc=kernel.nr(dtype), kc=2 * simd.AXPY_ROWS + 1)
    )
    try:
        x = random_matrix(rng, (2, k), dtype)
        for name, w in (
            ("row_major", random_matrix(rng, (k, n), dtype)),
            ("padded rows", random_matrix(rng, (k, n + 11), dtype)[:, 4 : 4 + n]),
        ):
            got = smallgemm.matmul(x[:1], w)
            assert_close(got, 1.0, x[:1], w)
            np.testing.assert_array_equal(got, blocked_product(x, w)[:1], err_msg=name)
            c = random_matrix(rng, (1, n), dtype)
            assert_close(smallgemm.gemm(0.5, x[:1], w, beta=3.0, c=c), 0.5, x[:1], w, 3.0, c)
            strided = random_matrix(rng, (1, 2 * k), dtype)[:, ::-2]  # a row of A read with stride -2
            np.testing.assert_array_equal(
                smallgemm.matmul(strided, w), blocked_product(np.vstack([strided] * 2), w)[:1], err_msg=name
            )
            assert_close(smallgemm.matmul(strided, w), 1.0, strided, w)
    finally:
        in_force.set_block_sizes(kernel, dtype, None)


def test_gemv_on_a_b_past_the_fetch_threshold(kernel, dtype):
    """A B large enough for the single-row stream to request rows ahead (512-bit kernels;
    the others do not): the same bits."""
    rng = np.random.default_rng(8)
    n = 4100
    k = ROW_FETCH.min_bytes // (n * dtype.itemsize) + 3
    x = random_matrix(rng, (2, k), dtype)
    w = random_matrix(rng, (k, n), dtype)
    with smallgemm.num_threads(1):  # on more, each worker streams a part below the threshold
        got = smallgemm.matmul(x[0], w)
    assert_close(got[None, :], 1.0, x[:1], w)
    np.testing.assert_array_equal(got, blocked_product(x, w)[0])
    with smallgemm.num_threads(3):
        np.testing.assert_array_equal(smallgemm.matmul(x[0], w), got)


@pytest.mark.parametrize("kc", [None, 2 * simd.AXPY_ROWS_WIDE + 3])
def test_gemv_on_a_b_past_the_wide_group_threshold(kernel, dtype, kc):
    """A B large enough for the single-row stream to add its rows in wide groups (512-bit
    kernels; the others keep groups of AXPY_ROWS): KC blocks that end inside a group, edge
    columns; right, and the bits of the blocked driver."""
    rng = np.random.default_rng(9)
    n = shared.GEMV_CHUNK + 3  # a second chunk of edge columns
    k = ROW_FETCH.wide_min_bytes // (n * dtype.itemsize) + 5
    assert n * k * dtype.itemsize >= ROW_FETCH.wide_min_bytes and k % simd.AXPY_ROWS_WIDE
    x = random_matrix(rng, (2, k), dtype)
    w = random_matrix(rng, (k, n), dtype)
    if kc is not None:
        in_force.set_block_sizes(
            kernel, dtype, blocking.BlockSizes(mc=kernel.mr(), nc=kernel.nr(dtype), kc=kc)
        )
    try:
        with smallgemm.num_threads(1):  # on more, each worker streams a part below the threshold
            got = smallgemm.matmul(x[0], w)
            c = random_matrix(rng, (1, n), dtype)
            assert_close(smallgemm.gemm(0.5, x[:1], w, beta=3.0, c=c), 0.5, x[:1], w, 3.0, c)
            backwards = np.ascontiguousarray(x[0, ::-1])[::-1]  # the same row read with stride -1
            np.testing.assert_array_equal(smallgemm.matmul(backwards, w), got)
        assert_close(got[None, :], 1.0, x[:1], w)
        np.testing.assert_array_equal(got, blocked_product(x, w)[0])
        for threads in (2, 3):
            with smallgemm.num_threads(threads):
                np.testing.assert_array_equal(smallgemm.matmul(x[0], w), got, err_msg=f"{threads} threads")
    finally:
        in_force.set_block_sizes(kernel, dtype, None)


def narrow_operands(rng, kernel, dtype, n, large):
    """(a, b) of a product narrow enough to be turned over: past turned_narrow_min_a (where the
    kernel turns such a product at all), and past the unpacked volume (the planner's way in)
    when ``large``, else within it (the small path's)."""
    config = kernel.config
    min_a = config.turned_narrow_min_a.of(dtype.itemsize)
    k = config.turned_narrow_min_depth + 5
    if min_a < NEVER:
        k = max(k, -(-min_a // 300))
    m = config.unpacked_max_volume.of(dtype.itemsize) // (n * k) + 7 if large else 300
    return random_matrix(rng, (m, k), dtype), random_matrix(rng, (k, n), dtype)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 9])
@pytest.mark.parametrize("large", [False, True], ids=["small path", "planner"])
def test_narrow_products_turned_over_give_the_narrow_tile_bits(kernel, dtype, n, large):
    """A C at most half the narrow tile wide is computed turned over (few rows times a
    transposed A): right, and the bits of the narrow tile, of the blocked driver, of each
    row alone and of any thread count; through matmul and gemm (alpha, beta, C's layouts)."""
    rng = np.random.default_rng(n)
    a, b = narrow_operands(rng, kernel, dtype, n, large)
    narrow_cols = kernel.narrow.cols(dtype.itemsize)
    turned = 2 * n <= narrow_cols and kernel.config.turned_narrow_min_a.of(dtype.itemsize) < NEVER
    assert rules.turns_narrow(kernel.config, a.shape[0], n, a, narrow_cols) == turned
    with smallgemm.num_threads(1):
        got = smallgemm.matmul(a, b)
        with configured(turned_narrow_min_depth=a.shape[1] + 1):  # not turned
            np.testing.assert_array_equal(smallgemm.matmul(a, b), got)
        for i in (0, a.shape[0] // 2, a.shape[0] - 1):
            np.testing.assert_array_equal(smallgemm.matmul(a[i], b), got[i], err_msg=f"row {i}")
        for order in ("C", "F"):
            c = random_matrix(rng, got.shape, dtype, order)
            assert_close(smallgemm.gemm(0.5, a, b, beta=-2.0, c=c), 0.5, a, b, -2.0, c)
        padded = random_matrix(rng, (a.shape[0], a.shape[1] + 3), dtype)[
            :, 1:-2
        ]  # rows 3 elements apart more
        padded[...] = a
        np.testing.assert_array_equal(smallgemm.matmul(padded, b), got)
        np.testing.assert_array_equal(smallgemm.matmul(a[::-1], b), got[::-1])  # rows read backwards
        same_rows = np.broadcast_to(a[3], a.shape)  # a zero row stride
        np.testing.assert_array_equal(smallgemm.matmul(same_rows, b), np.broadcast_to(got[3], got.shape))
    assert_close(got, 1.0, a, b)
    np.testing.assert_array_equal(blocked_product(a, b), got)
    for threads in (2, 3):
        with smallgemm.num_threads(threads):
            np.testing.assert_array_equal(smallgemm.matmul(a, b), got, err_msg=f"{threads} threads")


def test_narrow_products_in_a_stack_are_turned_over_alike(kernel, dtype):
    """A stack of narrow products: each product the bits of the same product alone."""
    rng = np.random.default_rng(5)
    a, b = narrow_operands(rng, kernel, dtype, 3, False)
    stack_a = np.stack([a, a[::-1], 2 * a])
    stack_b = np.stack([b, b[::-1], -b])
    got = smallgemm.matmul(stack_a, stack_b)
    for t in range(3):
        np.testing.assert_array_equal(
            got[t], smallgemm.matmul(stack_a[t], stack_b[t]), err_msg=f"product {t}"
        )


@pytest.mark.parametrize("transposed", [False, True], ids=["row_major", "transposed"])
@pytest.mark.parametrize("m", [2, 5, 17, 32])
def test_few_rows_stream_across_column_chunks_and_row_groups(kernel, dtype, m, transposed):
    """Several column chunks of the stream buffer and several groups of B rows per KC
    block: the result matches the reference and, bitwise, the rows of a packed product.
    A transposed float32 B is large enough for the row tiles to request its next strips
    (where the panel's runs of W's rows are short enough: the avx512 kernel's)."""
    rng = np.random.default_rng(m)
    cols, size = kernel.few.cols(dtype.itemsize), dtype.itemsize
    strip_bytes = shared.TRANSPOSED_PANEL_BYTES if transposed else kernel.few.stream.strip_bytes
    group = unpacked.strip_rows(strip_bytes, cols, size)
    k, n = 3 * group + 5, shared.STREAM_COLS + 70
    assert not transposed or n * k * 4 > kernel.few.stream.transposed_fetch_min_bytes
    # Several groups inside one KC block, whatever KC the host's L1 gives this kernel.
    sizes = in_force.block_sizes(kernel, dtype)
    in_force.set_block_sizes(kernel, dtype, dataclasses.replace(sizes, kc=max(sizes.kc, 4 * group)))
    try:
        w = random_matrix(rng, (n, k), dtype).T if transposed else random_matrix(rng, (k, n), dtype)
        big = random_matrix(rng, (400, k), dtype)  # past the unpacked sizes: the blocked driver
        full = smallgemm.matmul(big, w)
        x = big[7 : 7 + m]
        got = smallgemm.matmul(x, w)
        assert_close(got, 1.0, x, w)
        np.testing.assert_array_equal(got, full[7 : 7 + m])
        c = random_matrix(rng, (m, n), dtype)
        assert_close(smallgemm.gemm(-0.5, x, w, beta=2.0, c=c), -0.5, x, w, 2.0, c)
    finally:
        in_force.set_block_sizes(kernel, dtype, None)


@pytest.mark.parametrize("taller", [False, True], ids=["one row tile", "two row tiles"])
def test_a_row_stream_from_memory_takes_short_groups_with_the_same_bits(kernel, dtype, taller):
    """Few rows times a row-major B whose rows span STREAM_FROM_MEMORY_MIN_BYTES, and the
    few-rows tile's ``fetch_min_bytes``: one row tile takes its B rows STREAM_FROM_MEMORY_ROWS at
    a time and requests strips ahead (two row tiles keep the long groups); right against the
    reference, and the bits of the blocked driver, of each row alone and of every thread count."""
    rng = np.random.default_rng(5)
    size = dtype.itemsize
    m = kernel.few.rows + (1 if taller else 0)
    k = 2 * in_force.block_sizes(kernel, dtype).kc + 5  # three KC blocks, each several groups
    span = max(shared.STREAM_FROM_MEMORY_MIN_BYTES, kernel.few.stream.fetch_min_bytes)
    n = span // (k * size) + 3  # edge columns
    x = random_matrix(rng, (m, k), dtype)
    w = random_matrix(rng, (k, n), dtype)
    assert k * n * size >= span
    with smallgemm.num_threads(1):
        got = smallgemm.matmul(x, w)
    assert_close(got, 1.0, x, w)
    np.testing.assert_array_equal(blocked_product(x, w), got)
    for i in (0, m - 1):
        np.testing.assert_array_equal(smallgemm.matmul(x[i], w), got[i], err_msg=f"row {i} alone")
    for threads in (2, 3):
        with smallgemm.num_threads(threads):
            np.testing.assert_array_equal(smallgemm.matmul(x, w), got, err_msg=f"{threads} threads")


@pytest.mark.parametrize("transposed", [False, True], ids=["row_major", "transposed"])
@pytest.mark.parametrize("m", [1, 2, 4])
def test_few_rows_with_a_large_b_use_the_workers_with_the_same_bits(
    kernel, dtype, m, transposed, parallel_runs
):
    """Below the parallel volume, a few-rows product whose B is large still streams B on
    every worker (it is memory-bound); the bits do not depend on the thread count."""
    rng = np.random.default_rng(m)
    config = kernel.config
    row_stream = m == 1 and not transposed
    min_stream = (config.parallel_min_row_stream if row_stream else config.parallel_min_stream).of(
        dtype.itemsize
    )
    k, n = 300, min_stream // 300 + 50
    assert m * n * k < config.parallel_min_volume.of(dtype.itemsize)
    x = random_matrix(rng, (m, k), dtype)
    w = random_matrix(rng, (n, k), dtype).T if transposed else random_matrix(rng, (k, n), dtype)
    results = []
    for threads in (1, 2, 3, 8):
        with smallgemm.num_threads(threads):
            results.append(smallgemm.matmul(x, w))
    assert parallel_runs == [2, 3, 8]
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    assert_close(results[0], 1.0, x, w)


def test_one_row_times_rows_of_b_takes_threads_from_the_kernels_row_stream(kernel, dtype, parallel_runs):
    """One row times a B with contiguous rows (the single-row stream), as a matrix or as a
    vector, is shared out from the kernel's ``parallel_min_row_stream`` elements of B, not
    below (its threads cost more than they save there); the same bits either way."""
    rng = np.random.default_rng(4)
    k = 256
    min_stream = kernel.config.parallel_min_row_stream.of(dtype.itemsize)
    for n, shared_out in both_sides(min_stream, k):
        x = random_matrix(rng, (1, k), dtype)
        w = random_matrix(rng, (k, n), dtype)
        expected = chain_reference(1.0, x, w)
        for operand in (x, x[0]):
            del parallel_runs[:]
            with smallgemm.num_threads(2):
                got = smallgemm.matmul(operand, w)
            assert parallel_runs == ([2] if shared_out else []), (n, operand.ndim)
            np.testing.assert_array_equal(got.reshape(1, n), expected, err_msg=f"n {n}")


def test_memory_bound_products_take_threads_from_the_kernels_stream(kernel, dtype, parallel_runs):
    """Row dots (``W @ x``), the few-rows stream (``[4,k] @ B``) and the transposing stream
    (``[4,k] @ W.T``), far below the parallel volume, are shared out from the kernel's
    ``parallel_min_stream`` elements streamed, not below; the same bits either way."""
    rng = np.random.default_rng(6)
    k = 256
    min_stream = kernel.config.parallel_min_stream.of(dtype.itemsize)
    for count, shared_out in both_sides(min_stream, k):
        w = random_matrix(rng, (count, k), dtype)
        v = random_matrix(rng, (k, 1), dtype)
        x = random_matrix(rng, (4, k), dtype)
        b = random_matrix(rng, (k, count), dtype)
        assert 4 * count * k < kernel.config.parallel_min_volume.of(dtype.itemsize)
        for a_op, b_op in ((w, v), (x, b), (x, w.T)):
            del parallel_runs[:]
            with smallgemm.num_threads(2):
                got = smallgemm.matmul(a_op, b_op)
            assert parallel_runs == ([2] if shared_out else []), (count, a_op.shape, b_op.shape)
            np.testing.assert_array_equal(got, chain_reference(1.0, a_op, b_op))


def test_few_rows_times_a_packed_b_take_threads_from_the_kernels_packed_rows(kernel, dtype, monkeypatch):
    """One row times a prepacked B is shared out from the kernel's ``parallel_min_packed_rows``
    elements of B, not below; the same bits either way."""
    runs = recorded_workers(monkeypatch, "run_prepacked_parallel", -2)
    rng = np.random.default_rng(7)
    k = 256
    min_stream = kernel.config.parallel_min_packed_rows.of(dtype.itemsize)
    for n, shared_out in both_sides(min_stream, k):
        x = random_matrix(rng, (1, k), dtype)
        b = random_matrix(rng, (k, n), dtype)
        del runs[:]
        with smallgemm.num_threads(2):
            got = smallgemm.matmul(x, smallgemm.pack(b))
        assert runs == ([2] if shared_out else []), n
        np.testing.assert_array_equal(got, chain_reference(1.0, x, b))


def test_one_row_on_several_workers_streams_columns_per_worker_with_the_same_bits(kernel, dtype, limits):
    """One row times a B large enough to be shared out (rows contiguous): each worker
    streams its own columns of every row (``gemv_rows``); the bits are those of one
    thread, and of the row inside a packed product."""
    rng = np.random.default_rng(12)
    k = 130  # a tail past the vectors of every kernel, one KC block
    min_stream = kernel.config.parallel_min_row_stream.of(dtype.itemsize)
    n = min_stream // k + 37
    x = random_matrix(rng, (1, k), dtype)
    w = random_matrix(rng, (k, n), dtype)
    with smallgemm.num_threads(1):
        expected = smallgemm.matmul(x, w)
    assert_close(expected, 1.0, x, w)
    assert n * k >= min_stream
    for threads in (2, 3, 8):
        with smallgemm.num_threads(threads):
            np.testing.assert_array_equal(smallgemm.matmul(x, w), expected, err_msg=f"{threads} threads")
    limits(few_rows_max=0, unpacked_max_volume=BySize(0, 0), one_thread_unpacked_volume=BySize(0, 0))
    packed = smallgemm.matmul(np.vstack([x, x[:, ::-1]] * 20), w)  # the blocked driver
    np.testing.assert_array_equal(packed[:1], expected)


@pytest.mark.parametrize("transposed", [False, True], ids=["row_major", "transposed"])
@pytest.mark.parametrize("m", [9, 17, 32])
def test_few_rows_with_several_row_tiles_give_the_same_bits_on_any_thread_count(kernel, dtype, m, transposed):
    """Sweeps of several row tiles (the later ones request the next strip; one column strip per
    worker for a row-major B, three for a transposed one): same bits on 1, 2, 3 and 8 threads."""
    rng = np.random.default_rng(m)
    config = kernel.config
    # Worth threads, and large enough that a transposed B's next strip is requested ahead.
    k, n = (
        300,
        max(config.parallel_min_stream.of(dtype.itemsize), TRANSPOSED_FETCH_MIN_BYTES // 4) // 300 + 50,
    )
    assert rules.worth_threads(config, m, n, k, True, dtype) and n * k * 4 > TRANSPOSED_FETCH_MIN_BYTES
    x = random_matrix(rng, (m, k), dtype)
    w = random_matrix(rng, (n, k), dtype).T if transposed else random_matrix(rng, (k, n), dtype)
    results = []
    for threads in (1, 2, 3, 8):
        with smallgemm.num_threads(threads):
            results.append(smallgemm.matmul(x, w))
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    assert_close(results[0], 1.0, x, w)


def test_narrow_products_with_many_rows_match_the_packed_path_bitwise(kernel, dtype):
    """n within the narrow tile: unpacked whatever m (x @ W for a 10-class output layer);
    the bits are those of the packed driver, which a B with strided rows is sent to."""
    rng = np.random.default_rng(11)
    m, k, n = 700, 300, max(1, kernel.narrow.cols(dtype.itemsize) - 3)
    x = random_matrix(rng, (m, k), dtype)
    w = random_matrix(rng, (k, n), dtype)
    w_strided = np.zeros((k, 2 * n), dtype)[:, ::2]
    w_strided[...] = w
    got = smallgemm.matmul(x, w)
    assert_close(got, 1.0, x, w)
    np.testing.assert_array_equal(got, smallgemm.matmul(x, w_strided))
    g = random_matrix(rng, (m, n), dtype)
    acc = random_matrix(rng, (k, n), dtype)
    got = smallgemm.gemm(1.0, x, g, beta=1.0, c=acc, trans_a=True)
    assert_close(got, 1.0, x.T, g, 1.0, acc)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_narrow_tile_streams_rows_it_pads_little_with_the_chain_bits(kernel, dtype, threads):
    """From the kernel's ``stream_from`` rows, where the narrow tile's row tiles pad at most
    ``rows - stream_from`` rows, the few-rows stream runs the narrow tile (NARROW_STREAM),
    reading A from a copy of each group's rows; other kernels, and other rows, keep the
    few-rows tile up to its ``up_to`` rows, and the main tile past them (and where one of its
    row tiles holds the rows with fewer FMAs, B in the caches).  Either way: the chain
    reference's bits, for rows of A a power of two apart, a transposed and a reversed A,
    several groups, KC blocks and column chunks, beta and a strided C, in a stack, on any
    thread count."""
    rng = np.random.default_rng(threads)
    narrow, size = kernel.narrow, dtype.itemsize
    group = unpacked.strip_rows((narrow.stream or kernel.few.stream).strip_bytes, narrow.cols(size), size)
    k, n = 5 * group + 5, shared.STREAM_COLS + 70
    sizes = in_force.block_sizes(kernel, dtype)
    in_force.set_block_sizes(kernel, dtype, dataclasses.replace(sizes, kc=2 * group))
    try:
        rows, start = narrow.rows, narrow.stream_from
        heights = {rows - 1, rows, 2 * rows} | (
            {start - 1, start, rows + start - 1, rows + start} if start else set()
        )
        if kernel.few.up_to < rows:  # the few-rows tile's stream, below the narrow tile's rows
            heights.add(kernel.few.up_to)
        for m in sorted(heights):
            w = random_matrix(rng, (k, n), dtype)
            wide = random_matrix(rng, (m, max(1024, 1 << k.bit_length())), dtype)[
                :, :k
            ]  # rows 4 KiB x 2^i apart
            a_layouts = {
                "power-of-two rows": wide,
                "transposed": random_matrix(rng, (k, m), dtype).T,
                "reversed": random_matrix(rng, (m, k), dtype)[::-1, ::-1],
            }
            streams = start and start <= m and -m % rows <= rows - start
            route = unpacked.tile_of(
                kernel.shape, narrow, kernel.few, kernel.gemv, kernel.resident, k, 2 * group, wide, w
            )
            expected = unpacked.FEW_TILE if m <= kernel.few.up_to else unpacked.MAIN_TILE
            expected = unpacked.NARROW_STREAM if streams else expected
            if m <= kernel.mr() and padded_fmas(kernel.few, m, n, dtype) >= padded_fmas(
                kernel.shape, m, n, dtype
            ):
                expected = unpacked.MAIN_TILE  # one row tile, B from the caches
            if m <= kernel.gemv.strips:  # rows held in register strips (B from the caches)
                expected = unpacked.GEMV_TILE
            assert route == expected, m
            with smallgemm.num_threads(threads):
                for name, x in a_layouts.items():
                    got = smallgemm.matmul(x, w)
                    np.testing.assert_array_equal(got, chain_reference(1.0, x, w), err_msg=f"m {m} {name}")
                c = random_matrix(rng, (m, 2 * n), dtype)[:, ::2]
                expected = chain_reference(-0.5, wide, w, 2.0, c)
                got = smallgemm.gemm(-0.5, wide, w, beta=2.0, c=c)
                np.testing.assert_array_equal(got, expected, err_msg=f"m {m} gemm")
                stacked = smallgemm.matmul(np.stack([wide, wide[::-1]]), np.stack([w, w[:, ::-1]]))
                for t, (x, y) in enumerate(((wide, w), (wide[::-1], w[:, ::-1]))):
                    np.testing.assert_array_equal(
                        stacked[t], chain_reference(1.0, x, y), err_msg=f"m {m} stack {t}"
                    )
    finally:
        in_force.set_block_sizes(kernel, dtype, None)
