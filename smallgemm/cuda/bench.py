"""``python -m smallgemm.cuda bench``: the ladder against cuBLAS, in seed 000's table.

Each kernel multiplies square device matrices (``M = N = K``) ``repeats`` times,
each launch timed by CUDA events; cuBLAS is ``cupy.matmul`` (TF32 off), where CuPy
is installed.  Before timing, every kernel's result on the first size is checked
bit for bit against ``smallgemm.matmul`` on the CPU in exact mode.
"""

from __future__ import annotations

import os
import time
from functools import partial

import numpy as np
from numba import cuda

from .kernels import KERNELS
from .operands import simulated
from .product import matmul


def _seconds(run, repeats: int) -> list[float]:
    """Time of each of ``repeats`` calls of ``run`` on the device, by CUDA events (by the
    host's clock in the simulator, whose events do not time)."""
    times = []
    for _ in range(repeats):
        start, stop = cuda.event(), cuda.event()
        begin = time.perf_counter()
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(time.perf_counter() - begin if simulated() else start.elapsed_time(stop) / 1e3)
    return times


def _cublas(size: int, dtype: np.dtype, repeats: int) -> list[float] | None:
    """Times of ``cupy.matmul`` with TF32 off, or None without CuPy."""
    os.environ["CUPY_TF32"] = "0"  # cuBLAS in float32, as the kernels (read when CuPy is imported)
    try:
        import cupy
    except ImportError:
        return None
    a = cupy.random.standard_normal((size, size)).astype(dtype)
    b = cupy.random.standard_normal((size, size)).astype(dtype)
    c = cupy.matmul(a, b)
    times = []
    for _ in range(repeats):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        cupy.matmul(a, b, out=c)
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return times


def line(size: int, times: list[float], name: str, reference: float | None) -> str:
    """One row of seed 000's table, with the share of cuBLAS's average."""
    low, avg, high = min(times), sum(times) / len(times), max(times)
    gflops = 2.0 * size**3 / avg / 1e9
    share = f", {100 * reference / avg:6.1f} % of cuBLAS" if reference else ""
    return (f"{name:>13}  M N K = {size:6d} {size:6d} {size:6d}, Time = {low:12.8f} {avg:12.8f} {high:12.8f} s, "
            f"AVG Performance = {gflops:10.4f} Gflops{share}")


def check(size: int, dtype: np.dtype, kernels: list[str]) -> str:
    """Every kernel's product of one ``size``³ pair against smallgemm.matmul (CPU, exact)."""
    import smallgemm

    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size)).astype(dtype)
    b = rng.standard_normal((size, size)).astype(dtype)
    expected = smallgemm.matmul(a, b)
    if simulated():  # no fused multiply-add: the kernels are checked against each other
        expected, against = matmul(a, b, kernel="naive"), "the naive kernel (simulator)"
    else:
        expected, against = smallgemm.matmul(a, b), "smallgemm.matmul (CPU, exact)"
    same = [name for name in kernels if np.array_equal(matmul(a, b, kernel=name), expected)]
    differ = sorted(set(kernels) - set(same))
    return (f"bits: {size}^3 {dtype.name}: " + (f"every kernel equals {against}" if not differ
            else f"{', '.join(differ)} differ from {against}"))


def device_name() -> str:
    """The GPU's name, or the simulator's."""
    if simulated():
        return "numba-cuda simulator (multiply and add rounded apart)"
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else name


def run(sizes: list[int], dtype: np.dtype, kernels: list[str], repeats: int) -> list[str]:
    """The table's lines: a device line, the check, then per size cuBLAS and each kernel."""
    lines = [f"device: {device_name()}, {dtype.name}", check(min(sizes), dtype, kernels)]
    rng = np.random.default_rng(1)
    for size in sizes:
        a = cuda.to_device(rng.standard_normal((size, size)).astype(dtype))
        b = cuda.to_device(rng.standard_normal((size, size)).astype(dtype))
        c = cuda.device_array((size, size), dtype)
        reference = _cublas(size, dtype, repeats)
        if reference is not None:
            lines.append(line(size, reference, "cuBLAS", None))
        cublas_avg = sum(reference) / len(reference) if reference else None
        for name in kernels:
            kernel = KERNELS[name]
            kernel.launch(a, b, c)  # compiles
            cuda.synchronize()
            lines.append(line(size, _seconds(partial(kernel.launch, a, b, c), repeats), name, cublas_avg))
    if not any(ln.lstrip().startswith("cuBLAS") for ln in lines):
        lines.append("cuBLAS: not timed (CuPy is not installed: pip install cupy-cuda12x)")
    return lines
