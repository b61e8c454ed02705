"""Slow, readable references and the error bound every test compares with.

Reference: the product of float64 copies.  Bound (Higham 2002, §3.1): a sum of
k products in any order satisfies |c_hat - c| <= gamma_k * sum |a||b| with
gamma_k = k*u / (1 - k*u); two kernels that sum in different orders differ by at
most twice that.  Bounds are absolute per element (elements may be near zero).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic


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


@intrinsic
def _fused_multiply_add(typingctx, x, y, z):
    """x*y + z rounded once (``llvm.fma``), for float32 or float64 scalars."""
    if x not in (types.float32, types.float64) or y != x or z != x:
        return None

    def codegen(context, builder, signature, args):
        kind = ir.FloatType() if x == types.float32 else ir.DoubleType()
        fma = builder.module.declare_intrinsic("llvm.fma", [kind], ir.FunctionType(kind, [kind] * 3))
        return builder.call(fma, args)

    return x(x, y, z), codegen


@njit(cache=True)
def _chain_product(alpha, a, b, beta, c, continue_chain):
    zero = alpha - alpha
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            s = c[i, j] if continue_chain else zero
            for p in range(a.shape[1]):
                s = _fused_multiply_add(a[i, p], b[p, j], s)
            if continue_chain:
                c[i, j] = s
            elif beta == 0:
                c[i, j] = alpha * s
            else:
                c[i, j] = _fused_multiply_add(alpha, s, beta * c[i, j])


def chain_reference(alpha, a, b, beta=0.0, c=None):
    """The exact-products rule, one scalar FMA chain per element in increasing k:

        C[i, j] = alpha * s + beta * C0[i, j],  s = fma(a[i,K-1], b[K-1,j], ... fma(a[i,0], b[0,j], 0))

    the last two terms one ``fma(alpha, s, beta * C0)``, and C0 never read when beta == 0;
    ``alpha == beta == 1`` continues the chain from C0 instead (s starts at C0, C = s).
    With nothing to multiply (k == 0 or alpha == 0), C = beta * C0 as BLAS does.
    """
    a, b = np.asarray(a), np.asarray(b)
    dtype = np.result_type(a, b)
    m, n = a.shape[0], b.shape[1]
    out = np.zeros((m, n), dtype) if c is None or beta == 0 else np.array(c, dtype=dtype)
    if a.shape[1] == 0 or alpha == 0:
        return (dtype.type(beta) * out) if beta != 0 else np.zeros((m, n), dtype)
    continue_chain = alpha == 1 and beta == 1
    _chain_product(dtype.type(alpha), a.astype(dtype), b.astype(dtype), dtype.type(beta), out, continue_chain)
    return out
