"""Time one training step of an MLP 512-2048-2048-10 (batch 256, float32): smallgemm vs NumPy.

    python benchmarks/nn_step.py > nn_step.md
    python benchmarks/nn_step.py --products     # each matrix product of the step alone

A step is ``smallgemm.nn``'s forward, backward and SGD-with-momentum update;
the same code runs with each matmul backend, timed interleaved in this one
process (``smallgemm.bench.time_interleaved``), with 1 and 2 threads (NumPy's
BLAS limited by ``threadpoolctl``).  Prints a Markdown table of the medians.
OpenBLAS's forcing variables are removed by re-running without them.
"""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
from threadpoolctl import threadpool_limits

import smallgemm
from smallgemm import nn
from smallgemm.tools import bench

SIZES = (512, 2048, 2048, 10)
BATCH = 256
REPEATS = 12


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def step_products(rng: np.random.Generator):
    """(name, call) for each product of a step, as ``nn.Linear`` makes it through ``nn.backend.gemm``."""
    for fan_in, fan_out in itertools.pairwise(SIZES):
        x = rng.standard_normal((BATCH, fan_in)).astype(np.float32)
        w = rng.standard_normal((fan_in, fan_out)).astype(np.float32)
        g = rng.standard_normal((BATCH, fan_out)).astype(np.float32)
        grad = np.zeros((fan_in, fan_out), np.float32)
        yield f"x @ W, [{BATCH},{fan_in}] @ [{fan_in},{fan_out}]", lambda x=x, w=w: nn.backend.gemm(1.0, x, w)
        yield "g @ W.T", lambda g=g, w=w: nn.backend.gemm(1.0, g, w, trans_b=True)
        yield (
            "grad_W += x.T @ g",
            lambda x=x, g=g, c=grad: nn.backend.gemm(1.0, x, g, beta=1.0, c=c, trans_a=True),
        )


def on_backend(backend: str, call):
    def run() -> None:
        with nn.use_backend(backend):
            call()

    return run


def print_products() -> None:
    """The step's products one by one, and their sum, for 1 and 2 threads."""
    print(
        "| threads | product | smallgemm median | numpy median | ratio numpy/smallgemm |\n|---|---|---|---|---|"
    )
    for threads in (1, 2):
        settle = bench.SETTLE_SECONDS if threads > 1 else 0.0
        total_ours = total_theirs = 0.0
        for name, call in step_products(np.random.default_rng(0)):
            with threadpool_limits(threads, user_api="blas"), smallgemm.num_threads(threads):
                ours, theirs = bench.time_interleaved(
                    [on_backend("smallgemm", call), on_backend("numpy", call)], 4 * REPEATS, settle
                )
            total_ours, total_theirs = total_ours + ours.median, total_theirs + theirs.median
            print(
                f"| {threads} | {name} | {_ms(ours.median)} | {_ms(theirs.median)} | "
                f"{theirs.median / ours.median:.3f} |",
                flush=True,
            )
        print(
            f"| {threads} | all products | {_ms(total_ours)} | {_ms(total_theirs)} | "
            f"{total_theirs / total_ours:.3f} |",
            flush=True,
        )


def main() -> None:
    clean = bench.clean_environment()
    if clean is not None:
        sys.exit(subprocess.call([sys.executable, *sys.argv], env=clean))
    if "--products" in sys.argv[1:]:
        print_products()
        return
    rng = np.random.default_rng(0)
    model = nn.mlp(SIZES, rng)
    optimizer = nn.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    loss_fn = nn.SoftmaxCrossEntropy()
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH)

    def step(backend: str):
        def run() -> None:
            with nn.use_backend(backend):
                nn.train_step(model, loss_fn, optimizer, x, y)

        return run

    print(
        f"One training step, MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, float32, SGD with momentum; "
        f"smallgemm kernel {smallgemm.plan.dispatch.current().name}, NumPy {np.__version__} with "
        f"{bench.openblas_kernel()}\n"
    )
    print("| threads | smallgemm median | numpy median | ratio numpy/smallgemm |\n|---|---|---|---|")
    for threads in (1, 2):
        settle = bench.SETTLE_SECONDS if threads > 1 else 0.0
        with threadpool_limits(threads, user_api="blas"), smallgemm.num_threads(threads):
            ours, theirs = bench.time_interleaved([step("smallgemm"), step("numpy")], REPEATS, settle)
        print(
            f"| {threads} | {_ms(ours.median)} | {_ms(theirs.median)} | {theirs.median / ours.median:.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
