"""Property tests: random shapes, strides, layouts and scalars against the reference."""

import numpy as np
from conftest import forced_kernel
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import assert_close

import smallgemm


@st.composite
def strided_matrix(draw, rows, cols, dtype):
    """A (rows x cols) view with random order, step and direction of each axis."""
    step_r = draw(st.sampled_from([1, 2, -1, -3]))
    step_c = draw(st.sampled_from([1, 2, -1, -2]))
    transposed = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    base_shape = (abs(step_r) * max(rows, 1), abs(step_c) * max(cols, 1))
    if transposed:
        base = rng.standard_normal(base_shape[::-1]).astype(dtype).T
    else:
        base = rng.standard_normal(base_shape).astype(dtype)
    view = base[::step_r, ::step_c][:rows, :cols]
    assert view.shape == (rows, cols)
    return view


@st.composite
def problems(draw):
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    m, n, k = (draw(st.integers(0, 70)) for _ in range(3))
    a = draw(strided_matrix(m, k, dtype))
    b = draw(strided_matrix(k, n, dtype))
    c = draw(strided_matrix(m, n, dtype))
    alpha = draw(st.sampled_from([1.0, -0.5, 3.0]))
    beta = draw(st.sampled_from([0.0, 1.0, 0.25]))
    kernel = draw(st.sampled_from(["avx512", "avx2", "portable"]))
    return kernel, alpha, a, b, beta, c


@settings(max_examples=150, deadline=None)
@given(problems())
def test_random_problems_match_reference(problem):
    kernel, alpha, a, b, beta, c = problem
    c0 = c.copy()
    a0, b0 = a.copy(), b.copy()
    with forced_kernel(kernel):
        out = smallgemm.gemm(alpha, a, b, beta=beta, c=c, overwrite_c=True)
    assert out is c
    assert_close(out, alpha, a0, b0, beta, c0)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)
