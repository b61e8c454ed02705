"""Cold compile time of every compiled entry and linked routine, and the functions compiled more than once.

    python benchmarks/compile_time.py [--kernel avx2] [--dtype float32] [--functions 25]

The test suite and a fresh installation are bound by Numba's cold compiles
(docs/design.md, "Entry points without dispatch overhead").  This compiles
each entry of ``entries`` for one kernel and dtype into an empty, temporary cache
and prints the seconds each took: its own code (what a first product compiles besides
the routines its route reaches) and the linked routines it is the first to be able to
reach (``Entry.link_routines``, as ``python -m smallgemm compile`` does); then every
jitted function and subroutine of the package
left holding several signatures whose tile shapes agree: those that differ
only by a literal (``Literal[int](0)``) or a read-only array are usually a
constant passed where a run-time value would have served, and cost a second
compilation of the function and all it calls.  Any kernel compiles on any
x86-64 host (LLVM splits vectors wider than the CPU's), so the numbers of one
host are comparable across kernels.

``--functions N`` adds the N functions that took longest to compile, each with its
own time (what its callees took is theirs): how many times it was compiled, the
seconds in all and those of them spent optimising LLVM IR; a linked routine's
machine code, emitted when it is linked, is a row of its own (``link NAME``).  A
subroutine's row is its typing and lowering to IR: the callers that link it in
optimise and emit its code.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
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
    parser.add_argument("--functions", type=int, default=0, help="list the N slowest functions to compile")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="smallgemm-compile-") as cache:
        os.environ["NUMBA_CACHE_DIR"] = cache  # read when Numba is first imported, below
        if args.functions:
            with own_times() as times:
                report(args.kernel, args.dtype)
            print_own_times(times, args.functions)
        else:
            report(args.kernel, args.dtype)


class OwnTimes:
    """Seconds each compiled function took itself: a stack of the compiles in progress,
    each charged its time less that of the compiles it started."""

    def __init__(self):
        self.stack: list[list] = []  # [name, start, seconds of nested compiles]
        self.own = collections.defaultdict(float)
        self.optimising = collections.defaultdict(float)
        self.count = collections.Counter()

    def timed(self, name: str, run):
        self.stack.append([name, time.perf_counter(), 0.0])
        try:
            return run()
        finally:
            name, start, nested = self.stack.pop()
            seconds = time.perf_counter() - start
            self.own[name] += seconds - nested
            self.count[name] += 1
            if self.stack:
                self.stack[-1][2] += seconds

    def charge_optimising(self, seconds: float) -> None:
        self.optimising[self.stack[-1][0] if self.stack else "(outside)"] += seconds


@contextlib.contextmanager
def own_times():
    """Patch Numba's compiler, its LLVM optimiser and ``Linked.link`` to fill an ``OwnTimes``."""
    from numba.core import codegen, compiler

    from smallgemm.simd import linked, subroutine

    times = OwnTimes()
    compile_extra, link = compiler.compile_extra, linked.Linked.link
    lower = subroutine.Subroutine._lower
    optimise = codegen.CPUCodeLibrary._optimize_functions, codegen.CPUCodeLibrary._optimize_final_module

    def timed_compile(typingctx, targetctx, func, *args, **kwargs):
        name = getattr(func, "__qualname__", str(func))
        return times.timed(name, lambda: compile_extra(typingctx, targetctx, func, *args, **kwargs))

    def timed_link(routine, argtypes, callees=False):
        if argtypes in routine.compiled:
            return link(routine, argtypes, callees)
        return times.timed(
            f"link {routine.name.rsplit('.', 1)[-1]}", lambda: link(routine, argtypes, callees)
        )

    def timed_lower(routine, typingctx, argtypes):
        return times.timed(routine.pyfunc.__qualname__, lambda: lower(routine, typingctx, argtypes))

    def timed_optimiser(method):
        def run(library, *args):
            start = time.perf_counter()
            try:
                return method(library, *args)
            finally:
                times.charge_optimising(time.perf_counter() - start)

        return run

    compiler.compile_extra, linked.Linked.link = timed_compile, timed_link
    subroutine.Subroutine._lower = timed_lower
    codegen.CPUCodeLibrary._optimize_functions = timed_optimiser(optimise[0])
    codegen.CPUCodeLibrary._optimize_final_module = timed_optimiser(optimise[1])
    try:
        yield times
    finally:
        compiler.compile_extra, linked.Linked.link = compile_extra, link
        subroutine.Subroutine._lower = lower
        codegen.CPUCodeLibrary._optimize_functions, codegen.CPUCodeLibrary._optimize_final_module = optimise


def print_own_times(times: OwnTimes, count: int) -> None:
    print("| function | compiles | own seconds | of which LLVM optimisation |\n|---|---|---|---|")
    for name, seconds in sorted(times.own.items(), key=lambda item: -item[1])[:count]:
        print(f"| `{name}` | {times.count[name]} | {seconds:.2f} | {times.optimising[name]:.2f} |")
    print(f"| all | | {sum(times.own.values()):.1f} | {sum(times.optimising.values()):.1f} |\n")


def report(kernel_name: str | None, dtype_name: str) -> None:
    import numpy as np
    from numba.core.registry import CPUDispatcher

    import smallgemm
    from smallgemm.kernels import kernel_by_name
    from smallgemm.plan import dispatch, entries
    from smallgemm.plan.entry import Entry
    from smallgemm.simd.subroutine import SubroutineCall

    kernel = kernel_by_name(kernel_name) if kernel_name else dispatch.detect()
    dtype = np.dtype(dtype_name)
    print(f"| entry ({kernel.name}, {dtype.name}) | its own code, s | the routines it is first to reach, s |")
    print("|---|---|---|")
    own_total = routines_total = 0.0
    for name, entry in vars(entries).items():
        if isinstance(entry, Entry):
            start = time.perf_counter()
            entry.get(kernel, dtype)
            own = time.perf_counter() - start
            entry.link_routines(kernel, dtype)
            routines = time.perf_counter() - start - own
            own_total += own
            routines_total += routines
            print(f"| `{name}` | {own:.1f} | {routines:.1f} |", flush=True)
    print(f"| all | {own_total:.1f} | {routines_total:.1f} |")
    print(f"\nEvery entry and every routine: {own_total + routines_total:.1f} s\n")

    print("Functions compiled under several signatures with the same tile shapes (argument: types):")
    seen = set()
    for module_info in pkgutil.walk_packages(smallgemm.__path__, "smallgemm."):
        module = importlib.import_module(module_info.name)
        for name, obj in vars(module).items():
            if isinstance(obj, CPUDispatcher):
                compiled = obj.signatures
            elif isinstance(obj, SubroutineCall):
                compiled = list(obj.subroutine.compiled)
            else:
                continue
            if id(obj) in seen or obj.py_func.__module__ != module.__name__:
                continue
            seen.add(id(obj))
            by_tiles: dict[tuple, list] = {}
            for signature in compiled:
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
