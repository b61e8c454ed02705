"""``Problem``: one call's operands and what the fit rules derive from them, oriented
the way the kernels read them best; the strategy tables (``strategies``) test it.
"""

from __future__ import annotations

import numpy as np

from ..drivers.unpacked import unpacked_form
from . import prepared, rules


class Problem:
    """One call's operands and what the rules derive from them, each derived once, on
    demand (a product of ~50 us spends ~1 us here: no cached_property descriptors)."""

    __slots__ = (
        "_form",
        "_oriented",
        "_prep",
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
        self.swapped = self.turned = self._oriented = False
        self._prep = self._unpacked = self._form = None

    @property
    def prep(self):
        """This thread's prepared state for the dtype (``prepared.current_prepared``)."""
        prep = self._prep
        if prep is None:
            prep = self._prep = prepared.current_prepared(self.dtype)
        return prep

    def orient(self) -> None:
        """Turn the problem the way the kernels read it best (``rules.oriented``), once."""
        if self._oriented:
            return
        self._oriented = True
        self.a, self.b, self.c, self.swapped = rules.oriented(
            self.prep.config, self.a, self.b, self.c, self.prep.narrow_cols
        )
        if self.swapped:
            self.m, self.n = self.n, self.m
            if self.offsets is not None:
                offsets_a, offsets_b, offsets_c = self.offsets
                self.offsets = (offsets_b, offsets_a, offsets_c)

    @property
    def unpacked(self) -> bool:
        """Whether the unpacked driver computes it (``rules.use_unpacked``)."""
        unpacked = self._unpacked
        if unpacked is None:
            unpacked = self._unpacked = self.turned or self._use_unpacked()
        return unpacked

    def _use_unpacked(self) -> bool:
        self.orient()
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
            form = self._form = unpacked_form(
                self.m,
                self.n,
                self.a.strides[1] // size,
                self.b.strides[0] // size,
                self.b.strides[1] // size,
            )
        return form

    def replay(self, swapped: bool, turned: bool) -> None:
        """Turn the problem as ``orient`` and ``turn_few_rows`` did for the same key (``run``)."""
        self._oriented = True
        if swapped:
            self.a, self.b, self.c, self.swapped = self.b.T, self.a.T, self.c.T, True
            self.m, self.n = self.n, self.m
        elif turned:
            self.a, self.b, self.c, self.turned = self.b.T, np.ascontiguousarray(self.a.T), self.c.T, True

    def turn_few_rows(self) -> bool:
        """Turn ``x @ W.T`` over (C^T = W x^T) where ``rules.turns_few_rows`` says so; m and n
        stay as given, so that threads are chosen as for the few-rows stream of W."""
        self.orient()
        if self.turned:
            return True
        if self.swapped or not rules.turns_few_rows(self.prep.config, self.a, self.b, self.prep.turned_rows):
            return False
        self.a, self.b, self.c = self.b.T, np.ascontiguousarray(self.a.T), self.c.T
        self.turned = True
        return True
