"""The compiled small ways in: ``matmul``'s 2-D products and stacks along one batch axis
decided and computed in compiled code (``runners.run_small``, ``runners.run_small_stack``),
with the bits of the general way, and every other product left to it."""

import numpy as np
import pytest
from conftest import configured, random_matrix
from reference import assert_close, chain_reference

import smallgemm
from smallgemm.drivers.unpacked import SMALL_DONE, SMALL_PLANNED, SMALL_REFUSED
from smallgemm.kernels import BySize
from smallgemm.plan import rules, runners, strategies


def _stack(rng, shape, dtype, layout):
    """A stack of ``shape`` (count, rows, cols) in the given memory layout."""
    count, rows, cols = shape
    if layout == "C":
        return rng.standard_normal(shape).astype(dtype)
    if layout == "reversed_batch":
        return rng.standard_normal(shape).astype(dtype)[::-1]
    if layout == "transposed":
        return rng.standard_normal((count, cols, rows)).astype(dtype).transpose(0, 2, 1)
    if layout == "strided":
        return rng.standard_normal((count, 2 * rows, cols + 3)).astype(dtype)[:, ::2, 1 : cols + 1]
    # Strides of no whole number of elements: a field of a packed record.
    records = np.zeros(shape, dtype=[("x", dtype), ("pad", np.int8)])
    records["x"] = rng.standard_normal(shape)
    return records["x"]


def _matrix(rng, shape, dtype, layout):
    """A ``shape`` matrix in the given memory layout (a view, never a copy of the values)."""
    rows, cols = shape
    if layout == "C":
        return rng.standard_normal(shape).astype(dtype)
    if layout == "F":
        return np.asfortranarray(rng.standard_normal(shape).astype(dtype))
    if layout == "reversed":
        return rng.standard_normal(shape).astype(dtype)[::-1, ::-1]
    return rng.standard_normal((2 * rows, cols + 5)).astype(dtype)[::2, 2 : cols + 2]  # strided


@pytest.mark.parametrize("layout", ["C", "F", "reversed", "strided"])
def test_two_dimensional_products_on_each_side_of_the_unpacked_limit(kernel, dtype, layout):
    """2-D products take matmul's direct way in, whatever their size: the same bits as the
    general way (``out=``) and ``gemm``, and as the other driver, against the reference."""
    side = round(kernel.config.unpacked_max_volume.of(dtype.itemsize) ** (1 / 3))
    rng = np.random.default_rng(side)
    for m, n, k in ((side, side, side), (side + 1, side + 1, side + 1), (3 * side, side, 3)):
        a, b = _matrix(rng, (m, k), dtype, layout), _matrix(rng, (k, n), dtype, layout)
        got = smallgemm.matmul(a, b)
        assert got.shape == (m, n) and got.dtype == dtype and got.flags.c_contiguous
        assert_close(got, 1.0, a, b)
        out = np.full((m, n), np.nan, dtype)
        np.testing.assert_array_equal(smallgemm.matmul(a, b, out=out), got)
        np.testing.assert_array_equal(smallgemm.gemm(1.0, a, b), got)
        for limit in (0, m * n * k):  # blocked, then unpacked
            with configured(
                unpacked_max_volume=BySize(limit, limit), one_thread_unpacked_volume=BySize(limit, limit)
            ):
                np.testing.assert_array_equal(smallgemm.matmul(a, b), got, err_msg=f"limit {limit}")


def test_the_small_way_in_decides_in_compiled_code(kernel, dtype):
    """``runners.run_small`` (matmul's way in for small matrices) computes small products along
    contiguous rows and leaves every other one, untouched, to the planner or to the general
    path: each route gives matmul's result against the reference, bitwise as ``out=``."""
    rng = np.random.default_rng(12)
    side = round(kernel.config.unpacked_max_volume.of(dtype.itemsize) ** (1 / 3))
    narrow_rows = kernel.config.few_rows_max + 1
    narrow_cols = kernel.narrow.cols(dtype.itemsize)
    # A narrow C of more rows than the few-rows limit: computed as given on a shallow A, turned
    # over (planned) from the kernel's turned_narrow_min_a elements of A where it turns any.
    turned_rows = max(narrow_rows, -(-kernel.config.turned_narrow_min_a.of(dtype.itemsize) // 40))
    turned_a = random_matrix(rng, (min(turned_rows, 4096), 40), dtype)
    turned = rules.turns_narrow(kernel.config, turned_a.shape[0], 2, turned_a, narrow_cols)
    records = np.zeros((6, 5), dtype=[("x", dtype), ("pad", np.int8)])
    records["x"] = rng.standard_normal((6, 5))
    cases = [
        ("16x16", random_matrix(rng, (16, 16), dtype), random_matrix(rng, (16, 16), dtype), SMALL_DONE),
        (
            "one row, B transposed",
            random_matrix(rng, (1, 9), dtype),
            random_matrix(rng, (7, 9), dtype).T,
            SMALL_DONE,
        ),
        ("one column", random_matrix(rng, (9, 7), dtype), random_matrix(rng, (7, 1), dtype), SMALL_DONE),
        (
            "B transposed",
            random_matrix(rng, (5, 9), dtype),
            random_matrix(rng, (7, 9), dtype).T,
            SMALL_PLANNED,
        ),
        (
            "past the limit",
            random_matrix(rng, (side + 1, side), dtype),
            random_matrix(rng, (side, side), dtype),
            SMALL_PLANNED,
        ),
        (
            "narrow, many rows",
            random_matrix(rng, (narrow_rows, 40), dtype),
            random_matrix(rng, (40, 2), dtype),
            SMALL_DONE,
        ),
        (
            "narrow, turned",
            turned_a,
            random_matrix(rng, (40, 2), dtype),
            SMALL_PLANNED if turned else SMALL_DONE,
        ),
        ("k = 0", np.ones((3, 0), dtype), np.ones((0, 4), dtype), SMALL_PLANNED),
        ("part-element strides", records["x"], random_matrix(rng, (5, 3), dtype), SMALL_REFUSED),
        ("mismatched", random_matrix(rng, (3, 4), dtype), random_matrix(rng, (5, 6), dtype), SMALL_REFUSED),
    ]
    smallgemm.matmul(*cases[0][1:3])  # a small product: the unpacked entry is ready from here on
    for name, a, b, route in cases:
        a0, b0 = a.copy(), b.copy()
        c = np.full((a.shape[0], b.shape[1]), np.nan, dtype)
        assert runners.run_small(a, b, c, dtype) == route, name
        if route == SMALL_DONE:
            assert_close(c, 1.0, a, b)
        else:
            assert np.isnan(c).all(), f"{name}: written, though left to another path"
        np.testing.assert_array_equal(a, a0)
        np.testing.assert_array_equal(b, b0)
        if route == SMALL_REFUSED and a.shape[1] != b.shape[0]:
            with pytest.raises(ValueError, match=r"\(3, 4\) and \(5, 6\)"):
                smallgemm.matmul(a, b)
            continue
        got = smallgemm.matmul(a, b)
        assert_close(got, 1.0, a, b)
        np.testing.assert_array_equal(smallgemm.matmul(a, b, out=np.empty_like(got)), got, err_msg=name)
    a, b = random_matrix(rng, (16, 16), dtype), random_matrix(rng, (16, 16), dtype)
    c = np.empty((16, 16), dtype)
    with configured(
        unpacked_max_volume=BySize(0, 0)
    ):  # the limit a prepared state binds, changed after a call
        assert runners.run_small(a, b, c, dtype) == SMALL_PLANNED
    assert runners.run_small(a, b, c, dtype) == SMALL_DONE
    _check_outs(
        lambda left, right, out: runners.run_small(left, right, out, dtype), a, b, smallgemm.matmul(a, b)
    )


@pytest.mark.parametrize(
    ("m", "n", "k"), [(16, 16, 40), (1, 50, 30), (4, 300, 60), (30, 100, 20), (33, 70, 64), (17, 40, 9)]
)
def test_a_small_continued_chain_is_computed_on_the_small_way_in(kernel, dtype, m, n, k):
    """gemm's accumulation (alpha == beta == 1, c overwritten, as ``smallgemm.nn`` sums a
    gradient) on the tile loops, which start each chain from C: the bits of the chain from C,
    for a C in any layout and A transposed; a B without contiguous rows is left to the planner."""
    rng = np.random.default_rng(m * n)
    a, b = random_matrix(rng, (m, k), dtype), random_matrix(rng, (k, n), dtype)
    smallgemm.matmul(a, b)  # a small product: the unpacked entry is ready from here on
    for name, left, c in (
        ("C order", a, random_matrix(rng, (m, n), dtype)),
        ("F order, A transposed", np.asfortranarray(a), np.asfortranarray(random_matrix(rng, (m, n), dtype))),
        ("every other column", a, random_matrix(rng, (m, 2 * n), dtype)[:, ::2]),
    ):
        expected = chain_reference(1.0, left, b, 1.0, c)
        assert runners.run_small_scaled(1.0, left, b, 1.0, c, dtype) == SMALL_DONE, name
        np.testing.assert_array_equal(c, expected, err_msg=name)
        assert smallgemm.gemm(1.0, left, b, beta=1.0, c=c, overwrite_c=True) is c
        np.testing.assert_array_equal(c, chain_reference(1.0, left, b, 1.0, expected), err_msg=name)
    if n > 1:
        transposed_b = np.asfortranarray(b)
        c = random_matrix(rng, (m, n), dtype)
        before = c.copy()
        assert runners.run_small_scaled(1.0, a, transposed_b, 1.0, c, dtype) == SMALL_PLANNED
        np.testing.assert_array_equal(c, before)
        smallgemm.gemm(1.0, a, transposed_b, beta=1.0, c=c, overwrite_c=True)
        np.testing.assert_array_equal(c, chain_reference(1.0, a, b, 1.0, before))


def _check_outs(small_way, a, b, expected):
    """Each out of ``_outs`` through a small way in (``small_way(left, right, out)``: written
    bitwise as ``expected``, or refused and untouched) and through matmul."""
    for name, out, route in _outs(a, b, expected.shape, expected.dtype):
        left, right = (out if name == "out is A" else a), (out if name == "out is B" else b)
        before = out.copy()
        assert small_way(left, right, out) == route, name
        if route == SMALL_REFUSED:
            np.testing.assert_array_equal(out, before, err_msg=f"{name}: written, though refused")
        else:
            np.testing.assert_array_equal(out, expected, err_msg=name)
        if out.shape == expected.shape:
            assert smallgemm.matmul(left, right, out=out) is out
            np.testing.assert_array_equal(out, expected, err_msg=name)


def _outs(a, b, shape, dtype):
    """(name, out, route of the small ways in) for products of a and b into ``shape``:
    outs written in place whatever their layout, and those left to the general path (an
    out that is A or B is a copy of it, given as that operand too)."""
    spread = np.full((*shape[:-1], 2 * shape[-1]), np.nan, dtype)[..., ::2]
    order_f = np.asfortranarray(np.full(shape, np.nan, dtype))
    return [
        ("out in F order", order_f, SMALL_DONE),
        ("out every other column", spread, SMALL_DONE),
        ("out is A", a.copy(), SMALL_REFUSED),
        ("out is B", b.copy(), SMALL_REFUSED),
        ("out of another shape", np.full((*shape[:-1], shape[-1] + 1), np.nan, dtype), SMALL_REFUSED),
    ]


def _planned_stack_bits(a, b):
    """``a @ b`` for two stacks through ``strategies.compute`` (the way every stack took before
    the small-stack entry): the bits that entry must give."""
    count, m, _ = a.shape
    n, size = b.shape[2], a.itemsize
    c = np.empty((count, m, n), a.dtype)
    offsets = [
        np.arange(count, dtype=np.int64) * step
        for step in (a.strides[0] // size, b.strides[0] // size, m * n)
    ]
    strategies.compute(1.0, a[0], b[0], 0.0, c[0], tuple(offsets))
    return c


@pytest.mark.parametrize("layout", ["C", "reversed_batch", "transposed", "strided"])
def test_the_small_stack_way_in_decides_in_compiled_code(kernel, dtype, layout, monkeypatch):
    """``runners.run_small_stack`` (matmul's way in for two stacks along one batch axis) computes
    stacks of small products along contiguous rows of B, one thread, with the bits of
    ``strategies.compute`` and of lone products, and leaves every other stack, untouched, to
    the planner: a product past the small limit, B transposed, a narrow C of many rows, or
    a stack worth the threads (but on one thread the same stack is small again)."""
    rng = np.random.default_rng(13)
    config = kernel.config
    side = round(config.unpacked_max_volume.of(dtype.itemsize) ** (1 / 3))
    narrow_rows = config.few_rows_max + 1
    # A narrow C of many rows: computed as given, unless A's rows are not contiguous (the
    # planner swaps it) or A is large enough to be turned over (``rules.turns_narrow``).
    narrow_cols = kernel.narrow.cols(dtype.itemsize)
    swapped_narrow = layout == "transposed" and narrow_cols >= 2 * 2
    turned_rows = min(4096, max(narrow_rows, -(-config.turned_narrow_min_a.of(dtype.itemsize) // 40)))
    turned = swapped_narrow or rules.turns_narrow(
        config, turned_rows, 2, np.empty((turned_rows, 40), dtype), narrow_cols
    )
    # The fewest 16x16x16 products worth the threads (rules.stack_worth_threads), and one fewer.
    worth = (
        config.parallel_min_stack_volume.of(dtype.itemsize),
        16**3 + config.stack_product_overhead.of(dtype.itemsize),
    )
    parallel_count = -(-worth[0] // worth[1])
    assert rules.stack_worth_threads(config, parallel_count, 16, 16, 16, dtype)
    assert not rules.stack_worth_threads(config, parallel_count - 1, 16, 16, 16, dtype)
    cases = [  # (name, count, m, k, n, B's layout, threads, route)
        ("one 16x16", 1, 16, 16, 16, "C", 1, SMALL_DONE),
        ("ten 16x16", 10, 16, 16, 16, "C", 1, SMALL_DONE),
        ("edges", 3, 7, 33, 9, "C", 2, SMALL_DONE),
        ("k = 1", 2, 40, 1, 50, "C", 3, SMALL_DONE),
        ("one row", 3, 1, 30, 20, "C", 8, SMALL_DONE),
        ("one column", 3, 20, 30, 1, "C", 1, SMALL_DONE),
        ("B transposed", 3, 7, 33, 9, "transposed", 1, SMALL_PLANNED),
        ("past the limit", 2, side + 1, side, side, "C", 1, SMALL_PLANNED),
        ("narrow, many rows", 2, narrow_rows, 40, 2, "C", 1, SMALL_PLANNED if swapped_narrow else SMALL_DONE),
        ("narrow, turned", 2, turned_rows, 40, 2, "C", 1, SMALL_PLANNED if turned else SMALL_DONE),
        ("worth the threads", parallel_count, 16, 16, 16, "C", 2, SMALL_PLANNED),
        ("one product short of the threads", parallel_count - 1, 16, 16, 16, "C", 2, SMALL_DONE),
        ("the same on one thread", parallel_count, 16, 16, 16, "C", 1, SMALL_DONE),
    ]
    batches = []
    monkeypatch.setattr(
        strategies,
        "compute",
        lambda *args, _run=strategies.compute: (len(args) > 5 and batches.append(args), _run(*args)),
    )
    for name, count, m, k, n, b_layout, threads, route in cases:
        a = _stack(rng, (count, m, k), dtype, layout)
        b = _stack(rng, (count, k, n), dtype, b_layout)
        a0, b0 = a.copy(), b.copy()
        expected = _planned_stack_bits(a, b)  # the stack entry is in use from here on
        c = np.full((count, m, n), np.nan, dtype)
        with smallgemm.num_threads(threads):
            assert runners.run_small_stack(a, b, c, dtype) == route, name
            del batches[:]
            got = smallgemm.matmul(a, b)
        assert len(batches) == (route != SMALL_DONE), name
        if route == SMALL_DONE:
            np.testing.assert_array_equal(c, expected, err_msg=name)
        else:
            assert np.isnan(c).all(), f"{name}: written, though left to the planner"
        np.testing.assert_array_equal(got, expected, err_msg=name)
        for t in (0, count - 1):
            np.testing.assert_array_equal(
                got[t], smallgemm.matmul(np.array(a[t]), np.array(b[t])), err_msg=name
            )
        assert_close(got, 1.0, a, b)
        np.testing.assert_array_equal(a, a0)
        np.testing.assert_array_equal(b, b0)
    a, b = _stack(rng, (4, 16, 16), dtype, layout), _stack(rng, (4, 16, 16), dtype, "C")
    with configured(
        unpacked_max_volume=BySize(0, 0)
    ):  # the limit a prepared state binds, changed after a call
        assert runners.run_small_stack(a, b, np.empty((4, 16, 16), dtype), dtype) == SMALL_PLANNED
    assert runners.run_small_stack(a, b, np.empty((4, 16, 16), dtype), dtype) == SMALL_DONE
    a = np.ascontiguousarray(a)

    def small_stack(left, right, out):
        return runners.run_small_stack(left, right, out, dtype)

    _check_outs(small_stack, a, b, _planned_stack_bits(a, b))


@pytest.mark.parametrize("layout", ["C", "reversed_batch", "transposed", "strided", "byte_strides"])
@pytest.mark.parametrize("shape", [(5, 16, 16, 16), (3, 7, 33, 9), (2, 40, 1, 50)], ids=str)
def test_two_stacks_along_one_batch_axis(kernel, dtype, layout, shape):
    """``[t, m, k] @ [t, k, n]`` (matmul's shortest way into the batch loop) in any layout:
    each product bitwise as a lone call, all of them against the reference."""
    count, m, k, n = shape
    rng = np.random.default_rng(8)
    a = _stack(rng, (count, m, k), dtype, layout)
    b = _stack(rng, (count, k, n), dtype, "C" if layout == "C" else "transposed")
    got = smallgemm.matmul(a, b)
    assert got.shape == (count, m, n) and got.dtype == dtype and got.flags.c_contiguous
    for t in range(count):
        np.testing.assert_array_equal(got[t], smallgemm.matmul(np.array(a[t]), b[t]))
    assert_close(got, 1.0, a, b)


@pytest.mark.parametrize("layout", ["C", "reversed_batch", "transposed", "strided", "byte_strides"])
def test_a_stack_times_one_matrix(kernel, dtype, layout):
    """``[t, m, k] @ [k, n]`` (a linear layer): folded into one product where the strides
    allow it, a loop otherwise; every matrix of the result bitwise as a lone product."""
    rng = np.random.default_rng(9)
    a = _stack(rng, (4, 37, 20), dtype, layout)
    b = rng.standard_normal((20, 45)).astype(dtype)
    got = smallgemm.matmul(a, b)
    assert got.shape == (4, 37, 45) and got.dtype == dtype and got.flags.c_contiguous
    for t in range(4):
        np.testing.assert_array_equal(got[t], smallgemm.matmul(np.array(a[t]), b))
    assert_close(got, 1.0, a, b)


@pytest.mark.parametrize("rows", [8, 300], ids=["small", "planned"])
def test_a_stack_times_one_matrix_into_out_and_with_more_axes(kernel, dtype, rows):
    """A linear layer into an ``out=`` that folds, one that does not (every other matrix of a
    larger array: the general path), and a stack of two batch axes times one matrix: each
    result is the one product's bits, small or planned."""
    rng = np.random.default_rng(10)
    a = rng.standard_normal((2, 3, rows, 20)).astype(dtype)
    b = rng.standard_normal((20, 45)).astype(dtype)
    expected = chain_reference(1.0, a.reshape(-1, 20), b).reshape(2, 3, rows, 45)
    np.testing.assert_array_equal(smallgemm.matmul(a, b), expected)
    layer = a[0]
    folding = np.full((3, rows, 45), np.nan, dtype)
    assert smallgemm.matmul(layer, b, out=folding) is folding
    np.testing.assert_array_equal(folding, expected[0])
    apart = np.full((6, rows, 45), np.nan, dtype)
    every_other = apart[::2]
    assert smallgemm.matmul(layer, b, out=every_other) is every_other
    np.testing.assert_array_equal(every_other, expected[0])
    assert np.isnan(apart[1::2]).all()


@pytest.mark.parametrize(("m", "k"), [(2, 3), (16, 16), (33, 64), (90, 93), (300, 200)])
def test_a_transposed_matrix_times_a_column_is_computed_swapped(kernel, dtype, m, k):
    """``A.T @ x`` (A's columns contiguous) on the small way in is one row times A's rows,
    C^T = x^T A (``unpacked.column_swaps``), as the table reads it: the chain reference's bits
    for a column, a strided column, a vector, into an out= and through gemm with beta."""
    rng = np.random.default_rng(m + k)
    a = rng.standard_normal((k, m)).astype(dtype).T
    smallgemm.matmul(a[:1], np.ones((k, 1), dtype))  # a small product: the unpacked entry is ready
    for name, x in (
        ("column", random_matrix(rng, (k, 1), dtype)),
        ("every other row", random_matrix(rng, (2 * k, 1), dtype)[::2]),
    ):
        expected = chain_reference(1.0, a, x)
        small = smallgemm.explain(a, x, threads=1).strategy == "small product"
        c = np.full((m, 1), np.nan, dtype)
        assert runners.run_small(a, x, c, dtype) == (SMALL_DONE if small else SMALL_PLANNED), name
        assert small == (m * k < kernel.config.parallel_min_stream.of(dtype.itemsize)), name
        if small:
            np.testing.assert_array_equal(c, expected, err_msg=name)
            assert "column_swaps" in smallgemm.explain(a, x).turned_over, name
        np.testing.assert_array_equal(smallgemm.matmul(a, x), expected, err_msg=name)
        np.testing.assert_array_equal(smallgemm.matmul(a, x[:, 0]), expected[:, 0], err_msg=name)
        out = np.full((m, 2), np.nan, dtype)[:, :1]
        assert smallgemm.matmul(a, x, out=out) is out
        np.testing.assert_array_equal(out, expected, err_msg=name)
        c = random_matrix(rng, (m, 1), dtype)
        np.testing.assert_array_equal(
            smallgemm.gemm(2.0, a, x, beta=0.5, c=c), chain_reference(2.0, a, x, 0.5, c), err_msg=name
        )


@pytest.mark.parametrize(
    ("m", "n", "k"), [(33, 2, 40), (64, 4, 256), (150, 4, 150), (1000, 4, 64), (300, 6, 128)]
)
def test_a_narrow_product_of_many_rows_has_the_chain_bits_as_given_or_turned(kernel, dtype, m, n, k):
    """A C at most half the narrow tile wide with more rows than the few-rows limit: computed
    as given on the small way in below the kernel's turned_narrow_min_a, turned over by the
    planner from it; the chain reference's bits either way, and the route the rule names."""
    rng = np.random.default_rng(m * n + k)
    a, b = random_matrix(rng, (m, k), dtype), random_matrix(rng, (k, n), dtype)
    smallgemm.matmul(a[:1], b)  # a small product: the unpacked entry is ready
    turned = rules.turns_narrow(kernel.config, m, n, a, kernel.narrow.cols(dtype.itemsize))
    c = np.full((m, n), np.nan, dtype)
    route = runners.run_small(a, b, c, dtype)
    assert route == (SMALL_PLANNED if turned else SMALL_DONE)
    expected = chain_reference(1.0, a, b)
    if route == SMALL_DONE:
        np.testing.assert_array_equal(c, expected)
    np.testing.assert_array_equal(smallgemm.matmul(a, b), expected)


@pytest.mark.parametrize(("count", "m", "k"), [(3, 5, 7), (20, 64, 64), (4, 300, 200)])
def test_a_stack_of_transposed_matrices_times_columns_is_computed_swapped(kernel, dtype, count, m, k):
    """A stack of ``A.T @ x`` on the small stack way in: each product read swapped, as a lone
    one, with the chain reference's bits; the table's stack row reads it the same way."""
    rng = np.random.default_rng(count * m)
    a = rng.standard_normal((count, k, m)).astype(dtype).transpose(0, 2, 1)
    x = rng.standard_normal((count, k, 1)).astype(dtype)
    expected = np.stack([chain_reference(1.0, a[t], x[t]) for t in range(count)])
    smallgemm.matmul(a[:, :1], x)  # a small stack: the entries are ready
    c = np.full((count, m, 1), np.nan, dtype)
    assert runners.run_small_stack(a, x, c, dtype) == SMALL_DONE
    np.testing.assert_array_equal(c, expected)
    np.testing.assert_array_equal(smallgemm.matmul(a, x), expected)
    np.testing.assert_array_equal(_planned_stack_bits(a, x), expected)
    assert smallgemm.explain(a, x, threads=1).stack.startswith("small stack")
