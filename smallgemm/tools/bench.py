"""``python -m smallgemm bench``: smallgemm against NumPy, interleaved, in one process.

Prints the table format of seed 000 (``M N K = …, Time = min avg max s,
AVG Performance = … Gflops``) for both libraries, the ratio of medians, the
kernel smallgemm used and the OpenBLAS kernel NumPy used.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

# Square products of seed 000 (M = N, K = 1024) and the classic cube.
DEFAULT_SHAPES: tuple[tuple[int, int, int], ...] = (
    *tuple((s, s, 1024) for s in (128, 256, 512, 1024, 2048, 4096)),
    (1024, 1024, 1024),
)
# Variables set on the project's machine that force OpenBLAS onto its 256-bit
# kernel at half speed (README.md, "Benchmarks"); a fair comparison runs without them.
OPENBLAS_FORCING = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
TARGET_SECONDS = 0.4  # per library per shape


@dataclass
class Timing:
    """Seconds of each run of one library on one shape."""

    seconds: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def gflops(self, flops: float) -> float:
        return flops / statistics.mean(self.seconds) / 1e9


def format_line(name: str, shape: tuple[int, int, int], timing: Timing, flops: float) -> str:
    m, n, k = shape
    t = timing.seconds
    return (
        f"{name:<10} M N K = {m} {n} {k}, Time = {min(t):.6f} {statistics.mean(t):.6f} {max(t):.6f} s, "
        f"AVG Performance = {timing.gflops(flops):.1f} Gflops"
    )


# With several threads, a library's idle workers keep spinning for a while after
# a call (OpenBLAS ~0.1 s) and steal the cores from the next library's call:
# strict alternation measured runs up to 2x slower.  With threads, libraries
# therefore alternate in blocks: a pause for the other's workers to fall asleep,
# untimed runs for WARM_SECONDS (at least one) to wake this one's workers and
# the cores, then the timed runs.  One untimed run would leave calls of tens of
# microseconds timed cold, right after the pause (float64 96^3: 70.8 us, 51.4 warm).
SETTLE_SECONDS = 0.15
WARM_SECONDS = 0.02
BLOCKS = 3


def time_interleaved(
    calls: Sequence[Callable[[], object]], repeats: int, settle: float = 0.0
) -> list[Timing]:
    """Time each call ``repeats`` times, alternating between them after one warm-up each.

    With ``settle`` > 0 the calls alternate in BLOCKS blocks, each preceded by a
    pause of ``settle`` seconds and WARM_SECONDS of untimed runs (see SETTLE_SECONDS).
    Nothing is set: the calls run as a user's would (after ``compile_first``, each entry
    is loaded from the cache by its first call).
    """
    for call in calls:
        call()
    timings = [Timing([]) for _ in calls]
    if not settle:
        for _ in range(repeats):
            for call, timing in zip(calls, timings):
                start = time.perf_counter()
                call()
                timing.seconds.append(time.perf_counter() - start)
        return timings
    per_block = max(1, -(-repeats // BLOCKS))
    for _ in range(BLOCKS):
        for call, timing in zip(calls, timings):
            time.sleep(settle)
            warm_until = time.perf_counter() + WARM_SECONDS
            call()
            while time.perf_counter() < warm_until:
                call()
            for _ in range(per_block):
                start = time.perf_counter()
                call()
                timing.seconds.append(time.perf_counter() - start)
    return timings


COMPILED_FIRST = "after `python -m smallgemm compile`, default settings"


def compile_first(
    dtypes: Iterable = (np.float32, np.float64), out=sys.stderr, kernel: str | None = None
) -> None:
    """Fill the compile cache for the kernel in force (or ``kernel``), as a user runs ``python -m
    smallgemm compile`` once, in a process of its own: the timing process keeps its default
    settings (threads, first-use mode) and loads each entry from the cache on its first call."""
    names = sorted({np.dtype(dtype).name for dtype in dtypes})
    chosen = ["--dtype", names[0]] if len(names) == 1 else []  # no --dtype: both, in one process
    if kernel is not None:
        chosen += ["--kernel", kernel]
    print(" ".join(["python -m smallgemm compile", *chosen]), file=out, flush=True)
    subprocess.run([sys.executable, "-m", "smallgemm", "compile", "--quiet", *chosen], check=True)


def thread_limits(threads: int | None):
    """Both libraries on ``threads`` threads (``threadpoolctl`` for NumPy's BLAS,
    ``smallgemm.num_threads``); None: each library's default, nothing set."""
    if threads is None:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    import smallgemm

    stack = contextlib.ExitStack()
    stack.enter_context(threadpool_limits(threads, user_api="blas"))
    stack.enter_context(smallgemm.num_threads(threads))
    return stack


def repeats_for(seconds_per_call: float) -> int:
    return max(5, min(50, int(TARGET_SECONDS / max(seconds_per_call, 1e-9))))


def openblas_kernel() -> str:
    """The OpenBLAS (or other BLAS) kernel NumPy is using, as threadpoolctl reports it."""
    from threadpoolctl import threadpool_info

    for lib in threadpool_info():
        if lib.get("user_api") == "blas":
            return f"{lib.get('internal_api')} {lib.get('version')} ({lib.get('architecture')})"
    return "unknown BLAS"


def run(shapes, dtype: np.dtype, threads: int | None, out=sys.stdout) -> list[dict]:
    """Benchmark ``shapes`` on ``threads`` threads (None: the defaults, nothing set); print
    the table and return one record per shape.  Run ``compile_first`` before it."""
    import smallgemm

    forced = [f"{v}={os.environ[v]}" for v in OPENBLAS_FORCING if v in os.environ]
    if forced:
        print(
            f"warning: {' '.join(forced)} forces NumPy's OpenBLAS kernel; its figures are not "
            f"its best (run without them)",
            file=out,
        )
    kernel = smallgemm.plan.dispatch.current()
    workers = smallgemm.get_num_threads() if threads is None else threads
    setting = f"{workers} thread(s), the default" if threads is None else f"{threads} thread(s), set for both"
    print(
        f"smallgemm kernel {kernel.tile_name(dtype)}, NumPy {np.__version__} with {openblas_kernel()}, "
        f"dtype {np.dtype(dtype).name}, {setting}; {COMPILED_FIRST}; timings interleaved",
        file=out,
    )
    rng = np.random.default_rng(0)
    records = []
    settle = SETTLE_SECONDS if workers > 1 else 0.0
    with thread_limits(threads):
        for shape in shapes:
            m, n, k = shape
            a = rng.standard_normal((m, k)).astype(dtype)
            b = rng.standard_normal((k, n)).astype(dtype)
            c = np.empty((m, n), dtype)
            flops = 2.0 * m * n * k

            def ours(a=a, b=b, c=c):
                smallgemm.gemm(1.0, a, b, c=c, overwrite_c=True)

            def theirs(a=a, b=b, c=c):
                np.matmul(a, b, out=c)

            probe = time_interleaved([ours], 1)[0].median
            timings = time_interleaved([ours, theirs], repeats_for(probe), settle)
            print(format_line("smallgemm", shape, timings[0], flops), file=out)
            print(format_line("numpy", shape, timings[1], flops), file=out)
            ratio = timings[1].median / timings[0].median
            print(f"{'':<10} ratio (numpy median / smallgemm median) = {ratio:.3f}", file=out, flush=True)
            records.append(
                {"shape": shape, "smallgemm": timings[0].seconds, "numpy": timings[1].seconds, "ratio": ratio}
            )
    return records


def clean_environment() -> dict[str, str] | None:
    """The environment without the OpenBLAS-forcing variables, or None if none is set."""
    if not any(v in os.environ for v in OPENBLAS_FORCING):
        return None
    return {k: v for k, v in os.environ.items() if k not in OPENBLAS_FORCING}
