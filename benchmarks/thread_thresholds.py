"""Two threads against one for the memory-bound products each kernel's thread thresholds govern;
print Markdown.

    python benchmarks/thread_thresholds.py [--kernel avx2] [--dtype float64] [--rounds 2]

A product far below ``parallel_min_volume`` takes threads from a number of elements streamed
(``KernelConfig``): row dots (``W @ x``, ``[1,k] @ W.T``) and the few-rows and transposing
streams (``[4,k] @ B``, ``[4,k] @ W.T``) from ``parallel_min_stream``; one row times a B with
contiguous rows from ``parallel_min_row_stream``; few rows times a packed B from
``parallel_min_packed_rows``.  For streamed sizes 2^14 to 2^20 this times each product on one
thread and on two with the three thresholds set to 1 (``in_force.override_config``), so that
two threads run at every size; each setting in its own fresh process, alternating, ROUNDS
times, best of 11 runs.  A threshold is right where two threads are at least as fast as one
from it on (ratio >= 1) and not below it; the table marks the sizes from the kernel's value
on.  Any kernel runs on an x86-64 host (forced kernels: say so with the figures).
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys

CHILD = r"""
import sys, timeit
import numpy as np
import smallgemm
from smallgemm.kernels import BySize, kernel_by_name
from smallgemm.plan import in_force

kernel, dtype, threads = sys.argv[1], np.dtype(sys.argv[2]), int(sys.argv[3])
smallgemm.set_kernel(kernel)
smallgemm.set_num_threads(threads)
rng = np.random.default_rng(0)
k = 512
cases = {}
for e in range(14, 21):
    n = (1 << e) // k
    w = rng.standard_normal((n, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    x = rng.standard_normal((4, k)).astype(dtype)
    packed = smallgemm.pack(b)
    cases[("parallel_min_stream", e, f"W[{n},{k}] @ x")] = lambda w=w, v=x[0]: smallgemm.matmul(w, v)
    cases[("parallel_min_stream", e, f"[1,{k}] @ W.T")] = lambda w=w, x=x[:1]: smallgemm.matmul(x, w.T)
    cases[("parallel_min_stream", e, f"[4,{k}] @ [{k},{n}]")] = lambda b=b, x=x: smallgemm.matmul(x, b)
    cases[("parallel_min_stream", e, f"[4,{k}] @ W.T")] = lambda w=w, x=x: smallgemm.matmul(x, w.T)
    cases[("parallel_min_row_stream", e, f"[1,{k}] @ [{k},{n}]")] = lambda b=b, x=x[:1]: smallgemm.matmul(x, b)
    for m in (1, 4):
        cases[("parallel_min_packed_rows", e, f"[{m},{k}] @ pack([{k},{n}])")] = (
            lambda p=packed, x=x[:m]: smallgemm.matmul(x, p)
        )
every_size = {name: BySize(1, 1) for name in ("parallel_min_stream", "parallel_min_row_stream", "parallel_min_packed_rows")}
best = {}
with in_force.override_config([kernel_by_name(kernel)], **every_size):
    for key, call in cases.items():
        call()
        number = max(1, int(0.02 / max(timeit.timeit(call, number=1), 1e-7)))
        best[key] = min(timeit.repeat(call, number=number, repeat=11)) / number
print(repr(best))
"""


def _run(kernel: str, dtype: str, threads: int) -> dict:
    env = {name: value for name, value in os.environ.items() if not name.startswith("SMALLGEMM_")}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, kernel, dtype, str(threads)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode:
        sys.exit(done.stderr)
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


def main() -> None:
    from smallgemm.kernels import kernel_by_name
    from smallgemm.plan import dispatch
    from smallgemm.tools.bench import compile_first

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernel", default=None, help="avx512, avx2 or portable (default: the detected one)")
    parser.add_argument("--dtype", default=None, choices=["float32", "float64"], help="default: both")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    kernel = kernel_by_name(args.kernel) if args.kernel else dispatch.detect()
    dtypes = [args.dtype] if args.dtype else ["float32", "float64"]
    compile_first(dtypes, kernel=kernel.name)
    for dtype in dtypes:
        runs = {1: [], 2: []}
        for _ in range(args.rounds):
            for threads in (1, 2):
                runs[threads].append(_run(kernel.name, dtype, threads))
        itemsize = 4 if dtype == "float32" else 8
        print(f"\n{kernel.name} {dtype}, {args.rounds} rounds\n")
        print("| threshold | elements | product | 1 thread | 2 threads | 1 / 2 | threads by default |")
        print("|---|---|---|---|---|---|---|")
        for key in sorted(runs[1][0], key=lambda key: key[:2]):  # by threshold, then size
            name, e, label = key
            one, two = (min(run[key] for run in runs[t]) for t in (1, 2))
            value = getattr(kernel.config, name).of(itemsize)
            print(
                f"| `{name}` | 2^{e} | {label} | {one * 1e6:.1f} µs | {two * 1e6:.1f} µs | {one / two:.2f} |"
                f" {'yes' if 1 << e >= value else ''} |"
            )


if __name__ == "__main__":
    main()
