"""Block sizes MC, NC, KC per kernel and dtype: the cache model, then measurement.

The analytic model is Low, Igual, Smith and Quintana-Orti, "Analytical modeling
is enough for high-performance BLIS" (ACM TOMS 43(2), 2016): the KC x NR panel
of B shares the L1 with the MR x KC panel of A, the MC x KC block of A fills
what the L2 has left beside a B panel, and the KC x NC slice of B fills the L3.

Measurement corrects KC (docs/design.md): the model assumes the L1 alone feeds
the kernel, but on Zen 4/5 the L2 delivers B panels fast enough that a longer KC
(fewer passes over C) wins.  MC and NC are then recomputed from the caches for
that KC, so the corrected sizes still adapt to the host's caches.  Where the
vendor's L2 measured better with a smaller A block, MC is capped too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import cpu
from .kernels import Kernel

# NC beyond this stops paying on any cache we know (a B slice of 4096 columns is
# already megabytes) and only grows the workspace.
NC_MAX = 4096
# KC per (kernel, dtype) chosen by the sweeps recorded in docs/design.md.  The
# portable kernel is flat within 2 % over KC = 256..1024: it keeps the model's KC.
MEASURED_KC = {
    ("avx512", "float32"): 1024,
    ("avx512", "float64"): 512,
    ("avx2", "float32"): 512,
    ("avx2", "float64"): 512,
}


# The share of the L2 that the MC x KC block of A may take, by CPU vendor,
# where measurement disagrees with the model (which gives it every way a B
# panel leaves free).  With the measured KC the B panels do not fit the L1 and
# stream through the L2 beside the A block.  Intel host (L2 2 MiB, 16 ways),
# one thread, ratio to NumPy, model MC 448 -> half the L2 (MC 266): float64
# 1024^3 0.85-0.89 -> 0.96, 4096x4096x1024 0.78 -> 0.82-0.84; float32 1024^3
# 0.98 -> 1.00-1.03, 4096x4096x1024 0.90 -> 0.92.  Zen 5 (1 MiB L2) measured
# well with the model's MC (0.8-0.9 of the L2).
L2_SHARE_FOR_A = {"GenuineIntel": 0.5}


@dataclass(frozen=True)
class BlockSizes:
    """MC rows of A per L2 block, NC columns of B per L3 slice, KC common-dimension slice."""

    mc: int
    nc: int
    kc: int

    def check(self, mr: int, nr: int) -> None:
        """Raise ValueError unless the sizes are positive and MR | MC, NR | NC."""
        if min(self.mc, self.nc, self.kc) < 1:
            raise ValueError(f"block sizes must be positive, got {self}")
        if self.mc % mr or self.nc % nr:
            raise ValueError(f"MC must be a multiple of MR={mr} and NC of NR={nr}, got {self}")

    def workspace_bytes(self, mr: int, nr: int, itemsize: int, threads: int = 1) -> int:
        """Packing buffers: one MC x KC block of A per thread, one KC x NC slice of B."""
        return itemsize * (threads * (self.mc * self.kc + mr * nr) + self.kc * self.nc)


def _round_down(value: float, multiple: int) -> int:
    return max(multiple, int(value) // multiple * multiple)


def _round_up(value: float, multiple: int) -> int:
    return max(multiple, -(-int(value) // multiple) * multiple)


def analytic_kc(mr: int, nr: int, itemsize: int, l1: cpu.CacheLevel) -> int:
    """KC such that an MR x KC panel of A and a KC x NR panel of B share the L1 (Low et al.)."""
    ways_a = max(1, (l1.ways - 1) // (1 + nr / mr))
    return max(1, int(ways_a * l1.sets * l1.line // (mr * itemsize)))


def analytic_mc(mr: int, nr: int, kc: int, itemsize: int, l2: cpu.CacheLevel) -> int:
    """MC such that the MC x KC block of A fills the L2 ways a B panel leaves free."""
    way = l2.sets * l2.line
    ways_b = -(-kc * nr * itemsize // way)
    ways_a = max(1, l2.ways - 1 - ways_b)
    return _round_down(ways_a * way / (kc * itemsize), mr)


def analytic_nc(mr: int, nr: int, kc: int, mc: int, itemsize: int, l3: cpu.CacheLevel) -> int:
    """NC such that the KC x NC slice of B fills the L3 ways an A block leaves free."""
    way = l3.sets * l3.line
    ways_a = -(-mc * kc * itemsize // way)
    ways_b = max(1, l3.ways - 1 - ways_a)
    return _round_down(ways_b * way / (kc * itemsize), nr)


def analytic(kernel: Kernel, dtype: np.dtype, caches=None) -> BlockSizes:
    """The pure cache-model block sizes (no cap, no measurement)."""
    l1, l2, l3 = caches or cpu.caches()
    mr, nr, size = kernel.mr(), kernel.nr(dtype), np.dtype(dtype).itemsize
    kc = analytic_kc(mr, nr, size, l1)
    mc = analytic_mc(mr, nr, kc, size, l2)
    return BlockSizes(mc=mc, nc=analytic_nc(mr, nr, kc, mc, size, l3), kc=kc)


def default(kernel: Kernel, dtype: np.dtype, caches=None, vendor: str | None = None) -> BlockSizes:
    """Block sizes used when no tuned configuration applies: measured KC, cache-model MC/NC
    (MC capped by the vendor's measured L2 share; ``vendor`` defaults to the host's)."""
    l1, l2, l3 = caches or cpu.caches()
    mr, nr, size = kernel.mr(), kernel.nr(dtype), np.dtype(dtype).itemsize
    kc = MEASURED_KC.get((kernel.name, np.dtype(dtype).name)) or analytic_kc(mr, nr, size, l1)
    mc = analytic_mc(mr, nr, kc, size, l2)
    share = L2_SHARE_FOR_A.get(cpu.vendor() if vendor is None else vendor)
    if share is not None:
        # Whole MR panels, rounded up: a 256-row batch stays one row block.
        mc = min(mc, _round_up(share * l2.size / (kc * size), mr))
    nc = min(analytic_nc(mr, nr, kc, mc, size, l3), _round_down(NC_MAX, nr))
    sizes = BlockSizes(mc=mc, nc=nc, kc=kc)
    sizes.check(mr, nr)
    return sizes
