"""``smallgemm.gemm``: scipy's calling convention, NumPy's dtype rules, clear errors."""

import numpy as np
import pytest

import smallgemm
from reference import assert_close


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
