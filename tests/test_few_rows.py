"""Few rows, GEMV, split-K, prepacked operands and batch invariance."""

import dataclasses

import numpy as np
import pytest
from conftest import blocked_product, configured, random_matrix
from numba import njit
from reference import assert_close

import smallgemm
from smallgemm import simd
from smallgemm.drivers import unpacked
from smallgemm.kernels import KERNELS, BySize, shared
from smallgemm.plan import blocking, entry, prepared, rules, runners, strategies
from smallgemm.plan import entries as smallgemm_entries


@pytest.fixture
def always_parallel(limits):
    limits(parallel_min_volume=BySize(0, 0))


def b_layouts(rng, k, n, dtype):
    """B (k x n) row-major, transposed (W stored [N, K]), strided and reversed."""
    yield "row_major", random_matrix(rng, (k, n), dtype)
    yield "transposed", random_matrix(rng, (n, k), dtype).T
    yield "strided", random_matrix(rng, (k, 2 * n + 1), dtype)[:, 1::2]
    yield "reversed", random_matrix(rng, (k, n), dtype)[::-1]


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 8, 13, 16, 17, 33, 40])
def test_few_rows_against_reference(kernel, dtype, m):
    rng = np.random.default_rng(m)
    k, n = 37, 3 * kernel.few.cols(dtype.itemsize) + 5  # edge columns in every tile shape
    x = random_matrix(rng, (m, k), dtype)
    for name, w in b_layouts(rng, k, n, dtype):
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
            np.testing.assert_array_equal(smallgemm.matmul(x[i : i + 1], w), got[i : i + 1], err_msg=f"n {n} row {i}")
        np.testing.assert_array_equal(blocked_product(x, w), got, err_msg=f"n {n} blocked")


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
    rules.set_block_sizes(kernel, dtype, blocking.BlockSizes(mc=kernel.mr(), nc=kernel.nr(dtype), kc=2 * simd.AXPY_ROWS + 1))
    try:
        x = random_matrix(rng, (2, k), dtype)
        for name, w in (("row_major", random_matrix(rng, (k, n), dtype)),
                        ("padded rows", random_matrix(rng, (k, n + 11), dtype)[:, 4 : 4 + n])):
            got = smallgemm.matmul(x[:1], w)
            assert_close(got, 1.0, x[:1], w)
            np.testing.assert_array_equal(got, blocked_product(x, w)[:1], err_msg=name)
            c = random_matrix(rng, (1, n), dtype)
            assert_close(smallgemm.gemm(0.5, x[:1], w, beta=3.0, c=c), 0.5, x[:1], w, 3.0, c)
            strided = random_matrix(rng, (1, 2 * k), dtype)[:, ::-2]  # a row of A read with stride -2
            np.testing.assert_array_equal(smallgemm.matmul(strided, w), blocked_product(np.vstack([strided] * 2), w)[:1],
                                          err_msg=name)
            assert_close(smallgemm.matmul(strided, w), 1.0, strided, w)
    finally:
        rules.set_block_sizes(kernel, dtype, None)


def test_gemv_on_a_b_past_the_fetch_threshold(kernel, dtype):
    """A B large enough for the single-row stream to request rows ahead (512-bit kernels;
    the others do not): the same bits."""
    rng = np.random.default_rng(8)
    n = 4100
    k = shared.GEMV_FETCH_MIN_BYTES // (n * dtype.itemsize) + 3
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
    k = shared.GEMV_WIDE_MIN_BYTES // (n * dtype.itemsize) + 5
    assert n * k * dtype.itemsize >= shared.GEMV_WIDE_MIN_BYTES and k % simd.AXPY_ROWS_WIDE
    x = random_matrix(rng, (2, k), dtype)
    w = random_matrix(rng, (k, n), dtype)
    if kc is not None:
        rules.set_block_sizes(kernel, dtype, blocking.BlockSizes(mc=kernel.mr(), nc=kernel.nr(dtype), kc=kc))
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
        rules.set_block_sizes(kernel, dtype, None)


def narrow_operands(rng, kernel, dtype, n, large):
    """(a, b) of a product narrow enough to be turned over: past turned_narrow_min_a, and
    past the unpacked volume (the planner's way in) when ``large``, else within it (the
    small path's)."""
    config = kernel.config
    k = max(config.turned_narrow_min_depth + 5, -(-config.turned_narrow_min_a.of(dtype.itemsize) // 300))
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
    turned = 2 * n <= kernel.narrow.cols(dtype.itemsize)
    assert rules._turns_narrow(kernel.config, a.shape[0], n, a, kernel.narrow.cols(dtype.itemsize)) == turned
    with smallgemm.num_threads(1):
        got = smallgemm.matmul(a, b)
        with configured(turned_narrow_min_depth=a.shape[1] + 1):  # not turned
            np.testing.assert_array_equal(smallgemm.matmul(a, b), got)
        for i in (0, a.shape[0] // 2, a.shape[0] - 1):
            np.testing.assert_array_equal(smallgemm.matmul(a[i], b), got[i], err_msg=f"row {i}")
        for order in ("C", "F"):
            c = random_matrix(rng, got.shape, dtype, order)
            assert_close(smallgemm.gemm(0.5, a, b, beta=-2.0, c=c), 0.5, a, b, -2.0, c)
        padded = random_matrix(rng, (a.shape[0], a.shape[1] + 3), dtype)[:, 1:-2]  # rows 3 elements apart more
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
        np.testing.assert_array_equal(got[t], smallgemm.matmul(stack_a[t], stack_b[t]), err_msg=f"product {t}")


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
    yield "padded rows, strided vector", random_matrix(rng, (rows, k + 9), dtype)[:, 3 : 3 + k], \
        random_matrix(rng, (2 * k,), dtype)[::-2]


@pytest.mark.parametrize("rows", [1, 17, 33])
@pytest.mark.parametrize("k", [1, 16, 37, 70])
def test_matrix_times_vector_row_dots_give_the_packed_bits(kernel, dtype, rows, k):
    """``W @ x`` and ``x @ W.T`` (W's rows contiguous) as row dots: right against the
    reference, and each element the bits of the same row inside a large packed product,
    whatever the way in (1-D or 2-D operands), across KC blocks that end mid-vector."""
    rng = np.random.default_rng(rows * 100 + k)
    lanes = kernel.gemv.lanes(dtype.itemsize)
    rules.set_block_sizes(kernel, dtype, blocking.BlockSizes(mc=2 * kernel.mr(), nc=2 * kernel.nr(dtype), kc=2 * lanes + 3))
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
            assert_close(smallgemm.gemm(-0.5, x[None, :], w, beta=2.0, c=c, trans_b=True), -0.5, x[None, :], w.T, 2.0, c)
    finally:
        rules.set_block_sizes(kernel, dtype, None)


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


def test_row_dots_pair_row_blocks_for_256_bit_vectors_where_their_rows_share_no_set(kernel, dtype):
    """Pairs of row blocks (two FMA chains side by side) for the avx2 kernel only, where the
    pair's rows fall in at most 8 rows per L1 set (4 KiB apart share one) and, for 16 rows
    at once (float32), the matrix is at most 16 MiB; the bits are the same either way (the
    tests above and below run both forms)."""
    item = dtype.itemsize
    suits = lambda rows, ld: dot_pairs_suit(kernel.gemv, np.zeros(1, dtype), rows, ld)  # noqa: E731
    if kernel.gemv.bits != 256:
        assert not suits(1000, 1000)
        return
    assert suits(1000, 1000) and suits(17, 16) and suits(2000, 1000 // item)
    assert suits(1024, 1024) == (item == 8)  # rows 4 KiB apart: 16 float32 rows in one set
    assert suits(2048, 2048 // item)  # 2 KiB apart: 8 rows a set
    assert suits(4000, 4000) == (item == 8)  # 64 MiB of float32: 8 streams, not 16


@pytest.mark.parametrize("k", [1, 5, 37, 70])
def test_row_dots_from_any_start_within_a_vector(kernel, dtype, k, always_parallel, limits):
    """Row dots of rows that all start at one place within a vector, for every place: the
    steps before a vector boundary taken on their own (in every KC block) give the bits of
    the blocked driver, on any thread count."""
    limits(parallel_min_stream=0)  # no one-thread way in, whatever the size
    rng = np.random.default_rng(k)
    lanes = kernel.gemv.lanes(dtype.itemsize)
    rules.set_block_sizes(kernel, dtype, blocking.BlockSizes(mc=2 * kernel.mr(), nc=2 * kernel.nr(dtype), kc=2 * lanes + 3))
    try:
        x = random_matrix(rng, (k,), dtype)
        ld = -(-(k + 1) // 16) * 16
        for offset, w in starts_within_a_line(rng, 33, k, ld, dtype):
            expected = blocked_product(x[None, :], w.T)[0]
            assert_close(expected[None, :], 1.0, x[None, :], w.T)
            for threads in (1, 2, 3):
                with smallgemm.num_threads(threads):
                    for way, got in {"W @ x": smallgemm.matmul(w, x), "x @ W.T": smallgemm.matmul(x, w.T)}.items():
                        np.testing.assert_array_equal(got, expected, err_msg=f"offset {offset}: {way}, {threads} threads")
    finally:
        rules.set_block_sizes(kernel, dtype, None)


def test_gemv_from_any_start_within_a_vector(kernel, dtype):
    """One row times a B whose rows all start at one place within a vector, for every place,
    wide enough for two column chunks and large enough to be shared out: the columns before
    a vector boundary taken one by one give the bits of the blocked driver, on any thread
    count."""
    rng = np.random.default_rng(3)
    n = shared.GEMV_CHUNK + 21  # a chunk, its lead and a chunk of edge columns
    ld = -(-(n + 1) // 16) * 16
    k = shared.GEMV_ROWS_PARALLEL_MIN_BYTES // (n * dtype.itemsize) + 3  # streamed on each worker
    x = random_matrix(rng, (2, k), dtype)
    for offset, w in starts_within_a_line(rng, k, n, ld, dtype):
        expected = blocked_product(x, w)[0]
        assert_close(expected[None, :], 1.0, x[:1], w)
        for threads in (1, 2, 3):
            with smallgemm.num_threads(threads):
                np.testing.assert_array_equal(smallgemm.matmul(x[0], w), expected, err_msg=f"offset {offset}, {threads} threads")


@pytest.mark.parametrize("m", [2, 4, 9])
def test_row_stream_from_any_start_within_a_line(kernel, dtype, m, always_parallel, limits):
    """A few rows times a B whose rows all start at one place within a line, for every place,
    over several KC blocks: the columns before a line boundary taken as a strip of their own
    (rows far apart, with strips requested ahead, and a last strip cut short) or not (rows
    close together) give the bits of the blocked driver, on any thread count; so does a B
    too narrow to be split."""
    limits(parallel_min_stream=0)  # shared out whatever the size
    rng = np.random.default_rng(m)
    cols = kernel.few.cols(dtype.itemsize)
    rules.set_block_sizes(kernel, dtype, blocking.BlockSizes(mc=2 * kernel.mr(), nc=2 * kernel.nr(dtype), kc=21))
    try:
        x = random_matrix(rng, (m, 50), dtype)
        far = shared.STREAM_LEAD_MIN_ROW_BYTES // dtype.itemsize
        near = -(-(4 * cols + 6) // 16) * 16
        for n, ld in ((4 * cols + 5, far), (4 * cols + 5, near), (cols, far)):
            for offset, w in starts_within_a_line(rng, 50, n, ld, dtype):
                expected = blocked_product(x, w)
                assert_close(expected, 1.0, x, w)
                for threads in (1, 2, 3):
                    with smallgemm.num_threads(threads):
                        got = smallgemm.matmul(x, w)
                    np.testing.assert_array_equal(got, expected, err_msg=f"n {n}, ld {ld}, offset {offset}, {threads} threads")
    finally:
        rules.set_block_sizes(kernel, dtype, None)


@pytest.mark.parametrize("rows, k", [(1, 1), (5, 7), (37, 301), (70, 133)])
def test_lane_wise_row_dots_when_batch_invariance_is_given_up(kernel, dtype, rows, k, always_parallel, limits):
    """With batch invariance given up, a matrix times a contiguous vector along contiguous
    rows sums each row lane-wise: right against the reference (edge rows and k, alpha and
    beta, NaN in C unread), the same bits through every way in, for rows read backwards or
    padded, and on any thread count;
    with a strided vector, and for other products, the invariant bits."""
    limits(parallel_min_stream=0)  # row dots shared out whatever the size
    rng = np.random.default_rng(rows * 1000 + k)
    w, x = random_matrix(rng, (rows, k), dtype), random_matrix(rng, (k,), dtype)
    strided = random_matrix(rng, (2 * k,), dtype)[::2]
    few = random_matrix(rng, (3, k), dtype)
    invariant = {"contiguous": smallgemm.matmul(w, x), "strided": smallgemm.matmul(w, strided),
                 "few rows": smallgemm.matmul(few, w.T)}
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
        for layout, mat, expected in (("reversed rows", w[::-1], lane_wise[::-1]), ("padded rows", padded, lane_wise)):
            for threads in (1, 3):
                with smallgemm.num_threads(threads):
                    np.testing.assert_array_equal(smallgemm.matmul(mat, x), expected, err_msg=f"{layout}, {threads} threads")
        c = random_matrix(rng, (rows, 1), dtype)
        assert_close(smallgemm.gemm(-0.5, w, x[:, None], beta=2.0, c=c), -0.5, w, x[:, None], 2.0, c)
        c[0, 0] = np.nan  # beta == 0 never reads C
        assert_close(smallgemm.gemm(1.5, w, x[:, None], beta=0.0, c=c), 1.5, w, x[:, None])
    np.testing.assert_array_equal(smallgemm.matmul(w, x), invariant["contiguous"])


def test_giving_batch_invariance_up_compiles_nothing(kernel, dtype, always_parallel, limits):
    """The lane-wise opt-in is a run-time value of the row-dots rule: the entries compiled
    for the invariant row dots serve it, on one thread and several (a second set cost about
    a minute per kernel and dtype), and its bits are its own."""
    limits(parallel_min_stream=0)
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
    limits(parallel_min_stack_volume=0, parallel_min_stream=0)
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
        assert rules._use_unpacked(config, 4096, 1, 4096, w, x, 16, 1024, one_thread_volume=0)
        assert rules.worth_threads(config, 4096, 1, 4096, True, w.dtype)
        assert not rules.worth_threads(config, 64, 1, 64, True, w.dtype)


@pytest.mark.parametrize("form", ["W @ x", "x @ W.T"])
def test_row_dots_on_threads_give_the_same_bits(kernel, dtype, always_parallel, limits, form):
    """Row dots split into runs of row blocks: the bits of one thread on 1, 2, 3 and 8."""
    limits(parallel_min_stream=0)  # no one-thread way in, whatever the size
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


@pytest.mark.parametrize("n", [1, 10, 17, 32])
def test_few_columns_from_a_transposed_a_match_the_other_paths_bitwise(kernel, dtype, always_parallel, n):
    """``x.T @ g`` with few columns is computed turned over, as a few-rows product: the bits
    are those of the same product with ``x.T`` copied row-major, on any thread count, alone
    or in a stack."""
    rng = np.random.default_rng(n)
    k, m = 70, 300
    x = random_matrix(rng, (k, m), dtype)
    g = random_matrix(rng, (k, n), dtype)
    assert rules._oriented(kernel.config, x.T, g, np.empty((m, n), dtype), kernel.narrow.cols(dtype.itemsize))[3]  # the turned-over path
    expected = smallgemm.matmul(np.ascontiguousarray(x.T), g)
    assert_close(expected, 1.0, x.T, g)
    for threads in (1, 2, 3, 8):
        with smallgemm.num_threads(threads):
            np.testing.assert_array_equal(smallgemm.matmul(x.T, g), expected, err_msg=f"{threads} threads")
    c = random_matrix(rng, (m, n), dtype)
    assert_close(smallgemm.gemm(0.5, x, g, beta=-2.0, c=c, trans_a=True), 0.5, x.T, g, -2.0, c)
    stacked = smallgemm.matmul(np.stack([x[::-1], x]).transpose(0, 2, 1), np.stack([g[::-1], g]))
    np.testing.assert_array_equal(stacked[1], expected)
    assert_close(stacked[0], 1.0, x[::-1].T, g[::-1])


@pytest.mark.parametrize("everywhere", [False, True], ids=["default kernels", "every kernel"])
def test_few_rows_times_a_transposed_b_turned_over_give_the_packed_bits(kernel, dtype, always_parallel, limits,
                                                                       everywhere):
    """``x @ W.T`` (W stored [N, K]) with as many rows as the narrow or the main tile has
    columns (float64: 2 to two main strips) is computed turned over, W x^T, on the kernels of
    that turn them (``turned_few_rows`` in their configuration; or on every kernel, to run the path on each): right against the reference (alpha, beta, every
    layout of x and of C), and the bits of the blocked driver, of each row alone, of the rows
    inside a large product and of every thread count; the operands are left as they were."""
    if everywhere:
        limits(turned_few_rows=True)
    narrow, wide = kernel.narrow.cols(dtype.itemsize), kernel.nr(dtype)
    turned_rows = prepared.current_prepared(dtype).turned_rows
    if dtype.itemsize == 8:  # from 2 rows to two main strips
        expected = tuple(range(2, 2 * wide + 1))
    else:  # one strip of either tile
        expected = (narrow, wide)
    assert turned_rows == (expected if everywhere or kernel.config.turned_few_rows else ())
    # Each end of the turned counts and the strip widths among them; counts on either side.
    turned = sorted({min(turned_rows, default=0), narrow, wide, max(turned_rows, default=0)} & set(turned_rows))
    not_turned = sorted({2, narrow - 1, narrow + 1, wide + 1, max(turned_rows, default=0) + 1} - set(turned_rows))
    rng = np.random.default_rng(21)
    # Two KC blocks; W past few_rows_max rows, with edge columns for every tile.
    config = rules.config_of(kernel)
    k, n = rules.block_sizes(kernel, dtype).kc + 17, config.few_rows_max + 2 * wide + 5
    w = random_matrix(rng, (n, k), dtype)
    w_copy = w.copy()
    for m in turned + not_turned:
        x = random_matrix(rng, (m, k), dtype)
        assert rules._turns_few_rows(config, x, w.T, turned_rows) == (m in turned)
        with smallgemm.num_threads(1):
            got = smallgemm.matmul(x, w.T)
        assert_close(got, 1.0, x, w.T)
        np.testing.assert_array_equal(blocked_product(x, w.T), got, err_msg=f"m {m} blocked")
        for i in (0, m - 1):
            np.testing.assert_array_equal(smallgemm.matmul(x[i], w.T), got[i], err_msg=f"m {m} row {i} alone")
        inside = smallgemm.matmul(np.vstack([random_matrix(rng, (300, k), dtype), x]), w.T)
        np.testing.assert_array_equal(inside[300:], got, err_msg=f"m {m} inside a large product")
        for threads in (2, 3, 4, 8):
            with smallgemm.num_threads(threads):
                np.testing.assert_array_equal(smallgemm.matmul(x, w.T), got, err_msg=f"m {m}, {threads} threads")
        for name, x_laid in (("F", np.asfortranarray(x)), ("reversed", x[::-1]),
                             ("strided", np.repeat(x, 2, axis=1)[:, ::2])):
            expected = got[::-1] if name == "reversed" else got
            np.testing.assert_array_equal(smallgemm.matmul(x_laid, w.T), expected, err_msg=f"m {m} x {name}")
        w_in_wider = random_matrix(rng, (n, k + 5), dtype)[:, 2 : k + 2]  # W's rows further apart
        w_in_wider[...] = w
        np.testing.assert_array_equal(smallgemm.matmul(x, w_in_wider.T), got, err_msg=f"m {m} W in a wider array")
        np.testing.assert_array_equal(smallgemm.matmul(x, w[::-1].T), got[:, ::-1], err_msg=f"m {m} W reversed")
        for name, c in (("C", random_matrix(rng, (m, n), dtype)), ("F", random_matrix(rng, (m, n), dtype, "F")),
                        ("strided", random_matrix(rng, (m, 2 * n), dtype)[:, ::2])):
            c_before = c.copy()
            out = smallgemm.gemm(0.5, x, w, beta=-2.0, c=c, trans_b=True)
            assert_close(out, 0.5, x, w.T, -2.0, c_before)
            np.testing.assert_array_equal(c, c_before)  # a new array: C is not overwritten
            into = smallgemm.gemm(0.5, x, w, beta=-2.0, c=c, trans_b=True, overwrite_c=True)
            np.testing.assert_array_equal(into, out, err_msg=f"m {m} C {name} overwritten")
        np.testing.assert_array_equal(w, w_copy)


@pytest.mark.parametrize("n", [7, 40, 300])
def test_split_k_is_bitwise_identical_for_any_thread_count(kernel, dtype, tiny_blocks, always_parallel, n):
    """Products not exact (``exact(False)``) may split k between threads: the bits still do
    not depend on the thread count."""
    rng = np.random.default_rng(2)
    k = 4 * tiny_blocks.kc + 3  # five KC blocks: split-K whenever the columns give too few tasks
    x = random_matrix(rng, (3, k), dtype)
    w = random_matrix(rng, (k, n), dtype)
    c0 = random_matrix(rng, (3, n), dtype)
    results = []
    for threads in (1, 2, 3, 4, 8):
        with smallgemm.num_threads(threads), smallgemm.exact(False):
            results.append(smallgemm.gemm(0.5, x, w, beta=1.5, c=c0))
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    assert_close(results[0], 0.5, x, w, 1.5, c0)


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_invariance(kernel, dtype, threads):
    """A row of C has the same bits alone, in a small batch and in a large product."""
    rng = np.random.default_rng(3)
    sizes = rules.block_sizes(kernel, dtype)
    k = sizes.kc + 17  # two KC blocks: the merge order matters
    big_m = 300
    for name, w in b_layouts(rng, k, 150, dtype):
        x = random_matrix(rng, (big_m, k), dtype)
        with smallgemm.num_threads(threads):
            full = smallgemm.matmul(x, w)
            for i in (0, 5, 299):
                np.testing.assert_array_equal(smallgemm.matmul(x[i], w), full[i], err_msg=f"{name} row {i} alone")
                np.testing.assert_array_equal(smallgemm.matmul(x[i : i + 1], w)[0], full[i])
            small = smallgemm.matmul(x[8:12], w)
            np.testing.assert_array_equal(small, full[8:12], err_msg=f"{name} small batch")
            stacked = smallgemm.matmul(x.reshape(3, 100, k), w)
            np.testing.assert_array_equal(stacked.reshape(big_m, -1), full, err_msg=f"{name} folded stack")
            pairs = smallgemm.matmul(x.reshape(150, 2, k), np.broadcast_to(w, (150,) + w.shape))
            np.testing.assert_array_equal(pairs.reshape(big_m, -1), full, err_msg=f"{name} batched loop")
        # The unpacked (small) and blocked drivers agree too.
        with smallgemm.num_threads(threads):
            np.testing.assert_array_equal(blocked_product(x[:4], w), full[:4], err_msg=f"{name} blocked")


@pytest.mark.parametrize("trans", [False, True])
def test_prepacked_gives_the_same_bits(kernel, dtype, tiny_blocks, trans):
    rng = np.random.default_rng(4)
    k, n = 3 * tiny_blocks.kc + 2, 2 * tiny_blocks.nc + 5
    w = random_matrix(rng, (n, k) if trans else (k, n), dtype)
    packed = smallgemm.pack(w, trans=trans)
    op = w.T if trans else w
    assert packed.shape == (k, n) and packed.dtype == dtype
    assert packed.nbytes >= op.size * dtype.itemsize
    for m in (1, 3, kernel.mr() + 1, 40):
        x = random_matrix(rng, (m, k), dtype)
        np.testing.assert_array_equal(smallgemm.matmul(x, packed), smallgemm.matmul(x, op))
        np.testing.assert_array_equal(smallgemm.matmul(x[0], packed), smallgemm.matmul(x[0], op))
        c = random_matrix(rng, (m, n), dtype)
        np.testing.assert_array_equal(
            smallgemm.gemm(0.5, x, packed, beta=2.0, c=c), smallgemm.gemm(0.5, x, op, beta=2.0, c=c)
        )
        assert_close(smallgemm.matmul(x, packed), 1.0, x, op)
    stack = random_matrix(rng, (2, 3, k), dtype)
    np.testing.assert_array_equal(smallgemm.matmul(stack, packed), smallgemm.matmul(stack, op))


def test_prepacked_matmul_writes_into_out(kernel, dtype, monkeypatch):
    """``matmul(x, packed, out=...)`` computes straight into ``out`` when it can (a vector,
    a matrix, a foldable stack, a strided view), through a new array when ``out``
    overlaps x or has another dtype; the values are those of the unpacked operand."""
    rng = np.random.default_rng(9)
    k, n = 70, 90
    w = random_matrix(rng, (k, n), dtype)
    packed = smallgemm.pack(w)
    targets = []
    real = strategies.run_prepacked

    def recording(alpha, a, p, beta, c):
        targets.append(c)
        real(alpha, a, p, beta, c)

    monkeypatch.setattr(strategies, "run_prepacked", recording)
    for x in (random_matrix(rng, (k,), dtype), random_matrix(rng, (5, k), dtype), random_matrix(rng, (2, 3, k), dtype)):
        expected = smallgemm.matmul(x, w)
        wide = np.full(x.shape[:-1] + (2 * n,), 7.0, dtype)
        for out in (np.empty(x.shape[:-1] + (n,), dtype), wide[..., ::2]):
            targets.clear()
            assert smallgemm.matmul(x, packed, out=out) is out
            np.testing.assert_array_equal(out, expected)
            assert len(targets) == 1 and np.shares_memory(targets[0], out)
        np.testing.assert_array_equal(wide[..., 1::2], 7.0)  # nothing written beside the view
    square = random_matrix(rng, (k, k), dtype)
    packed_square = smallgemm.pack(square)
    x = random_matrix(rng, (k, k), dtype)
    expected = smallgemm.matmul(x, square)
    y = x.copy()
    targets.clear()
    np.testing.assert_array_equal(smallgemm.matmul(y, packed_square, out=y), expected)  # out is the input
    assert not np.shares_memory(targets[0], y)
    if dtype == np.float32:
        wider = np.empty((k, k), np.float64)
        np.testing.assert_array_equal(smallgemm.matmul(x, packed_square, out=wider), expected)


@pytest.mark.parametrize("trans", [False, True])
def test_prepacked_on_threads_gives_the_same_bits(kernel, dtype, tiny_blocks, monkeypatch, trans, limits):
    """Prepacked products on any number of workers (few rows: groups of panels;
    more: row-block tasks) give the bits of the one-thread unpacked operand."""
    limits(parallel_min_volume=BySize(0, 0), parallel_min_stream=0)
    ran = []
    real = runners.run_prepacked_parallel
    monkeypatch.setattr(runners, "run_prepacked_parallel", lambda *args: ran.append(args[-2:]) or real(*args))
    rng = np.random.default_rng(6)
    k, n = 3 * tiny_blocks.kc + 2, 3 * tiny_blocks.nc + 5
    w = random_matrix(rng, (n, k) if trans else (k, n), dtype)
    packed = smallgemm.pack(w, trans=trans)
    op = w.T if trans else w
    for m in (1, 3, kernel.mr() + 1, 2 * tiny_blocks.mc + 3):
        x = random_matrix(rng, (m, k), dtype)
        c = random_matrix(rng, (m, n), dtype)
        with smallgemm.num_threads(1):
            expected = smallgemm.gemm(0.5, x, op, beta=2.0, c=c)
        for workers in (2, 3, 8):
            with smallgemm.num_threads(workers):
                np.testing.assert_array_equal(smallgemm.gemm(0.5, x, packed, beta=2.0, c=c), expected)
        assert_close(expected, 0.5, x, op, 2.0, c)
    few_rows = [(w, True) for w in (2, 3, 8)]
    assert ran == few_rows * 2 + [(w, False) for w in (2, 3, 8)] * 2


def test_bad_use_of_a_packed_operand():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((30, 20)).astype(np.float32)
    packed = smallgemm.pack(w)
    with pytest.raises(ValueError, match=r"\(4, 31\).*packed \(30, 20\)"):
        smallgemm.matmul(np.ones((4, 31), np.float32), packed)
    with pytest.raises(TypeError, match="float64.*packed operand is float32"):
        smallgemm.matmul(np.ones((4, 30)), packed)
    with pytest.raises(ValueError, match="trans_b"):
        smallgemm.gemm(1.0, np.ones((4, 30), np.float32), packed, trans_b=True)
    with pytest.raises(ValueError, match="shapes do not match"):
        smallgemm.gemm(1.0, np.ones((4, 30), np.float32), packed, trans_a=True)
    with smallgemm.use_kernel("portable"):
        with pytest.raises(ValueError, match="packed for the 'avx512' kernel|packed for the 'avx2' kernel"):
            smallgemm.matmul(np.ones((4, 30), np.float32), packed)
    with pytest.raises(TypeError, match="float32 and float64"):
        smallgemm.pack(np.ones((3, 3), np.int64))
    with pytest.raises(ValueError, match="2-D"):
        smallgemm.pack(np.ones(3, np.float32))
    # float32 rows with a float64 packed operand are widened exactly.
    p64 = smallgemm.pack(w.astype(np.float64))
    x = rng.standard_normal((2, 30)).astype(np.float32)
    np.testing.assert_array_equal(smallgemm.matmul(x, p64), smallgemm.matmul(x.astype(np.float64), w.astype(np.float64)))


@pytest.mark.parametrize("transposed", [False, True], ids=["row_major", "transposed"])
@pytest.mark.parametrize("m", [2, 5, 17, 32])
def test_few_rows_stream_across_column_chunks_and_row_groups(kernel, dtype, m, transposed):
    """Several column chunks of the stream buffer and several groups of B rows per KC
    block: the result matches the reference and, bitwise, the rows of a packed product.
    A transposed float32 B is large enough for the row tiles to request its next strips
    (where the panel's runs of W's rows are short enough: the avx512 kernel's)."""
    rng = np.random.default_rng(m)
    cols, size = kernel.few.cols(dtype.itemsize), dtype.itemsize
    strip_bytes = shared.TRANSPOSED_PANEL_BYTES if transposed else shared.STREAM_STRIP_BYTES
    group = unpacked.strip_rows(strip_bytes, cols, size)
    k, n = 3 * group + 5, shared.STREAM_COLS + 70
    assert not transposed or n * k * 4 > shared.TRANSPOSED_FETCH_MIN_BYTES
    # Several groups inside one KC block, whatever KC the host's L1 gives this kernel.
    sizes = rules.block_sizes(kernel, dtype)
    rules.set_block_sizes(kernel, dtype, dataclasses.replace(sizes, kc=max(sizes.kc, 4 * group)))
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
        rules.set_block_sizes(kernel, dtype, None)


@pytest.mark.parametrize("taller", [False, True], ids=["one row tile", "two row tiles"])
def test_a_row_stream_from_memory_takes_short_groups_with_the_same_bits(kernel, dtype, taller):
    """Few rows times a row-major B whose rows span STREAM_FROM_MEMORY_MIN_BYTES: one row
    tile takes its B rows STREAM_FROM_MEMORY_ROWS at a time (two row tiles keep the long
    groups); right against the reference, and the bits of the blocked driver, of each row
    alone and of every thread count."""
    rng = np.random.default_rng(5)
    size = dtype.itemsize
    m = kernel.few.rows + (1 if taller else 0)
    k = 2 * rules.block_sizes(kernel, dtype).kc + 5  # three KC blocks, each several groups
    n = shared.STREAM_FROM_MEMORY_MIN_BYTES // (k * size) + 3  # edge columns
    x = random_matrix(rng, (m, k), dtype)
    w = random_matrix(rng, (k, n), dtype)
    assert k * n * size >= shared.STREAM_FROM_MEMORY_MIN_BYTES
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
def test_few_rows_with_a_large_b_use_the_workers_with_the_same_bits(kernel, dtype, m, transposed, monkeypatch):
    """Below the parallel volume, a few-rows product whose B is large still streams B on
    every worker (it is memory-bound); the bits do not depend on the thread count."""
    rng = np.random.default_rng(m)
    config = kernel.config
    k, n = 300, config.parallel_min_stream // 300 + 50
    assert m * n * k < config.parallel_min_volume.of(dtype.itemsize)
    x = random_matrix(rng, (m, k), dtype)
    w = random_matrix(rng, (n, k), dtype).T if transposed else random_matrix(rng, (k, n), dtype)
    parallel_runs = []
    original = runners.run_unpacked_parallel

    def recording(*args, **kwargs):
        parallel_runs.append(args[-1])
        return original(*args, **kwargs)

    monkeypatch.setattr(runners, "run_unpacked_parallel", recording)
    results = []
    for threads in (1, 2, 3, 8):
        with smallgemm.num_threads(threads):
            results.append(smallgemm.matmul(x, w))
    assert parallel_runs == [2, 3, 8]
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    assert_close(results[0], 1.0, x, w)


def test_one_row_times_a_b_from_memory_streams_columns_per_worker_with_the_same_bits(kernel, dtype, limits):
    """One row times a B of GEMV_ROWS_PARALLEL_MIN_BYTES or more (rows contiguous): each
    worker streams its own columns of every row; the bits are those of one thread, and
    of the row inside a packed product."""
    rng = np.random.default_rng(12)
    k = 130  # a tail past the vectors of every kernel, one KC block
    n = shared.GEMV_ROWS_PARALLEL_MIN_BYTES // (k * dtype.itemsize) + 37
    x = random_matrix(rng, (1, k), dtype)
    w = random_matrix(rng, (k, n), dtype)
    with smallgemm.num_threads(1):
        expected = smallgemm.matmul(x, w)
    assert_close(expected, 1.0, x, w)
    assert n * k * dtype.itemsize >= shared.GEMV_ROWS_PARALLEL_MIN_BYTES
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
    k, n = 300, config.parallel_min_stream // 300 + 50
    assert rules.worth_threads(config, m, n, k, True, dtype) and n * k * 4 > shared.TRANSPOSED_FETCH_MIN_BYTES
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
