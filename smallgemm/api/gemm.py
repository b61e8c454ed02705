"""Public BLAS-style entry point: ``gemm``, with the calling convention of
``scipy.linalg.blas.sgemm`` / ``dgemm`` and NumPy's dtype promotion.

This layer knows NumPy semantics and argument checking; it never sees
registers or packing.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..drivers.unpacked import SMALL_DONE, SMALL_PLANNED, SMALL_REFUSED
from ..plan import strategies
from ..plan.runners import run_small_made, run_small_scaled
from .packed import PackedMatrix

_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_F32, _F64 = _FLOAT_DTYPES
_NDARRAY = np.ndarray


def _as_matrix(x, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype not in _FLOAT_DTYPES:
        # np.asarray keeps the dtype's byte order; compare kinds for a clear message.
        if arr.dtype.kind == "f" and arr.dtype.itemsize in (4, 8):
            return _as_matrix(arr.astype(arr.dtype.newbyteorder("=")), name)
        raise TypeError(f"gemm: {name} has dtype {arr.dtype}; only float32 and float64 are supported")
    if arr.ndim != 2:
        raise ValueError(f"gemm: {name} must be 2-D, got an array of shape {arr.shape}")
    return arr


def operators(a, b, trans_a: bool, trans_b: bool) -> tuple:
    """op(a) and op(b) (x or x.T), ValueError in gemm's words unless op(a) has as many columns
    as op(b) has rows.  Any 2-D array type with ``shape`` and ``T`` (NumPy's, Dask's)."""
    op_a = a.T if trans_a else a
    op_b = b.T if trans_b else b
    if op_a.shape[1] != op_b.shape[0]:
        raise ValueError(
            f"gemm: shapes do not match: op(a) is {op_a.shape} and op(b) is {op_b.shape} "
            f"(a {a.shape}, trans_a={bool(trans_a)}; b {b.shape}, trans_b={bool(trans_b)}); "
            f"op(a) must have as many columns as op(b) has rows"
        )
    return op_a, op_b


def as_scalar(x, name: str) -> float:
    """``x`` as a float, TypeError in gemm's words unless it is a real number (not a bool)."""
    if type(x) is float or type(x) is int:  # the usual case, without the ABC check (~0.4 us)
        return float(x)
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise TypeError(f"gemm: {name} must be a real number, got {type(x).__name__} {x!r}")
    return float(x)


def _strides_ok(x: np.ndarray) -> bool:
    """True when both strides of a 2-D ``x`` are whole numbers of elements (the driver's unit)."""
    rows, cols = x.strides
    return not (rows % x.itemsize or cols % x.itemsize)


def _operand(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` as ``dtype`` with element strides: a view when possible, else a copy."""
    if x.dtype != dtype:
        return x.astype(dtype)  # float32 -> float64 is exact: no precision lost
    if not _strides_ok(x):
        return np.array(x, dtype=dtype, order="C")
    return x


def _checked_c(c, shape: tuple[int, int], product: str) -> np.ndarray:
    """``c`` as an array, TypeError unless float32/float64, ValueError unless of ``shape``."""
    c_in = c if isinstance(c, np.ndarray) else np.asarray(c)
    if c_in.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"gemm: c has dtype {c_in.dtype}; only float32 and float64 are supported")
    if c_in.shape != shape:
        raise ValueError(f"gemm: c has shape {c_in.shape} but {product} has shape {shape}")
    return c_in


def gemm(
    alpha: float,
    a,
    b,
    beta: float = 0.0,
    c=None,
    trans_a: bool = False,
    trans_b: bool = False,
    overwrite_c: bool = False,
) -> np.ndarray:
    """Return ``alpha * op(a) @ op(b) + beta * c``, op(x) being x or x.T.

    The convention of ``scipy.linalg.blas.sgemm/dgemm``: ``trans_a``/``trans_b``
    transpose the operands (as a swap of strides, never a copy); ``c`` (if given)
    must have the shape of the product; with ``overwrite_c`` and a ``c`` of the
    result dtype, the result is written into ``c`` and ``c`` is returned.
    Otherwise ``c`` is left untouched and a new array is returned.  When
    ``beta == 0``, ``c`` is never read (NaN in it does not leak).

    The result dtype follows NumPy: float32 with float32 gives float32, float64
    with anything gives float64.  Raises ``TypeError`` for other dtypes and
    ``ValueError`` (naming the shapes) when the shapes do not match.

    ``b`` may be a ``smallgemm.pack(...)`` result; its transposition was fixed
    when it was packed, so ``trans_b`` must then be False.
    """
    if (
        type(a) is _NDARRAY
        and type(b) is _NDARRAY
        and (type(alpha) is float or type(alpha) is int)
        and (type(beta) is float or type(beta) is int)
    ):
        # Two matrices of one float dtype, into a new array or overwriting a c of it: the
        # least Python before the compiled way in, which checks the rest and computes a
        # small product, hands a valid one back to the planner, or refuses (then the
        # general path below says what is wrong, or copies where c overlaps a or b).
        dtype = a.dtype
        if dtype is b.dtype and (dtype is _F32 or dtype is _F64) and a.ndim == 2 and b.ndim == 2:
            op_a = a.T if trans_a else a
            op_b = b.T if trans_b else b
            if c is None:  # a small product's result is made by the compiled way in
                made = run_small_made(float(alpha), op_a, op_b, dtype)
                if made is SMALL_PLANNED:
                    out = np.empty((op_a.shape[0], op_b.shape[1]), dtype)
                    strategies.compute(float(alpha), op_a, op_b, 0.0, out)
                    return out
                if made is not SMALL_REFUSED:
                    return made
            elif (
                overwrite_c and type(c) is _NDARRAY and c.dtype is dtype and c.ndim == 2 and c.flags.writeable
            ):
                out = c
                route = run_small_scaled(alpha, op_a, op_b, beta, out, dtype)
                if route == SMALL_DONE:
                    return out
                if route == SMALL_PLANNED:
                    strategies.compute(float(alpha), op_a, op_b, float(beta), out)
                    return out
    alpha = as_scalar(alpha, "alpha")
    beta = as_scalar(beta, "beta")
    if isinstance(b, PackedMatrix):
        return _gemm_packed(alpha, a, b, beta, c, trans_a, trans_b, overwrite_c)
    a = _as_matrix(a, "a")
    b = _as_matrix(b, "b")
    op_a, op_b = operators(a, b, trans_a, trans_b)
    shape = (op_a.shape[0], op_b.shape[1])
    dtypes = [a.dtype, b.dtype]
    if c is not None:
        c_in = _checked_c(c, shape, f"op(a) @ op(b) (op(a) {op_a.shape}, op(b) {op_b.shape})")
        dtypes.append(c_in.dtype)
    # NumPy's promotion among float32/float64 (np.result_type costs ~0.6 us a call).
    dtype = _FLOAT_DTYPES[1] if _FLOAT_DTYPES[1] in dtypes else _FLOAT_DTYPES[0]

    if c is None:
        out = np.empty(shape, dtype=dtype)
        beta = 0.0
    elif overwrite_c and c_in.dtype == dtype and c_in.flags.writeable and _strides_ok(c_in):
        out = c_in
    else:
        out = np.array(c_in, dtype=dtype, order="C") if beta != 0 else np.empty(shape, dtype=dtype)

    op_a = _operand(op_a, dtype)
    op_b = _operand(op_b, dtype)
    # The product reads A and B while it writes C: an overlapping C (overwrite_c
    # with c sharing memory with a or b) is computed into a fresh array first.
    if c is not None and (np.may_share_memory(out, op_a) or np.may_share_memory(out, op_b)):
        target = np.array(out, order="C") if beta != 0 else np.empty(shape, dtype=dtype)
        strategies.compute(alpha, op_a, op_b, beta, target)
        out[...] = target
        return out
    strategies.compute(alpha, op_a, op_b, beta, out)
    return out


def _gemm_packed(alpha, a, packed: PackedMatrix, beta, c, trans_a, trans_b, overwrite_c) -> np.ndarray:
    from .matmul import packed_left_operand

    if trans_b:
        raise ValueError(
            "gemm: trans_b does not apply to a packed operand; its transposition is fixed "
            "when packing (smallgemm.pack(b, trans=True))"
        )
    packed.check_usable()
    a = _as_matrix(packed_left_operand(a, packed, "gemm"), "a")
    op_a = a.T if trans_a else a
    k, n = packed.shape
    if op_a.shape[1] != k:
        raise ValueError(
            f"gemm: shapes do not match: op(a) is {op_a.shape} and the packed b is {packed.shape}"
        )
    shape = (op_a.shape[0], n)
    dtype = packed.dtype
    if c is None:
        out, beta = np.empty(shape, dtype=dtype), 0.0
    else:
        c_in = _checked_c(c, shape, "op(a) @ b")
        if (
            overwrite_c
            and c_in.dtype == dtype
            and c_in.flags.writeable
            and _strides_ok(c_in)
            and not np.may_share_memory(c_in, op_a)
        ):
            out = c_in
        else:
            out = np.array(c_in, dtype=dtype) if beta != 0 else np.empty(shape, dtype=dtype)
    strategies.compute(alpha, _operand(op_a, dtype), packed, beta, out)
    return out
