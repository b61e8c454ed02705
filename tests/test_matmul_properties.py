"""Property tests against numpy.matmul, and checks that the fast path copies nothing."""

import tracemalloc

import numpy as np
import pytest
from conftest import forced_kernel
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import assert_close

import smallgemm


@st.composite
def operand(draw, core_shape, batch_shape, dtype):
    """An array of batch_shape + core_shape, possibly transposed, sliced or reversed."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    step = draw(st.sampled_from([1, 1, 2, -1]))
    transposed = draw(st.booleans()) and len(core_shape) == 2
    core = core_shape[::-1] if transposed else core_shape
    base_core = (*core[:-1], abs(step) * core[-1]) if core else core
    x = rng.standard_normal(batch_shape + base_core).astype(dtype)
    x = x[..., ::step] if core else x
    if transposed:
        x = np.swapaxes(x, -1, -2)
    assert x.shape == batch_shape + core_shape
    return x


@st.composite
def matmul_problems(draw):
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    m, n, k = (draw(st.integers(0, 40)) for _ in range(3))
    batch_a = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    batch_b = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    # Make the batch shapes broadcastable: where both have an axis, one of them is 1 or equal.
    lb = min(len(batch_a), len(batch_b))
    fixed_b = list(batch_b)
    for i in range(1, lb + 1):
        if batch_a[-i] != batch_b[-i] and batch_a[-i] != 1:
            fixed_b[-i] = draw(st.sampled_from([1, batch_a[-i]]))
    batch_b = tuple(fixed_b)
    shape_a = (k,) if draw(st.booleans()) and not batch_a else (m, k)
    shape_b = (k,) if draw(st.booleans()) and not batch_b else (k, n)
    a = draw(operand(shape_a, batch_a if len(shape_a) == 2 else (), dtype))
    b = draw(operand(shape_b, batch_b if len(shape_b) == 2 else (), dtype))
    kernel = draw(st.sampled_from(["avx512", "avx2", "portable"]))
    return kernel, a, b


@settings(max_examples=150, deadline=None)
@given(matmul_problems())
def test_matches_numpy(problem):
    kernel, a, b = problem
    with forced_kernel(kernel):
        got = smallgemm.matmul(a, b)
    want = np.matmul(a, b)
    assert np.shape(got) == np.shape(want) and got.dtype == want.dtype and type(got) is type(want)
    a2 = a if a.ndim > 1 else a[None, :]
    b2 = b if b.ndim > 1 else b[:, None]
    full = np.reshape(got, (*np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]), a2.shape[-2], b2.shape[-1]))
    assert_close(full, 1.0, a2, b2)


def peak_allocation(fn):
    """Bytes allocated at the peak of ``fn()`` (NumPy reports its buffers to tracemalloc)."""
    fn()  # warm: compile, allocate the reusable workspace
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    "make",
    [
        lambda x, w: (x.T, w),  # a.T @ b
        lambda x, w: (x.T, w[::-1]),  # reversed rows
        lambda x, w: (x[::2].T, w[::2]),  # sliced with a step
        lambda x, w: (w.T[:, ::-1].T.T, x),  # negative strides, transposed
    ],
    ids=["transposed", "reversed", "sliced", "negative_transposed"],
)
def test_fast_path_makes_no_copy(make):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2048, 48)).astype(np.float32)
    w = rng.standard_normal((2048, 40)).astype(np.float32)
    a, b = make(x, w)
    operand_bytes = min(a.size, b.size) * 4
    peak = peak_allocation(lambda: smallgemm.matmul(a, b))
    result_bytes = a.shape[0] * b.shape[1] * 4
    assert peak < result_bytes + operand_bytes // 4, (peak, result_bytes, operand_bytes)


def test_linear_layer_batch_is_folded_without_copy():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 64, 256)).astype(np.float32)
    w = rng.standard_normal((256, 32)).astype(np.float32)
    peak = peak_allocation(lambda: smallgemm.matmul(x, w))
    assert peak < 16 * 64 * 32 * 4 + x.nbytes // 4
    assert_close(smallgemm.matmul(x, w), 1.0, x, w)


def test_many_small_products():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((1000, 16, 16)).astype(np.float32)
    b = rng.standard_normal((1000, 16, 16)).astype(np.float32)
    assert_close(smallgemm.matmul(a, b), 1.0, a, b)
    # A broadcast stack: b's batch axis has stride 0, nothing is copied.
    shared = np.broadcast_to(b[:1], b.shape)
    assert_close(smallgemm.matmul(a, shared), 1.0, a, shared)


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_a_stack_of_one_product_gives_the_chain_references_bits(kernel, dtype, layout):
    """A stack of one product takes the 2-D way in: the reference's bits, a (1, m, n)
    result, ``out=`` of that shape filled and returned, inputs unchanged, and NumPy's
    error for an ``out`` whose stack is not one product."""
    from reference import chain_reference

    rng = np.random.default_rng(5)
    for m, n, k in ((1, 1, 1), (16, 16, 16), (3, 40, 17), (64, 5, 33), (0, 4, 4), (4, 4, 0)):
        if layout == "strided":
            a = rng.standard_normal((1, m, 2 * k)).astype(dtype)[:, :, ::2]
            b = rng.standard_normal((1, 3 * k, n)).astype(dtype)[:, ::3, :]
        else:
            a = np.asarray(rng.standard_normal((1, m, k)).astype(dtype), order=layout)
            b = np.asarray(rng.standard_normal((1, k, n)).astype(dtype), order=layout)
        kept_a, kept_b = a.copy(), b.copy()
        expected = chain_reference(1.0, a[0], b[0])[np.newaxis]
        got = smallgemm.matmul(a, b)
        assert got.shape == (1, m, n) and got.dtype == dtype, kernel.name
        np.testing.assert_array_equal(got, expected)
        out = np.full((1, m, n), np.nan, dtype)
        assert smallgemm.matmul(a, b, out=out) is out
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(a, kept_a)
        np.testing.assert_array_equal(b, kept_b)
        with pytest.raises(ValueError, match="non-broadcastable output operand"):
            smallgemm.matmul(a, b, out=np.empty((2, m, n), dtype))
