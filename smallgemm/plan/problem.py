"""``Problem``: one call's operands and what the fit rules derive from them, oriented
the way the kernels read them best; the strategy tables (``strategies``) test it.
"""

from __future__ import annotations

import numpy as np

from ..drivers.unpacked import column_swaps, small_product, unpacked_form
from . import prepared, rules


class Problem:
    """One call's operands and what the rules derive from them, each derived once, on
    demand (a product of ~50 us spends ~1 us here: no cached_property descriptors)."""

    __slots__ = (
        "_form",
        "_prep",
        "_small",
        "_unpacked",
        "a",
        "alpha",
        "b",
        "beta",
        "c",
        "dtype",
        "k",
        "m",
        "n",
        "offsets",
        "oriented",
        "swapped",
        "turned",
        "workers",
    )

    def __init__(self, alpha, a, b, beta, c, workers: int, offsets=None):
        self.alpha, self.beta, self.a, self.b, self.c = alpha, beta, a, b, c
        self.m, self.k = a.shape
        self.n = c.shape[1]
        self.workers = workers
        self.offsets = offsets  # a stack's (offsets_a, offsets_b, offsets_c), else None
        self.dtype = c.dtype
        self.swapped = self.turned = self.oriented = False
        self._prep = self._unpacked = self._form = self._small = None

    @property
    def prep(self):
        """This thread's prepared state for the dtype (``prepared.current_prepared``)."""
        prep = self._prep
        if prep is None:
            prep = self._prep = prepared.current_prepared(self.dtype)
        return prep

    @property
    def unpacked(self) -> bool:
        """Whether the unpacked driver computes it (``rules.use_unpacked``)."""
        unpacked = self._unpacked
        if unpacked is None:
            unpacked = self._unpacked = self.turned or self._use_unpacked()
        return unpacked

    def _use_unpacked(self) -> bool:
        prep, m, n, k = self.prep, self.m, self.n, self.k
        if self.offsets is None:
            one_thread = self.workers == 1 or not rules.worth_threads(prep.config, m, n, k, True, self.dtype)
        else:
            one_thread = self.workers == 1
        return rules.use_unpacked(
            prep.config,
            m,
            n,
            k,
            self.a,
            self.b,
            prep.narrow_cols,
            prep.sizes.kc,
            prep.one_thread_volume if one_thread else 0,
        )

    @property
    def form(self) -> int:
        """The unpacked driver's way for this layout (``unpacked.unpacked_form``)."""
        form = self._form
        if form is None:
            size = self.a.itemsize
            # Its Python source, run as Python: integer tests only, the compiled rule's answers
            # without a call into compiled code (0.09 us against 0.19 through its jitted copy).
            form = self._form = unpacked_form.py_func(
                self.m,
                self.n,
                self.a.strides[1] // size,
                self.b.strides[0] // size,
                self.b.strides[1] // size,
            )
        return form

    def empty(self) -> bool:
        """C has no elements (the tables' first row)."""
        return self.m == 0 or self.n == 0

    def scale_only(self) -> bool:
        """Nothing to multiply: C = beta*C."""
        return self.k == 0 or self.alpha == 0

    def continues_chain(self) -> bool:
        """gemm's continued chain: each element's chain goes on from C (alpha == beta == 1)."""
        return self.alpha == 1 and self.beta == 1

    def small(self) -> bool:
        """Whether the compiled small ways in compute it as given (``unpacked.small_product``,
        its source run as Python on the limits their contexts hold); a stack's products are
        never a continued chain."""
        small = self._small
        if small is None:
            small = self._small = self._small_product()
        return small

    def small_swaps(self) -> bool:
        """Whether the compiled small ways in read the product (or a stack's products) swapped,
        C^T = B^T A^T (``unpacked.column_swaps``: ``A.T @ x``)."""
        rs_a, cs_a = (stride // self.a.itemsize for stride in self.a.strides)
        return column_swaps.py_func(self.m, self.n, self.k, rs_a, cs_a)

    def _small_product(self) -> bool:
        prep, size = self.prep, self.a.itemsize
        a, b = (self.b.T, self.a.T) if self.small_swaps() else (self.a, self.b)
        return small_product.py_func(
            a.shape[0],
            b.shape[1],
            self.k,
            a.strides[1] // size,
            b.strides[0] // size,
            b.strides[1] // size,
            prep.small_limits,
            prep.narrow_cols,
            self.offsets is None and self.continues_chain(),
        )

    def orientation(self, turns: bool) -> tuple[bool, bool]:
        """How the table reads this problem, decided before any of its rows is tested, so that
        their fit rules only read it: (swapped, turned).  A small product is read as the
        compiled small ways in read it (``small``, ``small_swaps``).  Swapped: ``rules.swaps``.  Turned,
        with ``turns`` (one 2-D product): ``x @ W.T`` computed as C^T = W x^T where
        ``rules.turns_few_rows`` says so and there is a product to compute (C not empty,
        k and alpha not 0, not gemm's continued chain: nothing is copied for those)."""
        prep = self.prep
        if self.small():
            return self.small_swaps(), False
        if rules.swaps(prep.config, self.a, self.b, self.c, prep.narrow_cols):
            return True, False
        computes = not (self.empty() or self.scale_only() or self.continues_chain())
        return False, turns and computes and rules.turns_few_rows(
            prep.config, self.a, self.b, prep.turned_rows
        )

    def orient(self, swapped: bool, turned: bool) -> None:
        """Turn the problem as ``orientation`` decided (here, or for the same key earlier:
        ``strategies.compute``); m and n stay as given when turned, so that threads are chosen
        as for the few-rows stream of W."""
        self.oriented = True
        if swapped:
            self.a, self.b, self.c, self.swapped = self.b.T, self.a.T, self.c.T, True
            self.m, self.n = self.n, self.m
            if self.offsets is not None:
                offsets_a, offsets_b, offsets_c = self.offsets
                self.offsets = (offsets_b, offsets_a, offsets_c)
        elif turned:
            self.a, self.b, self.c, self.turned = self.b.T, np.ascontiguousarray(self.a.T), self.c.T, True
