"""``python -m smallgemm.cuda bench``: the ladder against cuBLAS, in seed 000's table.

Each kernel multiplies square device matrices (``M = N = K``) ``repeats`` times,
each launch timed by CUDA events; cuBLAS is ``cupy.matmul``, where CuPy is installed,
float32 in FP32: TF32 turned off with CuPy's own switch, and its row says whether a
product showed TF32's errors.  Before timing, every kernel's result on the first size is checked
bit for bit against ``smallgemm.matmul`` on the CPU in exact mode.
"""

from __future__ import annotations

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


# cuBLAS's float32 error, against the float64 product, in units of max(|A| @ |B|): FP32
# arithmetic stays below 1e-6 at the sizes timed; TF32 rounds each input to 10 bits of
# mantissa (unit roundoff 2**-11, about 5e-4), which leaves errors of 1e-4 and more.
TF32_MIN_ERROR = 1e-5


def tf32_in_use(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> bool:
    """Whether the float32 product ``c`` of ``a`` and ``b`` has TF32's errors (``TF32_MIN_ERROR``)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    scale = float((np.abs(a64) @ np.abs(b64)).max()) or 1.0
    return float(np.abs(c - a64 @ b64).max()) / scale >= TF32_MIN_ERROR


def _fp32_compute(cupy) -> str:
    """Sets ``cupy.matmul`` to compute float32 in FP32 (TF32 off) with CuPy's own switch,
    whenever CuPy was imported and whatever ``CUPY_TF32`` says; returns the compute type
    CuPy now reports, or why none could be set."""
    try:
        from cupy._core import _routines_linalg as linalg

        linalg.set_compute_type(np.float32, linalg.COMPUTE_TYPE_FP32)
        return linalg.compute_type_to_str(linalg.get_compute_type(np.float32))
    except (ImportError, AttributeError):
        return f"CuPy {cupy.__version__} has no compute-type switch"


def _cublas(size: int, dtype: np.dtype, repeats: int) -> tuple[list[float], str] | None:
    """Times of ``cupy.matmul`` and what its arithmetic was (float32: the compute type set and
    whether its product shows TF32's errors), or None without CuPy."""
    try:
        import cupy
    except ImportError:
        return None
    note = ""
    if dtype == np.float32:
        compute = _fp32_compute(cupy)
        rng = np.random.default_rng(2)
        a_host, b_host = (rng.standard_normal((256, 256)).astype(np.float32) for _ in range(2))
        c_host = cupy.asnumpy(cupy.matmul(cupy.asarray(a_host), cupy.asarray(b_host)))
        note = f"{compute}, TF32 {'ON: not FP32' if tf32_in_use(a_host, b_host, c_host) else 'off (checked)'}"
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
    return times, note


def line(size: int, times: list[float], name: str, reference: float | None) -> str:
    """One row of seed 000's table, with the share of cuBLAS's average."""
    low, avg, high = min(times), sum(times) / len(times), max(times)
    gflops = 2.0 * size**3 / avg / 1e9
    share = f", {100 * reference / avg:6.1f} % of cuBLAS" if reference else ""
    return (
        f"{name:>13}  M N K = {size:6d} {size:6d} {size:6d}, Time = {low:12.8f} {avg:12.8f} {high:12.8f} s, "
        f"AVG Performance = {gflops:10.4f} Gflops{share}"
    )


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
    return f"bits: {size}^3 {dtype.name}: " + (
        f"every kernel equals {against}" if not differ else f"{', '.join(differ)} differ from {against}"
    )


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
        cublas = _cublas(size, dtype, repeats)
        cublas_avg = None
        if cublas is not None:
            reference, note = cublas
            lines.append(line(size, reference, "cuBLAS", None) + (f" ({note})" if note else ""))
            cublas_avg = sum(reference) / len(reference)
        for name in kernels:
            kernel = KERNELS[name]
            kernel.launch(a, b, c)  # compiles
            cuda.synchronize()
            lines.append(line(size, _seconds(partial(kernel.launch, a, b, c), repeats), name, cublas_avg))
    if not any(ln.lstrip().startswith("cuBLAS") for ln in lines):
        lines.append("cuBLAS: not timed (CuPy is not installed: pip install cupy-cuda12x)")
    return lines
