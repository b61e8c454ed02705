"""What a user gets: each headline product in a fresh process with default settings; print Markdown.

    python benchmarks/default_path.py [--rounds 3] [--only TEXT]

``python -m smallgemm compile`` fills the cache first.  Then, for each product of the
README's table, ROUNDS fresh processes with default settings (no ``SMALLGEMM_*`` variable,
every core) and ROUNDS with ``SMALLGEMM_FIRST_USE=compile``, alternating, each time
smallgemm and NumPy interleaved (``bench.time_interleaved``) and report the ratio NumPy /
smallgemm; the table gives the median ratio of each setting and default/compile, which
should be about 1: the default path runs the tuned drivers.  It also reports how many
products of each default process ran on the first-use driver (``info()["first_use"]``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np
from targets import rerun_clean

import smallgemm
from smallgemm.machine import cpu
from smallgemm.tools import bench

# label: the statement that makes the operands a, b (float32 unless said), from rand(*shape, dtype=...).
PRODUCTS = {
    "1024×1024×1024": "a, b = rand(1024, 1024), rand(1024, 1024)",
    "4096×4096×1024": "a, b = rand(4096, 1024), rand(1024, 4096)",
    "float64 1024×1024×1024": "a, b = rand(1024, 1024, dtype=np.float64), rand(1024, 1024, dtype=np.float64)",
    "`[4,512] @ [512,2048]`": "a, b = rand(4, 512), rand(512, 2048)",
    "`[8,512] @ [512,2048]`": "a, b = rand(8, 512), rand(512, 2048)",
    "`[8,512] @ W.T`, W `[2048,512]`": "a, b = rand(8, 512), rand(2048, 512).T",
    "`[1,512] @ [512,2048]`": "a, b = rand(1, 512), rand(512, 2048)",
    "`W @ x`, W `[2048,512]`": "a, b = rand(2048, 512), rand(512)",
    "`W @ x`, W `[4096,4096]`": "a, b = rand(4096, 4096), rand(4096)",
    "stack `1000×16×16 @ 1000×16×16`": "a, b = rand(1000, 16, 16), rand(1000, 16, 16)",
    "stack `[64,128,512] @ [512,512]`": "a, b = rand(64, 128, 512), rand(512, 512)",
    "stack `8×512×512 @ 8×512×512`": "a, b = rand(8, 512, 512), rand(8, 512, 512)",
}

CHILD = """
import json, sys
import numpy as np
import smallgemm
from smallgemm.tools import bench
rng = np.random.default_rng(0)
def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)
{make}
ours, theirs = (lambda: smallgemm.matmul(a, b)), (lambda: np.matmul(a, b))
settle = bench.SETTLE_SECONDS if smallgemm.get_num_threads() > 1 else 0.0
probe = bench.time_interleaved([ours], 1)[0].median
t_ours, t_theirs = bench.time_interleaved([ours, theirs], bench.repeats_for(probe), settle)
print(json.dumps({{"ratio": t_theirs.median / t_ours.median, "first_use_runs": smallgemm.info()["first_use"]["runs"]}}))
"""


def _child(make: str, **settings: str) -> dict:
    env = {name: value for name, value in os.environ.items() if not name.startswith("SMALLGEMM_")}
    env.update(settings)
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(make=make)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="the products whose label holds TEXT")
    args = parser.parse_args()
    rerun_clean()
    bench.compile_first()
    print(
        f"{cpu.model_name()}, kernel {smallgemm.plan.dispatch.current().name}, {smallgemm.get_num_threads()} "
        f"threads (the default), NumPy {np.__version__} with {bench.openblas_kernel()}; "
        f"{args.rounds} fresh processes per setting, after `python -m smallgemm compile`\n"
    )
    print(
        "| product (float32 unless said) | default settings | `SMALLGEMM_FIRST_USE=compile` | default / compile "
        "| first-use runs (default) |\n|---|---|---|---|---|"
    )
    for label, make in PRODUCTS.items():
        if args.only not in label:
            continue
        default, compiled, first = [], [], 0
        for _ in range(args.rounds):
            run = _child(make)
            default.append(run["ratio"])
            first += run["first_use_runs"]
            compiled.append(_child(make, SMALLGEMM_FIRST_USE="compile")["ratio"])
        d, c = statistics.median(default), statistics.median(compiled)
        print(f"| {label} | {d:.3f} | {c:.3f} | {d / c:.3f} | {first} |", flush=True)


if __name__ == "__main__":
    main()
