"""Products computed turned over, split-K, batch invariance and prepacked operands."""

import numpy as np
import pytest
from conftest import b_layouts, blocked_product, random_matrix
from reference import assert_close, chain_reference

import smallgemm
from smallgemm.kernels import BySize
from smallgemm.plan import blocking, in_force, prepared, rules, runners, strategies


@pytest.mark.parametrize("n", [1, 10, 17, 32])
def test_few_columns_from_a_transposed_a_match_the_other_paths_bitwise(kernel, dtype, always_parallel, n):
    """``x.T @ g`` with few columns (up to the kernel's ``few_rows_max``) is computed turned
    over, as a few-rows product: the bits are those of the same product with ``x.T`` copied
    row-major, on any thread count, alone or in a stack (and so with more columns, packed)."""
    rng = np.random.default_rng(n)
    k, m = 70, 300
    x = random_matrix(rng, (k, m), dtype)
    g = random_matrix(rng, (k, n), dtype)
    turned = rules.swaps(kernel.config, x.T, g, np.empty((m, n), dtype), kernel.narrow.cols(dtype.itemsize))
    assert turned == (n <= kernel.config.few_rows_max)
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
def test_few_rows_times_a_transposed_b_turned_over_give_the_packed_bits(
    kernel, dtype, always_parallel, limits, everywhere
):
    """``x @ W.T`` (W stored [N, K]) with as many rows as the narrow or the main tile has
    columns (float64: 2 to two main strips) is computed turned over, W x^T, on the kernels of
    that turn them (``turned_few_rows`` in their configuration; or on every kernel, to run the path on each): right against the reference (alpha, beta, every
    layout of x and of C), and the bits of the blocked driver, of each row alone, of the rows
    inside a large product and of every thread count; the operands are left as they were."""
    if everywhere:
        limits(turned_few_rows=True)
    narrow, wide = kernel.narrow.cols(dtype.itemsize), kernel.nr(dtype)
    turned_rows = prepared.current_prepared(dtype).turned_rows
    # float64: from 2 rows to two main strips; float32: one strip of either tile.
    expected = tuple(range(2, 2 * wide + 1)) if dtype.itemsize == 8 else (narrow, wide)
    assert turned_rows == (expected if everywhere or kernel.config.turned_few_rows else ())
    # Each end of the turned counts and the strip widths among them; counts on either side.
    turned = sorted(
        {min(turned_rows, default=0), narrow, wide, max(turned_rows, default=0)} & set(turned_rows)
    )
    not_turned = sorted(
        {2, narrow - 1, narrow + 1, wide + 1, max(turned_rows, default=0) + 1} - set(turned_rows)
    )
    rng = np.random.default_rng(21)
    # Two KC blocks; W past few_rows_max rows, with edge columns for every tile.
    config = in_force.config_of(kernel)
    k, n = in_force.block_sizes(kernel, dtype).kc + 17, config.few_rows_max + 2 * wide + 5
    w = random_matrix(rng, (n, k), dtype)
    w_copy = w.copy()
    for m in turned + not_turned:
        x = random_matrix(rng, (m, k), dtype)
        assert rules.turns_few_rows(config, x, w.T, turned_rows) == (m in turned)
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
                np.testing.assert_array_equal(
                    smallgemm.matmul(x, w.T), got, err_msg=f"m {m}, {threads} threads"
                )
        for name, x_laid in (
            ("F", np.asfortranarray(x)),
            ("reversed", x[::-1]),
            ("strided", np.repeat(x, 2, axis=1)[:, ::2]),
        ):
            expected = got[::-1] if name == "reversed" else got
            np.testing.assert_array_equal(smallgemm.matmul(x_laid, w.T), expected, err_msg=f"m {m} x {name}")
        w_in_wider = random_matrix(rng, (n, k + 5), dtype)[:, 2 : k + 2]  # W's rows further apart
        w_in_wider[...] = w
        np.testing.assert_array_equal(
            smallgemm.matmul(x, w_in_wider.T), got, err_msg=f"m {m} W in a wider array"
        )
        np.testing.assert_array_equal(
            smallgemm.matmul(x, w[::-1].T), got[:, ::-1], err_msg=f"m {m} W reversed"
        )
        for name, c in (
            ("C", random_matrix(rng, (m, n), dtype)),
            ("F", random_matrix(rng, (m, n), dtype, "F")),
            ("strided", random_matrix(rng, (m, 2 * n), dtype)[:, ::2]),
        ):
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
    sizes = in_force.block_sizes(kernel, dtype)
    k = sizes.kc + 17  # two KC blocks: the merge order matters
    big_m = 300
    for name, w in b_layouts(rng, k, 150, dtype):
        x = random_matrix(rng, (big_m, k), dtype)
        with smallgemm.num_threads(threads):
            full = smallgemm.matmul(x, w)
            for i in (0, 5, 299):
                np.testing.assert_array_equal(
                    smallgemm.matmul(x[i], w), full[i], err_msg=f"{name} row {i} alone"
                )
                np.testing.assert_array_equal(smallgemm.matmul(x[i : i + 1], w)[0], full[i])
            small = smallgemm.matmul(x[8:12], w)
            np.testing.assert_array_equal(small, full[8:12], err_msg=f"{name} small batch")
            stacked = smallgemm.matmul(x.reshape(3, 100, k), w)
            np.testing.assert_array_equal(stacked.reshape(big_m, -1), full, err_msg=f"{name} folded stack")
            pairs = smallgemm.matmul(x.reshape(150, 2, k), np.broadcast_to(w, (150, *w.shape)))
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


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_one_row_times_prepacked_panels_side_by_side_gives_the_chain_references_bits(
    kernel, dtype, workers, limits
):
    """One row of A takes several packed panels of a slice at once (``panel_row``): slices
    of eight panels, a last one of seven (a group, then three alone, the last part
    padding), three KC blocks, every merge rule, a strided and a reversed row of A, a
    strided output, on one worker or several (tasks of whole groups): every element is the
    scalar FMA chain."""
    limits(parallel_min_volume=BySize(0, 0), parallel_min_packed_rows=BySize(0, 0))
    nr = kernel.nr(dtype)
    in_force.set_block_sizes(kernel, dtype, blocking.BlockSizes(mc=4 * kernel.mr(), nc=8 * nr, kc=64))
    try:
        rng = np.random.default_rng(11)
        k, n = 2 * 64 + 5, 22 * nr + 3
        w = random_matrix(rng, (n, k), dtype)
        packed = smallgemm.pack(w, trans=True)
        x = random_matrix(rng, (1, k), dtype)
        c = random_matrix(rng, (1, n), dtype)
        wide = np.full((1, 2 * n), 7.0, dtype)
        with smallgemm.num_threads(workers):
            assert smallgemm.explain(x, packed).strategy.startswith("prepacked few rows")
            np.testing.assert_array_equal(smallgemm.matmul(x, packed), chain_reference(1.0, x, w.T))
            np.testing.assert_array_equal(smallgemm.matmul(x[0], packed), chain_reference(1.0, x, w.T)[0])
            for alpha, beta in ((0.5, 2.0), (1.0, 1.0), (2.0, 0.0)):
                np.testing.assert_array_equal(
                    smallgemm.gemm(alpha, x, packed, beta=beta, c=c), chain_reference(alpha, x, w.T, beta, c)
                )
            for row in (random_matrix(rng, (1, 2 * k), dtype)[:, ::2], x[:, ::-1]):
                np.testing.assert_array_equal(smallgemm.matmul(row, packed), chain_reference(1.0, row, w.T))
            smallgemm.matmul(x, packed, out=wide[:, ::2])
        np.testing.assert_array_equal(wide[:, ::2], chain_reference(1.0, x, w.T))
        np.testing.assert_array_equal(wide[:, 1::2], 7.0)
    finally:
        in_force.set_block_sizes(kernel, dtype, None)


def test_prepacked_matmul_writes_into_out(kernel, dtype, monkeypatch):
    """``matmul(x, packed, out=...)`` computes straight into ``out`` when it can (a vector,
    a matrix, a foldable stack, a strided view), through a new array when ``out``
    overlaps x or has another dtype; the values are those of the unpacked operand."""
    rng = np.random.default_rng(9)
    k, n = 70, 90
    w = random_matrix(rng, (k, n), dtype)
    packed = smallgemm.pack(w)
    targets = []
    real = strategies.compute

    def recording(alpha, a, b, beta, c, offsets=None):
        if not isinstance(b, np.ndarray):  # the packed B's table
            targets.append(c)
        real(alpha, a, b, beta, c, offsets)

    monkeypatch.setattr(strategies, "compute", recording)
    for x in (
        random_matrix(rng, (k,), dtype),
        random_matrix(rng, (5, k), dtype),
        random_matrix(rng, (2, 3, k), dtype),
    ):
        expected = smallgemm.matmul(x, w)
        wide = np.full((*x.shape[:-1], 2 * n), 7.0, dtype)
        for out in (np.empty((*x.shape[:-1], n), dtype), wide[..., ::2]):
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
    limits(parallel_min_volume=BySize(0, 0), parallel_min_packed_rows=BySize(0, 0))
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
    with pytest.raises(TypeError, match=r"float64.*packed operand is float32"):
        smallgemm.matmul(np.ones((4, 30)), packed)
    with pytest.raises(ValueError, match="trans_b"):
        smallgemm.gemm(1.0, np.ones((4, 30), np.float32), packed, trans_b=True)
    with pytest.raises(ValueError, match="shapes do not match"):
        smallgemm.gemm(1.0, np.ones((4, 30), np.float32), packed, trans_a=True)
    with (
        smallgemm.use_kernel("portable"),
        pytest.raises(ValueError, match=r"packed for the 'avx512' kernel|packed for the 'avx2' kernel"),
    ):
        smallgemm.matmul(np.ones((4, 30), np.float32), packed)
    with pytest.raises(TypeError, match="float32 and float64"):
        smallgemm.pack(np.ones((3, 3), np.int64))
    with pytest.raises(ValueError, match="2-D"):
        smallgemm.pack(np.ones(3, np.float32))
    # float32 rows with a float64 packed operand are widened exactly.
    p64 = smallgemm.pack(w.astype(np.float64))
    x = rng.standard_normal((2, 30)).astype(np.float32)
    np.testing.assert_array_equal(
        smallgemm.matmul(x, p64), smallgemm.matmul(x.astype(np.float64), w.astype(np.float64))
    )
