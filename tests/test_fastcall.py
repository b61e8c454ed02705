"""Linked routines called from Python as builtins (``simd.fastcall``) and the small way in
built on one (``unpacked.unpacked_call``): the objects' fields read in compiled code, the
answers and their references, and the arrays the routine must refuse.
"""

import sys

import numpy as np
import pytest
from conftest import random_matrix
from numba import types
from reference import chain_reference

import smallgemm
from smallgemm.drivers import batched
from smallgemm.drivers.batched import STACK_CALL_PRODUCTS, STACK_CONTEXT
from smallgemm.drivers.unpacked import CALL_CONTEXT, SMALL_DONE, SMALL_PLANNED, SMALL_REFUSED, entry
from smallgemm.drivers.unpacked.entry import SMALL_LIMITS
from smallgemm.plan import prepared, runners
from smallgemm.simd import buffer_at, fastcall, objects
from smallgemm.simd.linked import linked
from smallgemm.simd.objects import ARRAY_DATA, ARRAY_SHAPE, FLOAT_VALUE, store_word, word_at


def test_the_objects_fields_are_where_the_routines_read_them():
    assert objects.layout_holds()


@linked
def _echo(like, context, arguments, count, answer):
    """Answers 0 for no arguments, else 1 when the first argument's first element plus the
    context's first value equals the second argument (a float), else 2; counts its calls."""
    store_word(context + 8, word_at(context + 8) + 1)
    if count == 0:
        store_word(answer, 0)
        return
    array = word_at(arguments)
    first = buffer_at(word_at(array + ARRAY_DATA), like)
    wanted = objects.element_from_double_at(word_at(arguments + 8) + FLOAT_VALUE, like)
    rows = word_at(word_at(array + ARRAY_SHAPE))
    same = first[0] + word_at(context) == wanted and rows >= 1
    store_word(answer, 1 if same else 2)


def _echo_builtin(context):
    argtypes = (types.CPointer(types.float64), *(types.int64,) * 4)
    address = _echo.linked.link(argtypes).address
    answers = ("none", ["a list, counted"], "different")
    return fastcall.builtin(address, argtypes, answers, context, "echo"), answers


def test_a_builtin_reads_its_arguments_and_context_and_answers_with_a_new_reference():
    context = np.array([5, 0], np.int64)
    echo, answers = _echo_builtin(context)
    listed = answers[1]
    held = sys.getrefcount(listed)
    values = np.array([[2.0], [7.0]])
    for _ in range(1000):
        assert echo(values, 7.0) is listed
    assert sys.getrefcount(listed) == held  # each answer's reference went with it
    assert echo(values, 8.0) == "different" and echo() == "none"
    assert context[1] == 1002 and values.tolist() == [[2.0], [7.0]]
    del echo
    assert context[1] == 1002 and sys.getrefcount(context) >= 2  # the builtin held its context


@linked
def _maker(like, context, arguments, count, answer):
    """Makes a (rows, 3) array, rows the context's fourth value, and answers it (index 1, one
    past the builtin's one answer)."""
    rows = word_at(context + 24)
    made = objects.new_array(word_at(context), word_at(context + 8), word_at(context + 16), 2, rows, 3, 0)
    store_word(answer, 1)
    store_word(answer + 8, made)


def test_a_builtin_answers_the_array_its_routine_made_or_the_exception_it_left():
    """A routine that makes an array (``objects.new_array``) answers it with the one reference
    the caller holds; where NumPy refuses to make it, the exception NumPy set is raised."""
    dtype = np.dtype(np.float64)
    context = np.array(
        [objects.numpy_api_function(objects.NEW_FROM_DESCR_INDEX), id(np.ndarray), id(dtype), 4]
    )
    argtypes = (types.CPointer(types.float64), *(types.int64,) * 4)
    maker = fastcall.builtin(_maker.linked.link(argtypes).address, argtypes, ("unused",), context, "maker")
    held = sys.getrefcount(dtype)
    for _ in range(1000):
        made = maker()
        assert type(made) is np.ndarray and made.shape == (4, 3) and made.dtype is dtype
        assert made.flags.c_contiguous and made.flags.owndata and made.flags.writeable
        assert sys.getrefcount(made) == 2  # the name's, and getrefcount's argument
    del made
    assert sys.getrefcount(dtype) == held
    context[3] = 1 << 62
    with pytest.raises((ValueError, MemoryError)):
        maker()
    assert sys.getrefcount(dtype) == held


def _matmul_reference(a, b):
    """matmul's result of a and b, each element its chain (``chain_reference``)."""
    a2, b2 = (a[np.newaxis] if a.ndim == 1 else a), (b[:, np.newaxis] if b.ndim == 1 else b)
    if a2.ndim == 3:
        c = np.stack([chain_reference(1.0, a2[t], b2[t] if b2.ndim == 3 else b2) for t in range(len(a2))])
    else:
        c = chain_reference(1.0, a2, b2)
    return c.reshape(np.matmul(a, b).shape)


def test_the_small_ways_in_make_matmul_s_result(kernel, dtype):
    """Called with A and B alone, the builtins make matmul's result of a small product: a
    new C-ordered, writeable array of NumPy's shape and dtype that owns its data, with the
    product's bits and one reference, the caller's; the dtype's references come back."""
    _ways_in_in_use(dtype)
    rng = np.random.default_rng(8)
    prep = prepared.current_prepared(dtype)
    held = sys.getrefcount(dtype)
    for a_shape, b_shape in (
        ((6, 5), (5, 4)),
        ((3, 4, 5), (5, 6)),
        ((5,), (5, 4)),
        ((6, 5), (5,)),
        ((5,), (5,)),
        ((4, 6, 5), (4, 5, 3)),
    ):
        a, b = rng.standard_normal(a_shape).astype(dtype), rng.standard_normal(b_shape).astype(dtype)
        made = prep.small_stack(a, b, False) if b.ndim == 3 else prep.small(a, b)
        assert type(made) is np.ndarray and made.shape == np.matmul(a, b).shape and made.dtype is dtype
        assert made.flags.c_contiguous and made.flags.owndata and made.flags.writeable
        assert sys.getrefcount(made) == 2
        assert np.array_equal(made, _matmul_reference(a, b)), (a_shape, b_shape)
        assert np.array_equal(smallgemm.matmul(a, b), made)
    del made, a, b  # each array holds a reference to its dtype
    assert sys.getrefcount(dtype) == held


def _ways_in_in_use(dtype):
    """Products that put the small ways in to use (``prepared.FirstSmall`` refuses everything
    until a product has needed their entries): their slots then hold the builtins."""
    matrix, stack = np.ones((3, 3), dtype), np.ones((2, 3, 3), dtype)
    for _ in range(2):
        smallgemm.matmul(matrix, matrix)
        smallgemm.matmul(stack, stack)
    prep = prepared.current_prepared(np.dtype(dtype))
    assert type(prep.small) is type(len) and type(prep.small_stack) is type(len)


class _Matrix(np.ndarray):
    pass


class _LookAlike:
    """An object with an ndarray's dtype and dimensions that NumPy converts (``__array__``)."""

    def __init__(self, array):
        self.array, self.dtype, self.ndim, self.shape = array, array.dtype, array.ndim, array.shape

    def __len__(self):
        return len(self.array)

    def __array__(self, dtype=None, copy=None):
        return self.array


def test_the_small_way_in_refuses_what_is_not_an_ndarray(kernel, dtype):
    """Subclasses and look-alikes are refused by the routine (matmul asks before it checks
    their types) and computed by the general path: NumPy's result and type."""
    _ways_in_in_use(dtype)
    rng = np.random.default_rng(3)
    a, b = random_matrix(rng, (6, 5), dtype), random_matrix(rng, (5, 4), dtype)
    c = np.full((6, 4), np.nan, dtype)
    for x, y in ((a.view(_Matrix), b), (a, b.view(_Matrix))):
        assert runners.run_small(x, y, c, np.dtype(dtype)) == SMALL_REFUSED
        assert np.isnan(c).all()
        got = smallgemm.matmul(x, y)
        assert type(got) is _Matrix and np.array_equal(got, chain_reference(1.0, a, b))
    got = smallgemm.matmul(_LookAlike(a), b)
    assert type(got) is np.ndarray and np.array_equal(got, chain_reference(1.0, a, b))
    assert runners.run_small(a, b, c, np.dtype(dtype)) == SMALL_DONE
    assert np.array_equal(c, chain_reference(1.0, a, b))


def test_each_small_way_in_holds_the_small_product_limits_in_one_run():
    """``small_product_route`` reads SMALL_LIMITS as consecutive words of either context."""
    for context in (CALL_CONTEXT, STACK_CONTEXT):
        first = context.index(SMALL_LIMITS[0])
        assert context[first : first + len(SMALL_LIMITS)] == SMALL_LIMITS


def test_each_context_word_s_index_names_it():
    """The routines read each context word by its index constant (``DECIDE``, ``STACK_KC``, ...):
    every constant is the position of the word it is named after."""
    for module, context, prefix in ((entry, CALL_CONTEXT, ""), (batched, STACK_CONTEXT, "STACK_")):
        for position, word in enumerate(context):
            assert getattr(module, prefix + word.upper()) == position, (prefix, word)


def test_a_thread_s_small_way_in_is_a_builtin_bound_to_its_own_workspace():
    """After a small product, the slot holds the routine's builtin, whose context carries this
    thread's workspace addresses (the routine uses them as the entry did)."""
    _ways_in_in_use(np.float32)
    prep = prepared.current_prepared(np.dtype(np.float32))
    for name in ("abuf", "bbuf", "scratch", "sums"):
        assert prep.small.__self__[CALL_CONTEXT.index(name)] == getattr(prep.workspace, name).ctypes.data


def test_the_small_stack_way_in_refuses_what_it_cannot_read_and_plans_long_stacks(kernel, dtype):
    """The stack's builtin refuses subclasses, look-alikes and a misaligned stack (the general
    path computes them: NumPy's result and type), and plans a stack longer than its offsets
    buffer on one thread, which the batch loop computes with the same bits."""
    _ways_in_in_use(dtype)
    rng = np.random.default_rng(4)
    a, b = random_matrix(rng, (3, 6, 5), dtype), random_matrix(rng, (3, 5, 4), dtype)
    expected = np.stack([chain_reference(1.0, a[t], b[t]) for t in range(3)])
    c = np.full((3, 6, 4), np.nan, dtype)
    for x, y in ((a.view(_Matrix), b), (a, b.view(_Matrix))):
        assert runners.run_small_stack(x, y, c, np.dtype(dtype)) == SMALL_REFUSED and np.isnan(c).all()
        got = smallgemm.matmul(x, y)
        assert type(got) is _Matrix and np.array_equal(got, expected)
    assert np.array_equal(smallgemm.matmul(_LookAlike(a), b), expected)
    size = np.dtype(dtype).itemsize
    misaligned = np.frombuffer(bytearray(a.nbytes + 1), dtype, offset=1, count=a.size).reshape(a.shape)
    misaligned[...] = a
    assert runners.run_small_stack(misaligned, b, c, np.dtype(dtype)) == SMALL_REFUSED and np.isnan(c).all()
    assert np.array_equal(smallgemm.matmul(misaligned, b), expected) and size > 1
    count = STACK_CALL_PRODUCTS + 1
    a, b = random_matrix(rng, (count, 2, 3), dtype), random_matrix(rng, (count, 3, 2), dtype)
    c = np.full((count, 2, 2), np.nan, dtype)
    with smallgemm.num_threads(1):
        assert runners.run_small_stack(a, b, c, np.dtype(dtype)) == SMALL_PLANNED and np.isnan(c).all()
        got = smallgemm.matmul(a, b)
    for t in (0, count - 1):
        assert np.array_equal(got[t], chain_reference(1.0, a[t], b[t]))


def test_the_small_way_in_folds_a_stack_times_one_matrix_where_its_rows_follow_on(kernel, dtype):
    """A stack of matrices times one (a linear layer) is one tall product where each matrix's
    rows follow the previous one's at one stride (C order, one matrix, one row each, every other
    row): computed,
    the bits of each lone product.  Stacks whose rows do not follow on (every other matrix,
    part of each matrix's rows, matrices transposed), and a stack as B, are refused untouched; matmul computes every
    case with the same bits."""
    _ways_in_in_use(dtype)
    rng = np.random.default_rng(5)
    w = random_matrix(rng, (12, 7), dtype)
    base = random_matrix(rng, (6, 4, 12), dtype)
    cases = [
        ("C order", base, SMALL_DONE),
        ("one matrix", base[:1], SMALL_DONE),
        ("one row each", base[:, :1], SMALL_DONE),
        ("every other matrix", base[::2], SMALL_REFUSED),
        ("every other row", base[:, ::2], SMALL_DONE),  # still one row stride throughout
        ("the first three rows of each", base[:, :3], SMALL_REFUSED),
        (
            "matrices transposed",
            np.ascontiguousarray(base.transpose(0, 2, 1)).transpose(0, 2, 1),
            SMALL_REFUSED,
        ),
    ]
    for name, a, route in cases:
        expected = np.stack([chain_reference(1.0, a[t], w) for t in range(len(a))])
        c = np.full(expected.shape, np.nan, dtype)
        assert runners.run_small(a, w, c, np.dtype(dtype)) == route, name
        if route == SMALL_DONE:
            assert np.array_equal(c, expected), name
        else:
            assert np.isnan(c).all(), name
        assert np.array_equal(smallgemm.matmul(a, w), expected), name
    stack_b = random_matrix(rng, (1, 12, 7), dtype)
    c = np.full((1, 4, 7), np.nan, dtype)
    assert runners.run_small(base[:1], stack_b, c, np.dtype(dtype)) == SMALL_REFUSED and np.isnan(c).all()


def test_the_small_way_in_takes_a_matrix_and_a_vector_or_two_vectors(kernel, dtype):
    """A vector is a row of A or a column of B, its result a vector or a NumPy scalar: computed
    in the small way in with the bits of the matrix product, strided vectors too.  Empty ones,
    are left to the planner; a matrix with neither its rows nor its columns contiguous times
    a vector is computed on the tiles, an F-ordered one swapped, a vector times its rows.
    matmul returns NumPy's types and shapes."""
    _ways_in_in_use(dtype)
    rng = np.random.default_rng(6)
    w = random_matrix(rng, (5, 7), dtype)
    x, y = random_matrix(rng, (1, 7), dtype)[0], random_matrix(rng, (1, 5), dtype)[0]
    strided = np.repeat(x, 2)[::2]
    cases = [  # (name, a, b, C, the product of A and B as matrices)
        ("matrix @ vector", w, x, np.empty(5, dtype), chain_reference(1.0, w, x[:, None])[:, 0]),
        ("vector @ matrix", y, w, np.empty(7, dtype), chain_reference(1.0, y[None, :], w)[0]),
        ("strided vector", w, strided, np.empty(5, dtype), chain_reference(1.0, w, x[:, None])[:, 0]),
        (
            "vector @ vector",
            x,
            strided,
            np.empty((), dtype),
            chain_reference(1.0, x[None, :], x[:, None])[0, 0],
        ),
    ]
    for name, a, b, c, expected in cases:
        assert runners.run_small(a, b, c, np.dtype(dtype)) == SMALL_DONE, name
        assert np.array_equal(c, expected), name
        got = smallgemm.matmul(a, b)
        want = np.matmul(a, b)
        assert type(got) is type(want) and np.shape(got) == np.shape(want), name
        assert np.array_equal(got, expected), name
    # A matrix with neither rows nor columns contiguous, and an F-ordered one, times a vector.
    for rows, side, layout in ((5, 7, "strided"), (300, 200, "strided"), (5, 7, "F"), (300, 200, "F")):
        a = random_matrix(rng, (2 * rows, 2 * side), dtype)[::2, ::2]
        a = np.asfortranarray(a) if layout == "F" else a
        v = random_matrix(rng, (1, side), dtype)[0]
        column = chain_reference(1.0, a, v[:, None])[:, 0]
        c = np.full(rows, np.nan, dtype)
        assert runners.run_small(a, v, c, np.dtype(dtype)) == SMALL_DONE, (rows, layout)
        assert np.array_equal(c, column), (rows, layout)
        assert np.array_equal(smallgemm.matmul(a, v), column)
        assert np.array_equal(smallgemm.matmul(a, v[:, None])[:, 0], column)
    empty = np.empty(0, dtype)
    assert runners.run_small(empty, empty, np.empty((), dtype), np.dtype(dtype)) == SMALL_PLANNED
    assert (
        smallgemm.matmul(empty, empty) == 0 and type(smallgemm.matmul(empty, empty)) is np.dtype(dtype).type
    )
