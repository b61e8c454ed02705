"""Seconds to the first product of each strategy, cold and warm: the cold-start goals.

    python benchmarks/first_use.py [--dtype float32] [--mode background|compile]

Each strategy's first product (with its setup: ``pack`` for the prepacked ones) is timed
from after ``import smallgemm`` in a fresh process with an empty Numba cache (``cold``); then all of them one after the other in one such process (``all``); then,
after ``python -m smallgemm compile --dtype D`` filled a cache, the first product in a
fresh process that loads it (``warm``).  ``--mode`` sets ``SMALLGEMM_FIRST_USE``
(``background``, the default: products run on the first-use driver while their entries
compile in another process).  Run it on an otherwise idle machine: the compile
processes use the other cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

# (label, setup code defining `run`): each a product the strategy table places on one row.
CASES = [
    ("blocked", "a = r((300, 300)); b = np.asfortranarray(r((300, 300))); run = lambda: sg.matmul(a, b)"),
    ("small product", "a = r((64, 64)); b = r((64, 64)); run = lambda: sg.matmul(a, b)"),
    (
        "transposing stream",
        "x = r((4, 512)); w = np.asfortranarray(r((512, 256))); run = lambda: sg.matmul(x, w)",
    ),
    ("turned few rows", "x = r((4, 512)); w = r((2048, 512)); run = lambda: sg.matmul(x, w.T)"),
    ("row dots", "w = r((512, 512)); x = r((512, 1)); run = lambda: sg.matmul(w, x)"),
    ("matrix times vector", "w = r((512, 512)); x = r(512); run = lambda: sg.matmul(w, x)"),
    (
        "continued chain",
        "a = r((200, 300)); b = r((300, 100)); c = r((200, 100)); "
        "run = lambda: sg.gemm(1.0, a, b, beta=1.0, c=c, overwrite_c=True)",
    ),
    ("stack", "s = r((8, 40, 50)); run = lambda: sg.matmul(s, s.transpose(0, 2, 1))"),
    ("stack of tiny", "s = r((1000, 8, 8)); run = lambda: sg.matmul(s, s)"),
    ("prepacked", "a = r((300, 300)); p = sg.pack(r((300, 300))); run = lambda: sg.matmul(a, p)"),
    ("prepacked few rows", "x = r((2, 300)); p = sg.pack(r((300, 300))); run = lambda: sg.matmul(x, p)"),
]

SCRIPT = """
import time
import numpy as np
import smallgemm as sg
rng = np.random.default_rng(0)
r = lambda shape: rng.standard_normal(shape).astype(np.{dtype})
"""
# Timed: the setup (which packs, for the prepacked products) and the first product.
CASE = """
begin = time.perf_counter()
{setup}
run()
print(f"{{time.perf_counter() - begin:.2f}}")
"""


def first_product(setups: list[str], dtype: str, cache: str, mode: str) -> list[float]:
    """Seconds from after ``import smallgemm`` to the end of each setup's first product, in one process."""
    # The compile process left running would share the cores with the next measurement.
    stop = "\nfrom smallgemm.plan import warmup\nwarmup.compiles.process and warmup.compiles.process.kill()\n"
    script = SCRIPT.format(dtype=dtype) + "".join(CASE.format(setup=setup) for setup in setups) + stop
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "SMALLGEMM_FIRST_USE": mode}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    return [float(line) for line in done.stdout.split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--mode", default="background", choices=["background", "compile"])
    args = parser.parse_args()
    print(f"| first product ({args.dtype}, {args.mode}) | cold, s | warm, s |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory() as warm_cache:
        subprocess.run(
            [sys.executable, "-m", "smallgemm", "compile", "--quiet", "--dtype", args.dtype],
            env={**os.environ, "NUMBA_CACHE_DIR": warm_cache},
            check=True,
        )
        for label, setup in CASES:
            with tempfile.TemporaryDirectory() as cold_cache:
                (cold,) = first_product([setup], args.dtype, cold_cache, args.mode)
            (warm,) = first_product([setup], args.dtype, warm_cache, args.mode)
            print(f"| {label} | {cold:.2f} | {warm:.2f} |", flush=True)
    with tempfile.TemporaryDirectory() as cold_cache:
        times = first_product([setup for _, setup in CASES], args.dtype, cold_cache, args.mode)
    print(f"| all of them in one process, one after the other | {sum(times):.2f} | |")


if __name__ == "__main__":
    main()
