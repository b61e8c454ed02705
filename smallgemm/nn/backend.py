"""Which library computes the matrix products of ``smallgemm.nn``: smallgemm or NumPy.

Every product of the layers and optimizers goes through :func:`gemm`, so the
same training code can be timed with either library by switching the backend
(:func:`set_backend` or the :func:`use_backend` context manager).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

import smallgemm

BACKENDS = ("smallgemm", "numpy")
_backend = "smallgemm"


def get_backend() -> str:
    """The name of the library that computes the products: ``"smallgemm"`` or ``"numpy"``."""
    return _backend


def set_backend(name: str) -> None:
    """Compute every product of ``smallgemm.nn`` with ``name`` (one of :data:`BACKENDS`)."""
    global _backend
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    _backend = name


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Use backend ``name`` inside a ``with`` block; the previous one is restored after."""
    previous = get_backend()
    set_backend(name)
    try:
        yield
    finally:
        set_backend(previous)


def gemm(
    alpha: float,
    a: np.ndarray,
    b: np.ndarray,
    beta: float = 0.0,
    c: np.ndarray | None = None,
    trans_a: bool = False,
    trans_b: bool = False,
) -> np.ndarray:
    """``alpha * op(a) @ op(b) + beta * c``, written into ``c`` when it is given.

    op(x) is ``x.T`` when the matching ``trans_`` flag is set: a swap of
    strides, never a copy.  smallgemm does the whole update in one call;
    NumPy's ``matmul`` has no ``alpha``/``beta``, so its backend scales and
    adds around the product (what NumPy code has to do).
    """
    if _backend == "smallgemm":
        return smallgemm.gemm(
            alpha, a, b, beta=beta, c=c, trans_a=trans_a, trans_b=trans_b, overwrite_c=c is not None
        )
    op_a = a.T if trans_a else a
    op_b = b.T if trans_b else b
    if c is None or beta != 0.0:
        product = np.matmul(op_a, op_b)
        if alpha != 1.0:
            product *= alpha
        if c is None:
            return product
        if beta != 1.0:
            c *= beta
        c += product
        return c
    np.matmul(op_a, op_b, out=c)
    if alpha != 1.0:
        c *= alpha
    return c
