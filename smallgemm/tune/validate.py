"""Comparing a result with the reference, and the bound a reordered sum must meet.

Higham (2002, §3.1): a sum of k products in any order satisfies
|c_hat - c| <= gamma_k * sum |a||b|, gamma_k = k u / (1 - k u); two kernels that
sum in different orders differ by at most twice that.  The bound is absolute
(elements of C may be near zero, so a relative bound would be dishonest).
"""

from __future__ import annotations

import numpy as np


def gamma(k: int, dtype) -> float:
    """gamma_k = k u / (1 - k u) with u the unit roundoff of ``dtype``."""
    u = float(np.finfo(dtype).eps) / 2
    if k * u >= 1:
        raise ValueError(f"gamma_k is undefined for k={k} in {np.dtype(dtype).name} (k u >= 1)")
    return k * u / (1 - k * u)


def reorder_tolerance(k: int, dtype, max_abs_a: float = 1.0, max_abs_b: float = 1.0) -> float:
    """2 gamma_k k max|a| max|b|: the seed's bound for kernels that sum in another order.

    With the reproducible inputs (|a|, |b| <= 1) this is about 2 k^2 u.
    """
    return 2 * gamma(k, dtype) * k * max_abs_a * max_abs_b


def validate_gemm(result, expected, tolerance: float) -> int:
    """How many elements of ``result`` differ from ``expected`` by more than ``tolerance``.

    Both are compared flattened; every element by which the lengths differ
    counts as a mismatch, so a truncated (or padded) result is never valid.
    NaN compares as a mismatch.
    """
    got = np.asarray(result, dtype=np.float64).ravel()
    want = np.asarray(expected, dtype=np.float64).ravel()
    common = min(got.size, want.size)
    bad = ~(np.abs(got[:common] - want[:common]) <= tolerance)
    return int(np.count_nonzero(bad)) + abs(got.size - want.size)
