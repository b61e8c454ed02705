"""What starting two workers costs on each threading layer, alone and in products; print Markdown.

    python benchmarks/thread_launch.py [--layers tbb,omp] [--gaps 0,50,1000] [--rounds 2]

A launch alone: two workers that wait for each other (``simd.workers``), so that the time is
that of both threads running.  Then a few products that take two threads by default.  Each is
timed after the calling thread was busy elsewhere for GAP microseconds (a spin, as a program's
own work between products would be): a pool whose threads have gone to sleep by then pays to
wake them.  Every layer runs in its own fresh process (``NUMBA_THREADING_LAYER``), ROUNDS
times, alternating; the table gives each layer's medians (of 300 launches, 200 products) and
the range over the rounds.  Default settings otherwise, after ``python -m smallgemm compile``.
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import sys, time
import numpy as np
import numba
from numba import njit
import smallgemm
from smallgemm.simd import address, atomic_fetch_add
from smallgemm.simd.workers import on_workers

@on_workers
def meet(w, workers, arrived):
    atomic_fetch_add(arrived, 1)
    spins = 0
    while atomic_fetch_add(arrived, 0) < workers and spins < 100_000_000:
        spins += 1

@njit(nogil=True)
def launch(arrived):
    arrived[0] = 0
    meet(2, address(arrived))

def median_after(gap, call, count):
    times = []
    for _ in range(count):
        start = time.perf_counter()
        while time.perf_counter() - start < gap * 1e-6:
            pass
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return sorted(times)[count // 2]

rng = np.random.default_rng(0)
r = lambda *shape: rng.standard_normal(shape).astype(np.float32)
arrived = np.zeros(1, np.int64)
products = {
    "two workers that meet": lambda: launch(arrived),
    "[1,512] @ [512,2048]": (lambda a=r(1, 512), b=r(512, 2048): smallgemm.matmul(a, b)),
    "W @ x, W [2048,512]": (lambda a=r(2048, 512), b=r(512): smallgemm.matmul(a, b)),
    "[4,512] @ W.T, W [2048,512]": (lambda a=r(4, 512), b=r(2048, 512).T: smallgemm.matmul(a, b)),
    "[1,512] @ pack(W)": (lambda a=r(1, 512), b=smallgemm.pack(r(512, 2048)): smallgemm.matmul(a, b)),
    "300^3": (lambda a=r(300, 300), b=r(300, 300): smallgemm.matmul(a, b)),
}
gaps = [int(g) for g in sys.argv[1].split(",")]
found = {}
for name, call in products.items():
    call()
    for gap in gaps:
        found[(name, gap)] = median_after(gap, call, 300 if name.startswith("two") else 200)
print(numba.threading_layer())
print(repr(found))
"""


def run(script: str, layer: str, gaps: str) -> dict:
    env = {name: value for name, value in os.environ.items() if not name.startswith("SMALLGEMM_")}
    env["NUMBA_THREADING_LAYER"] = layer
    done = subprocess.run(
        [sys.executable, script, gaps], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode:
        sys.exit(done.stderr)
    ran_on, found = done.stdout.strip().splitlines()[-2:]
    if ran_on != layer:
        sys.exit(f"asked for the {layer} layer, ran on {ran_on}")
    return ast.literal_eval(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", default="tbb,omp")
    parser.add_argument("--gaps", default="0,50,1000", help="microseconds busy before each call")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    layers = args.layers.split(",")
    subprocess.run([sys.executable, "-m", "smallgemm", "compile", "--quiet"], check=True)
    rounds = {layer: [] for layer in layers}
    with tempfile.TemporaryDirectory() as folder:  # a file: Numba caches the workers' routine beside it
        script = os.path.join(folder, "launch.py")
        with open(script, "w") as file:
            file.write(CHILD)
        for _ in range(args.rounds):
            for layer in layers:
                rounds[layer].append(run(script, layer, args.gaps))
    keys = list(rounds[layers[0]][0])
    print("| call | busy before, µs | " + " | ".join(f"{layer}, µs" for layer in layers) + " |")
    print("|---|---|" + "---|" * len(layers))
    for name, gap in keys:
        cells = []
        for layer in layers:
            times = sorted(found[(name, gap)] * 1e6 for found in rounds[layer])
            cells.append(f"{times[0]:.1f}" if len(times) == 1 else f"{times[0]:.1f}–{times[-1]:.1f}")
        print(f"| {name} | {gap} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
