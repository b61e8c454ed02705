"""``python -m smallgemm.cuda bench [--sizes 1024,2048,4096] [--dtype float32]``."""

from __future__ import annotations

import argparse

import numpy as np

from .bench import run
from .kernels import KERNELS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m smallgemm.cuda", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    bench = commands.add_parser("bench", help="time the ladder and cuBLAS (seed 000's table)")
    bench.add_argument("--sizes", default="1024,2048,4096", help="M = N = K of each product, comma-separated")
    bench.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    bench.add_argument("--kernels", default=",".join(KERNELS), help="which kernels, comma-separated")
    bench.add_argument("--repeats", type=int, default=10, help="timed launches per kernel and size")
    args = parser.parse_args(argv)
    kernels = args.kernels.split(",")
    unknown = [name for name in kernels if name not in KERNELS]
    if unknown:
        parser.error(f"unknown kernels {', '.join(unknown)}; the kernels are {', '.join(KERNELS)}")
    sizes = [int(s) for s in args.sizes.split(",")]
    for line in run(sizes, np.dtype(args.dtype), kernels, args.repeats):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
