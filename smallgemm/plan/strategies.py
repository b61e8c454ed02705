"""The strategy table: every way smallgemm computes a product, in order; the first row that fits wins.

A row has a name, its fit rule (in words for ``explain``, and as a predicate over
a ``Problem``), the rule for using the threads, and a serial and a parallel
runner (``runners``).  Three tables, one per kind of call:

- ``PRODUCT``: one 2-D product C = alpha*A.B + beta*C;
- ``PREPACKED``: the same with B packed ahead (``pack``);
- ``STACK``: a stack of products of one shape, composed over ``PRODUCT``'s
  choice between the unpacked and the blocked drivers.

The compiled small ways in (``runners.run_small``, ``run_small_stack``) compute in
compiled code, without a table lookup, the products of the tables' small rows ("small
product", "small stack"): both run one rule's source, ``unpacked.small_product``, on the
same limits (``tests/test_strategies.py`` checks that they agree).  No row changes a bit:
every element is the same chain of FMAs on every row.

Before a table's rows are tested, its pre-pass orients the problem
(``Problem.orientation``: swapped, or ``x @ W.T`` turned over; a small product is read as
given, as the compiled ways in read it); the rows' fit rules then only read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..drivers.unpacked import DOTS_OF_A_ROWS, DOTS_OF_B_COLUMNS, TRANSPOSING_STREAM
from ..machine import threads
from . import described, entries, in_force, prepared, rules, runners, warmup
from .entry import Entry
from .problem import Problem


@dataclass(frozen=True)
class Strategy:
    name: str
    rule: str  # the fit rule, as ``explain`` prints it
    fits: Callable[[Problem], bool]
    # Whether the product is worth the workers; None: never on threads.
    worth_threads: Callable[[Problem], bool] | None
    serial: Callable[[Problem], None]
    parallel: Callable[[Problem], None] | None = None

    # Whether the row's drivers continue each chain across KC blocks in C (the blocked
    # loops), so that a beta other than 0 (and than gemm's continued chain) needs k within
    # one block: a longer product is computed into a buffer first (``in_two_steps``).
    chains_in_c: bool = False

    # The compiled entries the serial and the parallel runner call, each runner its own:
    # until a runner's entries are loaded or in the cache, the products it would run are
    # computed on the first-use driver (``warmup``).
    serial_entries: tuple[Entry, ...] = ()
    parallel_entries: tuple[Entry, ...] = ()

    # What ``explain`` says of the row (``described``): its tile, its tasks on several
    # workers, and whether its loops take block sizes fitted to k (``sizes_for_depth``).
    tile: Callable[[Problem], str] = described.routed_tile
    tasks: Callable[[Problem, int], str] = described.strip_tasks
    depth_fitted: bool = False

    def run(self, p: Problem) -> None:
        threaded = self.parallel is not None and p.workers > 1 and self.worth_threads(p)
        if self.chains_in_c and p.beta != 0 and not (p.alpha == 1 and p.beta == 1) and p.k > p.prep.sizes.kc:
            needed = (self.parallel_entries if threaded else self.serial_entries) + (entries.SCALE_ADD,)
            if not warmup.ran_first(needed, p):
                in_two_steps(self, p)
            return
        if threaded and runners.in_parallel(self._run_parallel, p):
            return
        if not (self.serial_entries and warmup.ran_first(self.serial_entries, p)):
            self.serial(p)

    def _run_parallel(self, p: Problem) -> None:
        if not (self.parallel_entries and warmup.ran_first(self.parallel_entries, p)):
            self.parallel(p)


def in_two_steps(strategy: Strategy, p: Problem) -> None:
    """C = alpha*s + beta*C0 where C cannot hold the chains s between KC blocks (C0 is
    needed at the end): s into a buffer first, then C = fma(alpha, s, beta*C0)."""
    sums = np.empty(p.c.shape, p.dtype)
    q = Problem(1.0, p.a, p.b, 0.0, sums, p.workers, p.offsets)
    q.orient(False, False)  # p's orientation, already applied: nothing to turn again
    strategy.run(q)
    runners.scale_add(p.prep, p.alpha, sums, p.beta, p.c)


class Table(tuple):
    """A strategy table: its rows in order, and how its pre-pass orients a problem before
    any row is tested (``Problem.orientation``): ``swaps`` (C^T = B^T A^T where the kernels
    read that better) and ``turns`` (``x @ W.T`` as C^T = W x^T)."""

    def __new__(cls, rows: tuple[Strategy, ...], *, swaps: bool, turns: bool) -> Table:
        table = super().__new__(cls, rows)
        table.swaps, table.turns = swaps, turns
        return table


def choose(table: Table, p: Problem) -> Strategy:
    """The first row of ``table`` that fits ``p``, oriented first by the table's pre-pass
    (unless it already is): the rows' fit rules read the problem and change nothing."""
    if not p.oriented:
        p.orient(*(p.orientation(table.turns) if table.swaps else (False, False)))
    for strategy in table:
        if strategy.fits(p):
            return strategy
    raise AssertionError("the last row of a strategy table fits every problem")


# --- the rows' runners: each reads the placed problem ---------------------------------------


def _unpacked_serial(p: Problem) -> None:
    runners.run_unpacked(p.prep, p.alpha, p.beta, p.a, p.b, p.c)


def _unpacked_parallel(p: Problem) -> None:
    prep = p.prep
    runners.run_unpacked_parallel(prep, prep.kernel, p.dtype, p.alpha, p.beta, p.a, p.b, p.c, p.workers)


def _blocked_serial(p: Problem) -> None:
    runners.run_blocked(p.prep, p.alpha, p.beta, p.a, p.b, p.c)


def _blocked_parallel(p: Problem) -> None:
    prep = p.prep
    runners.run_parallel(prep, prep.kernel, p.dtype, p.alpha, p.beta, p.a, p.b, p.c, p.workers)


def _unpacked_worth_threads(p: Problem) -> bool:
    return rules.worth_threads(p.prep.config, p.m, p.n, p.k, True, p.dtype)


def _tiles_worth_threads(p: Problem) -> bool:
    """The direct tiles' rule: B's rows are contiguous, so one row is the single-row stream."""
    return rules.worth_threads(p.prep.config, p.m, p.n, p.k, True, p.dtype, row_stream=p.m == 1)


def _blocked_worth_threads(p: Problem) -> bool:
    return rules.worth_threads(p.prep.config, p.m, p.n, p.k, False, p.dtype)


def _few_prepacked(p: Problem) -> bool:
    return p.m < p.prep.kernel.mr()


def _stack_sizes(p: Problem):
    return p.prep.chain_sizes if p.unpacked else p.prep.sizes_for_depth(p.k)


def _stack_worth_threads(p: Problem) -> bool:
    return rules.stack_worth_threads(p.prep.config, len(p.offsets[2]), p.m, p.n, p.k, p.dtype)


def _stack_serial(p: Problem) -> None:
    runners.run_batch_serial(p.prep, p.a, p.b, p.c, p.offsets, p.unpacked, _stack_sizes(p))


def _stack_each_parallel(p: Problem) -> None:
    prep = p.prep
    runners.run_batch_each_parallel(
        prep, prep.kernel, p.dtype, p.a, p.b, p.c, p.offsets, p.unpacked, _stack_sizes(p), p.workers
    )


def _stack_tasks(p: Problem) -> None:
    prep = p.prep
    runners.run_batch_tasks(
        prep,
        prep.kernel,
        p.dtype,
        p.a,
        p.b,
        p.c,
        p.offsets,
        p.unpacked,
        _stack_sizes(p),
        min(p.workers, len(p.offsets[2])),
    )


# --- the tables ---------------------------------------------------------------------------------

_UNPACKED_ENTRIES = {"serial_entries": (entries.UNPACKED,), "parallel_entries": (entries.UNPACKED_PARALLEL,)}
# The blocked loops: the main tile on packed panels, row-block tasks, blocks fitted to k.
_BLOCKED_ROW = {
    "serial_entries": (entries.BLOCKED,),
    "parallel_entries": (entries.PARALLEL,),
    "tile": described.main_tile,
    "tasks": described.row_block_tasks,
    "depth_fitted": True,
}
# A stack's serial entry (the small way in, SMALL_STACK, fetches itself: ``prepared.FirstSmall``).
_STACK = (entries.BATCHED,)

EMPTY = Strategy(
    "empty",
    "C has no elements (m == 0 or n == 0)",
    Problem.empty,
    None,
    lambda p: None,
    tile=described.no_tile,
)
SCALE_ONLY = Strategy(
    "scale only",
    "nothing to multiply (k == 0 or alpha == 0): C = beta*C",
    Problem.scale_only,
    None,
    lambda p: runners.scale(p.c, p.beta),
    tile=described.no_tile,
)

# The compiled small ways in compute these before any table is looked up (``runners.run_small``,
# ``run_small_stack``), by the same rule; these rows place the same products when they reach
# the table (an ``out=`` that overlaps an operand, a stack longer than the way in's buffer).
SMALL_PRODUCT = Strategy(
    "small product",
    "up to unpacked_max_volume multiply-adds, under parallel_min_stream elements of B streamed, read "
    "along B's rows or a vector (unpacked.small_product): the direct tiles, on the calling thread, "
    "as the compiled small way in computes it before any table lookup",
    Problem.small,
    None,
    _unpacked_serial,
    serial_entries=(entries.UNPACKED,),
)
SMALL_STACK = Strategy(
    "small stack",
    "small products (unpacked.small_product), not worth the threads: one after the other on the "
    "direct tiles, as the compiled small way in (batched.stack_call) computes them",
    lambda p: p.small() and not (p.workers > 1 and _stack_worth_threads(p)),
    None,
    _stack_serial,
    serial_entries=_STACK,
    tasks=described.each_product_tasks,
)


PRODUCT = Table(
    (
        EMPTY,
        SCALE_ONLY,
        SMALL_PRODUCT,
        Strategy(
            "continued chain, direct tiles",
            "gemm with alpha == beta == 1 up to unpacked_max_volume multiply-adds, B's rows contiguous: "
            "the direct tiles start each element's chain from C, on one thread (rules.chain_on_tiles)",
            lambda p: p.continues_chain() and rules.chain_on_tiles(p.prep.config, p.m, p.n, p.k, p.b),
            None,
            _unpacked_serial,
            serial_entries=(entries.UNPACKED,),
            tile=described.chain_tiles,
        ),
        Strategy(
            "continued chain",
            "gemm with alpha == beta == 1: each element's chain goes on from C "
            "(the blocked loops, which read C into the tiles)",
            Problem.continues_chain,
            _blocked_worth_threads,
            _blocked_serial,
            _blocked_parallel,
            **_BLOCKED_ROW,
        ),
        Strategy(
            "turned few rows",
            "x @ W.T with m in the kernel's turned rows (rules.turned_few_rows) and W taller than transposed_few_rows_max: "
            "C^T = W x^T, W's rows read in place",
            lambda p: p.turned,
            _unpacked_worth_threads,
            _unpacked_serial,
            _unpacked_parallel,
            **_UNPACKED_ENTRIES,
        ),
        Strategy(
            "row dots",
            "a matrix times a vector along contiguous rows (W @ x, or x @ W.T with one row)",
            lambda p: p.unpacked and p.form in (DOTS_OF_A_ROWS, DOTS_OF_B_COLUMNS),
            _unpacked_worth_threads,
            _unpacked_serial,
            _unpacked_parallel,
            tile=described.row_dots_tile,
            **_UNPACKED_ENTRIES,
        ),
        Strategy(
            "transposing stream",
            "few rows (m <= transposed_few_rows_max) times a B with contiguous columns: B packed a strip at a time",
            lambda p: p.unpacked and p.form == TRANSPOSING_STREAM,
            _unpacked_worth_threads,
            _unpacked_serial,
            _unpacked_parallel,
            tile=described.few_rows_tile,
            **_UNPACKED_ENTRIES,
        ),
        Strategy(
            "direct tiles",
            "B's rows contiguous and packing costs more than it saves: up to unpacked_max_volume "
            "multiply-adds, few rows (m <= few_rows_max), n within the narrow tile, or on one thread up to "
            "the kernel's one-thread volume (rules.use_unpacked)",
            lambda p: p.unpacked,
            _tiles_worth_threads,
            _unpacked_serial,
            _unpacked_parallel,
            **_UNPACKED_ENTRIES,
        ),
        Strategy(
            "blocked",
            "every other product: the five loops, A and B packed",
            lambda p: True,
            _blocked_worth_threads,
            _blocked_serial,
            _blocked_parallel,
            chains_in_c=True,
            **_BLOCKED_ROW,
        ),
    ),
    swaps=True,
    turns=True,
)

PREPACKED = Table(
    (
        EMPTY,
        SCALE_ONLY,
        Strategy(
            "prepacked few rows",
            "fewer rows than the main tile's MR: the packed panels stream past the rows",
            _few_prepacked,
            lambda p: p.k * p.n >= p.prep.config.parallel_min_packed_rows.of(p.dtype.itemsize),
            lambda p: runners.run_prepacked(p.prep, p.alpha, p.a, p.b, p.beta, p.c, True),
            lambda p: runners.run_prepacked_parallel(
                p.prep, p.prep.kernel, p.dtype, p.alpha, p.a, p.b, p.beta, p.c, p.workers, True
            ),
            chains_in_c=True,
            serial_entries=(entries.PREPACKED_ROWS,),
            parallel_entries=(entries.PREPACKED_ROWS_PARALLEL,),
            tile=described.panel_rows_tile,
        ),
        Strategy(
            "prepacked",
            "the blocked loops with B packed ahead",
            lambda p: True,
            lambda p: p.m * p.n * p.k >= p.prep.config.parallel_min_volume.of(p.dtype.itemsize),
            lambda p: runners.run_prepacked(p.prep, p.alpha, p.a, p.b, p.beta, p.c, False),
            lambda p: runners.run_prepacked_parallel(
                p.prep, p.prep.kernel, p.dtype, p.alpha, p.a, p.b, p.beta, p.c, p.workers, False
            ),
            chains_in_c=True,
            serial_entries=(entries.PREPACKED,),
            parallel_entries=(entries.PREPACKED_PARALLEL,),
            tile=described.main_tile,
            depth_fitted=True,
        ),
    ),
    swaps=False,
    turns=False,
)

# A stack of one: ``explain`` describes the lone product's row of PRODUCT instead.
LONE_PRODUCT = Strategy(
    "lone product",
    "a stack of one: the lone product's row of PRODUCT",
    lambda p: len(p.offsets[2]) == 1 and p.offsets[0][0] == p.offsets[1][0] == p.offsets[2][0] == 0,
    None,
    lambda p: compute(1.0, p.a, p.b, 0.0, p.c),
)

STACK = Table(
    (
        LONE_PRODUCT,
        SMALL_STACK,
        Strategy(
            "stack, each product on all workers",
            "products worth threads alone but too few to share out evenly (rules.each_on_all_workers)",
            lambda p: (
                p.workers > 1
                and _stack_worth_threads(p)
                and rules.each_on_all_workers(
                    p.prep.config, len(p.offsets[2]), p.m, p.n, p.k, p.unpacked, p.workers, p.dtype
                )
            ),
            _stack_worth_threads,
            _stack_serial,
            _stack_each_parallel,
            serial_entries=_STACK,
            parallel_entries=(entries.BATCH_EACH_PARALLEL,),
            tasks=described.each_product_tasks,
        ),
        Strategy(
            "stack tasks",
            "from parallel_min_stack_volume multiply-adds in all (stack_product_overhead more a product): whole products shared out",
            lambda p: p.workers > 1 and _stack_worth_threads(p),
            _stack_worth_threads,
            _stack_serial,
            _stack_tasks,
            serial_entries=_STACK,
            parallel_entries=(entries.BATCH_TASKS,),
            tasks=described.whole_product_tasks,
        ),
        Strategy(
            "stack serial",
            "every other stack: the products one after the other",
            lambda p: True,
            None,
            _stack_serial,
            serial_entries=_STACK,
            tasks=described.each_product_tasks,
        ),
    ),
    swaps=True,
    turns=False,
)


class Placed(NamedTuple):
    """Where ``compute`` placed a product: its row and orientation; whether the row's serial
    runner is the prepared state's unpacked builtin and nothing else (``builtin_row``); and
    whether that builtin is loaded, so that ``compute`` calls it alone (``on_builtin``)."""

    strategy: Strategy
    swapped: bool
    turned: bool
    builtin_row: bool
    on_builtin: bool = False


def _builtin_row(strategy: Strategy, p: Problem) -> bool:
    """Whether the placed ``p`` runs as the unpacked builtin on the calling thread: an unpacked
    row's serial runner, not worth the threads, not turned (which copies W).  Each holds for
    every product of the placement's key."""
    if strategy.serial is not _unpacked_serial or p.turned:
        return False
    return strategy.parallel is None or p.workers == 1 or not strategy.worth_threads(p)


# PRODUCT's choices, by everything its rules read: dtype, shapes, strides, workers, whether
# alpha is 0 or alpha and beta 1, and in_force.generation (kernel, exact mode, block sizes and
# configuration in force).
# Looking the table up again costs ~2 us of a ~50 us product; the key, ~0.4 us.  A product
# placed on the builtin alone skips the Problem and the row's runner too (~2 us).
_placed: dict[tuple, Placed] = {}
PLACED_KEPT = 512


def compute(
    alpha: float, a: np.ndarray, b: Any, beta: float, c: np.ndarray, offsets: tuple | None = None
) -> None:
    """The one way into the tables: C = alpha*A.B + beta*C in place, A (m, k) and C (m, n)
    matrices of one dtype, on the table for what B is:

    - a (k, n) matrix: PRODUCT, its placement remembered (``Placed``);
    - a ``pack``ed B (``api.packed.PackedMatrix``, checked usable; not an ndarray): PREPACKED;
    - with ``offsets``, three int64 arrays, each product's A, B and C in elements from
      ``a``, ``b`` and ``c``: the first matrices of a stack of products of their shapes and
      strides, m, n and k at least 1, alpha 1 and beta 0 (STACK).
    """
    workers = threads.workers()
    if offsets is not None:
        p = Problem(alpha, a, b, beta, c, workers, offsets)
        choose(STACK, p).run(p)
        return
    if not isinstance(b, np.ndarray):
        p = Problem(alpha, a, b, beta, c, workers)
        choose(PREPACKED, p).run(p)
        return
    key = (
        c.dtype.char,
        a.shape,
        a.strides,
        b.shape,
        b.strides,
        c.strides,
        workers,
        alpha == 0,
        alpha == 1 and beta == 1,
        in_force.generation,
    )
    placed = _placed.get(key)
    if placed is not None and placed.on_builtin:
        prep = prepared.current_prepared(c.dtype)
        if placed.swapped:
            a, b, c = b.T, a.T, c.T
        prep.unpacked(a, b, c, float(prep.scalar(alpha)), float(prep.scalar(beta)))
        return
    p = Problem(alpha, a, b, beta, c, workers)
    if placed is None:
        strategy = choose(PRODUCT, p)
        if len(_placed) >= PLACED_KEPT:
            _placed.clear()
        placed = _placed[key] = Placed(strategy, p.swapped, p.turned, _builtin_row(strategy, p))
    else:
        strategy = placed.strategy
        p.orient(placed.swapped, placed.turned)
    strategy.run(p)
    # Its entry loaded (by this product, or once the first-use tier is done with it).
    if placed.builtin_row and all(entry.ready(p.prep.kernel, p.dtype) for entry in strategy.serial_entries):
        _placed[key] = placed._replace(on_builtin=True)
