"""The machine's own limits, measured: FMA peak per vector width and dtype, read bandwidth.

Benchmarks print "% of peak" against these figures.  Each is a best-of-several
measurement in this process (the clock varies between runs on this machine).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from ..kernels import KERNELS
from ..machine import cpu
from ..simd import TileShape, address, fma_throughput_loop

# 2 x 14 accumulators hide the FMA latency (4 cycles) at 2 FMAs per cycle with room to spare.
_BITS = {512: TileShape(14, 2, 512, True), 256: TileShape(6, 2, 256, True), 128: TileShape(4, 2, 128, True)}
_ITERATIONS = 10_000_000  # ~35 ms a run: long enough to start threads together


@njit(cache=True, nogil=True)
def _fma_loop(shape, src, iterations):
    return fma_throughput_loop(shape, address(src), iterations)


@njit(cache=True, nogil=True, fastmath=True)
def _read_sum(x):
    total = 0.0
    for i in range(x.shape[0]):
        total += x[i]
    return total


def read_pass(x: np.ndarray) -> float:
    """Read all of the 1-D float64 array ``x`` once (its sum): the memory-bound reference a
    streaming product is timed beside, interleaved, over as many bytes as it reads."""
    return _read_sum(x)


def _widths() -> list[int]:
    """Vector widths this CPU runs natively (from the kernels it supports)."""
    features = cpu.features()
    supported = {k.shape.bits for k in KERNELS if k.runs_on(features)}
    return sorted(supported, reverse=True)


def fma_gflops(dtype, bits: int, threads: int = 1, repeats: int = 5) -> float:
    """Measured FMA peak in GFLOP/s for one vector width and dtype, on ``threads`` threads."""
    dtype = np.dtype(dtype)
    shape = _BITS[bits]
    src = np.full(3 * shape.lanes(dtype.itemsize), 1.0, dtype=dtype)
    src[shape.lanes(dtype.itemsize) :] = 0.999999  # x * y stays bounded: no overflow to inf
    flops = 2 * shape.lanes(dtype.itemsize) * shape.rows * shape.vectors * _ITERATIONS
    _fma_loop(shape, src, 10)
    barrier = threading.Barrier(threads)

    def timed(_):
        barrier.wait()  # start together: the threads' runs must overlap
        start = time.perf_counter()
        _fma_loop(shape, src, _ITERATIONS)
        return time.perf_counter() - start

    best = float("inf")
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(repeats):
            best = min(best, max(pool.map(timed, range(threads))))
    return threads * flops / best / 1e9


def read_bandwidth(bytes_: int = 256 * 1024**2, repeats: int = 5) -> float:
    """Measured read bandwidth of one core in GB/s (a sum over an array far larger than L3)."""
    x = np.ones(bytes_ // 8, dtype=np.float64)
    _read_sum(x[:16])
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        _read_sum(x)
        best = min(best, time.perf_counter() - start)
    return x.nbytes / best / 1e9


def peak(threads: int | None = None) -> dict:
    """FMA peak of one core and of ``threads`` cores (default: all) per dtype and vector
    width, in GFLOP/s, and the read bandwidth of one core in GB/s."""
    threads = threads or cpu.core_count()
    fma = {}
    for bits in _widths():
        for dtype in ("float32", "float64"):
            one = fma_gflops(dtype, bits, 1)
            fma[f"{dtype}_{bits}"] = {
                "one_core": one,
                "all_cores": fma_gflops(dtype, bits, threads),
                "threads": threads,
            }
    return {"fma_gflops": fma, "read_gb_per_s": read_bandwidth()}
