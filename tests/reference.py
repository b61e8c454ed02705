"""Slow, readable references and the error bound every test compares with.

Reference: the product of float64 copies.  Bound (Higham 2002, §3.1): a sum of
k products in any order satisfies |c_hat - c| <= gamma_k * sum |a||b| with
gamma_k = k*u / (1 - k*u); two kernels that sum in different orders differ by at
most twice that.  Bounds are absolute per element (elements may be near zero).
"""

from __future__ import annotations

import numpy as np


def unit_roundoff(dtype) -> float:
    return float(np.finfo(dtype).eps) / 2


def gamma(k: int, dtype) -> float:
    u = unit_roundoff(dtype)
    return k * u / (1 - k * u)


def reference_gemm(alpha, a, b, beta=0.0, c=None):
    """alpha*a@b + beta*c in float64, with its per-element error bound (for the product's dtype)."""
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    exact = alpha * (a64 @ b64)
    magnitude = abs(alpha) * (np.abs(a64) @ np.abs(b64))
    if c is not None and beta != 0:
        c64 = np.asarray(c, dtype=np.float64)
        exact = exact + beta * c64
        magnitude = magnitude + abs(beta) * np.abs(c64)
    return exact, magnitude


def assert_close(result, alpha, a, b, beta=0.0, c=None, dtype=None):
    """Assert ``result`` is within 2*gamma_(k+2) * sum|terms| of the float64 reference."""
    dtype = dtype or result.dtype
    exact, magnitude = reference_gemm(alpha, a, b, beta, c)
    k = np.shape(a)[-1]
    # k products, one alpha scaling and one beta term: k + 2 roundings at most,
    # plus the float32 rounding of the inputs' scalars; twice for order changes.
    bound = 2 * gamma(k + 3, dtype) * magnitude + np.finfo(dtype).tiny
    err = np.abs(np.asarray(result, dtype=np.float64) - exact)
    bad = ~(err <= bound)
    assert not bad.any(), (
        f"{bad.sum()} of {bad.size} elements outside the bound; worst excess "
        f"{np.max(err - bound)} at {np.unravel_index(np.argmax(err - bound), err.shape)}"
    )
