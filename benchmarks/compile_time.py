"""Cold compile time of every compiled entry, and the functions compiled more than once.

    python benchmarks/compile_time.py [--kernel avx2] [--dtype float32]

The test suite and a fresh installation are bound by Numba's cold compiles
(docs/design.md, "Entry points without dispatch overhead").  This compiles
each entry of ``entries`` for one kernel and dtype into an empty, temporary cache
and prints the seconds each took, then every jitted function of the package
left holding several signatures whose tile shapes agree: those that differ
only by a literal (``Literal[int](0)``) or a read-only array are usually a
constant passed where a run-time value would have served, and cost a second
compilation of the function and all it calls.  Any kernel compiles on any
x86-64 host (LLVM splits vectors wider than the CPU's), so the numbers of one
host are comparable across kernels.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernel", default=None, help="avx512, avx2 or portable (default: the detected one)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="smallgemm-compile-") as cache:
        os.environ["NUMBA_CACHE_DIR"] = cache  # read when Numba is first imported, below
        report(args.kernel, args.dtype)


def report(kernel_name: str | None, dtype_name: str) -> None:
    import numpy as np
    from numba.core.registry import CPUDispatcher

    import smallgemm
    from smallgemm.kernels import kernel_by_name
    from smallgemm.plan import dispatch, entries
    from smallgemm.plan.entry import Entry

    kernel = kernel_by_name(kernel_name) if kernel_name else dispatch.detect()
    dtype = np.dtype(dtype_name)
    print(f"| entry ({kernel.name}, {dtype.name}) | cold compile, s |")
    print("|---|---|")
    total = 0.0
    for name, entry in vars(entries).items():
        if isinstance(entry, Entry):
            start = time.perf_counter()
            entry.get(kernel, dtype)
            seconds = time.perf_counter() - start
            total += seconds
            print(f"| `{name}` | {seconds:.1f} |", flush=True)
    print(f"| all | {total:.1f} |\n")

    print("Functions compiled under several signatures with the same tile shapes (argument: types):")
    seen = set()
    for module_info in pkgutil.walk_packages(smallgemm.__path__, "smallgemm."):
        module = importlib.import_module(module_info.name)
        for name, obj in vars(module).items():
            if (
                not isinstance(obj, CPUDispatcher)
                or id(obj) in seen
                or obj.py_func.__module__ != module.__name__
            ):
                continue
            seen.add(id(obj))
            by_tiles: dict[tuple, list] = {}
            for signature in obj.signatures:
                tiles = tuple(str(t) for t in signature if "TileShape" in str(t))
                by_tiles.setdefault(tiles, []).append(signature)
            for signatures in by_tiles.values():
                if len(signatures) < 2:
                    continue
                differing = [
                    f"{i}: {', '.join(sorted({str(s[i]) for s in signatures}))}"
                    for i in range(len(signatures[0]))
                    if len({str(s[i]) for s in signatures}) > 1
                ]
                print(f"- `{module.__name__}.{name}` x{len(signatures)}: " + "; ".join(differing))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
