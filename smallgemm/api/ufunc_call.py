"""``numpy.matmul``'s calling convention around smallgemm's product: its keywords, its
overrides and its subclass wrapping.

Of NumPy's keywords for matmul, ``dtype``, ``casting`` and ``order`` go to the product and
``subok`` is applied here; ``signature`` (and its alias ``sig``), ``axes``, ``axis`` and
``keepdims`` hand the call to ``numpy.matmul``.  So do operands or an ``out`` that bring their
own implementation (``__array_ufunc__`` or ``__array_function__`` other than ndarray's: dask,
CuPy, xarray), so that it runs instead of a conversion.  A result of ndarray subclasses
(``np.matrix``, ``np.ma.MaskedArray``, a user's) is wrapped as NumPy wraps a ufunc's, by the
``__array_wrap__`` of ``out`` or of the input of the highest ``__array_priority__``.  What
smallgemm does not do itself, every invalid argument included, ``numpy.matmul`` does: its
result, or its exception in its words.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

_NDARRAY = np.ndarray
_ARRAY_UFUNC = np.ndarray.__array_ufunc__
_ARRAY_FUNCTION = np.ndarray.__array_function__
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
# Operand types that bring nothing of their own: no look-ups for them.
_PLAIN = frozenset({np.ndarray, list, tuple, float, int, complex, bool})
_OURS = frozenset({"casting", "order", "dtype", "subok"})  # ``out`` is matmul's own parameter
_CASTINGS = frozenset({"no", "equiv", "safe", "same_kind", "unsafe"})
_FLOAT_NAMES = {
    name: np.dtype(name) for name in ("f", "d", "f4", "f8", "float32", "float64", "single", "double")
}
_ORDERS = {None: "K", "K": "K", "A": "A", "C": "C", "F": "F", "k": "K", "a": "A", "c": "C", "f": "F"}
# NumPy 1 wraps subclass results by other rules (``__array_prepare__``, no ``return_scalar``):
# there, subclass operands are its business.
_NUMPY_1 = np.lib.NumpyVersion(np.__version__) < "2.0.0"
# (dtype, casting, order, subok) when no keyword is given.
_DEFAULTS = (None, "same_kind", "K", True)
_WRAP_DEPRECATED = (
    "__array_wrap__ must accept context and return_scalar arguments (positionally) in the "
    "future. (Deprecated NumPy 2.0)"
)

# product(a, b, out, dtype, casting, order): ``a @ b`` of two ndarrays into ``out`` (an ndarray)
# or a new array; None where NumPy computes it or raises.
Product = Callable[[np.ndarray, np.ndarray, np.ndarray | None, np.dtype | None, str, str], np.ndarray | None]


def call(product: Product, a: Any, b: Any, out: Any, keywords: dict[str, Any]) -> Any:
    """``numpy.matmul(a, b, out=out, **keywords)``, computed by ``product`` where it can be."""
    if keywords:
        options = _options(keywords)
        if options is None:
            return _numpy(a, b, out, keywords)
    else:
        options = _DEFAULTS
    target, return_scalar = out, True
    if type(out) is tuple and len(out) == 1:
        target = out[0]
    if target is Ellipsis:  # ``out=...``: a 0-d array, never a scalar
        target, return_scalar = None, False
    plain = type(a) is _NDARRAY and type(b) is _NDARRAY
    if (not plain and (_brings_its_own(a) or _brings_its_own(b))) or (
        target is not None
        and type(target) is not _NDARRAY
        and (not isinstance(target, _NDARRAY) or _brings_its_own(target))
    ):
        return _numpy(a, b, out, keywords)
    dtype, casting, order, subok = options
    result = product(
        a if type(a) is _NDARRAY else np.asarray(a),
        b if type(b) is _NDARRAY else np.asarray(b),
        None if target is None else target if type(target) is _NDARRAY else target.view(_NDARRAY),
        dtype,
        casting,
        order,
    )
    if result is None:
        return _numpy(a, b, out, keywords)
    if target is not None:
        if type(target) is _NDARRAY:
            return target
        return _call_wrap(target.__array_wrap__, target, (np.matmul, (a, b, target), 0), False)
    wrap = None if plain or not subok else _input_wrap(a, b)
    return_scalar = return_scalar and result.ndim == 0
    if wrap is None:
        return result[()] if return_scalar else result
    return _call_wrap(wrap, result, (np.matmul, (a, b), 0), return_scalar)


def _numpy(a: Any, b: Any, out: Any, keywords: dict[str, Any]) -> Any:
    """``numpy.matmul`` with the caller's arguments: its result, or its exception."""
    return np.matmul(a, b, **keywords) if out is None else np.matmul(a, b, out=out, **keywords)


def _options(keywords: dict[str, Any]) -> tuple | None:
    """``(dtype, casting, order, subok)`` from the keywords; None for a call NumPy must take:
    a keyword of its own (``signature``, ``axes`` ...), one it refuses, or a value that is not
    one of the plain ones (NumPy accepts some others or raises its error)."""
    if not _OURS.issuperset(keywords):
        return None
    casting = keywords.get("casting", "same_kind")
    order = keywords.get("order", "K")
    subok = keywords.get("subok", True)
    dtype = keywords.get("dtype")
    if type(casting) is not str or casting not in _CASTINGS or (subok is not True and subok is not False):
        return None
    if not (order is None or type(order) is str) or order not in _ORDERS:
        return None
    if dtype is not None:
        dtype = _float_dtype(dtype)
        if dtype is None:
            return None
    return dtype, casting, _ORDERS[order], subok


def _float_dtype(dtype: Any) -> np.dtype | None:
    """float32 or float64 where ``dtype`` is one of them (a native dtype, a type, a usual name),
    else None: NumPy's dtype, or its error (a byte order, an unknown name)."""
    if dtype is np.float32 or dtype is np.float64 or dtype is float:
        return np.dtype(dtype)
    if type(dtype) is str:
        return _FLOAT_NAMES.get(dtype)
    if isinstance(dtype, np.dtype):
        return _F32 if dtype == _F32 else _F64 if dtype == _F64 else None
    return None


def _brings_its_own(x: Any) -> bool:
    """True when NumPy would hand ``x`` to its own implementation (``__array_ufunc__`` or
    ``__array_function__`` other than ndarray's, or None: a refusal) or, not being an ndarray,
    wrap the result with its ``__array_wrap__``."""
    kind = type(x)
    if kind in _PLAIN:
        return False
    return (
        (_NUMPY_1 and isinstance(x, _NDARRAY))
        or getattr(kind, "__array_ufunc__", _ARRAY_UFUNC) is not _ARRAY_UFUNC
        or getattr(kind, "__array_function__", _ARRAY_FUNCTION) is not _ARRAY_FUNCTION
        or (not isinstance(x, _NDARRAY) and hasattr(x, "__array_wrap__"))
    )


def _input_wrap(a: Any, b: Any) -> Callable | None:
    """The ``__array_wrap__`` NumPy applies to a result of ``a`` and ``b``: an ndarray subclass
    input's, the first of the highest ``__array_priority__``, where an ndarray's own (None)
    yields only to a subclass's of a higher priority or of the same (0)."""
    wrap, priority, found = None, -math.inf, False
    for x in (a, b):
        if type(x) is _NDARRAY:
            if priority < 0.0:
                wrap, priority, found = None, 0.0, True
        elif isinstance(x, _NDARRAY):
            ours = _priority(x)
            if not found or priority < ours or (ours == 0.0 and wrap is None):
                wrap, priority, found = x.__array_wrap__, ours, True
    return wrap


def _priority(x: np.ndarray) -> float:
    """``x.__array_priority__``, or 0 (ndarray's) where it has none that is a number."""
    try:
        return float(x.__array_priority__)
    except (AttributeError, TypeError, ValueError):
        return 0.0


def _call_wrap(wrap: Callable, array: np.ndarray, context: tuple, return_scalar: bool) -> Any:
    """``wrap(array, context, return_scalar)``; as NumPy does, an ``__array_wrap__`` that takes
    fewer arguments (a TypeError) is called with fewer, with NumPy's deprecation warning."""
    try:
        return wrap(array, context, return_scalar)
    except TypeError:
        try:
            wrapped = wrap(array, context)
        except TypeError:
            wrapped = wrap(array)
    # The caller of smallgemm.matmul: this function, call, matmul, then theirs.
    warnings.warn(_WRAP_DEPRECATED, DeprecationWarning, stacklevel=4)
    return wrapped
