"""``python -m smallgemm.cuda bench [--sizes 1024,2048,4096] [--dtype float32]``: the ladder
against cuBLAS; ``python -m smallgemm.cuda ptx [--kernels] [--dtype] [--cc 9.0] [--out DIR]``:
what each kernel compiles to (no GPU needed)."""

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
    listing = commands.add_parser("ptx", help="compile the kernels to PTX and count what they hold")
    listing.add_argument("--kernels", default=",".join(KERNELS), help="which kernels, comma-separated")
    listing.add_argument("--dtype", default="float32,float64", help="float32, float64 or both")
    listing.add_argument("--cc", default="9.0", help="compute capability, as MAJOR.MINOR")
    listing.add_argument("--out", help="a folder to write each kernel's PTX into")
    args = parser.parse_args(argv)
    kernels = args.kernels.split(",")
    unknown = [name for name in kernels if name not in KERNELS]
    if unknown:
        parser.error(f"unknown kernels {', '.join(unknown)}; the kernels are {', '.join(KERNELS)}")
    if args.command == "ptx":
        return _ptx(kernels, args.dtype.split(","), tuple(int(v) for v in args.cc.split(".")), args.out)
    sizes = [int(s) for s in args.sizes.split(",")]
    for line in run(sizes, np.dtype(args.dtype), kernels, args.repeats):
        print(line, flush=True)
    return 0


def _ptx(kernels: list[str], dtypes: list[str], cc: tuple[int, int], out: str | None) -> int:
    from pathlib import Path

    from .ptx import layouts, ptx, summary

    for name in kernels:
        for dtype in dtypes:
            for a_k_fast, b_n_fast in layouts(name):
                text = ptx(name, np.dtype(dtype), a_k_fast, b_n_fast, cc)
                print(summary(name, dtype, a_k_fast, b_n_fast, text).line(), flush=True)
                if out:
                    Path(out).mkdir(parents=True, exist_ok=True)
                    Path(out, f"{name}_{dtype}_{int(a_k_fast)}{int(b_n_fast)}.ptx").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
