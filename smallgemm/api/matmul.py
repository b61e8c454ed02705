"""``smallgemm.matmul``: a drop-in ``numpy.matmul``.

Same semantics as NumPy: 1-D operands are promoted and the added axis removed,
batch dimensions broadcast, the result dtype is NumPy's (or ``dtype``'s), the
inputs and ``out=`` follow the ``casting`` rule, ``out`` may overlap an input,
and a new result is laid out as ``order`` says.  float32 and float64 operands
take the fast path; every other dtype (integers, bool, complex, float16,
longdouble, object, byte-swapped) is handed to ``numpy.matmul``, and so are
NumPy's other keywords, and operands with their own implementation
(``ufunc_call``, which also wraps results of ndarray subclasses as NumPy does).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..drivers.unpacked import SMALL_DONE, SMALL_PLANNED, SMALL_REFUSED
from ..machine.threads import workers as _workers
from ..plan import in_force, prepared, strategies
from . import ufunc_call
from .packed import PackedMatrix

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_FAST = (_F32, _F64)
# The casting rules that allow every cast between float32 and float64.
_FLOAT_CASTS = ("same_kind", "unsafe")
# Looked up once: on the small-matrix way in, each global-then-attribute lookup costs
# ~0.03 us (these three: 0.1 us of a ~1.8 us 16x16 float32 product).
_NDARRAY, _EMPTY = np.ndarray, np.empty
# The per-thread holder of the last prepared state (prepared.current_prepared's fast path): the
# small-matrix way in reads it itself as runners.run_small does, and the Python call it saves pays
# for the keywords' dict that every call to matmul builds.
_PREPARED = prepared.per_thread


def shape_error(a_shape, b_shape, detail: str) -> ValueError:
    """matmul's ValueError for operands whose shapes do not match, ``detail`` saying how."""
    return ValueError(f"matmul: operands with shapes {a_shape} and {b_shape} do not match: {detail}")


def promoted(a, b) -> tuple[Any, Any, bool, bool]:
    """a and b with a 1-D operand promoted as ``numpy.matmul`` does (a row; a column), and
    whether each was; ValueError in matmul's words unless the core dimensions match.  Any
    array type with ``ndim``, ``shape`` and NumPy's indexing (NumPy's, Dask's)."""
    a_shape, b_shape = a.shape, b.shape
    vector_a, vector_b = a.ndim == 1, b.ndim == 1
    if vector_a:
        a = a[np.newaxis, :]
    if vector_b:
        b = b[:, np.newaxis]
    if a.shape[-1] != b.shape[-2]:
        raise shape_error(
            a_shape,
            b_shape,
            f"the last dimension of the first ({a.shape[-1]}) differs from the "
            f"{'only' if vector_b else 'second-to-last'} dimension of the second ({b.shape[-2]})",
        )
    return a, b, vector_a, vector_b


def out_shape_error(got: tuple, shape: tuple) -> ValueError:
    """NumPy's wording for an ``out`` of the wrong shape: a core dimension (the last two of the
    result) that differs, else the broadcast (stack) dimensions."""
    core = min(2, len(shape))
    for i in range(core):
        want, have = shape[len(shape) - core + i], got[len(got) - core + i] if len(got) >= core else None
        if have is not None and have != want:
            return ValueError(
                f"matmul: Output operand 0 has a mismatch in its core dimension {i}, with gufunc "
                f"signature (n?,k),(k,m?)->(n?,m?) (size {have} is different from {want})"
            )

    def compact(dims):
        return "(" + ",".join(map(str, dims)) + ")"

    return ValueError(
        f"non-broadcastable output operand with shape {compact(got)} doesn't match the broadcast "
        f"shape {compact(shape)}"
    )


def _check_out(out, shape: tuple, dtype: np.dtype) -> np.ndarray:
    if isinstance(out, tuple):
        if len(out) != 1:
            raise ValueError(f"matmul: out must be one array, got a tuple of {len(out)}")
        out = out[0]
    if not isinstance(out, np.ndarray):
        raise TypeError(f"matmul: out must be a numpy array, got {type(out).__name__}")
    if out.shape != shape:
        raise out_shape_error(out.shape, shape)
    if not np.can_cast(dtype, out.dtype, casting="same_kind"):
        # NumPy's own message (numpy._core._exceptions._UFuncOutputCastingError).
        raise TypeError(
            f"Cannot cast ufunc 'matmul' output from {dtype!r} to {out.dtype!r} with casting rule 'same_kind'"
        )
    if not out.flags.writeable:
        raise ValueError("matmul: out is read-only")
    return out


def _writable_target(out: np.ndarray, dtype: np.dtype, a: np.ndarray, b: np.ndarray) -> bool:
    """True when the product can be written straight into ``out``."""
    if out.dtype != dtype or any(s % dtype.itemsize for s in out.strides):
        return False
    return not (np.may_share_memory(out, a) or np.may_share_memory(out, b))


def _fold_rows(x: np.ndarray) -> np.ndarray | None:
    """``x[..., m, k]`` as one ``(batch*m, k)`` view, or None if its strides forbid it."""
    view = x.view()
    try:
        view.shape = (math.prod(x.shape[:-1]), x.shape[-1])  # raises instead of copying
    except AttributeError:
        return None
    return view


@lru_cache(maxsize=64)
def _even_offsets(count: int, step: int) -> np.ndarray:
    """``step * arange(count)``, read-only and shared: a loop calling matmul on stacks of
    one shape pays for it once, not on every call (it cost ~5 % of a 1000x16x16 product)."""
    offsets = np.arange(count, dtype=np.int64) * step
    offsets.flags.writeable = False
    return offsets


@lru_cache(maxsize=64)
def _stack_offsets(
    count: int, step_a: int, step_b: int, step_c: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three ``_even_offsets`` of two stacks and their product, in one lookup."""
    return _even_offsets(count, step_a), _even_offsets(count, step_b), _even_offsets(count, step_c)


def _run_stack(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """The planner's way with two stacks along one batch axis that the small way in found
    valid, not small (``strategies.compute`` with offsets)."""
    size = a.itemsize
    offsets = _stack_offsets(len(a), a.strides[0] // size, b.strides[0] // size, c.strides[0] // size)
    strategies.compute(1.0, a[0], b[0], 0.0, c[0], offsets)


def _element_offsets(x: np.ndarray, batch_shape: tuple) -> np.ndarray:
    """Element offset of each matrix of ``x``'s stack, broadcast to ``batch_shape``."""
    if x.ndim == 3 and len(batch_shape) == 1 and x.shape[0] == batch_shape[0]:
        # One batch axis, not broadcast: evenly spaced matrices (the common case).
        return _even_offsets(x.shape[0], x.strides[0] // x.itemsize)
    nb = len(batch_shape)
    offsets = np.zeros(batch_shape, dtype=np.int64)
    lead = nb - (x.ndim - 2)
    for axis in range(x.ndim - 2):
        if x.shape[axis] == 1:
            continue  # broadcast (or a single matrix): offset 0
        index_shape = [1] * nb
        index_shape[lead + axis] = x.shape[axis]
        step = x.strides[axis] // x.itemsize
        offsets = offsets + (np.arange(x.shape[axis], dtype=np.int64) * step).reshape(index_shape)
    return np.ascontiguousarray(np.broadcast_to(offsets, batch_shape)).reshape(-1)


def _compute(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """c[...] = a @ b for a, b of c's dtype, shapes already checked and broadcastable."""
    if c.ndim == 2:  # an empty C and k == 0 too: the table's "empty" and "scale only" rows
        strategies.compute(1.0, a, b, 0.0, c)
        return
    # A stack's rows index its first matrices, which an empty stack lacks, and take k >= 1.
    if c.size == 0:
        return
    if a.shape[-1] == 0:
        c[...] = 0
        return
    if b.ndim == 2 and a.shape[:-2] == c.shape[:-2]:
        # One B shared by a stack of A's (a linear layer): one tall product.
        a_rows, c_rows = _fold_rows(a), _fold_rows(c)
        if a_rows is not None and c_rows is not None:
            strategies.compute(1.0, a_rows, b, 0.0, c_rows)
            return
    batch_shape = c.shape[:-2]
    strategies.compute(
        1.0,
        a[(0,) * (a.ndim - 2)],
        b[(0,) * (b.ndim - 2)],
        0.0,
        c[(0,) * (c.ndim - 2)],
        tuple(_element_offsets(x, batch_shape) for x in (a, b, c)),
    )


def _planned_product(a: np.ndarray, b: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """matmul's new result of a matrix, a folded stack or a vector times a matrix, or of a
    matrix times a vector, that the small way in found valid but not small: the planner's,
    on views (the builtin found a stack's rows fold)."""
    if b.ndim == 1:
        c = _EMPTY(len(a), dtype)
        strategies.compute(1.0, a, b.reshape(len(b), 1), 0.0, c.reshape(len(a), 1))
    elif a.ndim == 1:
        c = _EMPTY(b.shape[1], dtype)
        strategies.compute(1.0, a.reshape(1, len(a)), b, 0.0, c.reshape(1, b.shape[1]))
    elif a.ndim == 3:
        rows = len(a) * a.shape[1]
        c = _EMPTY((len(a), a.shape[1], b.shape[1]), dtype)
        strategies.compute(1.0, a.reshape(rows, a.shape[2]), b, 0.0, c.reshape(rows, b.shape[1]))
    else:
        c = _EMPTY((len(a), b.shape[1]), dtype)
        strategies.compute(1.0, a, b, 0.0, c)
    return c


def _fast_operand(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` as ``dtype`` with whole-element strides (a view when it already is)."""
    if x.dtype != dtype:
        return x.astype(dtype)  # float32 -> float64 is exact; float64 -> float32 only with dtype=float32
    if any(s % dtype.itemsize for s in x.strides):
        return np.ascontiguousarray(x)
    return x


def matmul(a: ArrayLike, b: ArrayLike | PackedMatrix, out: Any = None, **kwargs: Any) -> Any:
    """Matrix product with exactly ``numpy.matmul``'s semantics (see the module docstring).

    ``out`` may also be given positionally; it may be non-contiguous (it is
    written in place) and may overlap ``a`` or ``b``.  Returns ``out`` when
    given, else a new array, or a NumPy scalar for a 1-D @ 1-D product (a 0-d
    array with ``out=...``); for ndarray subclasses, what NumPy's wrapping
    makes of it.  ``kwargs``: NumPy's keywords for matmul, ``casting='same_kind'``,
    ``order='K'``, ``dtype=None``, ``subok=True``, ``signature``, ``axes``,
    ``axis`` and ``keepdims`` (see ``ufunc_call``); with a ``PackedMatrix``
    ``b``, none.
    """
    if out is None and not kwargs:
        # The commonest calls first: two matrices, a stack of them times one, two stacks along
        # one batch axis, or a matrix and a vector or two vectors, of one float dtype into a
        # new array (a 16x16 float32 product: ~0.46 us, of which the builtin, making the
        # result too, ~0.19; benchmarks/small_calls.py --breakdown).
        # The compiled ways in check that all are ndarrays, not subclasses or look-alikes,
        # and the rest (runners.run_small and run_small_stack, inline).
        try:
            dtype, ndim, ndim_b = a.dtype, a.ndim, b.ndim
            ours = dtype is b.dtype and (dtype is _F32 or dtype is _F64)
        except (AttributeError, TypeError):  # not array-like enough: the general path says what
            ours = False
        if ours:
            prep = _PREPARED.last
            if prep.given_at != in_force.generation or prep.dtype is not dtype:
                prep = prepared.current_prepared(dtype)
            if (ndim_b == 2 and (ndim == 2 or ndim == 3 or ndim == 1)) or (ndim_b == 1 and ndim == 2):
                # A matrix, a stack folded into one tall matrix (a linear layer) or a vector
                # times a matrix, or a matrix times a vector: the builtin makes the result.
                made = prep.small(a, b)
                if made is SMALL_PLANNED:
                    return _planned_product(a, b, dtype)
                if made is not SMALL_REFUSED:
                    return made
            elif ndim_b == 2 and ndim > 3:  # a stack of more axes times one matrix, folded here
                rows = _fold_rows(a)
                if rows is not None:
                    c = _EMPTY((*a.shape[:-1], b.shape[1]), dtype)
                    c_rows = c.reshape(len(rows), b.shape[1])
                    route = prep.small(rows, b, c_rows, 1.0, 0.0)
                    if route == SMALL_PLANNED:
                        strategies.compute(1.0, rows, b, 0.0, c_rows)
                    if route != SMALL_REFUSED:
                        return c
            elif ndim_b == 3 and ndim == 3:
                # Asked as if threads may run (the thread count costs ~0.12 us of a ~1 us
                # call), and again on one thread for a stack planned where that matters; the
                # builtin makes the result.
                made = prep.small_stack(a, b, True)
                if made is SMALL_PLANNED and _workers() == 1:
                    made = prep.small_stack(a, b, False)
                if made is SMALL_PLANNED:
                    c = _EMPTY((len(a), a.shape[1], b.shape[2]), dtype)
                    _run_stack(a, b, c)
                    return c
                if made is not SMALL_REFUSED:
                    return made
            elif ndim_b == 1 and ndim == 1:  # the builtin makes a 0-d result: NumPy's scalar of it
                made = prep.small(a, b)
                if made is SMALL_PLANNED:  # the planner, on a row and a column
                    made = _EMPTY((), dtype)
                    strategies.compute(
                        1.0, a.reshape(1, len(a)), b.reshape(len(b), 1), 0.0, made.reshape(1, 1)
                    )
                if made is not SMALL_REFUSED:
                    return made[()]
    if (
        out is not None
        and not kwargs
        and type(out) is _NDARRAY
        and type(a) is _NDARRAY
        and type(b) is _NDARRAY
    ):
        # An ``out`` of the operands' dtype and A's dimensions: a matrix, or a stack folded into
        # one (a linear layer), times a matrix, or two stacks along one batch axis.  The
        # compiled ways in check its shape and strides, and leave it to the general path where
        # it may overlap an operand (runners.run_small and run_small_stack, inline).
        dtype, ndim_a, ndim_b = a.dtype, a.ndim, b.ndim
        if (
            dtype is b.dtype
            and out.dtype is dtype
            and (dtype is _F32 or dtype is _F64)
            and out.ndim == ndim_a
            and out.flags.writeable
        ):
            prep = _PREPARED.last
            if prep.given_at != in_force.generation or prep.dtype is not dtype:
                prep = prepared.current_prepared(dtype)
            if ndim_b == 2 and (ndim_a == 2 or ndim_a == 3):
                route = prep.small(a, b, out, 1.0, 0.0)  # the builtin folds a stack and its out
                if route == SMALL_DONE:
                    return out
                if route == SMALL_PLANNED:  # valid, not small: the planner (the general way costs ~3 us more)
                    rows, c_rows = (a, out) if ndim_a == 2 else (_fold_rows(a), _fold_rows(out))
                    if rows is not None and c_rows is not None:
                        strategies.compute(1.0, rows, b, 0.0, c_rows)
                        return out
            elif ndim_b == 3 and ndim_a == 3:
                route = prep.small_stack(a, b, out, _workers() > 1)
                if route == SMALL_DONE:
                    return out
                if route == SMALL_PLANNED:
                    _run_stack(a, b, out)
                    return out
    if isinstance(b, PackedMatrix):
        return _matmul_packed(a, b, out, kwargs)
    return ufunc_call.call(_product, a, b, out, kwargs)


def _product(
    a: np.ndarray, b: np.ndarray, out: np.ndarray | None, dtype: np.dtype | None, casting: str, order: str
) -> np.ndarray | None:
    """``a @ b`` computed in ``dtype`` (NumPy's of a and b when None) into ``out``, else into a
    new array laid out as ``order`` says (NumPy's way for matmul: 'K' is 'C'; 'A' is 'F' when
    both operands are F-contiguous), 0-d for two vectors.  None where NumPy computes it (another
    dtype) or raises in its words (a 0-d operand, a cast ``casting`` forbids, a read-only out)."""
    da, db = a.dtype, b.dtype
    if (
        (da is not _F32 and da is not _F64 and da not in _FAST)
        or (db is not _F32 and db is not _F64 and db not in _FAST)
        or a.ndim == 0
        or b.ndim == 0
    ):
        return None
    if dtype is None:
        dtype = _F64 if (da == _F64 or db == _F64) else _F32
    if casting not in _FLOAT_CASTS and not (
        np.can_cast(da, dtype, casting) and np.can_cast(db, dtype, casting)
    ):
        return None
    fortran = order == "F" or (order == "A" and a.flags.f_contiguous and b.flags.f_contiguous)

    a_shape, b_shape = a.shape, b.shape
    a, b, vector_a, vector_b = promoted(a, b)
    if a.ndim == 2 and b.ndim == 2:
        batch_shape = ()
    elif a.shape[:-2] == b.shape[:-2]:
        batch_shape = a.shape[:-2]
    else:
        try:
            batch_shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise shape_error(
                a_shape, b_shape, f"batch dimensions {a.shape[:-2]} and {b.shape[:-2]} do not broadcast"
            ) from None
    full_shape = (*batch_shape, a.shape[-2], b.shape[-1])
    result_shape = batch_shape + ((() if vector_a else (a.shape[-2],)) + (() if vector_b else (b.shape[-1],)))

    if out is not None:
        if out.shape != result_shape:
            raise out_shape_error(out.shape, result_shape)
        if not out.flags.writeable or not np.can_cast(dtype, out.dtype, casting):
            return None
    a = _fast_operand(a, dtype)
    b = _fast_operand(b, dtype)
    if out is None:
        c = np.empty(full_shape, dtype, "F" if fortran else "C")
        _compute(a, b, c)
        return c.reshape(result_shape) if (vector_a or vector_b) else c

    target = out
    if vector_a:
        target = target[..., np.newaxis, :] if not vector_b else target[..., np.newaxis, np.newaxis]
    elif vector_b:
        target = target[..., np.newaxis]
    if _writable_target(out, dtype, a, b):
        _compute(a, b, target)
    else:
        c = np.empty(full_shape, dtype=dtype)
        _compute(a, b, c)
        np.copyto(target, c, casting=casting)
    return out


def packed_left_operand(a, packed: PackedMatrix, name: str) -> np.ndarray:
    """``a`` as the packed operand's dtype, or TypeError when that would lose precision."""
    a = np.asarray(a)
    if a.dtype == packed.dtype:
        return a
    if a.dtype == _F32 and packed.dtype == _F64:
        return a.astype(_F64)  # exact
    raise TypeError(
        f"{name}: the left operand has dtype {a.dtype} but the packed operand is {packed.dtype}; "
        f"pack a {np.result_type(a.dtype, packed.dtype)} copy of it instead"
    )


def _matmul_packed(a, packed: PackedMatrix, out, keywords: dict):
    """``a @ B`` with B prepacked: a may be 1-D, 2-D or a stack (folded into rows)."""
    if keywords:
        raise TypeError(
            f"matmul: a PackedMatrix operand takes no keywords but out (got {', '.join(keywords)})"
        )
    packed.check_usable()
    a = packed_left_operand(a, packed, "matmul")
    if a.ndim == 0:
        raise ValueError(
            "matmul: Input operand 0 does not have enough dimensions (has 0, gufunc core with "
            "signature (n?,k),(k,m?)->(n?,m?) requires 1)"
        )
    k, n = packed.shape
    if a.shape[-1] != k:
        raise shape_error(
            a.shape,
            f"packed {packed.shape}",
            f"the last dimension of the first ({a.shape[-1]}) differs from the packed k ({k})",
        )
    rows = a.reshape(1, k) if a.ndim == 1 else _fold_rows(a)
    if rows is None:
        rows = np.ascontiguousarray(a).reshape(-1, k)
    if any(s % a.itemsize for s in rows.strides):
        rows = np.ascontiguousarray(rows)
    result_shape = (*a.shape[:-1], n)
    if out is not None:
        out = _check_out(out, result_shape, packed.dtype)
        # Straight into out when it is one (rows x n) view of the result's dtype that
        # overlaps neither operand; else through a new array (a copy of C costs ~8 %
        # of a 4096x4096x1024 float32 product).
        target = out[np.newaxis, :] if a.ndim == 1 else _fold_rows(out)
        if target is not None and _writable_target(out, packed.dtype, rows, packed.data):
            strategies.compute(1.0, rows, packed, 0.0, target)
            return out
    c = np.empty((rows.shape[0], n), dtype=packed.dtype)
    strategies.compute(1.0, rows, packed, 0.0, c)
    result = c.reshape(result_shape)
    if out is None:
        return result[()] if result.ndim == 0 else result
    np.copyto(out, result, casting="same_kind")
    return out
