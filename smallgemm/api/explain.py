"""``smallgemm.explain``: how a product would be computed, without computing it.

Like a database's EXPLAIN: the strategy (the row of ``strategies``' table that
fits, and its rule), the kernel and tile, the block sizes, whether the problem is
turned over, the threads and their tasks, and what the result's bits depend on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..machine import threads as thread_setting
from ..plan import dispatch, entries, strategies, warmup
from .packed import PackedMatrix


@dataclass(frozen=True)
class Explanation:
    """What ``explain`` found; ``str()`` gives the text ``python -m smallgemm explain`` prints."""

    product: str  # e.g. "float32 [8,512] @ [512,2048]"
    strategy: str
    rule: str
    kernel: str
    tile: str
    block_sizes: tuple[int, int, int]  # MC, NC, KC
    turned_over: str  # "" when the problem is computed as given
    threads: int  # workers the product runs on
    tasks: str
    stack: str  # "" for one product, else the stack's row of the STACK table
    invariant: str
    compiled: str  # whether the entries it runs are compiled, and what a first product does if not
    entries: tuple[str, ...] = ()  # the compiled entries it runs (``python -m smallgemm info`` names them)

    def __str__(self) -> str:
        mc, nc, kc = self.block_sizes
        lines = [
            f"product      {self.product}",
            f"strategy     {self.strategy}: {self.rule}",
        ]
        if self.stack:
            lines.append(f"stack        {self.stack}")
        lines += [
            f"kernel       {self.kernel}, tile {self.tile}",
            f"blocks       MC={mc} NC={nc} KC={kc}",
            f"turned over  {self.turned_over or 'no'}",
            f"threads      {self.threads} ({self.tasks})",
            f"bits         {self.invariant}",
            f"compiled     {self.compiled}",
        ]
        return "\n".join(lines)


def _turned(p: strategies.Problem) -> str:
    if p.turned:
        return "yes: C^T = W x^T, W's contiguous rows read in place (rules.turns_few_rows)"
    if p.swapped:
        return "yes: C^T = B^T A^T (rules.swaps: C column-major, x.T @ g with few columns, or a narrow C; A.T @ x: unpacked.column_swaps)"
    return ""


def _tasks(row: strategies.Strategy, p: strategies.Problem, workers: int) -> str:
    return "one thread" if workers == 1 else row.tasks(p, workers)


def _invariant(strategy: strategies.Strategy) -> str:
    if not dispatch.get_exact():
        return (
            "not exact (set_exact(False)): independent of the thread count, but row dots sum lane-wise "
            "and unpacked products sum k in KC blocks, so bits may differ between paths and kernels"
        )
    return (
        "exact: each element one FMA chain in increasing k, the same bits on every kernel, block size, "
        "thread count, batch and strategy"
    )


def _entries(row: strategies.Strategy, workers: int) -> tuple[entries.Entry, ...]:
    """The compiled entries the row's runner calls on ``workers`` workers."""
    return row.parallel_entries if workers > 1 else row.serial_entries


def _compiled(row: strategies.Strategy, p: strategies.Problem, workers: int) -> str:
    needed = _entries(row, workers)
    if not needed:
        return "nothing to compile"
    kernel, dtype = p.prep.kernel, p.dtype
    names = [entries.name_of(entry) for entry in needed]
    missing = [name for name, entry in zip(names, needed) if not entry.cached(kernel, dtype)]
    if not missing:
        return f"yes: {', '.join(names)} (loaded or in the cache)"
    if warmup.runs_first(p):
        return (
            f"not yet: {', '.join(missing)}; a first product runs on the first-use driver "
            f"(same bits) while they compile in another process"
        )
    return f"not yet: {', '.join(missing)}; a first product compiles them (0.1-13 s each)"


def _stack_problem(a: np.ndarray, b: np.ndarray, workers: int) -> strategies.Problem:
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    count = math.prod(batch)
    a3 = np.broadcast_to(a, batch + a.shape[-2:]).reshape((count, *a.shape[-2:]))
    b3 = np.broadcast_to(b, batch + b.shape[-2:]).reshape((count, *b.shape[-2:]))
    c3 = np.empty((count, a.shape[-2], b.shape[-1]), a.dtype)
    offsets = tuple(np.arange(count, dtype=np.int64) * (x.strides[0] // x.itemsize) for x in (a3, b3, c3))
    return strategies.Problem(1.0, a3[0], b3[0], 0.0, c3[0], workers, offsets)


_FAST = (np.dtype(np.float32), np.dtype(np.float64))


def explain(a, b, out=None, *, threads: int | None = None) -> Explanation:
    """How ``matmul(a, b, out=out)`` would be computed, with ``threads`` threads (default:
    the setting in force).  Nothing is computed.  ``b`` may be a ``PackedMatrix``."""
    workers = thread_setting.workers() if threads is None else thread_setting.checked(threads)
    packed = isinstance(b, PackedMatrix)
    a = np.asarray(a)
    b = b if packed else np.asarray(b)
    dtype = np.result_type(a.dtype, b.dtype)
    if dtype not in _FAST or a.ndim == 0 or (not packed and b.ndim == 0):
        raise TypeError(
            f"smallgemm computes float32 and float64 products of arrays; "
            f"{a.dtype} @ {b.dtype} is handed to numpy.matmul"
        )
    a = a.astype(dtype, copy=False)
    b = b if packed else b.astype(dtype, copy=False)
    a2 = a.reshape(1, -1) if a.ndim == 1 else a
    if packed:
        c = np.empty((math.prod(a2.shape[:-1]), b.shape[1]), a.dtype) if out is None else out
        p = strategies.Problem(1.0, a2.reshape(math.prod(a2.shape[:-1]), a2.shape[-1]), b, 0.0, c, workers)
        table, stack_row = strategies.PREPACKED, None
    else:
        b2 = b.reshape(-1, 1) if b.ndim == 1 else b
        if a2.shape[-1] != b2.shape[-2]:
            raise ValueError(
                f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
                f"signature (n?,k),(k,m?)->(n?,m?) (size {b2.shape[-2]} is different from "
                f"{a2.shape[-1]})"
            )
        if b2.ndim == 2:
            rows = (
                a2 if a2.ndim == 2 else a2.reshape(math.prod(a2.shape[:-1]), a2.shape[-1])
            )  # one tall product
            c = (
                np.empty((rows.shape[0], b2.shape[1]), a.dtype)
                if out is None
                else out.reshape(rows.shape[0], b2.shape[1])
            )
            p = strategies.Problem(1.0, rows, b2, 0.0, c, workers)
            table, stack_row = strategies.PRODUCT, None
        else:
            p = _stack_problem(a2, b2, workers)
            a0, b0, c0 = p.a, p.b, p.c  # the first product, before STACK's pre-pass orients it
            stack_row = strategies.choose(strategies.STACK, p)
            table = strategies.PRODUCT
            if stack_row is strategies.LONE_PRODUCT:
                p = strategies.Problem(1.0, a0, b0, 0.0, c0, workers)
                stack_row = None
    strategy = strategies.choose(table, p)
    used = (
        workers if (strategy.worth_threads is not None and workers > 1 and strategy.worth_threads(p)) else 1
    )
    if stack_row is not None and stack_row.worth_threads is not None and workers > 1:
        used = workers if stack_row.worth_threads(p) else used
    # The blocked loops take blocks fitted to k; the other drivers the KC in force.
    sizes = p.prep.sizes_for_depth(p.k) if strategy.depth_fitted and p.k else p.prep.sizes
    dims = f"[{','.join(map(str, a.shape))}] @ [{','.join(map(str, b.shape))}]"
    return Explanation(
        product=f"{a.dtype} {dims}",
        strategy=strategy.name,
        rule=strategy.rule,
        kernel=p.prep.kernel.name,
        tile=strategy.tile(p),
        block_sizes=(sizes.mc, sizes.nc, sizes.kc),
        turned_over=_turned(p),
        threads=used,
        tasks=_tasks(stack_row or strategy, p, used),
        stack=f"{stack_row.name}: {stack_row.rule}" if stack_row is not None else "",
        invariant=_invariant(strategy),
        compiled=_compiled(stack_row or strategy, p, used),
        entries=tuple(entries.name_of(entry) for entry in _entries(stack_row or strategy, used)),
    )
