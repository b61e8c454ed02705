"""``smallgemm.gemm``: scipy's calling convention, NumPy's dtype rules, clear errors."""

import numpy as np
import pytest
from reference import assert_close

import smallgemm


@pytest.fixture
def rng():
    return np.random.default_rng(42)


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_transposes(rng, dtype, trans_a, trans_b):
    m, n, k = 19, 23, 29
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
    out = smallgemm.gemm(1.0, a, b, trans_a=trans_a, trans_b=trans_b)
    assert out.shape == (m, n)
    assert_close(out, 1.0, a.T if trans_a else a, b.T if trans_b else b)


@pytest.mark.parametrize(
    "da,db,expected",
    [
        (np.float32, np.float32, np.float32),
        (np.float32, np.float64, np.float64),
        (np.float64, np.float32, np.float64),
        (np.float64, np.float64, np.float64),
    ],
)
def test_result_dtype_follows_numpy(rng, da, db, expected):
    a = rng.standard_normal((5, 6)).astype(da)
    b = rng.standard_normal((6, 7)).astype(db)
    out = smallgemm.gemm(1.0, a, b)
    assert out.dtype == expected == (a @ b).dtype
    # Mixed precision loses nothing: the float32 operand is widened exactly.
    assert_close(out, 1.0, a, b, dtype=np.float64 if expected == np.float64 else np.float32)


def test_float64_c_promotes(rng):
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((5, 3)).astype(np.float32)
    c = rng.standard_normal((4, 3))
    out = smallgemm.gemm(1.0, a, b, beta=1.0, c=c)
    assert out.dtype == np.float64
    assert_close(out, 1.0, a, b, 1.0, c)


def test_overwrite_c_semantics(rng, dtype):
    a = rng.standard_normal((6, 4)).astype(dtype)
    b = rng.standard_normal((4, 5)).astype(dtype)
    c = rng.standard_normal((6, 5)).astype(dtype)
    c0 = c.copy()
    out = smallgemm.gemm(2.0, a, b, beta=1.0, c=c)
    assert out is not c
    np.testing.assert_array_equal(c, c0)
    out = smallgemm.gemm(2.0, a, b, beta=1.0, c=c, overwrite_c=True)
    assert out is c
    assert_close(c, 2.0, a, b, 1.0, c0)


def test_overwrite_c_with_other_dtype_returns_new_array(rng):
    a = rng.standard_normal((3, 3))
    c = np.ones((3, 3), np.float32)
    out = smallgemm.gemm(1.0, a, a, beta=1.0, c=c, overwrite_c=True)
    assert out is not c and out.dtype == np.float64
    np.testing.assert_array_equal(c, np.ones((3, 3), np.float32))


def test_c_overlapping_an_input(rng, dtype):
    a = rng.standard_normal((8, 8)).astype(dtype)
    a0 = a.copy()
    out = smallgemm.gemm(1.0, a, a0, beta=1.0, c=a, overwrite_c=True)
    assert out is a
    assert_close(out, 1.0, a0, a0, 1.0, a0)


def test_lists_are_accepted():
    out = smallgemm.gemm(1.0, [[1.0, 2.0]], [[3.0], [4.0]])
    np.testing.assert_array_equal(out, [[11.0]])


@pytest.mark.parametrize("bad", [np.int32, np.int64, np.complex64, np.complex128, np.float16, np.bool_])
def test_unsupported_dtypes_raise_type_error(bad):
    a = np.ones((2, 2), dtype=bad)
    f = np.ones((2, 2), np.float32)
    with pytest.raises(TypeError, match="float32 and float64"):
        smallgemm.gemm(1.0, a, f)
    with pytest.raises(TypeError, match="float32 and float64"):
        smallgemm.gemm(1.0, f, a)
    with pytest.raises(TypeError, match="float32 and float64"):
        smallgemm.gemm(1.0, f, f, beta=1.0, c=a)


@pytest.mark.parametrize("scalar", [1j, "2", None, True])
def test_bad_scalars_raise_type_error(scalar):
    f = np.ones((2, 2))
    with pytest.raises(TypeError, match="alpha"):
        smallgemm.gemm(scalar, f, f)
    with pytest.raises(TypeError, match="beta"):
        smallgemm.gemm(1.0, f, f, beta=scalar)


def test_shape_mismatch_names_the_shapes():
    a, b = np.ones((3, 4)), np.ones((5, 6))
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(5, 6\)"):
        smallgemm.gemm(1.0, a, b)
    with pytest.raises(ValueError, match=r"\(4, 3\)"):
        smallgemm.gemm(1.0, a, np.ones((4, 2)), trans_a=True)
    with pytest.raises(ValueError, match=r"c has shape \(2, 2\).*\(3, 2\)"):
        smallgemm.gemm(1.0, a, np.ones((4, 2)), beta=1.0, c=np.ones((2, 2)))


@pytest.mark.parametrize("shape", [(3,), (2, 3, 4), ()])
def test_operands_must_be_matrices(shape):
    with pytest.raises(ValueError, match="2-D"):
        smallgemm.gemm(1.0, np.ones(shape), np.ones((3, 3)))


def test_byte_swapped_and_odd_strides(rng):
    a = rng.standard_normal((5, 7)).astype(">f8")
    b = rng.standard_normal((7, 3))
    assert_close(smallgemm.gemm(1.0, a, b), 1.0, a, b)
    raw = np.zeros(5 * 7 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(5, 7)  # unaligned
    raw[...] = rng.standard_normal((5, 7))
    assert_close(smallgemm.gemm(1.0, raw, b.astype(np.float32)), 1.0, raw, b.astype(np.float32))


def test_empty_and_zero_k(dtype):
    assert smallgemm.gemm(1.0, np.ones((0, 3), dtype), np.ones((3, 4), dtype)).shape == (0, 4)
    out = smallgemm.gemm(1.0, np.ones((2, 0), dtype), np.ones((0, 4), dtype))
    np.testing.assert_array_equal(out, np.zeros((2, 4)))
    c = np.full((2, 4), 3.0, dtype)
    out = smallgemm.gemm(1.0, np.ones((2, 0), dtype), np.ones((0, 4), dtype), beta=2.0, c=c)
    np.testing.assert_array_equal(out, np.full((2, 4), 6.0))


def test_the_small_way_in_of_gemm(kernel, dtype):
    """``runners.run_small_scaled`` (gemm's way in for small matrices) computes small products
    with alpha and beta into a new array or an overwritten c of any layout, bitwise as the
    planner; it refuses, untouched, a c of another shape or on an operand, which the
    general path then rejects or computes through a copy; beta == 0 never reads c."""
    from conftest import random_matrix

    from smallgemm.drivers.unpacked import SMALL_DONE, SMALL_PLANNED, SMALL_REFUSED
    from smallgemm.plan import runners, strategies

    rng = np.random.default_rng(21)
    a, b = random_matrix(rng, (17, 13), dtype), random_matrix(rng, (17, 11), dtype)  # op(a) = a.T
    smallgemm.gemm(1.0, a, b, trans_a=True)  # a small product: the unpacked entry is ready from here on
    c0 = random_matrix(rng, (13, 11), dtype)
    for alpha, beta in ((1.0, 0.0), (-0.5, 2), (2, 1.0), (0.0, 1.0)):
        expected = np.empty((13, 11), dtype)
        np.copyto(expected, c0)
        strategies.compute(float(alpha), a.T, b, float(beta), expected)  # the planner's bits
        for layout in ("C", "F", "strided"):
            if layout == "strided":
                c = np.full((13, 33), np.nan, dtype)[:, ::3]
            else:
                c = np.full((13, 11), np.nan, dtype, order=layout)
            c[...] = c0
            if beta == 0:
                c[...] = np.nan
            before = c.copy()
            if alpha == 0:  # nothing to multiply: the planner's "scale only" row, c untouched here
                assert runners.run_small_scaled(alpha, a.T, b, beta, c, dtype) == SMALL_PLANNED
                np.testing.assert_array_equal(c, before)
            else:
                assert runners.run_small_scaled(alpha, a.T, b, beta, c, dtype) == SMALL_DONE
                np.testing.assert_array_equal(c, expected, err_msg=f"{alpha} {beta} {layout}")
            c[...] = before
            got = smallgemm.gemm(alpha, a, b, beta=beta, c=c, trans_a=True, overwrite_c=True)
            assert got is c
            np.testing.assert_array_equal(got, expected, err_msg=f"{alpha} {beta} {layout}")
        assert_close(expected, alpha, a.T, b, beta, c0)
    square = random_matrix(rng, (9, 9), dtype)
    other = random_matrix(rng, (9, 9), dtype)
    for name, c in (("c of another shape", np.zeros((9, 8), dtype)), ("c is a", square)):
        before = c.copy()
        assert runners.run_small_scaled(1.0, square, other, 1.0, c, dtype) == SMALL_REFUSED, name
        np.testing.assert_array_equal(c, before, err_msg=name)
    with pytest.raises(ValueError, match=r"\(9, 8\)"):
        smallgemm.gemm(1.0, square, other, beta=1.0, c=np.zeros((9, 8), dtype), overwrite_c=True)
    original = square.copy()  # c on a: computed through a copy
    got = smallgemm.gemm(2.0, square, other, beta=1.0, c=square, overwrite_c=True)
    assert got is square
    assert_close(got, 2.0, original, other, 1.0, original)


def test_alpha_zero_reads_neither_operand_on_every_way_in(kernel, dtype):
    """With alpha == 0 the result is beta*c, or zeros, whatever A and B hold (BLAS's rule, the
    planner's "scale only" row), once the small ways in are in use too: a NaN in A or B never
    reaches the result, into a new array or into c."""
    rng = np.random.default_rng(22)
    a, b = rng.standard_normal((9, 7)).astype(dtype), rng.standard_normal((7, 5)).astype(dtype)
    for _ in range(2):
        smallgemm.gemm(1.0, a, b)  # the small way in is in use from here on
    a[2, 3] = b[1, 1] = np.nan
    c = rng.standard_normal((9, 5)).astype(dtype)
    for alpha in (0.0, 0):
        np.testing.assert_array_equal(smallgemm.gemm(alpha, a, b), np.zeros((9, 5), dtype))
        np.testing.assert_array_equal(smallgemm.gemm(alpha, a, b, beta=2.0, c=c), 2 * c)
        into = c.copy()
        assert smallgemm.gemm(alpha, a, b, beta=0.5, c=into, overwrite_c=True) is into
        np.testing.assert_array_equal(into, (0.5 * c).astype(dtype))


def test_a_new_result_of_the_small_way_in_has_the_planner_s_bits(kernel, dtype):
    """gemm without c (the compiled way in makes the result) on every transpose, alpha and
    layout: each element the chain reference's, the result a new C-ordered array."""
    from reference import chain_reference

    rng = np.random.default_rng(23)
    x, y = rng.standard_normal((13, 11)).astype(dtype), rng.standard_normal((11, 13)).astype(dtype)
    for _ in range(2):
        smallgemm.gemm(1.0, x, y)  # the small way in is in use from here on
    for alpha in (1.0, -0.5, 3):
        for trans_a in (False, True):
            for trans_b in (False, True):
                a = np.asfortranarray(x.T) if trans_a else x  # op(a) = x either way
                b = y.T.copy() if trans_b else y
                got = smallgemm.gemm(alpha, a, b, trans_a=trans_a, trans_b=trans_b)
                assert got.flags.c_contiguous and got.flags.owndata and got.dtype == dtype
                np.testing.assert_array_equal(got, chain_reference(float(alpha), x, y), err_msg=f"{alpha}")
