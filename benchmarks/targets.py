"""Measure the performance targets of the engine, matmul and threads issues; print Markdown.

    python benchmarks/targets.py > targets.md

Each row times smallgemm and its comparison interleaved in this one process
(``smallgemm.bench.time_interleaved``: alternating runs with one thread, blocks
with a settle pause with several) and reports the medians and their ratio.
OpenBLAS's forcing variables are removed by re-running without them.  What a user gets
is timed: ``python -m smallgemm compile`` fills the cache first, then rows on the default
thread count set nothing (first-use mode and threads as a user has them); a row with
another thread count sets it for both libraries, and its threads column says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import timeit

import numpy as np
from numba import njit

import smallgemm
from smallgemm.kernels import microkernel
from smallgemm.plan import dispatch, in_force
from smallgemm.plan.workspace import aligned_empty
from smallgemm.simd import OVERWRITE, address
from smallgemm.simd.records import matrix, merge
from smallgemm.tools import bench

RNG = np.random.default_rng(0)
# A row on this many threads sets nothing: each library's default.  Other counts are set for both.
DEFAULT_THREADS = smallgemm.get_num_threads()
TABLE_HEADER = "| product | threads | smallgemm median | other median | ratio other/smallgemm | target |\n|---|---|---|---|---|---|"


def rerun_clean() -> None:
    """Re-run this script without OpenBLAS's forcing variables, and exit, when they are set."""
    clean = bench.clean_environment()
    if clean is not None:
        sys.exit(subprocess.call([sys.executable, *sys.argv], env=clean))


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def compare(name, ours, theirs, threads, target, repeats=None, calls_per_run=1, bytes_read=0):
    """One table row: medians of ``ours`` and ``theirs`` timed interleaved, and their ratio;
    returns the two medians per call.

    A run of ``ours`` or ``theirs`` may make ``calls_per_run`` calls (see
    ``calls_in_a_loop``); the medians are then per call.  With ``bytes_read`` (what a
    call must read), the target column adds the rate smallgemm read them at and its share
    of one core's read bandwidth from memory (``smallgemm.peak``).
    """
    settle = bench.SETTLE_SECONDS if threads > 1 else 0.0
    with bench.thread_limits(None if threads == DEFAULT_THREADS else threads):
        probe = bench.time_interleaved([ours], 1)[0].median
        t_ours, t_theirs = bench.time_interleaved([ours, theirs], repeats or bench.repeats_for(probe), settle)
    ours_call, theirs_call = t_ours.median / calls_per_run, t_theirs.median / calls_per_run
    if bytes_read:
        rate = bytes_read / ours_call / 1e9
        target = (
            f"{target}; read {rate:.0f} GB/s, {rate / peak_read_rate():.2f} of one core's from memory".lstrip(
                "; "
            )
        )
    print(
        f"| {name} | {threads} | {_duration(ours_call)} | {_duration(theirs_call)} | {theirs_call / ours_call:.3f} "
        f"| {target} |",
        flush=True,
    )
    return ours_call, theirs_call


_PEAK_READ: list[float] = []


def peak_read_rate() -> float:
    """One core's read bandwidth from memory in GB/s (``peak.read_bandwidth``), measured once."""
    if not _PEAK_READ:
        from smallgemm.api.peak import read_bandwidth

        _PEAK_READ.append(read_bandwidth())
    return _PEAK_READ[0]


def calls_in_a_loop(function, a, b, count):
    """A run of ``count`` calls ``function(a, b)`` in timeit's loop.

    A call of a microsecond cannot be timed alone: a timer read and a Python
    call around it add a quarter of a microsecond to both sides.
    """
    timer = timeit.Timer("function(a, b)", globals={"function": function, "a": a, "b": b})
    return lambda: timer.timeit(count)


def _duration(seconds: float) -> str:
    return f"{seconds * 1e6:.2f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


# Best of this many runs of the microkernel and of the FMA peak, alternating:
# another guest on the host's core slows one run in several (5 runs read
# 82-96 % of the peak on the same build, 15 keep within a few %).
ALTERNATIONS = 15


@njit
def _kernel_loop(shape, kc, a, b, c, scratch, reps, one):
    target = matrix(address(c), 0, c.shape[1], 1)
    for _ in range(reps):
        microkernel(
            shape,
            kc,
            address(a),
            0,
            address(b),
            0,
            target,
            c.shape[0],
            c.shape[1],
            merge(one, one, OVERWRITE),
            address(scratch),
        )


def microkernel_efficiency(dtype, kc):
    """GFLOP/s of the microkernel alone on cache-resident panels, and the FMA peak, same run.

    At the engine's KC (``in_force.block_sizes``: the panels then sit in the L2,
    as in a product) and at a shorter one, where the per-tile work (zeroing,
    write-back) weighs more.
    """
    from smallgemm.api.peak import fma_gflops

    kernel = dispatch.current()
    mr, nr = kernel.mr(), kernel.nr(dtype)
    a, b = aligned_empty(mr * kc, dtype), aligned_empty(kc * nr, dtype)  # as the engine packs them
    a[:], b[:] = rand(mr * kc, dtype=dtype), rand(kc * nr, dtype=dtype)
    c, scratch = np.zeros((mr, nr), dtype), np.zeros(mr * nr, dtype)
    reps = 20000 * 256 // kc
    _kernel_loop(kernel.shape, kc, a, b, c, scratch, 1, dtype(1))
    best, top = float("inf"), 0.0
    for _ in range(ALTERNATIONS):  # alternate kernel and peak: both see the same clock
        start = time.perf_counter()
        _kernel_loop(kernel.shape, kc, a, b, c, scratch, reps, dtype(1))
        best = min(best, time.perf_counter() - start)
        top = max(top, fma_gflops(dtype, kernel.shape.bits, repeats=1))
    gflops = 2 * mr * nr * kc * reps / best / 1e9
    engine = in_force.block_sizes(kernel, np.dtype(dtype)).kc
    which = " (the engine's)" if kc == engine else ""
    print(
        f"| microkernel {kernel.tile_name(dtype)} alone, cache-resident panels, KC = {kc}{which} | "
        f"{gflops:.1f} GFLOP/s | FMA peak {top:.1f} GFLOP/s | {100 * gflops / top:.1f} % | >= 95 % |",
        flush=True,
    )


def first_call_times():
    """Seconds for the first product in a fresh process: cold Numba cache, then warm."""
    code = (
        "import time, numpy as np; t0 = time.perf_counter(); import smallgemm; t1 = time.perf_counter();"
        "a = np.ones((300, 300), np.float32); smallgemm.matmul(a, a); t2 = time.perf_counter();"
        "print(f'{t1 - t0:.2f} {t2 - t1:.2f}')"
    )
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        cold = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env
        ).stdout.split()
        warm = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env
        ).stdout.split()
    print(
        f"| import smallgemm | {warm[0]} s |  |\n| first matmul, cold cache (compiles) | {cold[1]} s | |\n"
        f"| first matmul, warm cache | {warm[1]} s | under 1 s |"
    )


def main():
    rerun_clean()
    bench.compile_first()
    print(
        f"smallgemm {smallgemm.__version__}, kernel {dispatch.current().name}, NumPy {np.__version__} with "
        f"{bench.openblas_kernel()}, {time.strftime('%Y-%m-%d')}; {bench.COMPILED_FIRST}: rows on "
        f"{DEFAULT_THREADS} threads set nothing, other thread counts are set for both libraries\n"
    )
    header = TABLE_HEADER

    print("### Engine (gemm), one thread, against NumPy\n\n" + header)
    for dtype, target in ((np.float32, ">= 1.0"), (np.float64, ">= 1.05")):
        for m, n, k in ((1024, 1024, 1024), (4096, 4096, 1024)):
            a, b = rand(m, k, dtype=dtype), rand(k, n, dtype=dtype)
            c = np.empty((m, n), dtype)
            compare(
                f"{np.dtype(dtype).name} {m}x{n}x{k}",
                lambda: smallgemm.gemm(1.0, a, b, c=c, overwrite_c=True),
                lambda: np.matmul(a, b, out=c),
                1,
                target,
            )
    print("\n| microkernel | speed | peak, same run | efficiency | target |\n|---|---|---|---|---|")
    for dtype in (np.float32, np.float64):
        for kc in dict.fromkeys((in_force.block_sizes(dispatch.current(), np.dtype(dtype)).kc, 256)):
            microkernel_efficiency(dtype, kc)
    print("\n| start-up | seconds | target |\n|---|---|---|")
    first_call_times()

    print("\n### matmul, one thread\n\n" + header)
    m = rand(1024, 1024)
    n_ = rand(1024, 1024)
    compare(
        "a.T @ b against a @ b (both smallgemm)",
        lambda: smallgemm.matmul(m.T, n_),
        lambda: smallgemm.matmul(m, n_),
        1,
        ">= 0.95",
    )
    compare(
        "a @ b.T against a @ b (both smallgemm)",
        lambda: smallgemm.matmul(m, n_.T),
        lambda: smallgemm.matmul(m, n_),
        1,
        ">= 0.95",
    )
    a, b = rand(1000, 16, 16), rand(1000, 16, 16)
    compare(
        "1000x16x16 @ 1000x16x16 float32",
        lambda: smallgemm.matmul(a, b),
        lambda: np.matmul(a, b),
        1,
        ">= 1.5",
    )
    # What streaming the same 3 MiB costs: an elementwise sum reads and writes what the stack does.
    compare(
        "the same stack against np.add(a, b) (the streaming bound)",
        lambda: smallgemm.matmul(a, b),
        lambda: np.add(a, b),
        1,
        "",
    )
    x, w = rand(64, 128, 512), rand(512, 512)
    compare(
        "[64,128,512] @ [512,512] float32",
        lambda: smallgemm.matmul(x, w),
        lambda: np.matmul(x, w),
        1,
        ">= 1.0",
    )
    s = rand(16, 16)
    calls = 1000
    compare(
        f"16x16 float32 call (runs of {calls} calls)",
        calls_in_a_loop(smallgemm.matmul, s, s, calls),
        calls_in_a_loop(np.matmul, s, s, calls),
        1,
        "<= 2 us",
        repeats=101,
        calls_per_run=calls,
    )

    print("\n### Threads\n\n" + header)
    big = rand(2048, 2048)

    def one_thread():
        with smallgemm.num_threads(1):
            smallgemm.matmul(big, big)

    compare(
        "2048^3 float32: 2 threads against 1 thread (both smallgemm)",
        lambda: smallgemm.matmul(big, big),
        one_thread,
        2,
        ">= 1.9",
    )
    for dtype, target in ((np.float32, ">= 1.0"), (np.float64, ">= 1.05")):
        for mm, nn, kk in ((1024, 1024, 1024), (4096, 4096, 1024)):
            a, b = rand(mm, kk, dtype=dtype), rand(kk, nn, dtype=dtype)
            compare(
                f"{np.dtype(dtype).name} {mm}x{nn}x{kk}",
                lambda: smallgemm.matmul(a, b),
                lambda: np.matmul(a, b),
                2,
                target,
            )
    x, w, g = rand(4096, 512), rand(512, 2048), rand(4096, 2048)
    compare(
        "training step forward x @ W [4096,512]@[512,2048]",
        lambda: smallgemm.matmul(x, w),
        lambda: np.matmul(x, w),
        2,
        ">= 1.0",
    )
    compare("backward g @ W.T", lambda: smallgemm.matmul(g, w.T), lambda: np.matmul(g, w.T), 2, ">= 1.0")
    compare("backward x.T @ g", lambda: smallgemm.matmul(x.T, g), lambda: np.matmul(x.T, g), 2, ">= 1.0")
    a, b = rand(8, 512, 512), rand(8, 512, 512)
    compare(
        "8x512x512 @ 8x512x512 float32 (a stack)",
        lambda: smallgemm.matmul(a, b),
        lambda: np.matmul(a, b),
        2,
        "",
    )
    a, b = rand(3, 4, 4096), rand(3, 4096, 4096)  # three few-row products: each on both workers
    compare(
        "[3,4,4096] @ [3,4096,4096] float32 (a stack)",
        lambda: smallgemm.matmul(a, b),
        lambda: np.matmul(a, b),
        2,
        "",
    )
    few_rows(header)


def few_rows(header):
    """The few-rows targets: x @ W and x @ W.T against NumPy, GEMV against the bandwidth bound."""
    print("\n### Few rows\n\n" + header)
    w = rand(512, 2048)
    w_t = np.ascontiguousarray(w.T)  # [N, K]: a linear layer's usual layout
    packed_t = smallgemm.pack(w_t, trans=True)
    w64_t = w_t.astype(np.float64)
    from_memory = rand(4096, 4096)  # 64 MiB: streamed from memory by few rows
    v, big = rand(1, 4096), rand(4096, 4096)
    # A matrix (rows contiguous) times a 1-D vector: row dots.
    matrix_vector = (
        ("W [2048,512]", w_t, rand(512)),
        ("W [512,512], in the L2", rand(512, 512), rand(512)),
        ("W [4096,4096]", big, rand(4096)),
    )
    for threads in (1, 2):
        for m in (1, 4, 8, 16):
            x = rand(m, 512)
            target = ">= 2" if m >= 4 else ""
            compare(
                f"[{m},512] @ [512,2048] float32",
                lambda: smallgemm.matmul(x, w),
                lambda: np.matmul(x, w),
                threads,
                target,
            )
            compare(
                f"[{m},512] @ W.T, W [2048,512]",
                lambda: smallgemm.matmul(x, w_t.T),
                lambda: np.matmul(x, w_t.T),
                threads,
                target,
            )
            compare(
                f"[{m},512] @ pack(W, trans=True)",
                lambda: smallgemm.matmul(x, packed_t),
                lambda: np.matmul(x, w_t.T),
                threads,
                "",
            )
            x64 = x.astype(np.float64)
            compare(
                f"[{m},512] @ W.T float64",
                lambda: smallgemm.matmul(x64, w64_t.T),
                lambda: np.matmul(x64, w64_t.T),
                threads,
                "",
            )
        x = rand(4, 4096)
        compare(
            "[4,4096] @ [4096,4096] float32, B from memory",
            lambda: smallgemm.matmul(x, from_memory),
            lambda: np.matmul(x, from_memory),
            threads,
            "",
        )
        for name, mat, vec in matrix_vector:
            compare(
                f"W @ x, {name}", lambda: smallgemm.matmul(mat, vec), lambda: np.matmul(mat, vec), threads, ""
            )

            def lane_wise(mat=mat, vec=vec):
                with smallgemm.exact(False):
                    return smallgemm.matmul(mat, vec)

            compare(f"W @ x, {name}, not exact", lane_wise, lambda: np.matmul(mat, vec), threads, "")
    from smallgemm.api.peak import read_pass

    # The bound: a plain read of as many bytes as W (64 MiB, twice the L3), timed interleaved
    # with the product, medians against medians as everywhere else (the best runs also shown).
    stream = np.ones(big.nbytes // 8)
    with smallgemm.num_threads(1):
        gemv, read = bench.time_interleaved([lambda: smallgemm.matmul(v, big), lambda: read_pass(stream)], 21)
    flops = 2 * big.size
    for label, ours, bound in (
        ("median", gemv.median, read.median),
        ("best", min(gemv.seconds), min(read.seconds)),
    ):
        target = ">= 90 %" if label == "median" else ""
        print(
            f"\n| 1x4096 @ 4096x4096 float32, 1 thread, {label} | {flops / ours / 1e9:.1f} GFLOP/s | "
            f"read-bandwidth bound {flops / bound / 1e9:.1f} GFLOP/s (a read of W's bytes, same run) | "
            f"{100 * bound / ours:.0f} % | {target} |"
        )


if __name__ == "__main__":
    main()
