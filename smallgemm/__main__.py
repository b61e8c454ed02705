"""Command line: ``python -m smallgemm bench [--ladder] | info | compile | tune | explain``."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np

from .kernels import KERNELS


def _shapes(text: str):
    shapes = []
    for item in text.split(","):
        parts = item.lower().split("x")
        if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
            raise argparse.ArgumentTypeError(f"shape {item!r} is not MxNxK")
        shapes.append(tuple(int(p) for p in parts))
    return shapes


def _bench(args) -> int:
    from .tools import bench

    clean = bench.clean_environment()
    if clean is not None and not args.keep_openblas_env:
        removed = ", ".join(v for v in bench.OPENBLAS_FORCING if v in os.environ)
        print(
            f"note: rerunning without {removed} so that NumPy uses its best OpenBLAS kernel "
            f"(--keep-openblas-env to keep them)",
            flush=True,
        )
        return subprocess.call([sys.executable, "-m", "smallgemm", *sys.argv[1:]], env=clean)
    if args.ladder:
        from .tools.ladder import run_ladder

        bench.compile_first([args.dtype])
        run_ladder(np.dtype(args.dtype))
        return 0
    shapes = args.shapes or list(bench.DEFAULT_SHAPES)
    bench.compile_first([args.dtype])
    bench.run(shapes, np.dtype(args.dtype), args.threads)
    return 0


def _info(args) -> int:
    from .api.info import format_info, format_peak, info
    from .api.peak import peak

    print(format_info(info()), flush=True)
    if not args.no_peak:
        print(format_peak(peak()))
    return 0


def _compile(args) -> int:
    from .api import precompile

    return precompile.main(args.kernel, args.all, args.dtype, args.entry, args.quiet)


def _ints(text: str) -> list[int]:
    items = [t.strip() for t in text.split(",")]
    if not all(t.isdigit() and int(t) > 0 for t in items):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of positive integers")
    return [int(t) for t in items]


def _tune(args) -> int:
    from .plan import dispatch
    from .tune import record
    from .tune.search import format_table, search

    kernel = args.kernel or dispatch.current().name
    output = args.output or record.default_config_path()
    environment = record.Environment.current()
    config = record.Config(environment, ())
    if os.path.exists(output):
        try:
            previous = record.load_config(output)
        except ValueError as error:
            print(f"error: {error}; remove it or choose another --output", file=sys.stderr)
            return 2
        if previous.environment.mismatch(environment) is None:
            config = record.Config(environment, previous.tunings)  # keep the other dtypes' tunings
    result = search(
        kernel,
        args.dtype,
        args.shapes,
        args.threads,
        args.budget,
        workspace_limit=args.workspace_mib << 20,
        seed=args.seed,
    )
    print(format_table(result, args.top))
    if result.best() is None:
        print("error: no candidate passed validation; nothing written", file=sys.stderr)
        return 1
    tuning = record.tuning_from_search(result)
    record.save_config(config.with_tuning(tuning), output)
    print(f"chose MC={tuning.mc} NC={tuning.nc} KC={tuning.kc} for {kernel} {args.dtype}; wrote {output}")
    return 0


def _explain(args) -> int:
    from .api.explain import explain

    ((m, n, k),) = args.shape
    dtype = np.dtype(args.dtype)
    # Storage only (np.empty touches no memory): a transposed operand is a view of its transpose.
    a = np.empty((k, m), dtype).T if args.trans_a else np.empty((m, k), dtype)
    b = np.empty((n, k), dtype).T if args.trans_b else np.empty((k, n), dtype)
    if args.batch:
        a = (
            np.empty((args.batch, k, m), dtype).transpose(0, 2, 1)
            if args.trans_a
            else np.empty((args.batch, m, k), dtype)
        )
        b = (
            np.empty((args.batch, n, k), dtype).transpose(0, 2, 1)
            if args.trans_b
            else np.empty((args.batch, k, n), dtype)
        )
    print(explain(a, b, threads=args.threads))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m smallgemm")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench", help="benchmark smallgemm against NumPy in one process")
    b.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    b.add_argument("--threads", type=int, help="threads for both libraries (default: each library's default)")
    b.add_argument("--shapes", type=_shapes, help="comma-separated MxNxK list (default: seed 000's squares)")
    b.add_argument(
        "--ladder",
        action="store_true",
        help="run the optimisation ladder instead (naive loops to all cores, %% of FMA peak)",
    )
    b.add_argument(
        "--keep-openblas-env",
        action="store_true",
        help="do not remove OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE for the run",
    )
    b.set_defaults(func=_bench)
    i = sub.add_parser("info", help="CPU, kernel, block sizes, threads and versions")
    i.add_argument("--no-peak", action="store_true", help="skip measuring the FMA peak and bandwidth (~2 s)")
    i.set_defaults(func=_info)
    c = sub.add_parser("compile", help="compile the entries into Numba's cache ahead of first use")
    c.add_argument("--dtype", choices=["float32", "float64"], help="one dtype (default: both)")
    chosen = c.add_mutually_exclusive_group()
    chosen.add_argument(
        "--kernel", choices=[k.name for k in KERNELS], help="a kernel (default: the one in use)"
    )
    chosen.add_argument("--all", action="store_true", help="every kernel")
    c.add_argument("--entry", help="comma-separated entry names (default: all; see `info`)")
    c.add_argument("--quiet", action="store_true", help="no progress bar and no summary")
    c.set_defaults(func=_compile)
    t = sub.add_parser("tune", help="search block sizes (validated before timed) and write the configuration")
    t.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    t.add_argument(
        "--kernel", choices=[k.name for k in KERNELS], help="kernel to tune (default: the one this CPU uses)"
    )
    t.add_argument(
        "--shapes",
        type=_shapes,
        default=[(1024, 1024, 1024)],
        help="comma-separated MxNxK list to time (default 1024x1024x1024)",
    )
    t.add_argument(
        "--threads",
        type=_ints,
        default=[1],
        help="comma-separated thread counts; the first one's timings choose (default 1)",
    )
    t.add_argument("--budget", type=float, default=60.0, help="seconds of timing (default 60)")
    t.add_argument("--workspace-mib", type=int, default=64, help="workspace limit per candidate (default 64)")
    t.add_argument("--seed", type=int, default=1, help="seed of the reproducible inputs (default 1)")
    t.add_argument("--top", type=int, default=10, help="rows of the result table (default 10)")
    t.add_argument("--output", help="configuration file (default: the user cache, where matmul looks)")
    t.set_defaults(func=_tune)
    e = sub.add_parser("explain", help="how a product would be computed (strategy, tile, blocks, threads)")
    e.add_argument("shape", type=_shapes, help="MxNxK: C is M x N, the shared dimension K")
    e.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    e.add_argument("--trans-a", action="store_true", help="A stored transposed (a.T @ b)")
    e.add_argument("--trans-b", action="store_true", help="B stored transposed (a @ W.T)")
    e.add_argument("--batch", type=int, help="a stack of this many products")
    e.add_argument("--threads", type=int, help="threads (default: the setting in force)")
    e.set_defaults(func=_explain)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
