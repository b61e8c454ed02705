"""The optimisation ladder of seed 001, measured on this machine.

Each rung is one step from a textbook triple loop to smallgemm on all cores:

1. naive loops in the order i, j, k (the inner loop strides down a column of B);
2. the loops reordered i, k, j (the inner loop runs along rows of B and C,
   contiguous, which LLVM vectorises);
3. blocked: MC x KC blocks of A and KC x NC blocks of B packed into panels,
   then a scalar MR x NR microkernel (plain Numba loops, no explicit SIMD);
4. smallgemm on one thread: the same blocking with the SIMD microkernel;
5. smallgemm on all cores.

LLVM vectorises the inner loop of rung 2 on its own, so rung 3, scalar by
construction, can be slower: blocking and packing pay off only once the
microkernel keeps a register tile of vector accumulators (rung 4).

Each rung prints GFLOP/s and the percentage of the FMA peak measured in the
same run for the dtype and smallgemm's vector width (one core for rungs 1-4,
all cores for rung 5).  The slow rungs run on smaller cubes and say so.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

import numpy as np
from numba import njit

from ..api.matmul import matmul
from ..api.peak import fma_gflops
from ..machine import cpu, threads
from ..plan import dispatch
from . import bench

# Blocking of the scalar rung: an MR x NR accumulator tile, A blocks of MC x KC
# (fits L2), B blocks of KC x NC.
MR, NR = 4, 8
MC, KC, NC = 128, 256, 2048


@njit(cache=True)
def naive_ijk(a, b, c):
    """c = a @ b with the loops i, j, k: a dot product per element, B read down its columns."""
    m, k = a.shape
    n = b.shape[1]
    for i in range(m):
        for j in range(n):
            acc = a[i, 0] * b[0, j]
            for p in range(1, k):
                acc += a[i, p] * b[p, j]
            c[i, j] = acc


@njit(cache=True)
def reordered_ikj(a, b, c):
    """c = a @ b with the loops i, k, j: the inner loop updates a row of C from a row of B."""
    m, k = a.shape
    n = b.shape[1]
    c[:, :] = 0
    for i in range(m):
        for p in range(k):
            aip = a[i, p]
            for j in range(n):
                c[i, j] += aip * b[p, j]


@njit(cache=True)
def _pack(x, i0, k0, rows, depth, width, panels):
    """x[i0:i0+rows, k0:k0+depth] as ``width``-row panels, column by column, zero-padded.

    A packs into MR-row panels; B packs as B.T into NR-"row" panels, which is
    B's NR-column panels read row by row.
    """
    for q in range((rows + width - 1) // width):
        for p in range(depth):
            for r in range(width):
                i = q * width + r
                panels[q, p, r] = x[i0 + i, k0 + p] if i < rows else 0


@njit(cache=True)
def _scalar_microkernel(a_panel, b_panel, kc, acc, c, i0, j0, mr, nr):
    """C[i0:i0+mr, j0:j0+nr] += a_panel @ b_panel, accumulated in the MR x NR tile ``acc``."""
    acc[:, :] = 0
    for p in range(kc):
        for r in range(MR):
            ar = a_panel[p, r]
            for s in range(NR):
                acc[r, s] += ar * b_panel[p, s]
    for r in range(mr):
        for s in range(nr):
            c[i0 + r, j0 + s] += acc[r, s]


@njit(cache=True)
def blocked_scalar(a, b, c):
    """c = a @ b by the five loops of BLIS (NC, KC, MC, NR, MR) with packing and a scalar microkernel."""
    m, k = a.shape
    n = b.shape[1]
    c[:, :] = 0
    a_panels = np.empty(((MC + MR - 1) // MR, KC, MR), a.dtype)
    b_panels = np.empty(((NC + NR - 1) // NR, KC, NR), b.dtype)
    acc = np.empty((MR, NR), c.dtype)
    for j0 in range(0, n, NC):
        nc = min(NC, n - j0)
        for k0 in range(0, k, KC):
            kc = min(KC, k - k0)
            _pack(b.T, j0, k0, nc, kc, NR, b_panels)
            for i0 in range(0, m, MC):
                mc = min(MC, m - i0)
                _pack(a, i0, k0, mc, kc, MR, a_panels)
                for jr in range(0, nc, NR):
                    for ir in range(0, mc, MR):
                        _scalar_microkernel(
                            a_panels[ir // MR],
                            b_panels[jr // NR],
                            kc,
                            acc,
                            c,
                            i0 + ir,
                            j0 + jr,
                            min(MR, mc - ir),
                            min(NR, nc - jr),
                        )


@dataclass
class Rung:
    """One measured rung: its name, cube size, speed and share of the peak it is held to."""

    name: str
    size: int
    gflops: float
    peak_gflops: float

    @property
    def percent_of_peak(self) -> float:
        return 100.0 * self.gflops / self.peak_gflops


def _measure(
    product: Callable[[np.ndarray, np.ndarray, np.ndarray], object], size: int, dtype: np.dtype
) -> float:
    """Median GFLOP/s of ``product(a, b, c)`` on a ``size``-cube, after checking its result."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size)).astype(dtype)
    b = rng.standard_normal((size, size)).astype(dtype)
    c = np.empty((size, size), dtype)
    call = lambda: product(a, b, c)  # noqa: E731
    probe = bench.time_interleaved([call], 1)[0].median  # also compiles and warms
    tolerance = 1e-3 if dtype == np.float32 else 1e-9
    if not np.allclose(c, a @ b, rtol=tolerance, atol=tolerance * np.sqrt(size)):
        raise AssertionError(f"ladder rung {product!r} computed a wrong product")
    seconds = bench.time_interleaved([call], bench.repeats_for(probe))[0].median
    return 2.0 * size**3 / seconds / 1e9


def _smallgemm(n_threads: int) -> Callable[[np.ndarray, np.ndarray, np.ndarray], object]:
    def product(a, b, c):
        with threads.num_threads(n_threads):
            return matmul(a, b, out=c)

    return product


def measure_ladder(dtype, size: int = 1024) -> list[Rung]:
    """Measure the five rungs: naive on ``size/4``-cubes, reordered on ``size/2``, the rest on ``size``."""
    dtype = np.dtype(dtype)
    bits = dispatch.current().shape.bits
    cores = cpu.core_count()
    one_core, all_cores = fma_gflops(dtype, bits, 1, repeats=3), fma_gflops(dtype, bits, cores, repeats=3)
    steps = [
        ("naive loops i, j, k (Numba)", naive_ijk, max(8, size // 4), one_core),
        ("reordered loops i, k, j (Numba)", reordered_ikj, max(8, size // 2), one_core),
        (f"blocked, packed, scalar {MR}x{NR} microkernel (Numba)", blocked_scalar, size, one_core),
        (
            f"SIMD microkernel {dispatch.current().tile_name(dtype)} (smallgemm, 1 thread)",
            _smallgemm(1),
            size,
            one_core,
        ),
        (f"all cores (smallgemm, {cores} threads)", _smallgemm(cores), size, all_cores),
    ]
    return [Rung(name, n, _measure(product, n, dtype), peak) for name, product, n, peak in steps]


def run_ladder(dtype, out: TextIO = sys.stdout, size: int = 1024) -> list[Rung]:
    """Measure the ladder (see :func:`measure_ladder`) and print it as a Markdown table."""
    dtype = np.dtype(dtype)
    print(
        f"Ladder {dtype.name} on {cpu.model_name()}: % of the FMA peak measured now at "
        f"{dispatch.current().shape.bits} bits (one core; all cores for the last rung)",
        file=out,
    )
    print("| rung | cube | GFLOP/s | % of peak | peak GFLOP/s |\n|---|---|---|---|---|", file=out, flush=True)
    rungs = measure_ladder(dtype, size)
    for rung in rungs:
        cube = f"{rung.size}³" + ("" if rung.size == size else f" (smaller: rung too slow for {size}³)")
        print(
            f"| {rung.name} | {cube} | {rung.gflops:.2f} | {rung.percent_of_peak:.1f} % | "
            f"{rung.peak_gflops:.0f} |",
            file=out,
            flush=True,
        )
    return rungs
