"""First use in seconds: products run on the first-use driver while their entries compile elsewhere.

A strategy's entries take 0.1-13 s each to compile cold (``benchmarks/compile_time.py``).
When a product needs an entry that is neither loaded nor in Numba's on-disk cache,
it runs instead on ``drivers.chain`` (about a second to compile, a quarter to a third
of the peak), and the missing entries compile in a separate process,
``python -m smallgemm compile``, which fills the cache.  Once that process is done,
the next product loads them (a fraction of a second) and runs at full speed.  Products
are exact, so both drivers give the same bits: only the time differs.

The tier applies to exact products (a ``pack``ed B is read back from its panels) up to
``FIRST_USE_MAX_VOLUME`` multiply-adds; anything else compiles in process, as does every
product when ``SMALLGEMM_FIRST_USE=compile``.  One compile process runs at a time per
process, and the command holds a lock in the cache folder, so processes started together
compile each entry once.  A compile process that outlives its parent finishes and
leaves the cache filled for the next one; entries still queued behind it when the
parent ends get their own (``_compile_queued_at_exit``), so a program's second run finds
every entry its first run asked for.  A fork forgets the parent's compile process.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np

from ..machine import settings
from . import entries
from .entry import Entry

BACKGROUND, COMPILE = settings.FIRST_USE_MODES
MODE = settings.FIRST_USE


def set_first_use(mode: str) -> None:
    """``"background"`` (the default): a product whose entries are not compiled runs on the
    first-use driver while they compile in another process.  ``"compile"``: it compiles them
    here first, as a benchmark wants (its first timed calls then run the tuned drivers)."""
    global MODE
    if mode not in (BACKGROUND, COMPILE):
        raise ValueError(f"set_first_use: mode must be {BACKGROUND!r} or {COMPILE!r}, not {mode!r}")
    MODE = mode


def get_first_use() -> str:
    """The first-use mode in force (``set_first_use``)."""
    return MODE


@contextlib.contextmanager
def first_use(mode: str) -> Iterator[None]:
    """``set_first_use(mode)`` inside a ``with`` block, restoring the previous mode after."""
    previous = MODE
    set_first_use(mode)
    try:
        yield
    finally:
        set_first_use(previous)


# The largest product (multiply-adds, a stack's in all) the first-use driver takes: about
# a second at its speed, against the seconds that compiling would cost anyway.
FIRST_USE_MAX_VOLUME = 1 << 34
# How often the cache is read again for an entry that is neither loaded nor found there
# (another process compiles it), in seconds.
RECHECK_SECONDS = 0.5

_NO_OFFSETS = np.zeros(1, np.int64)


class Compiles:
    """This process's compile process, the entries it compiles and those still to ask for,
    and how many products ran on the first-use driver (``first_use_runs``)."""

    def __init__(self):
        self.process: subprocess.Popen | None = None
        self.compiling: set[tuple[str, str, str]] = set()  # (entry name, kernel name, dtype name)
        self.queued: list[tuple[str, str, str]] = []
        self.done: set[tuple[str, str, str]] = set()
        self.failed: set[tuple[str, str, str]] = set()
        self.checked: dict[tuple[str, str, str], float] = {}
        self.runs = 0


compiles = Compiles()


def _forget_after_fork() -> None:
    global compiles
    compiles = Compiles()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def first_use_runs() -> int:
    """How many products this process ran on the first-use driver."""
    return compiles.runs


def compiling() -> list[str]:
    """The entries this process's compile process compiles now, and those queued after it,
    as ``ENTRY kernel dtype``."""
    state = compiles
    return [" ".join(key) for key in sorted(state.compiling) + state.queued]


def _key(entry: Entry, kernel, dtype: np.dtype) -> tuple[str, str, str]:
    return entries.name_of(entry), kernel.name, dtype.name


def pump(start: bool = True) -> None:
    """Note a finished compile process and, with ``start``, start the next one for the
    queued entries of one kernel and dtype."""
    state = compiles
    if state.process is not None:
        code = state.process.poll()
        if code is None:
            return
        if code == 0:
            state.done |= state.compiling
        else:
            state.failed |= state.compiling
        state.process = None
        state.compiling = set()
    if not start or not state.queued:
        return
    _, kernel_name, dtype_name = state.queued[0]
    batch = [key for key in state.queued if key[1:] == (kernel_name, dtype_name)]
    state.queued = [key for key in state.queued if key not in batch]
    command = [
        sys.executable,
        "-m",
        "smallgemm",
        "compile",
        "--quiet",
        "--kernel",
        kernel_name,
        "--dtype",
        dtype_name,
        "--entry",
        ",".join(name for name, _, _ in batch),
    ]
    try:
        state.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "SMALLGEMM_FIRST_USE": COMPILE},
        )
    except OSError:
        state.failed.update(batch)
        return
    state.compiling = set(batch)


def _compile_queued_at_exit() -> None:
    """At exit, start a compile process for each kernel and dtype whose entries are still
    queued (the running one goes on by itself; the cache lock orders them)."""
    state = compiles
    while state.queued:
        state.process = None
        pump()


atexit.register(_compile_queued_at_exit)


def fetchable(entry: Entry, kernel, dtype: np.dtype, start: bool = True) -> bool:
    """Whether ``entry.get`` is quick now, making it so where it can: True if the entry is
    loaded, or found in the on-disk cache (then loaded here, once: a loaded entry is never
    looked for again), or its compile failed elsewhere (``get`` then compiles, or says why
    it cannot), or products compile in process.  Otherwise its compile is asked for (and,
    with ``start``, started if no other is running) and the answer is False; the cache is
    then read again at most every ``RECHECK_SECONDS``, and at once when the compile process
    ends, so the entry is loaded as soon as it is there."""
    if MODE == COMPILE or kernel.gemv.lane_sums or entry.ready(kernel, dtype):
        return True  # the compile command compiles only the exact kernels: lane-wise sums compile here
    pump(start)
    key = _key(entry, kernel, dtype)
    state = compiles
    if key in state.failed:
        return True
    finished = key in state.done
    now = time.monotonic()
    if not finished and now - state.checked.get(key, -RECHECK_SECONDS) < RECHECK_SECONDS:
        return False
    state.checked[key] = now
    if entry.cached(kernel, dtype):
        entry.get(kernel, dtype)  # loaded now: ``ready`` answers from here on
        return True
    if finished:  # compiled, yet not in the cache (none is writable): compile here
        state.failed.add(key)
        return True
    if key not in state.queued and key not in state.compiling:
        state.queued.append(key)
    if start:
        pump()
    return False


def runs_first(p) -> bool:
    """Whether the placed problem ``p`` may run on the first-use driver while its entries compile:
    the tier is on, products exact, and ``p`` within ``FIRST_USE_MAX_VOLUME``."""
    if MODE == COMPILE or p.prep.lane_sums:
        return False  # products not exact: only the tuned drivers give their bits
    count = 1 if p.offsets is None else len(p.offsets[2])
    return count * p.m * p.n * p.k <= FIRST_USE_MAX_VOLUME


def ran_first(needed: tuple[Entry, ...], p) -> bool:
    """Compute the placed problem ``p`` on the first-use driver if one of the ``needed``
    entries (those the runner about to run calls, and no others) cannot be fetched quickly
    (``fetchable``, which loads it from the cache or asks for its compile); True if it did."""
    prep = p.prep
    kernel, dtype = prep.kernel, prep.dtype
    if MODE == COMPILE or all(entry.ready(kernel, dtype) for entry in needed) or not runs_first(p):
        return False
    waiting = [entry for entry in needed if not fetchable(entry, kernel, dtype, start=False)]
    pump()  # one compile process for all of them
    if not waiting:
        return False
    offsets = (_NO_OFFSETS,) * 3 if p.offsets is None else p.offsets
    continue_chain = p.offsets is None and p.alpha == 1 and p.beta == 1
    b = p.b if isinstance(p.b, np.ndarray) else p.b.unpacked()  # a ``pack``ed B, read back
    entries.FIRST_USE.get(kernel, dtype)(
        prep.shape, prep.scalar(p.alpha), prep.scalar(p.beta), p.a, b, p.c, *offsets, continue_chain
    )
    compiles.runs += 1
    return True
