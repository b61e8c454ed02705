"""Block sizes MC, NC, KC per kernel and dtype: the cache model, then measurement.

The analytic model is Low, Igual, Smith and Quintana-Orti, "Analytical modeling
is enough for high-performance BLIS" (ACM TOMS 43(2), 2016): the KC x NR panel
of B shares the L1 with the MR x KC panel of A, the MC x KC block of A fills
what the L2 has left beside a B panel, and the KC x NC slice of B fills the L3.

Measurement corrects KC (the kernel's configuration, ``KernelConfig.kc``): the
model assumes the L1 alone feeds the kernel, but the L2 can deliver B panels fast
enough that a longer KC (fewer passes over C) wins.  MC and NC are then recomputed
from the caches for that KC, so the corrected sizes still adapt to the host's
caches.  Where a vendor's caches measured better with a smaller A block or B slice,
MC and NC are capped too (``KernelConfig.vendor_corrections``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..kernels import Kernel, KernelConfig
from ..machine import cpu
from ..simd.records import Blocks


@dataclass(frozen=True)
class BlockSizes:
    """MC rows of A per L2 block, NC columns of B per L3 slice, KC common-dimension slice."""

    mc: int
    nc: int
    kc: int
    # The same sizes as the record compiled entries take.
    blocks: Blocks = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", Blocks(self.mc, self.nc, self.kc))

    def check(self, mr: int, nr: int) -> None:
        """Raise ValueError unless the sizes are positive and MR | MC, NR | NC."""
        if min(self.mc, self.nc, self.kc) < 1:
            raise ValueError(f"block sizes must be positive, got {self}")
        if self.mc % mr or self.nc % nr:
            raise ValueError(f"MC must be a multiple of MR={mr} and NC of NR={nr}, got {self}")

    def for_depth(self, k: int, mr: int) -> BlockSizes:
        """The sizes for a product of depth ``k``: below KC, the A block keeps its bytes with more rows.

        MC is sized for an MC x KC block of A in the L2; with a shallower product
        that block would hold a fraction of its bytes, and every B panel would be
        fetched from the L3 once for each of many short row blocks.  KC becomes the
        depth rounded up to 16 elements, so no sum changes (one KC block either
        way) and the packing buffers, sized from MC x KC, still hold the block.
        Measured (paired), one thread, ``[4096,k] @ [k,2048]``: k = 512 / 256 float32
        5 / 6 % faster, float64 5.5 / 6-13 %.
        """
        mc, kc = depth_blocks(self.mc, self.kc, k, mr)
        if kc == self.kc:
            return self
        return BlockSizes(mc=mc, nc=self.nc, kc=kc)

    def workspace_bytes(self, mr: int, nr: int, itemsize: int, threads: int = 1) -> int:
        """Packing buffers: one MC x KC block of A per thread, one KC x NC slice of B."""
        return itemsize * (threads * (self.mc * self.kc + mr * nr) + self.kc * self.nc)


def depth_blocks(mc: int, kc: int, k: int, mr: int) -> tuple[int, int]:
    """(MC, KC) for a product of depth ``k`` (``BlockSizes.for_depth``): KC the depth
    rounded up to 16 where that is shorter, MC grown to keep the A block's bytes.  Integer
    arithmetic only, so that compiled callers (``smallgemm.njit``) compile this same rule."""
    depth = min(kc, max(16, -(-k // 16) * 16))
    if depth == kc:
        return mc, kc
    return max(mc, mc * kc // depth // mr * mr), depth


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


def default(
    kernel: Kernel,
    dtype: np.dtype,
    caches=None,
    vendor: str | None = None,
    config: KernelConfig | None = None,
) -> BlockSizes:
    """Block sizes used when no tuned configuration applies: the configuration's KC (or
    the model's), cache-model MC/NC capped by the vendor's measured correction.
    ``vendor`` defaults to the host's, ``config`` to the kernel's."""
    config = config or kernel.config
    l1, l2, l3 = caches or cpu.caches()
    mr, nr, size = kernel.mr(), kernel.nr(dtype), np.dtype(dtype).itemsize
    kc = config.kc.of(size) if config.kc is not None else analytic_kc(mr, nr, size, l1)
    mc = analytic_mc(mr, nr, kc, size, l2)
    nc_max = config.nc_max
    correction = config.vendor_corrections.get(cpu.vendor() if vendor is None else vendor)
    if correction is not None:
        # Whole MR panels, rounded up: a 256-row batch stays one row block.
        mc = min(mc, _round_up(correction.l2_share_for_a * l2.size / (kc * size), mr))
        nc_max = min(nc_max, correction.nc_max)
    nc = min(analytic_nc(mr, nr, kc, mc, size, l3), _round_down(nc_max, nr))
    sizes = BlockSizes(mc=mc, nc=nc, kc=kc)
    sizes.check(mr, nr)
    return sizes


def shared_block_rows(config: KernelConfig, sizes: BlockSizes, dtype: np.dtype, caches=None) -> int:
    """Most rows of A packed as one block shared by all threads (``parallel.one_row_block``:
    A packed once, each worker packs the B panels it takes): ``shared_a_l2s`` of the L2."""
    l2 = (caches or cpu.caches())[1]
    return int(config.shared_a_l2s * l2.size) // (sizes.kc * np.dtype(dtype).itemsize)
