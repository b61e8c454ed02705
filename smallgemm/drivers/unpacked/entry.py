"""The entry from Python into the unpacked driver: the builtin's routine, which decides in
compiled code whether a product is small (matmul's and gemm's small ways in) or computes a
planned one, a matrix, a folded stack or a vector each.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ...simd import address, buffer_at, element_size, one_of, row_dots_rule, tile_cols, zero_of
from ...simd.fastcall import address_of
from ...simd.linked import linked
from ...simd.objects import (
    ARRAY_DATA,
    ARRAY_NDIM,
    ARRAY_SHAPE,
    ARRAY_STRIDES,
    FLOAT_VALUE,
    OBJECT_TYPE,
    element_from_double_at,
    int32_at,
    new_array,
    store_word,
    word_at,
)
from ...simd.records import Tiles, Workspace, matrix
from ...simd.subroutine import subroutine
from ..blocked import continued
from .tiles import gemm_unpacked

# What ``unpacked_call`` did with a product it was asked to decide on (its context's ``decide``).
SMALL_DONE, SMALL_PLANNED, SMALL_REFUSED = 0, 1, 2
# The objects a builtin of ``unpacked_call`` answers, by the index the routine writes.
CALL_ANSWERS = (SMALL_DONE, SMALL_PLANNED, SMALL_REFUSED)
# The index with which it answers the result it made (``simd.fastcall``).
SMALL_MADE = len(CALL_ANSWERS)


@subroutine(inline=True)
def byte_span(data, shape, strides, itemsize):
    """(first byte, one past the last byte) that the elements of an array at address ``data``
    with this shape and these strides span; (0, 0) when it is empty."""
    lo = hi = data
    for d in range(len(shape)):
        if shape[d] == 0:
            return 0, 0
        span = (shape[d] - 1) * strides[d]
        if span < 0:
            lo += span
        else:
            hi += span
    return lo, hi + itemsize


@subroutine(inline=True)
def matrix_fields(obj, size, vector_as_row):
    """(matrices, rows, columns, row stride, column stride, readable) of the ndarray at the
    address ``obj`` as one matrix, strides in elements: its two dimensions (matrices 0); a
    vector as one row (``vector_as_row``) or one column, a 0-d array as one element (matrices
    0: matmul's operands and results with vectors); or its three dimensions with the first
    two merged where each matrix's rows follow the previous matrix's at one row stride (a
    stack folded into one tall matrix: matmul's linear layer).  Not readable where a stride
    is not a whole number of elements, the first two dimensions do not merge, or it has more
    dimensions."""
    ndim = int32_at(obj + ARRAY_NDIM)
    if ndim > 3:
        return 0, 0, 0, 0, 0, False
    shape, strides = word_at(obj + ARRAY_SHAPE), word_at(obj + ARRAY_STRIDES)
    count, rows, cols, rs, cs, merged = 0, 1, 1, size, size, True  # 0-d: one element
    if ndim == 1:
        if vector_as_row:
            cols, cs = word_at(shape), word_at(strides)
        else:
            rows, rs = word_at(shape), word_at(strides)
    elif ndim == 2:
        rows, cols, rs, cs = word_at(shape), word_at(shape + 8), word_at(strides), word_at(strides + 8)
    elif ndim == 3:
        count, each, cols = word_at(shape), word_at(shape + 8), word_at(shape + 16)
        step, rs, cs = word_at(strides), word_at(strides + 8), word_at(strides + 16)
        if each == 1:
            rs = step  # one row a matrix: the rows are the matrices
        merged = count == 1 or each == 1 or step == each * rs
        rows = count * each
    whole = rs % size == 0 and cs % size == 0
    return count, rows, cols, rs // size, cs // size, merged and whole


@subroutine(inline=True)
def spans_meet(x_span, y_span):
    """Whether two ``byte_span``s meet (NumPy's ``may_share_memory``: bounds only)."""
    return x_span[0] < y_span[1] and y_span[0] < x_span[1]


# The small-product limits, as the words at ``small_product_route``'s ``limits`` hold them (each
# context of a small way in holds them in this order, one after the other).
SMALL_LIMITS = ("max_volume", "min_stream", "few_rows", "narrow_min_depth", "narrow_min_a")


@subroutine(inline=True)
def narrow_turns(m, n, k, cs_a, narrow_cols, few_rows, min_depth, min_a):
    """Whether a C at most half as wide as the narrow tile is computed turned over, C^T =
    B^T A^T (``rules.turns_narrow``, which runs this source as Python): more than
    ``few_rows`` rows, A's rows contiguous, from ``min_depth`` columns and ``min_a``
    elements of A (the kernel's ``turned_narrow_min_depth`` and ``turned_narrow_min_a``)."""
    return n > 1 and 2 * n <= narrow_cols and m > few_rows and k >= min_depth and m * k >= min_a and cs_a == 1


@subroutine(inline=True)
def column_swaps(m, n, k, rs_a, cs_a):
    """Whether a matrix times one column is computed swapped, C^T = B^T A^T, on the small ways
    in as in the planner (``rules.swaps``): A's columns contiguous and its rows not (``A.T @
    x``), so that one row times A^T streams A along its contiguous columns, a vector of rows
    a load, where the tiles would walk down A one row stride per k (64x64 float32: ~3x).  With
    one column of A (k = 1) its strides say nothing of its layout."""
    return n == 1 and m > 1 and k > 1 and rs_a == 1 and cs_a != 1


@subroutine(inline=True)
def small_product(m, n, k, cs_a, rs_b, cs_b, limits, narrow_cols, chained):
    """Whether a product is small enough to be computed as given, on the unpacked tiles and the
    calling thread, before any table lookup: the rule of the compiled small ways in
    (``small_product_route``) and of the strategy table's "small product" row, which runs this
    source as Python (``Problem.small``).  Strides in elements; ``limits``: the kernel's
    SMALL_LIMITS values, in that order; ``narrow_cols``: the narrow tile's width; ``chained``:
    a continued chain (alpha == beta == 1), which only the tile loops compute, reading B along
    its rows (``tiles.chain_tile_loops``).

    Up to ``max_volume`` multiply-adds, under ``min_stream`` elements of the streamed operand
    (B, or A when B is one column: where threads may pay), and read along rows (B's, or a
    vector's; a matrix with contiguous columns times a column the ways in read swapped
    first, ``column_swaps``, and one with neither contiguous the tiles compute faster than the
    planner up to 256x256 on every kernel, level to 512x512: docs/performance.md);
    a C at most half the narrow tile wide with more than ``few_rows`` rows
    only where it is not turned over (``narrow_turns``) and A's rows are contiguous (else
    ``rules.swaps`` swaps it)."""
    max_volume, min_stream, few_rows, narrow_min_depth, narrow_min_a = limits
    volume = m * n * k
    streamed = k * (m if n == 1 else n)
    along_rows = cs_b == 1 or (m == 1 and rs_b == 1) or (n == 1 and cs_a == 1)
    if volume == 0 or volume > max_volume or streamed >= min_stream or not along_rows:
        return False
    if chained and cs_b != 1 and n > 1:
        return False
    if n > 1 and 2 * n <= narrow_cols and m > few_rows:  # a narrow C: as given unless turned, or swapped
        return cs_a == 1 and not narrow_turns(
            m, n, k, cs_a, narrow_cols, few_rows, narrow_min_depth, narrow_min_a
        )
    return True


@subroutine(inline=True)
def small_product_route(narrow, m, n, k, rs_a, cs_a, rs_b, cs_b, limits, chained, a):
    """(route, swapped) for a product whose operands are checked, read as the small ways in
    read it: swapped, C^T = B^T A^T, where ``column_swaps`` says so.  The route is SMALL_DONE
    when it is then ``small_product``, else SMALL_PLANNED (see ``unpacked_call``); ``limits``:
    the address of the kernel's SMALL_LIMITS words in the way in's context."""
    values = (
        word_at(limits),
        word_at(limits + 8),
        word_at(limits + 16),
        word_at(limits + 24),
        word_at(limits + 32),
    )
    swapped = column_swaps(m, n, k, rs_a, cs_a)
    if swapped:
        m, n, cs_a, rs_b, cs_b = n, m, rs_b, cs_a, rs_a
    if small_product(m, n, k, cs_a, rs_b, cs_b, values, tile_cols(narrow, a), chained):
        return SMALL_DONE, swapped
    return SMALL_PLANNED, swapped


# The int64 values that both small ways in's contexts begin with (this one's and the stack's,
# ``batched.STACK_CONTEXT``; ``prepared.Prepared`` builds them once): the row-dots rule's
# lane-wise flag; KC; the addresses of the workspace's buffers (``Workspace``'s fields); the
# small-product limits; the address of ``numpy.ndarray``, the one type of A, B and C the
# routines read; and, to make a result, the addresses of NumPy's ``PyArray_NewFromDescr`` and
# of the dtype.
SMALL_WAY_CONTEXT = (
    "lane_sums",
    "kc",
    "abuf",
    "bbuf",
    "scratch",
    "sums",
    *SMALL_LIMITS,
    "array_type",
    "new_array",
    "descr",
)
# The int64 values bound to a prepared state's ``unpacked_call`` builtins, in this order:
# whether the call decides first (matmul's and gemm's small ways in) or computes a product the
# planner placed, then SMALL_WAY_CONTEXT's.
CALL_CONTEXT = ("decide", *SMALL_WAY_CONTEXT)
(
    DECIDE,
    LANE_SUMS,
    KC,
    ABUF,
    BBUF,
    SCRATCH,
    SUMS,
    MAX_VOLUME,
    MIN_STREAM,
    FEW_ROWS,
    NARROW_MIN_DEPTH,
    NARROW_MIN_A,
    ARRAY_TYPE,
    NEW_ARRAY,
    DESCR,
) = range(len(CALL_CONTEXT))
# What ``unpacked_call`` is called with: A, B, C (arrays of one float dtype), alpha, beta (Python
# floats); or A and B alone (MAKE_ARGUMENTS), to make C, and alpha after them (gemm's).
CALL_ARGUMENTS = 5
MAKE_ARGUMENTS = 2


@linked
def unpacked_call(shape, narrow, few, gemv, resident, like, context, arguments, count, answer):
    """C = alpha*A.B + beta*C, called from Python as a builtin (``simd.fastcall``) with
    (A, B, C, alpha, beta): arrays of ``like``'s dtype, C not overlapping A or B, and
    Python floats.  A and C are matrices, or stacks of them that fold into one tall matrix
    each (``matrix_fields``: matmul's linear layer), B a matrix; or A or B is a vector (a
    row of A, a column of B) and C the vector or 0-d array of their product.  The caller
    checks the dtypes, that alpha and beta are floats, and that C has the dimensions of
    matmul's result (the routine checks its rows and columns).

    Where the context's ``decide`` is set (matmul's and gemm's ways in for small matrices,
    where the same checks in Python cost more than a 16x16 product) it first decides:
    SMALL_REFUSED when A, B or C is not an ``ndarray`` (a subclass, or another library's
    array with the same attributes: matmul asks before it checks their types), B is a
    stack, A or C does not fold, their shapes do not match or a stride is not whole
    elements (the general path says what is wrong), or C may overlap A or B (an ``out=``;
    the general path computes into a new array and copies); SMALL_PLANNED for a product the
    planner must place (``small_product_route``; or a continued chain, alpha == beta == 1,
    whose B has no contiguous rows; or alpha == 0, which reads neither A nor B: the table's
    "scale only" row); else it computes the product: SMALL_DONE.  Called with
    A and B alone (MAKE_ARGUMENTS), or with alpha, it decides the same for C = alpha*A.B and
    makes C itself,
    matmul's result as ``numpy.empty`` would (``made_result``; 0-d for two vectors), once it
    knows the product is small: the builtin then returns it (SMALL_MADE).
    Without ``decide`` it computes the product the planner placed here (2-D operands)."""
    decide = word_at(context + 8 * DECIDE) != 0
    makes = decide and (count == MAKE_ARGUMENTS or count == MAKE_ARGUMENTS + 1)
    if count != CALL_ARGUMENTS and not makes:
        store_word(answer, SMALL_REFUSED)
        return
    a_object, b_object = word_at(arguments), word_at(arguments + 8)
    c_object = a_object if makes else word_at(arguments + 16)  # C read once made, below
    array_type = word_at(context + 8 * ARRAY_TYPE)
    if decide and not (
        word_at(a_object + OBJECT_TYPE) == array_type
        and word_at(b_object + OBJECT_TYPE) == array_type
        and word_at(c_object + OBJECT_TYPE) == array_type
    ):
        store_word(answer, SMALL_REFUSED)  # before reading a field that only arrays have
        return
    if makes:
        alpha, beta = one_of(like), zero_of(like)
        if count > MAKE_ARGUMENTS:
            alpha = element_from_double_at(word_at(arguments + 16) + FLOAT_VALUE, like)
    else:
        alpha = element_from_double_at(word_at(arguments + 24) + FLOAT_VALUE, like)
        beta = element_from_double_at(word_at(arguments + 32) + FLOAT_VALUE, like)
    size = element_size(like)
    a_vector = int32_at(a_object + ARRAY_NDIM) == 1  # then C is a row, else a column or matrix
    count_a, m, k, rs_a, cs_a, readable_a = matrix_fields(a_object, size, True)
    count_b, k_b, n, rs_b, cs_b, readable_b = matrix_fields(b_object, size, False)
    if makes:  # C as it will be made, C-ordered (matmul's result: a stack only of a stack times a matrix)
        count_c, m_c, n_c, rs_c, cs_c = count_a, m, n, n, 1
        readable_c = count_a == 0 or int32_at(b_object + ARRAY_NDIM) == 2
    else:
        count_c, m_c, n_c, rs_c, cs_c, readable_c = matrix_fields(c_object, size, a_vector)
    a_data, b_data = word_at(a_object + ARRAY_DATA), word_at(b_object + ARRAY_DATA)
    swapped = False  # a planned product comes oriented
    if decide:
        if (
            not (readable_a and readable_b and readable_c)
            or count_b != 0
            or count_c != count_a
            or m_c != m
            or n_c != n
            or k != k_b
        ):
            store_word(answer, SMALL_REFUSED)
            return
        if not makes:
            c_data = word_at(c_object + ARRAY_DATA)
            c_span = byte_span(c_data, (m, n), (rs_c * size, cs_c * size), size)
            a_span = byte_span(a_data, (m, k), (rs_a * size, cs_a * size), size)
            if spans_meet(c_span, a_span) or spans_meet(
                c_span, byte_span(b_data, (k, n), (rs_b * size, cs_b * size), size)
            ):
                store_word(answer, SMALL_REFUSED)
                return
        if alpha == zero_of(like):  # nothing to multiply, A and B not read: the table's "scale only" row
            store_word(answer, SMALL_PLANNED)
            return
        chained = continued(alpha, beta, like)
        limits = context + 8 * MAX_VOLUME
        route, swapped = small_product_route(narrow, m, n, k, rs_a, cs_a, rs_b, cs_b, limits, chained, like)
        if route == SMALL_PLANNED:
            store_word(answer, SMALL_PLANNED)
            return
        if makes:
            c_object = made_result(context, a_object, b_object, count_a, m, n)
            store_word(answer, SMALL_MADE)
            store_word(answer + 8, c_object)
            if c_object == 0:
                return  # the builtin raises the exception NumPy set
        if swapped:  # C^T = B^T A^T: each element the same chain of FMAs
            m, n, a_data, b_data = n, m, b_data, a_data
            rs_a, cs_a, rs_b, cs_b, rs_c, cs_c = cs_b, rs_b, cs_a, rs_a, cs_c, rs_c
    c_data = word_at(c_object + ARRAY_DATA)
    tiles = Tiles(shape, narrow, few, row_dots_rule(gemv, word_at(context + 8 * LANE_SUMS) != 0), resident)
    gemm_unpacked(
        tiles,
        m,
        n,
        k,
        alpha,
        beta,
        matrix(buffer_at(a_data, like), 0, rs_a, cs_a),
        matrix(buffer_at(b_data, like), 0, rs_b, cs_b),
        matrix(buffer_at(c_data, like), 0, rs_c, cs_c),
        word_at(context + 8 * KC),
        workspace_at(context + 8 * ABUF, like),
    )
    if not makes:
        store_word(answer, SMALL_DONE)


@subroutine(inline=True)
def made_result(context, a_object, b_object, stacked, rows, n):
    """The address of a new C-ordered array for matmul's result of A and B: a matrix or a
    stack of ``stacked`` (A folded: its first two dimensions), of ``rows`` rows in all, by n;
    a vector where A or B is one, a 0-d array where both are; 0 with the exception NumPy set."""
    a_ndim, b_ndim = int32_at(a_object + ARRAY_NDIM), int32_at(b_object + ARRAY_NDIM)
    ndim, d0, d1, d2 = 2, rows, n, 0
    if a_ndim == 1 and b_ndim == 1:
        ndim = 0
    elif a_ndim == 1:
        ndim, d0 = 1, n
    elif b_ndim == 1:
        ndim, d0 = 1, rows
    elif a_ndim == 3:
        ndim, d0, d1, d2 = 3, stacked, rows // stacked if stacked > 0 else 0, n
    return new_array(
        word_at(context + 8 * NEW_ARRAY),
        word_at(context + 8 * ARRAY_TYPE),
        word_at(context + 8 * DESCR),
        ndim,
        d0,
        d1,
        d2,
    )


@subroutine(inline=True)
def workspace_at(fields, like):
    """The ``Workspace`` whose four buffers' addresses are the words at ``fields``, pointers of
    ``like``'s dtype."""
    return Workspace(
        buffer_at(word_at(fields), like),
        buffer_at(word_at(fields + 8), like),
        buffer_at(word_at(fields + 16), like),
        buffer_at(word_at(fields + 24), like),
    )


unpacked_call_address = address_of(unpacked_call)


@njit(cache=True)
def unpacked_entry(shape, narrow, few, gemv, resident, like):
    """The address of ``unpacked_call`` for these tiles and ``like``'s dtype, linked first:
    the prepared state makes builtins of it (``simd.fastcall``)."""
    unset = np.intp(0)
    return unpacked_call_address(
        shape, narrow, few, gemv, resident, address(like), unset, unset, unset, unset
    )
