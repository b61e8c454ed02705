"""Command line: ``python -m smallgemm bench [--ladder] | info``."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np


def _shapes(text: str):
    shapes = []
    for item in text.split(","):
        parts = item.lower().split("x")
        if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
            raise argparse.ArgumentTypeError(f"shape {item!r} is not MxNxK")
        shapes.append(tuple(int(p) for p in parts))
    return shapes


def _bench(args) -> int:
    from . import bench

    clean = bench.clean_environment()
    if clean is not None and not args.keep_openblas_env:
        removed = ", ".join(v for v in bench.OPENBLAS_FORCING if v in os.environ)
        print(f"note: rerunning without {removed} so that NumPy uses its best OpenBLAS kernel "
              f"(--keep-openblas-env to keep them)", flush=True)
        return subprocess.call([sys.executable, "-m", "smallgemm", *sys.argv[1:]], env=clean)
    if args.ladder:
        from .ladder import run_ladder

        run_ladder(np.dtype(args.dtype))
        return 0
    shapes = args.shapes or list(bench.DEFAULT_SHAPES)
    bench.run(shapes, np.dtype(args.dtype), args.threads)
    return 0


def _info(args) -> int:
    from .info import format_info, format_peak, info
    from .peak import peak

    print(format_info(info()), flush=True)
    if not args.no_peak:
        print(format_peak(peak()))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m smallgemm")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench", help="benchmark smallgemm against NumPy in one process")
    b.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    b.add_argument("--threads", type=int, default=1, help="threads for both libraries (default 1)")
    b.add_argument("--shapes", type=_shapes, help="comma-separated MxNxK list (default: seed 000's squares)")
    b.add_argument("--ladder", action="store_true",
                   help="run the optimisation ladder instead (naive loops to all cores, %% of FMA peak)")
    b.add_argument("--keep-openblas-env", action="store_true",
                   help="do not remove OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE for the run")
    b.set_defaults(func=_bench)
    i = sub.add_parser("info", help="CPU, kernel, block sizes, threads and versions")
    i.add_argument("--no-peak", action="store_true", help="skip measuring the FMA peak and bandwidth (~2 s)")
    i.set_defaults(func=_info)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
