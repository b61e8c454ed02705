"""A matrix times a vector: the row dots, their pairs and starts, lane-wise sums, threads."""

import dataclasses

import numpy as np
import pytest
from conftest import blocked_product, random_matrix
from numba import njit
from reference import assert_close, chain_reference

import smallgemm
from smallgemm import simd
from smallgemm.drivers import unpacked
from smallgemm.kernels import KERNELS, BySize, shared
from smallgemm.plan import blocking, entry, in_force, rules
from smallgemm.plan import entries as smallgemm_entries


def matrix_vector_ways(w, x):
    """{way in: result} for the same ``W @ x``: 1-D and 2-D operands, ``x @ W.T``, into ``out``."""
    return {
        "W @ x": smallgemm.matmul(w, x),
        "x @ W.T": smallgemm.matmul(x, w.T),
        "[1,k] @ W.T": smallgemm.matmul(x[None, :], w.T)[0],
        "W @ [k,1]": smallgemm.matmul(w, x[:, None])[:, 0],
        "W @ x into out": smallgemm.matmul(w, x, out=np.empty(w.shape[0], w.dtype)),
    }


def dot_forms(rng, rows, k, dtype):
    """(name, matrix whose rows are contiguous along k, vector): the layouts the row dots read."""
    yield "contiguous", random_matrix(rng, (rows, k), dtype), random_matrix(rng, (k,), dtype)
    yield "reversed rows", random_matrix(rng, (rows, k), dtype)[::-1], random_matrix(rng, (k,), dtype)
    yield (
        "padded rows, strided vector",
        random_matrix(rng, (rows, k + 9), dtype)[:, 3 : 3 + k],
        random_matrix(rng, (2 * k,), dtype)[::-2],
    )


@pytest.mark.parametrize("rows", [1, 17, 33])
@pytest.mark.parametrize("k", [1, 16, 37, 70])
def test_matrix_times_vector_row_dots_give_the_packed_bits(kernel, dtype, rows, k):
    """``W @ x`` and ``x @ W.T`` (W's rows contiguous) as row dots: right against the
    reference, and each element the bits of the same row inside a large packed product,
    whatever the way in (1-D or 2-D operands), across KC blocks that end mid-vector."""
    rng = np.random.default_rng(rows * 100 + k)
    lanes = kernel.gemv.lanes(dtype.itemsize)
    in_force.set_block_sizes(
        kernel, dtype, blocking.BlockSizes(mc=2 * kernel.mr(), nc=2 * kernel.nr(dtype), kc=2 * lanes + 3)
    )
    try:
        for name, w, x in dot_forms(rng, rows, k, dtype):
            packed = smallgemm.matmul(np.stack([x] * 40), w.T)[0]  # 40 rows: the blocked driver
            assert_close(packed[None, :], 1.0, x[None, :], w.T)
            for way, got in matrix_vector_ways(w, x).items():
                np.testing.assert_array_equal(got, packed, err_msg=f"{name}: {way}")
            c = random_matrix(rng, (rows, 3), dtype)[:, 1:2]  # a strided column of C
            c[0, 0] = np.nan  # beta == 0 never reads C
            expected = smallgemm.gemm(1.5, w, x[:, None], beta=0.0, c=c.copy())
            assert_close(expected, 1.5, w, x[:, None])
            c = random_matrix(rng, (1, rows), dtype)
            assert_close(
                smallgemm.gemm(-0.5, x[None, :], w, beta=2.0, c=c, trans_b=True),
                -0.5,
                x[None, :],
                w.T,
                2.0,
                c,
            )
    finally:
        in_force.set_block_sizes(kernel, dtype, None)


def starts_within_a_line(rng, rows, cols, ld, dtype):
    """(offset, matrix [rows, cols] whose data starts ``offset`` elements into a 64-byte
    line) for every offset; the row stride ``ld`` is a whole number of lines, so all rows
    start at the same place within a vector, as in most NumPy arrays (16 bytes in)."""
    per_line = 64 // dtype.itemsize
    assert ld % per_line == 0 and cols <= ld
    raw = random_matrix(rng, (rows * ld + 2 * per_line,), dtype)
    first = -(raw.ctypes.data // dtype.itemsize) % per_line
    for offset in range(per_line):
        start = first + offset
        yield offset, raw[start : start + rows * ld].reshape(rows, ld)[:, :cols]


@njit
def to_vector_boundary(shape, arr, offset):
    return simd.elements_to_vector_boundary(shape, simd.address(arr), offset)


@njit
def to_line_boundary(shape, arr, offset):
    return simd.elements_to_line_boundary(shape, simd.address(arr), offset)


@pytest.mark.parametrize("boundary", ["vector", "line"])
def test_elements_to_a_boundary(kernel, dtype, boundary):
    """The counts the row dots, the single-row stream (to a vector) and the row stream (to a
    line) align their loads with: elements to the next multiple of the vector size or of 64
    bytes, none from an address between two elements."""
    to_boundary = to_vector_boundary if boundary == "vector" else to_line_boundary
    every = kernel.gemv.lanes(dtype.itemsize) if boundary == "vector" else 64 // dtype.itemsize
    raw = np.zeros(4 * every, dtype)
    first = -(raw.ctypes.data // dtype.itemsize) % every
    for offset in range(2 * every):
        assert to_boundary(kernel.gemv, raw, first + offset) == (-offset) % every, offset
    between = np.frombuffer(bytearray(4 * every * dtype.itemsize + 1), dtype, count=4 * every, offset=1)
    assert [to_boundary(kernel.gemv, between, j) for j in range(every)] == [0] * every


@njit
def dot_pairs_suit(shape, arr, rows, ldm):
    return unpacked.dot_pairs_suit(shape, simd.address(arr), rows, ldm)


def test_row_dots_pair_row_blocks_where_the_kernel_takes_pairs_and_their_rows_share_no_set(kernel, dtype):
    """Pairs of row blocks (two FMA chains side by side) on a kernel whose GEMV tile takes them
    (``dot_pairs``), where the pair's rows fall in at most 8 rows per L1 set (4 KiB apart share
    one) and, for more than 8 rows at once, the matrix is at most 16 MiB; the bits are the same
    either way (the tests above and below run both forms)."""
    item = dtype.itemsize
    suits = lambda rows, ld: dot_pairs_suit(kernel.gemv, np.zeros(1, dtype), rows, ld)  # noqa: E731
    if kernel.gemv.dot_pairs is None:
        assert not suits(1000, 1000)
        return
    pair_rows = 2 * kernel.gemv.lanes(item)
    assert suits(1000, 1000) and suits(17, 16) and suits(2000, 1000 // item)
    assert suits(1024, 1024) == (pair_rows <= 8)  # rows 4 KiB apart: all of a pair's rows in one set
    assert suits(2048, 2048 // item)  # 2 KiB apart: half of them a set
    assert suits(4000, 4000) == (pair_rows <= 8)  # 64 MiB of float32, 128 of float64: at most 8 streams


@pytest.mark.parametrize("k", [1, 5, 37, 70])
def test_row_dots_from_any_start_within_a_vector(kernel, dtype, k, always_parallel, limits):
    """Row dots of rows that all start at one place within a vector, for every place: the
    steps before a vector boundary taken on their own (in every KC block) give the bits of
    the blocked driver, on any thread count."""
    limits(parallel_min_stream=BySize(0, 0))  # no one-thread way in, whatever the size
    rng = np.random.default_rng(k)
    lanes = kernel.gemv.lanes(dtype.itemsize)
    in_force.set_block_sizes(
        kernel, dtype, blocking.BlockSizes(mc=2 * kernel.mr(), nc=2 * kernel.nr(dtype), kc=2 * lanes + 3)
    )
    try:
        x = random_matrix(rng, (k,), dtype)
        ld = -(-(k + 1) // 16) * 16
        for offset, w in starts_within_a_line(rng, 33, k, ld, dtype):
            expected = blocked_product(x[None, :], w.T)[0]
            assert_close(expected[None, :], 1.0, x[None, :], w.T)
            for threads in (1, 2, 3):
                with smallgemm.num_threads(threads):
                    for way, got in {
                        "W @ x": smallgemm.matmul(w, x),
                        "x @ W.T": smallgemm.matmul(x, w.T),
                    }.items():
                        np.testing.assert_array_equal(
                            got, expected, err_msg=f"offset {offset}: {way}, {threads} threads"
                        )
    finally:
        in_force.set_block_sizes(kernel, dtype, None)


def test_gemv_from_any_start_within_a_vector(kernel, dtype):
    """One row times a B whose rows all start at one place within a vector, for every place,
    wide enough for two column chunks and large enough to be shared out: the columns before
    a vector boundary taken one by one give the bits of the blocked driver, on any thread
    count."""
    rng = np.random.default_rng(3)
    n = shared.GEMV_CHUNK + 21  # a chunk, its lead and a chunk of edge columns
    ld = -(-(n + 1) // 16) * 16
    k = kernel.config.parallel_min_stream.of(dtype.itemsize) // n + 3  # shared out between the workers
    x = random_matrix(rng, (2, k), dtype)
    for offset, w in starts_within_a_line(rng, k, n, ld, dtype):
        expected = blocked_product(x, w)[0]
        assert_close(expected[None, :], 1.0, x[:1], w)
        for threads in (1, 2, 3):
            with smallgemm.num_threads(threads):
                np.testing.assert_array_equal(
                    smallgemm.matmul(x[0], w), expected, err_msg=f"offset {offset}, {threads} threads"
                )


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 12])
def test_rows_in_register_strips_from_any_start_within_a_line(kernel, dtype, m):
    """A few rows times B in register strips (kernels whose GEMV tile sets ``strips``, up to
    that many rows; the other kernels and rows take their own tiles), widths around a strip,
    a strip and a vector, and two, from every start within a line (the second strip goes back
    to a vector boundary, the last takes up to a vector more, the last vector is masked), on
    rows of A a stride apart: every element is the chain reference's, with alpha and beta too,
    on one thread and two."""
    rng = np.random.default_rng(m)
    lanes = kernel.gemv.lanes(dtype.itemsize)
    strip = simd.strip_vectors(kernel.gemv.vectors, min(m, simd.STRIP_ROWS)) * lanes  # a strip of these rows
    k = 19
    x = random_matrix(rng, (m, 2 * k), dtype)[:, ::2]
    for n in sorted(
        {1, lanes - 1, lanes + 1, strip - 1, strip + 1, strip + lanes, strip + lanes + 1, 2 * strip + 3}
    ):
        ld = -(-(n + 1) // 16) * 16
        for offset, w in starts_within_a_line(rng, k, n, ld, dtype):
            c = random_matrix(rng, (m, n), dtype)
            for threads in (1, 2):
                with smallgemm.num_threads(threads):
                    np.testing.assert_array_equal(
                        smallgemm.matmul(x, w), chain_reference(1.0, x, w), err_msg=f"n {n}, offset {offset}"
                    )
                    np.testing.assert_array_equal(
                        smallgemm.gemm(0.5, x, w, beta=-2.0, c=c.copy()),
                        chain_reference(0.5, x, w, -2.0, c),
                        err_msg=f"n {n}, offset {offset}, gemm",
                    )


@pytest.mark.parametrize("m", [2, 5, 12])
def test_rows_in_register_strips_on_every_layout_stack_and_thread_count(
    kernel, dtype, m, always_parallel, limits
):
    """Register strips (where the kernel's GEMV tile takes them) with A row-major, transposed and
    reversed, and B row-major, with its rows reversed and with its rows padded: alone, in a stack,
    and shared out between threads (thresholds zero), every element the chain reference's; not
    exact, over several KC blocks (each block's sums merged into C), the same bits on every
    thread count, within the bound."""
    limits(parallel_min_stream=BySize(0, 0), parallel_min_row_stream=BySize(0, 0))
    rng = np.random.default_rng(m)
    lanes = kernel.gemv.lanes(dtype.itemsize)
    k, n = 45, 3 * simd.strip_vectors(kernel.gemv.vectors, min(m, simd.STRIP_ROWS)) * lanes + 7
    a_layouts = {
        "row-major": random_matrix(rng, (m, k), dtype),
        "transposed": random_matrix(rng, (k, m), dtype).T,
        "reversed": random_matrix(rng, (m, k), dtype)[::-1, ::-1],
    }
    b_layouts = {
        "row-major": random_matrix(rng, (k, n), dtype),
        "rows reversed": random_matrix(rng, (k, n), dtype)[::-1],
        "rows padded": random_matrix(rng, (k, n + 5), dtype)[:, 2 : 2 + n],
    }
    strips = m <= kernel.gemv.strips and k * n * dtype.itemsize >= kernel.few.min_b_bytes
    expected_tile = unpacked.GEMV_TILE if strips else None  # below the few tile's bytes, the main tile's
    for a_name, x in a_layouts.items():
        for b_name, w in b_layouts.items():
            where = f"A {a_name}, B {b_name}"
            route = unpacked.tile_of(
                kernel.shape, kernel.narrow, kernel.few, kernel.gemv, kernel.resident, k, k, x, w
            )
            assert expected_tile is None or route == expected_tile, where
            expected = chain_reference(1.0, x, w)
            for threads in (1, 2, 3):
                with smallgemm.num_threads(threads):
                    np.testing.assert_array_equal(
                        smallgemm.matmul(x, w), expected, err_msg=f"{where}, {threads}"
                    )
                    stacked = smallgemm.matmul(np.stack([x, x[::-1]]), np.stack([w, w]))
                    np.testing.assert_array_equal(stacked[0], expected, err_msg=f"{where}, stack")
                    np.testing.assert_array_equal(
                        stacked[1], chain_reference(1.0, x[::-1], w), err_msg=f"{where}, stack"
                    )
    x, w = a_layouts["row-major"], b_layouts["rows padded"]
    sizes = in_force.block_sizes(kernel, dtype)
    in_force.set_block_sizes(kernel, dtype, blocking.BlockSizes(mc=sizes.mc, nc=sizes.nc, kc=16))
    try:
        with smallgemm.exact(False):
            with smallgemm.num_threads(1):
                one = smallgemm.matmul(x, w)
            assert_close(one, 1.0, x, w)
            for threads in (2, 3):
                with smallgemm.num_threads(threads):
                    np.testing.assert_array_equal(
                        smallgemm.matmul(x, w), one, err_msg=f"not exact, {threads}"
                    )
    finally:
        in_force.set_block_sizes(kernel, dtype, None)


@pytest.mark.parametrize("m", [2, 4, 9])
def test_row_stream_from_any_start_within_a_line(kernel, dtype, m, always_parallel, limits):
    """A few rows times a B whose rows all start at one place within a line, for every place,
    over several KC blocks: the columns before a line boundary taken as a strip of their own
    (rows far apart, with strips requested ahead, and a last strip cut short) or not (rows
    close together) give the bits of the blocked driver, on any thread count; so does a B
    too narrow to be split."""
    limits(parallel_min_stream=BySize(0, 0))  # shared out whatever the size
    rng = np.random.default_rng(m)
    cols = kernel.few.cols(dtype.itemsize)
    in_force.set_block_sizes(
        kernel, dtype, blocking.BlockSizes(mc=2 * kernel.mr(), nc=2 * kernel.nr(dtype), kc=21)
    )
    try:
        x = random_matrix(rng, (m, 50), dtype)
        far = kernel.few.stream.lead_min_row_bytes // dtype.itemsize
        near = -(-(4 * cols + 6) // 16) * 16
        for n, ld in ((4 * cols + 5, far), (4 * cols + 5, near), (cols, far)):
            for offset, w in starts_within_a_line(rng, 50, n, ld, dtype):
                expected = blocked_product(x, w)
                assert_close(expected, 1.0, x, w)
                for threads in (1, 2, 3):
                    with smallgemm.num_threads(threads):
                        got = smallgemm.matmul(x, w)
                    np.testing.assert_array_equal(
                        got, expected, err_msg=f"n {n}, ld {ld}, offset {offset}, {threads} threads"
                    )
    finally:
        in_force.set_block_sizes(kernel, dtype, None)


@pytest.mark.parametrize("rows, k", [(1, 1), (5, 7), (37, 301), (70, 133)])
def test_lane_wise_row_dots_when_batch_invariance_is_given_up(
    kernel, dtype, rows, k, always_parallel, limits
):
    """With batch invariance given up, a matrix times a contiguous vector along contiguous
    rows sums each row lane-wise: right against the reference (edge rows and k, alpha and
    beta, NaN in C unread), the same bits through every way in, for rows read backwards or
    padded, and on any thread count;
    with a strided vector, and for other products, the invariant bits."""
    limits(parallel_min_stream=BySize(0, 0))  # row dots shared out whatever the size
    rng = np.random.default_rng(rows * 1000 + k)
    w, x = random_matrix(rng, (rows, k), dtype), random_matrix(rng, (k,), dtype)
    strided = random_matrix(rng, (2 * k,), dtype)[::2]
    few = random_matrix(rng, (3, k), dtype)
    invariant = {
        "contiguous": smallgemm.matmul(w, x),
        "strided": smallgemm.matmul(w, strided),
        "few rows": smallgemm.matmul(few, w.T),
    }
    with smallgemm.exact(False):
        with smallgemm.num_threads(1):
            lane_wise = smallgemm.matmul(w, x)
        assert_close(lane_wise[:, None], 1.0, w, x[:, None])
        if k >= 2 * kernel.gemv.lanes(dtype.itemsize):  # several lanes' partial sums: another order
            assert not np.array_equal(lane_wise, invariant["contiguous"])
        for threads in (1, 2, 3):
            with smallgemm.num_threads(threads):
                for way, got in matrix_vector_ways(w, x).items():
                    np.testing.assert_array_equal(got, lane_wise, err_msg=f"{way}, {threads} threads")
                np.testing.assert_array_equal(smallgemm.matmul(w, strided), invariant["strided"])
                np.testing.assert_array_equal(smallgemm.matmul(few, w.T), invariant["few rows"])
        # Rows read backwards or a row stride past k: each row's sum is its own, the same bits.
        padded = random_matrix(rng, (rows, k + 9), dtype)[:, 3 : 3 + k]
        padded[...] = w
        for layout, mat, expected in (
            ("reversed rows", w[::-1], lane_wise[::-1]),
            ("padded rows", padded, lane_wise),
        ):
            for threads in (1, 3):
                with smallgemm.num_threads(threads):
                    np.testing.assert_array_equal(
                        smallgemm.matmul(mat, x), expected, err_msg=f"{layout}, {threads} threads"
                    )
        c = random_matrix(rng, (rows, 1), dtype)
        assert_close(smallgemm.gemm(-0.5, w, x[:, None], beta=2.0, c=c), -0.5, w, x[:, None], 2.0, c)
        c[0, 0] = np.nan  # beta == 0 never reads C
        assert_close(smallgemm.gemm(1.5, w, x[:, None], beta=0.0, c=c), 1.5, w, x[:, None])
    np.testing.assert_array_equal(smallgemm.matmul(w, x), invariant["contiguous"])


def test_giving_batch_invariance_up_compiles_nothing(kernel, dtype, always_parallel, limits):
    """The lane-wise opt-in is a run-time value of the row-dots rule: the entries compiled
    for the invariant row dots serve it, on one thread and several (a second set cost about
    a minute per kernel and dtype), and its bits are its own."""
    limits(parallel_min_stream=BySize(0, 0))
    rng = np.random.default_rng(17)
    w, x = random_matrix(rng, (90, 70), dtype), random_matrix(rng, (70,), dtype)
    compiled_entries = [e for e in vars(smallgemm_entries).values() if isinstance(e, entry.Entry)]
    assert len(compiled_entries) >= 14
    invariant = {}
    for threads in (1, 2):
        with smallgemm.num_threads(threads):
            invariant[threads] = smallgemm.matmul(w, x)
    compiled = [len(e.dispatcher.overloads) for e in compiled_entries]
    with smallgemm.exact(False):
        for threads in (1, 2):
            with smallgemm.num_threads(threads):
                lane_wise = smallgemm.matmul(w, x)
            assert not np.array_equal(lane_wise, invariant[threads])
            assert_close(lane_wise[:, None], 1.0, w, x[:, None])
    assert [len(e.dispatcher.overloads) for e in compiled_entries] == compiled
    np.testing.assert_array_equal(invariant[1], invariant[2])


@pytest.mark.parametrize("count", [2, 3, 7])
def test_stacks_of_matrix_vector_products_give_the_bits_of_lone_products(kernel, dtype, limits, count):
    """``[t, m, k] @ [t, k, 1]`` (row dots per product), shared out or each on all workers:
    every product the bits of the lone product on one thread."""
    limits(parallel_min_stack_volume=BySize(0, 0), parallel_min_stream=BySize(0, 0))
    rng = np.random.default_rng(count)
    w = random_matrix(rng, (count, 70, 45), dtype)
    x = random_matrix(rng, (count, 45, 1), dtype)
    with smallgemm.num_threads(1):
        lone = [smallgemm.matmul(w[t], x[t]) for t in range(count)]
    for t in range(count):
        assert_close(lone[t], 1.0, w[t], x[t])
    for threads in (1, 2, 3):
        with smallgemm.num_threads(threads):
            got = smallgemm.matmul(w, x)
        for t in range(count):
            np.testing.assert_array_equal(got[t], lone[t], err_msg=f"product {t}, {threads} threads")


def test_matrix_times_vector_takes_the_row_dots_and_the_threads_it_is_worth():
    """The routing: ``W @ x`` with W's rows contiguous is unpacked (row dots) whatever its
    size, and worth threads when W is large enough to stream, though its multiply-adds
    are few."""
    w = np.zeros((4096, 4096), np.float32)
    x = np.zeros((4096, 1), np.float32)
    for kernel in KERNELS:
        config = kernel.config
        assert rules.use_unpacked(config, 4096, 1, 4096, w, x, 16, 1024, one_thread_volume=0)
        assert rules.worth_threads(config, 4096, 1, 4096, True, w.dtype)
        assert not rules.worth_threads(config, 64, 1, 64, True, w.dtype)


@pytest.mark.parametrize("form", ["W @ x", "x @ W.T"])
def test_row_dots_on_threads_give_the_same_bits(kernel, dtype, always_parallel, limits, form):
    """Row dots split into runs of row blocks: the bits of one thread on 1, 2, 3 and 8."""
    limits(parallel_min_stream=BySize(0, 0))  # no one-thread way in, whatever the size
    rng = np.random.default_rng(9)
    rows, k = 301, 45
    w, x = random_matrix(rng, (rows, k), dtype), random_matrix(rng, (k,), dtype)
    compute = (lambda: smallgemm.matmul(w, x)) if form == "W @ x" else (lambda: smallgemm.matmul(x, w.T))
    with smallgemm.num_threads(1):
        expected = compute()
    assert_close(expected[:, None], 1.0, w, x[:, None])
    for threads in (2, 3, 8):
        with smallgemm.num_threads(threads):
            np.testing.assert_array_equal(compute(), expected, err_msg=f"{threads} threads")


def test_gemv_with_vectors(kernel, dtype):
    rng = np.random.default_rng(1)
    w = random_matrix(rng, (300, 200), dtype)
    v, u = random_matrix(rng, (300,), dtype), random_matrix(rng, (200,), dtype)
    got = smallgemm.matmul(v, w)
    assert got.shape == (200,)
    assert_close(got[None, :], 1.0, v[None, :], w)
    np.testing.assert_array_equal(got, smallgemm.matmul(v[None, :], w)[0])
    got = smallgemm.matmul(w, u)
    assert got.shape == (300,)
    assert_close(got[:, None], 1.0, w, u[:, None])


@njit
def _strips_taken(rule, m, n, k, b):
    return unpacked.row_dots.strips_in_registers(rule, m, n, k, simd.address(b))


def test_one_row_past_the_l3_fetch_bytes_leaves_the_register_strips_to_the_stream():
    """A GEMV tile with ``row_fetch.l3_min_bytes`` (the AVX-512 kernel's on Intel) streams one
    row times a B of that many bytes or more, requesting it ahead; a few rows keep their
    register strips up to ``min_bytes``, and without ``l3_min_bytes`` one row does too."""
    gemv = next(kernel.gemv for kernel in KERNELS if kernel.gemv.row_fetch is not None)
    fetch = gemv.row_fetch
    with_l3 = dataclasses.replace(gemv, row_fetch=dataclasses.replace(fetch, l3_min_bytes=1 << 20))
    without = dataclasses.replace(gemv, row_fetch=dataclasses.replace(fetch, l3_min_bytes=0))
    b = np.empty(1, np.float32)
    n, k = 1024, 256  # 1 MiB of float32
    assert not _strips_taken(with_l3, 1, n, k, b)
    assert _strips_taken(with_l3, 1, n, k - 1, b)
    assert _strips_taken(with_l3, 2, n, k, b) and _strips_taken(without, 1, n, k, b)


def test_one_row_times_a_b_past_the_l2_gives_the_packed_bits(kernel, dtype):
    """One row times a B past a 2 MiB L2 (the stream with requests ahead on Intel's AVX-512
    kernel, register strips elsewhere), edge columns, alpha and beta, on one thread and two:
    the blocked driver's bits."""
    rng = np.random.default_rng(12)
    n = 2 * shared.GEMV_CHUNK + 5
    k = (3 << 20) // (n * dtype.itemsize)
    x, w = random_matrix(rng, (2, k), dtype), random_matrix(rng, (k, n), dtype)
    expected = blocked_product(x, w)[:1]
    c = random_matrix(rng, (1, n), dtype)
    for threads in (1, 2):
        with smallgemm.num_threads(threads):
            np.testing.assert_array_equal(smallgemm.matmul(x[:1], w), expected, err_msg=f"{threads} threads")
            np.testing.assert_array_equal(
                smallgemm.gemm(0.5, x[:1], w, beta=-2.0, c=c.copy()), chain_reference(0.5, x[:1], w, -2.0, c)
            )
