"""``smallgemm.matmul`` against ``numpy.matmul`` for NumPy's calling convention: the ufunc
keywords, operands that bring their own implementation, and subclass results.

Each case compares what the two give: the result's type, dtype, values and layout, or the
exception's type and words.  Operands hold small integers, so that every product is exact
whatever the order of its sums.
"""

import warnings
from typing import ClassVar

import numpy as np
import pytest

import smallgemm
from smallgemm.api import ufunc_call

pytestmark = pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")


def outcome(matmul, *args, **kwargs):
    """What ``matmul(*args, **kwargs)`` gives: for a result its type, dtype, values and
    layout (a scalar's value), and the warnings; for an exception its type and words."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = matmul(*args, **kwargs)
        except (TypeError, ValueError) as error:  # the type is compared: NumPy's own subclasses included
            return type(error), str(error)
    told = [(w.category, str(w.message), w.filename) for w in caught]
    if not isinstance(result, np.ndarray):
        return type(result), result, told
    layout = result.flags.c_contiguous, result.flags.f_contiguous, result.strides
    return type(result), result.dtype, result.tolist(), layout, told


def assert_as_numpy(*args, **kwargs):
    assert outcome(smallgemm.matmul, *args, **kwargs) == outcome(np.matmul, *args, **kwargs)


def integers(shape, dtype, order="C", seed=0):
    data = np.random.default_rng(seed).integers(-4, 5, shape).astype(dtype)
    return np.asfortranarray(data) if order == "F" else data


OPERANDS = {
    "f4 @ f4": lambda: (integers((5, 3), np.float32), integers((3, 4), np.float32, seed=1)),
    "f4 @ f8": lambda: (integers((5, 3), np.float32), integers((3, 4), np.float64, seed=1)),
    "f8 @ f8, F": lambda: (integers((5, 3), np.float64, "F"), integers((3, 4), np.float64, "F", seed=1)),
    "f8 F @ f4 C": lambda: (integers((5, 3), np.float64, "F"), integers((3, 4), np.float32, seed=1)),
    "stacks, F": lambda: (integers((2, 5, 3), np.float64, "F"), integers((2, 3, 4), np.float64, "F", seed=1)),
    "stack @ matrix": lambda: (integers((2, 5, 3), np.float32), integers((3, 4), np.float32, seed=1)),
    "vector @ matrix, F": lambda: (integers(3, np.float64), integers((2, 3, 4), np.float64, "F", seed=1)),
    "matrix @ vector": lambda: (integers((5, 3), np.float32, "F"), integers(3, np.float32, seed=1)),
    "vector @ vector": lambda: (integers(3, np.float64), integers(3, np.float32, seed=1)),
    "empty": lambda: (np.ones((5, 0), np.float64), np.ones((0, 4), np.float64)),
    "int64 @ f8": lambda: (integers((5, 3), np.int64), integers((3, 4), np.float64, seed=1)),
    "lists": lambda: (integers((5, 3), np.float64).tolist(), integers((3, 4), np.float64, seed=1).tolist()),
}

KEYWORDS = [
    {},
    {"dtype": None},
    {"dtype": np.float32},
    {"dtype": np.float64},
    {"dtype": float},
    {"dtype": "f4"},
    {"dtype": "float64"},
    {"dtype": "d"},
    {"dtype": np.dtype(np.float32)},
    {"dtype": np.dtypes.Float64DType},
    {"dtype": np.int32},
    {"dtype": np.float16},
    {"dtype": np.complex64},
    {"dtype": ">f8"},
    {"dtype": "<f4"},
    {"dtype": "nonsense"},
    {"dtype": np.int64, "casting": "unsafe"},
    {"casting": "no"},
    {"casting": "equiv"},
    {"casting": "safe"},
    {"casting": "same_kind"},
    {"casting": "unsafe"},
    {"casting": "bogus"},
    {"casting": None},
    {"dtype": np.float32, "casting": "no"},
    {"dtype": np.float32, "casting": "safe"},
    {"dtype": np.float64, "casting": "safe"},
    {"dtype": np.float64, "casting": "equiv"},
    {"order": "K"},
    {"order": "A"},
    {"order": "C"},
    {"order": "F"},
    {"order": "a"},
    {"order": "f"},
    {"order": None},
    {"order": "X"},
    {"order": "Fortran"},
    {"order": b"F"},
    {"order": 1},
    {"order": "F", "dtype": np.float32},
    {"order": "A", "casting": "unsafe"},
    {"subok": True},
    {"subok": False},
    {"subok": None},
    {"subok": np.True_},
    {"signature": "dd->d"},
    {"signature": (None, None, np.float32)},
    {"signature": None},
    {"sig": "ff->f"},
    {"signature": "ff->f", "dtype": np.float32},
    {"axes": [(-2, -1), (-2, -1), (-2, -1)]},
    {"axes": [(0, 1), (1, 0), (0, 1)]},
    {"axes": None},
    {"axis": 0},
    {"axis": 0, "axes": [(0, 1), (0, 1), (0, 1)]},
    {"keepdims": False},
    {"keepdims": True},
    {"where": True},
    {"extobj": None},
    {"unknown": 1, "dtype": np.float32},
]


@pytest.mark.parametrize("keywords", KEYWORDS, ids=repr)
@pytest.mark.parametrize("operands", OPERANDS.values(), ids=OPERANDS.keys())
def test_keywords_as_numpy(operands, keywords):
    a, b = operands()
    assert_as_numpy(a, b, **keywords)


@pytest.mark.parametrize("casting", ["no", "equiv", "safe", "same_kind", "unsafe"])
@pytest.mark.parametrize("out_dtype", [np.float32, np.float64, np.complex128, np.int32, np.float16])
@pytest.mark.parametrize("dtype", [None, np.float32, np.float64])
def test_out_under_each_casting_rule(casting, out_dtype, dtype):
    a, b = integers((5, 3), np.float64), integers((3, 4), np.float64, seed=1)

    def into_out(matmul):
        out = np.full((5, 4), 7, out_dtype)
        result = outcome(matmul, a, b, out=out, casting=casting, dtype=dtype)
        return result, out.tolist()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        assert into_out(smallgemm.matmul) == into_out(np.matmul)


@pytest.mark.parametrize(
    "out",
    [
        ...,
        (None,),
        None,
        (np.zeros((5, 4)),),
        [np.zeros((5, 4))],
        (np.zeros((5, 4)), np.zeros((5, 4))),
        3,
        np.zeros((5, 4))[::2],
        np.zeros((5, 4), np.float32).T,
        np.zeros((4, 5)).T,
    ],
    ids=repr,
)
def test_out_forms_as_numpy(out):
    assert_as_numpy(integers((5, 3), np.float64), integers((3, 4), np.float64, seed=1), out=out)


def test_out_ellipsis_gives_a_zero_dimensional_array():
    got = smallgemm.matmul(np.arange(3.0), np.arange(3.0), out=...)
    assert type(got) is np.ndarray and got.shape == () and got == 5.0


def test_a_read_only_out_is_refused_as_numpy_does():
    out = np.zeros((5, 4))
    out.flags.writeable = False
    assert_as_numpy(integers((5, 3), np.float64), integers((3, 4), np.float64, seed=1), out=out)


def test_keywords_modify_no_input():
    a, b = integers((2, 5, 3), np.float64, "F"), integers((3, 4), np.float64, seed=1)
    a0, b0 = a.copy(order="K"), b.copy()
    smallgemm.matmul(a, b, dtype=np.float32, order="F", casting="same_kind")
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)
    assert a.flags.f_contiguous and a.dtype == np.float64


def test_a_packed_operand_takes_no_keywords():
    b = smallgemm.pack(np.ones((3, 4), np.float32))
    with pytest.raises(TypeError, match=r"PackedMatrix operand takes no keywords but out.*dtype"):
        smallgemm.matmul(np.ones((2, 3), np.float32), b, dtype=np.float32)


class Traced(np.ndarray):
    """A subclass that logs each ``__array_wrap__`` and ``__array_finalize__`` call, and
    carries an ``info`` from the array it was made from."""

    log: ClassVar[list] = []

    def __array_finalize__(self, obj):
        self.log.append(
            ("finalize", type(self).__name__, self.shape, type(obj).__name__, getattr(obj, "info", None))
        )
        self.info = getattr(obj, "info", None)

    def __array_wrap__(self, array, context=None, return_scalar=False):
        ufunc, args, index = context if context is not None else (None, (), None)
        self.log.append(
            (
                "wrap",
                self.info,
                type(array).__name__,
                array.shape,
                ufunc,
                [type(x).__name__ for x in args],
                index,
                return_scalar,
            )
        )
        return super().__array_wrap__(array, context, return_scalar)


class Preferred(Traced):
    __array_priority__ = 5.0


class OldStyleWrap(np.ndarray):
    """An ``__array_wrap__`` of before NumPy 2: no ``return_scalar``."""

    def __array_wrap__(self, array, context=None):
        return super().__array_wrap__(array, context)


def traced(cls, data, info):
    view = np.asarray(data).view(cls)
    view.info = info
    return view


SUBCLASS_CALLS = {
    "both": lambda: (
        (
            traced(Traced, integers((5, 3), np.float64), "a"),
            traced(Traced, integers((3, 4), np.float32), "b"),
        ),
        {},
    ),
    "second": lambda: ((integers((5, 3), np.float64), traced(Traced, integers((3, 4), np.float64), "b")), {}),
    "list first": lambda: (([[1.0, 2.0]], traced(Traced, np.ones((2, 3)), "b")), {}),
    "priority": lambda: ((traced(Traced, np.ones((5, 3)), "a"), traced(Preferred, np.ones((3, 4)), "p")), {}),
    "vectors": lambda: ((traced(Traced, np.arange(3.0), "v"), np.arange(3.0)), {}),
    "vectors, out=...": lambda: ((traced(Traced, np.arange(3.0), "v"), np.arange(3.0)), {"out": ...}),
    "subok=False": lambda: ((traced(Traced, np.ones((5, 3)), "a"), np.ones((3, 4))), {"subok": False}),
    "order=F, dtype": lambda: (
        (traced(Traced, np.ones((5, 3)), "a"), np.ones((3, 4))),
        {"order": "F", "dtype": "f4"},
    ),
    "out": lambda: ((np.ones((5, 3)), np.ones((3, 4))), {"out": traced(Traced, np.zeros((5, 4)), "o")}),
    "out, subok=False": lambda: (
        (traced(Preferred, np.ones((5, 3)), "a"), np.ones((3, 4))),
        {"out": (traced(Traced, np.zeros((5, 4)), "o"),), "subok": False},
    ),
    "old-style wrap": lambda: ((np.ones((5, 3)).view(OldStyleWrap), np.ones((3, 4))), {}),
    "matrix": lambda: (
        (np.matrix(integers((5, 3), np.float64)), np.matrix(integers((3, 4), np.float64))),
        {},
    ),
    "matrix @ vector": lambda: ((np.matrix(integers((5, 3), np.float64)), np.arange(3.0)), {}),
    "vector @ matrix": lambda: ((np.arange(5.0), np.matrix(integers((5, 3), np.float64))), {}),
    "matrix, subok=False": lambda: (
        (np.matrix(np.ones((5, 3))), np.matrix(np.ones((3, 4)))),
        {"subok": False},
    ),
    "matrix and traced": lambda: ((np.matrix(np.ones((5, 3))), traced(Traced, np.ones((3, 4)), "b")), {}),
}


@pytest.mark.parametrize("call", SUBCLASS_CALLS.values(), ids=SUBCLASS_CALLS.keys())
def test_subclass_results_are_wrapped_as_numpy_wraps_them(call):
    """Same type, values, ``info`` and the same ``__array_wrap__`` / ``__array_finalize__``
    calls, in the same order with the same arguments (a fresh set of operands for each)."""

    def logged(matmul):
        args, kwargs = call()
        Traced.log.clear()
        result = outcome(matmul, *args, **kwargs)
        info = getattr(matmul(*args, **kwargs), "info", None) if result[0] is not TypeError else None
        return result, info, list(Traced.log)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ours, theirs = logged(smallgemm.matmul), logged(np.matmul)
    assert ours == theirs


def test_np_matrix_in_np_matrix_out():
    a, b = np.matrix([[1.0, 2.0], [3.0, 4.0]]), np.matrix([[5.0], [6.0]])
    got = smallgemm.matmul(a, b)
    assert type(got) is np.matrix and got.tolist() == [[17.0], [39.0]]


def test_the_old_style_wrap_warns_as_numpy_does():
    a, b = np.ones((2, 3)).view(OldStyleWrap), np.ones((3, 2))
    with pytest.warns(
        DeprecationWarning, match="__array_wrap__ must accept context and return_scalar"
    ) as told:
        got = smallgemm.matmul(a, b)
    assert type(got) is OldStyleWrap
    assert told[0].filename == __file__  # the caller's line, as NumPy's warning names it


MASKED_CALLS = {
    "both masked": lambda: (
        np.ma.array(integers((3, 3), np.float64), mask=np.eye(3)),
        np.ma.array(integers((3, 3), np.float64, seed=1), mask=np.tri(3)),
    ),
    "masked @ ndarray": lambda: (
        np.ma.array(integers((2, 2), np.float32), mask=[[0, 1], [0, 0]]),
        integers((2, 2), np.float32, seed=1),
    ),
    "shapes differ": lambda: (
        np.ma.array(integers((5, 3), np.float64), mask=integers((5, 3), bool)),
        integers((3, 4), np.float64, seed=1),
    ),
    "no mask": lambda: (np.ma.array(integers((5, 3), np.float32)), np.ma.array(integers((3, 4), np.float32))),
}


@pytest.mark.parametrize("operands", MASKED_CALLS.values(), ids=MASKED_CALLS.keys())
def test_masked_arrays_as_numpy(operands):
    """``np.ma.MaskedArray`` implements neither ``__array_ufunc__`` nor ``__array_function__``
    (NumPy 2.4): NumPy multiplies the data, masked values included, and its ``__array_wrap__``
    makes the mask.  smallgemm's product is wrapped the same way."""

    def masked(matmul):
        a, b = operands()
        result = outcome(matmul, a, b)
        if result[0] is not np.ma.MaskedArray:
            return result
        got = matmul(a, b)
        return result, np.ma.getmaskarray(got).tolist(), got.data.tolist(), got.fill_value

    assert masked(smallgemm.matmul) == masked(np.matmul)


@pytest.mark.parametrize("k", [2, 3])
def test_a_masked_out_as_numpy(k):
    """Into a masked ``out``: its ``__array_wrap__`` ors the masks of the inputs, which only
    broadcast (NumPy raises otherwise) when they have the shape of the result."""

    def into(matmul):
        out = np.ma.array(np.zeros((2, 2)), mask=[[1, 0], [0, 0]])
        result = outcome(matmul, integers((2, k), np.float64), integers((k, 2), np.float64, seed=1), out=out)
        return result, out.data.tolist(), np.ma.getmaskarray(out).tolist()

    assert into(smallgemm.matmul) == into(np.matmul)


class UfuncDuck:
    """An array type with its own ``__array_ufunc__``: it answers with what it was given."""

    def __init__(self, data):
        self.data = np.asarray(data)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return "UfuncDuck", ufunc, method, len(inputs), sorted(kwargs)


class FunctionDuck:
    """An array type with ``__array_function__`` (and ``__array__``) but no ``__array_ufunc__``."""

    def __init__(self, data):
        self.data = np.asarray(data)

    def __array__(self, dtype=None, copy=None):
        return self.data

    def __array_function__(self, func, types, args, kwargs):
        return NotImplemented


class Refuses:
    """An operand that opts out of NumPy's ufuncs."""

    __array_ufunc__ = None


class UfuncSubclass(np.ndarray):
    """An ndarray subclass with its own ``__array_ufunc__``."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return "UfuncSubclass", ufunc, method, sorted(kwargs)


@pytest.mark.parametrize("position", ["a", "b", "out"])
@pytest.mark.parametrize("kind", [UfuncDuck, UfuncSubclass])
def test_an_own_array_ufunc_runs(kind, position):
    duck = kind(np.ones((2, 2))) if kind is UfuncDuck else np.ones((2, 2)).view(kind)
    args = {"a": np.ones((2, 2)), "b": np.ones((2, 2)), "out": None}
    args[position] = duck
    got = smallgemm.matmul(args["a"], args["b"], out=args["out"], dtype=np.float64)
    assert got == np.matmul(args["a"], args["b"], out=args["out"], dtype=np.float64)
    assert got[0] == kind.__name__ and got[1] is np.matmul


def test_an_operand_with_array_function_goes_to_numpy(monkeypatch):
    calls = []
    numpy_matmul = np.matmul

    def counted(*args, **kwargs):
        calls.append(args)
        return numpy_matmul(*args, **kwargs)

    a, b = FunctionDuck(integers((5, 3), np.float64)), integers((3, 4), np.float64, seed=1)
    want = outcome(np.matmul, a, b)
    monkeypatch.setattr(ufunc_call.np, "matmul", counted)
    assert outcome(smallgemm.matmul, a, b) == want
    assert len(calls) == 1 and calls[0][0] is a


@pytest.mark.parametrize("position", ["a", "b", "out"])
def test_an_operand_refusing_ufuncs_is_refused_as_numpy_does(position):
    args = {"a": np.ones((2, 2)), "b": np.ones((2, 2)), "out": None}
    args[position] = Refuses()
    assert_as_numpy(args["a"], args["b"], out=args["out"])
