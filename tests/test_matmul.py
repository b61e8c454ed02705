"""``smallgemm.matmul`` against ``numpy.matmul``: shapes, broadcasting, dtypes, out=, errors."""

import numpy as np
import pytest
from reference import assert_close

import smallgemm

SHAPE_PAIRS = [
    ((3, 4), (4, 5)),
    ((4,), (4, 5)),
    ((3, 4), (4,)),
    ((4,), (4,)),
    ((2, 3, 4), (4, 5)),
    ((3, 4), (2, 4, 5)),
    ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 6)),
    ((1, 3, 4), (7, 4, 2)),
    ((4,), (3, 4, 5)),
    ((3, 2, 5, 4), (4,)),
    ((0, 3, 4), (4, 5)),
    ((3, 0), (0, 5)),
    ((0, 4), (4, 5)),
    ((3, 4), (4, 0)),
    ((2, 3, 0), (0, 5)),
    ((2, 3, 4), (4, 0)),
    ((2, 2, 3, 4), (4, 5)),
    ((2, 0, 4), (2, 4, 3)),
    ((40, 33), (33, 70)),
    ((3, 20, 40), (1, 40, 50)),
]


@pytest.mark.parametrize("sa,sb", SHAPE_PAIRS, ids=str)
def test_shapes_and_broadcasting(dtype, sa, sb):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(sa).astype(dtype)
    b = rng.standard_normal(sb).astype(dtype)
    got = smallgemm.matmul(a, b)
    want = np.matmul(a, b)
    assert type(got) is type(want)
    assert np.shape(got) == np.shape(want) and got.dtype == want.dtype
    # The same product with the 1-D operands made 2-D, against the float64 reference.
    a2 = a if a.ndim > 1 else a[None, :]
    b2 = b if b.ndim > 1 else b[:, None]
    full = smallgemm.matmul(a2, b2)
    assert_close(full, 1.0, a2, b2)
    np.testing.assert_array_equal(np.reshape(got, full.shape), full)


def test_vector_dot_is_a_numpy_scalar(dtype):
    a = np.arange(5, dtype=dtype)
    got = smallgemm.matmul(a, a)
    assert type(got) is dtype.type and got == 30


@pytest.mark.parametrize("da,db", [(np.float32, np.float64), (np.float64, np.float32)])
def test_mixed_precision_gives_float64_without_loss(da, db):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 7)).astype(da)
    b = rng.standard_normal((7, 3)).astype(db)
    got = smallgemm.matmul(a, b)
    assert got.dtype == np.float64
    assert_close(got, 1.0, a, b, dtype=np.float64)


@pytest.mark.parametrize(
    "dt", [np.int32, np.int64, np.bool_, np.complex64, np.complex128, np.float16, np.longdouble, object]
)
def test_other_dtypes_are_handed_to_numpy(dt):
    a = (np.arange(12).reshape(3, 4) % 3).astype(dt)
    b = (np.arange(8).reshape(4, 2) % 2).astype(dt)
    got = smallgemm.matmul(a, b)
    want = np.matmul(a, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_mixed_int_and_float_follows_numpy():
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    b = np.ones((3, 2), np.float32)
    got = smallgemm.matmul(a, b)
    assert got.dtype == np.matmul(a, b).dtype
    np.testing.assert_array_equal(got, np.matmul(a, b))


def test_lists_and_out_positional():
    out = np.empty((1, 1))
    assert smallgemm.matmul([[1.0, 2.0]], [[3.0], [4.0]], out) is out
    assert out[0, 0] == 11.0


@pytest.mark.parametrize("bad", [np.float64(3.0), np.array(2.0)])
def test_scalars_raise_like_numpy(bad):
    a = np.ones((2, 2))
    with pytest.raises(ValueError) as ours:
        smallgemm.matmul(bad, a)
    with pytest.raises(ValueError) as theirs:
        np.matmul(bad, a)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(
    "sa,sb",
    [((3, 4), (5, 6)), ((4,), (5,)), ((2, 3, 4), (3, 4, 5)), ((3,), (4, 5))],
)
def test_shape_errors_name_the_shapes(sa, sb):
    with pytest.raises(ValueError, match=rf"{sa}.*{sb}".replace("(", r"\(").replace(")", r"\)")):
        smallgemm.matmul(np.ones(sa), np.ones(sb))
    with pytest.raises(ValueError):
        np.matmul(np.ones(sa), np.ones(sb))


class TestOut:
    def test_out_is_filled_and_returned(self, dtype):
        rng = np.random.default_rng(2)
        a = rng.standard_normal((2, 5, 6)).astype(dtype)
        b = rng.standard_normal((6, 7)).astype(dtype)
        out = np.full((2, 5, 7), np.nan, dtype)
        assert smallgemm.matmul(a, b, out=out) is out
        np.testing.assert_allclose(out, np.matmul(a, b), rtol=1e-5 if dtype == np.float32 else 1e-12)

    def test_non_contiguous_out_is_written_in_place(self, dtype):
        rng = np.random.default_rng(3)
        a = rng.standard_normal((9, 6)).astype(dtype)
        b = rng.standard_normal((6, 8)).astype(dtype)
        canvas = np.full((20, 30), -7.0, dtype)
        out = canvas[1:19:2, 3:27:3]
        smallgemm.matmul(a, b, out=out)
        assert_close(out, 1.0, a, b)
        mask = np.ones(canvas.shape, bool)
        mask[1:19:2, 3:27:3] = False
        assert (canvas[mask] == -7.0).all()

    def test_out_overlapping_an_input(self, dtype):
        rng = np.random.default_rng(4)
        a = rng.standard_normal((8, 8)).astype(dtype)
        b = rng.standard_normal((8, 8)).astype(dtype)
        a0 = a.copy()
        smallgemm.matmul(a, b, out=a)
        assert_close(a, 1.0, a0, b)
        b0 = b.copy()
        smallgemm.matmul(a0, b.T, out=b)  # out is the memory of the transposed operand
        assert_close(b, 1.0, a0, b0.T)

    def test_out_with_wider_or_same_kind_dtype(self):
        a = np.ones((3, 4), np.float32)
        out = np.zeros((3, 3), np.float64)
        smallgemm.matmul(a, a.T, out=out)
        np.testing.assert_array_equal(out, np.full((3, 3), 4.0))
        out32 = np.zeros((3, 3), np.float32)
        smallgemm.matmul(a.astype(np.float64), a.T.astype(np.float64), out=out32)  # same_kind: allowed
        np.testing.assert_array_equal(out32, np.full((3, 3), 4.0))
        outc = np.zeros((3, 3), np.complex128)
        smallgemm.matmul(a, a.T, out=outc)
        np.testing.assert_array_equal(outc, np.full((3, 3), 4.0))

    def test_unsafe_cast_raises_numpys_type_error(self):
        a = np.ones((3, 4))
        out = np.zeros((3, 3), np.int64)
        with pytest.raises(TypeError) as ours:
            smallgemm.matmul(a, a.T, out=out)
        with pytest.raises(TypeError) as theirs:
            np.matmul(a, a.T, out=out)
        assert str(ours.value) == str(theirs.value)

    def test_wrong_out_shape_raises_numpys_value_error(self):
        a = np.ones((3, 4))
        with pytest.raises(ValueError) as ours:
            smallgemm.matmul(a, a.T, out=np.zeros((3, 2)))
        with pytest.raises(ValueError) as theirs:
            np.matmul(a, a.T, out=np.zeros((3, 2)))
        assert str(ours.value) == str(theirs.value)

    def test_vector_dot_with_out(self):
        a = np.arange(4.0)
        out = np.zeros(())
        assert smallgemm.matmul(a, a, out=out) is out
        assert out[()] == 14.0


def test_inputs_not_modified(dtype):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 7, 9)).astype(dtype)
    b = rng.standard_normal((3, 9, 4)).astype(dtype)
    a0, b0 = a.copy(), b.copy()
    smallgemm.matmul(a, b)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


@pytest.mark.parametrize(
    "a_shape, b_shape, out_shape",
    [
        ((0, 1, 1), (0, 1, 1), (1, 1, 1)),  # NumPy's TestMatmul.test_empty_out
        ((2, 3), (3, 4), (2, 5)),
        ((2, 3), (3, 4), (5, 4)),
    ],
)
def test_an_out_of_the_wrong_shape_is_refused_in_numpys_words(a_shape, b_shape, out_shape):
    a, b, out = np.ones(a_shape), np.ones(b_shape), np.ones(out_shape)
    with pytest.raises(ValueError) as numpy_error:
        np.matmul(a, b, out=out)
    with pytest.raises(ValueError) as ours:
        smallgemm.matmul(a, b, out=out)
    if str(numpy_error.value).startswith("non-broadcastable"):  # NumPy's adds the shapes it remapped
        compact = "(" + ",".join(map(str, out_shape)) + ")"
        assert str(ours.value).startswith(f"non-broadcastable output operand with shape {compact} ")
    else:
        assert str(ours.value) == str(numpy_error.value)
