"""pytest-benchmark suite: smallgemm against NumPy, same process, same groups.

Run it without the variables that force OpenBLAS onto its slow 256-bit kernel
(docs/usage.md, "Benchmarks and tools"; docs/performance.md); the suite cannot undo them once NumPy is
loaded, so it only warns when they are set::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE pytest benchmarks/ --benchmark-only \\
        --benchmark-json=results.json
    python benchmarks/report.py results.json --out docs/

Every case runs for float32 and float64, on 1 thread and on all cores, with
both libraries; smallgemm and NumPy of one case share a group, so the table of
a group is the comparison.  Test names hold the nominal sizes, never the
scaled ones, so ``pytest-benchmark compare`` matches runs of different commits.

Sizes: ``SMALLGEMM_BENCH_SCALE`` (default 1.0) multiplies every dimension;
``--bench-small`` divides them by 64 (minimum 1), for a smoke run in seconds.

What the JSON holds beyond pytest-benchmark's own fields:

- each benchmark's ``extra_info``: family, case, flops, shape (the actual, scaled
  ``[batch, m, n, k]``), dtype, threads, library, kernel (smallgemm's tile or
  OpenBLAS's kernel) and scale;
- ``machine_info``: cpu_model, openblas and smallgemm_kernel (stable
  between runs, so ``--benchmark-compare`` does not warn about them);
- a top-level ``smallgemm`` record for the session: command, date, cpu_model,
  openblas, kernel, scale, the OpenBLAS-forcing variables that were set, and
  ``peak`` (``smallgemm.peak()``: FMA GFLOP/s per dtype and vector width, one
  core and all cores, measured once when the JSON is written).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

import numpy as np
import pytest

import smallgemm
from smallgemm.machine import cpu
from smallgemm.tools import bench

SMALL_DIVISOR = 64
ALL_CORES = cpu.core_count()


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Benchmarks run in one process: timings need the whole machine, and pytest-benchmark
    turns itself off under xdist, which the project's ``addopts`` start (one worker per
    core, for the compile-bound test suite)."""
    if getattr(config.option, "numprocesses", None):
        config.option.numprocesses = 0
        config.option.dist = "no"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--bench-small",
        action="store_true",
        help=f"divide every benchmark dimension by {SMALL_DIVISOR} (a smoke run)",
    )


def _scale(config: pytest.Config) -> float:
    if config.getoption("--bench-small"):
        return 1.0 / SMALL_DIVISOR
    return float(os.environ.get("SMALLGEMM_BENCH_SCALE", "1.0"))


def _forcing() -> list[str]:
    return [f"{v}={os.environ[v]}" for v in bench.OPENBLAS_FORCING if v in os.environ]


def _warning() -> str | None:
    forced = _forcing()
    if not forced:
        return None
    return (
        f"WARNING: {' '.join(forced)} forces NumPy's OpenBLAS onto a slower kernel; its figures are not "
        f"its best. Run: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE pytest benchmarks/ --benchmark-only"
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    """What a user gets: the cache filled by ``python -m smallgemm compile`` first, then default
    settings (an all-cores case sets nothing; a one-thread case sets one thread for both
    libraries).  A ``--bench-small`` smoke run compiles as its environment says instead."""
    config = session.config
    if not config.getoption("--bench-small") and not config.getoption("--benchmark-disable"):
        bench.compile_first()


def pytest_report_header(config: pytest.Config) -> list[str]:
    kernel = smallgemm.plan.dispatch.current()
    lines = [
        f"smallgemm kernel {kernel.name}, NumPy {np.__version__} with {bench.openblas_kernel()}, "
        f"scale {_scale(config):g}, all cores = {ALL_CORES}; {bench.COMPILED_FIRST} "
        "(one-thread cases set one thread)"
    ]
    warning = _warning()
    if warning:
        print(warning, file=sys.stderr)  # also before collection: visible with -q too
        lines.append(warning)
    return lines


def pytest_terminal_summary(terminalreporter) -> None:
    warning = _warning()
    if warning:
        terminalreporter.write_line(warning, red=True)


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    machine_info["cpu_model"] = cpu.model_name()
    machine_info["openblas"] = bench.openblas_kernel()
    machine_info["smallgemm_kernel"] = smallgemm.plan.dispatch.current().name


def pytest_benchmark_update_json(config: pytest.Config, benchmarks, output_json: dict) -> None:
    output_json["smallgemm"] = {
        "command": " ".join(["pytest", *config.invocation_params.args]),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cpu_model": cpu.model_name(),
        "openblas": bench.openblas_kernel(),
        "kernel": smallgemm.plan.dispatch.current().name,
        "vector_bits": smallgemm.plan.dispatch.current().shape.bits,
        "scale": _scale(config),
        "openblas_forcing": _forcing(),
        "peak": smallgemm.peak(),
    }


@pytest.fixture(params=["float32", "float64"])
def dtype(request) -> np.dtype:
    return np.dtype(request.param)


@pytest.fixture(params=sorted({1, ALL_CORES}), ids=lambda n: f"{n}t")
def threads(request) -> int:
    return request.param


@pytest.fixture(params=["smallgemm", "numpy"])
def library(request) -> str:
    return request.param


@pytest.fixture
def operand(request, dtype) -> Callable[..., np.ndarray]:
    """``operand(*nominal_shape)``: a random C-contiguous array, every dimension scaled."""
    scale = _scale(request.config)
    rng = np.random.default_rng(0)

    def make(*shape: int) -> np.ndarray:
        scaled = tuple(max(1, round(n * scale)) for n in shape)
        return rng.standard_normal(scaled).astype(dtype)

    return make


def _flops_and_shape(a: np.ndarray, b: np.ndarray) -> tuple[float, list[int]]:
    """``2 m n k batch`` of ``a @ b`` (batch dimensions broadcast) and ``[batch, m, n, k]``."""
    batch = int(np.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), dtype=np.int64))
    m, k = a.shape[-2:]
    n = b.shape[-1]
    return 2.0 * batch * m * n * k, [batch, m, n, k]


@pytest.fixture
def product(
    benchmark, request, dtype, threads, library
) -> Callable[[str, str, np.ndarray, np.ndarray], None]:
    """``product(family, case, a, b)``: benchmark ``a @ b`` with this test's library, dtype and threads.

    ``family`` (``square``, ``few-rows``, ...) is what the report selects on;
    ``case`` names the product at its nominal size.  With the dtype and thread
    count they make the group, shared by smallgemm and NumPy.  Both libraries write
    into a preallocated ``out``; a one-thread case limits both to one thread, an all-cores
    case runs each library's default (``bench.thread_limits``).
    """

    def run(family: str, case: str, a: np.ndarray, b: np.ndarray) -> None:
        out = np.empty((*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1]), dtype)
        flops, shape = _flops_and_shape(a, b)
        call = (
            (lambda: smallgemm.matmul(a, b, out=out))
            if library == "smallgemm"
            else (lambda: np.matmul(a, b, out=out))
        )
        kernel = (
            smallgemm.plan.dispatch.current().tile_name(dtype)
            if library == "smallgemm"
            else bench.openblas_kernel()
        )
        benchmark.group = f"{family} {case} {dtype.name} {threads}t"
        benchmark.extra_info.update(
            family=family,
            case=case,
            flops=flops,
            shape=shape,
            dtype=dtype.name,
            threads=threads,
            library=library,
            kernel=kernel,
            scale=_scale(request.config),
        )
        with bench.thread_limits(None if threads == ALL_CORES else threads):
            if threads > 1 and benchmark.enabled:
                time.sleep(bench.SETTLE_SECONDS)  # the other library's spinning workers fall asleep
            call()  # loads the entry (smallgemm) and wakes this library's workers: never timed
            benchmark(call)

    return run
