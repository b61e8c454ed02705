"""Reproducible operands and the float64 reference product (seed 002).

The inputs come from a 64-bit linear congruential generator, not from a
platform random generator, so a tuning run can be repeated exactly anywhere.
The logical matrix is generated in row-major order and only then stored in the
requested layout: the layout never changes the values.
"""

from __future__ import annotations

import numba
import numpy as np

LCG_MULTIPLIER = 6364136223846793005
LCG_INCREMENT = 1442695040888963407
SEED_MIX = 0x9E3779B97F4A7C15
LAYOUTS = ("row", "column")
_MASK = (1 << 64) - 1


@numba.njit(cache=True)
def _lcg_values(state: np.uint64, count: int) -> np.ndarray:
    # uint64 arithmetic wraps modulo 2**64, which is the generator's modulus.
    out = np.empty(count, np.float64)
    mul = np.uint64(LCG_MULTIPLIER)
    inc = np.uint64(LCG_INCREMENT)
    x = state
    for j in range(count):
        out[j] = ((x >> np.uint64(32)) % np.uint64(2001)) / 1000.0 - 1.0
        x = x * mul + inc
    return out


def reproducible_matrix(seed: int, rows: int, cols: int, layout: str = "row", dtype=np.float64) -> np.ndarray:
    """A rows x cols matrix of the seed's LCG values in [-1, 1] (multiples of 0.001).

    x0 = seed XOR 0x9E3779B97F4A7C15, x_{j+1} = 6364136223846793005 x_j +
    1442695040888963407 mod 2**64, each state x_j giving ((x_j >> 32) mod 2001)
    / 1000 - 1 for element j in row-major order.  ``layout`` ("row" or "column")
    only chooses how the same values are stored (C or Fortran order).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if rows < 0 or cols < 0:
        raise ValueError(f"a matrix cannot have a negative shape, got {rows} x {cols}")
    state = np.uint64((int(seed) ^ SEED_MIX) & _MASK)
    values = _lcg_values(state, rows * cols).reshape(rows, cols).astype(dtype)
    return np.asfortranarray(values) if layout == "column" else values


def reproducible_batch(
    seed: int, batch: int, rows: int, cols: int, layout: str = "row", dtype=np.float64
) -> np.ndarray:
    """A stack of ``batch`` reproducible matrices; matrix t uses seed + t."""
    return np.stack([reproducible_matrix(seed + t, rows, cols, layout, dtype) for t in range(batch)])


@numba.njit(cache=True)
def _reference(a: np.ndarray, bt: np.ndarray) -> np.ndarray:
    m, k = a.shape
    n = bt.shape[0]
    c = np.empty((m, n), np.float64)
    for i in range(m):
        for j in range(n):
            s = 0.0
            for p in range(k):
                s += a[i, p] * bt[j, p]
            c[i, j] = s
    return c


def reference_gemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A @ B in float64 by plain i-j-k loops: each element summed from 0 in increasing k.

    B is copied transposed first so that the inner loop reads contiguous memory;
    the order of the additions is that of the seed's gemm_reference.
    """
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"reference_gemm needs (m, k) and (k, n) matrices, got {a.shape} and {b.shape}")
    a64 = np.ascontiguousarray(a, dtype=np.float64)
    bt64 = np.ascontiguousarray(np.asarray(b, dtype=np.float64).T)
    return _reference(a64, bt64)
