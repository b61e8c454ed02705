"""``python -m smallgemm compile``: fill Numba's on-disk cache ahead of first use.

A container build or a CI step runs it once; every later process then loads each
entry in a fraction of a second instead of compiling it (0.1-13 s each).  The cache is
where Numba puts it (``NUMBA_CACHE_DIR`` moves it; ``info`` names it).  The compile
holds a lock in the cache folder, so that compiles started together (several
processes' first-use compiles, ``plan.warmup``) run one after the other and each
entry is compiled once.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TextIO

import numpy as np

from ..kernels import KERNELS, Kernel, kernel_by_name
from ..machine import compile_cache
from ..plan import dispatch, entries
from ..plan.entry import Entry
from ..progress import ProgressBar

DTYPES = ("float32", "float64")
LOCK_NAME = "smallgemm-compile.lock"


@dataclass(frozen=True)
class Compiled:
    """One entry made ready: its name, kernel and dtype, the seconds it took and whether it
    was in the cache already (loaded, not compiled)."""

    entry: str
    kernel: str
    dtype: str
    seconds: float
    cached: bool


def package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cache_status(kernel: Kernel, dtype: np.dtype) -> dict[str, bool]:
    """Each entry's name and whether it is compiled (loaded or in the on-disk cache) for this
    kernel and dtype."""
    return {name: entry.cached(kernel, dtype) for name, entry in entries.ALL.items()}


@contextlib.contextmanager
def _compile_lock():
    directory = compile_cache.describe(package_root())["directory"]
    if directory is None:
        yield
        return
    os.makedirs(directory, exist_ok=True)
    with compile_cache.exclusive(os.path.join(directory, LOCK_NAME)):
        yield


def compile_entries(
    kernels: Iterable[Kernel],
    dtypes: Iterable[str],
    names: Iterable[str] | None = None,
    report: Callable[[int, int, Compiled], None] | None = None,
) -> list[Compiled]:
    """Compile (or load) the named entries (default: all) for every kernel and dtype given;
    ``report(done, total, compiled)`` is called after each."""
    chosen = list(entries.ALL) if names is None else list(names)
    unknown = [name for name in chosen if name not in entries.ALL]
    if unknown:
        raise ValueError(f"unknown entries {unknown}; known: {', '.join(entries.ALL)}")
    work = [(kernel, np.dtype(dtype), name) for kernel in kernels for dtype in dtypes for name in chosen]
    done: list[Compiled] = []
    with _compile_lock():
        for kernel, dtype, name in work:
            entry: Entry = entries.ALL[name]
            was_cached = entry.cached(kernel, dtype)
            start = time.perf_counter()
            entry.link_routines(kernel, dtype)
            item = Compiled(name, kernel.name, dtype.name, time.perf_counter() - start, was_cached)
            done.append(item)
            if report is not None:
                report(len(done), len(work), item)
    return done


def progress_bar(stream: TextIO | None = None) -> Callable[[int, int, Compiled], None]:
    """A report for ``compile_entries``: the shared bar, one step per entry, with the entry
    and its seconds (or "cached"), redrawn on a terminal, a line per entry in a log."""
    bar: ProgressBar | None = None

    def report(done: int, total: int, item: Compiled) -> None:
        nonlocal bar
        if bar is None:
            bar = ProgressBar(total, stream=stream or sys.stderr, log_each=True)
        how = "cached" if item.cached else f"{item.seconds:.1f} s"
        bar.update(done, f"{item.kernel} {item.dtype} {item.entry} ({how})")
        if done == total:
            bar.close()

    return report


def main(
    kernel_name: str | None, all_kernels: bool, dtype: str | None, names: str | None, quiet: bool
) -> int:
    """The command: the kernel in use (or one named, or all), one dtype or both."""
    if all_kernels:
        kernels = list(KERNELS)
    else:
        kernels = [kernel_by_name(kernel_name) if kernel_name else dispatch.current()]
    chosen = None if names is None else [n.strip() for n in names.split(",") if n.strip()]
    start = time.perf_counter()
    try:
        done = compile_entries(
            kernels, [dtype] if dtype else DTYPES, chosen, None if quiet else progress_bar()
        )
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not quiet:
        compiled = sum(not item.cached for item in done)
        where = compile_cache.describe(package_root())["directory"] or "nowhere (no writable cache)"
        print(
            f"{compiled} entries compiled, {len(done) - compiled} already cached, "
            f"in {time.perf_counter() - start:.1f} s; cache: {where}"
        )
    return 0
