"""The AVX2+FMA kernel: 6x16 float32, 6x8 float64, and its tuning."""

from ..simd import DotPairs, StreamSettings, TileShape
from .config import NEVER, BySize, KernelConfig
from .kernel import Kernel

# The few-rows stream on the few-rows tile (strips of B one line wide), one thread, on an
# AMD Zen 3 (AVX2) unless a figure names an Intel Xeon (the kernel forced there):
FEW_TILE_STREAM = StreamSettings(
    # Rows of B a group: 8 KiB strips, 128 rows of its one-line strips, beat 32 rows (float32
    # [16,512] @ [512,2048]: 1.17x as fast; 64 rows 1.11x).
    strip_bytes=8192,
    # The first row tile keeps each strip of B in the L1 panel for the others from 2 tiles a
    # sweep, the later tiles sharing out the requests for the next strip (Intel Xeon, us, kept /
    # not kept): float32 [16,512] @ [512,2048] 530-577 / 747-800, [32,512] 941-992 / 1202-1256,
    # float64 [16,512] 1077-1111 / 1513-1691.  With 2 tiles (m = 5 to 8) it depends on B: float32
    # [8,512] @ [512,2048] (4 MiB) 551-579 / 509-511, float64 1101-1115 / 988-1013, but [8,1024]
    # @ [1024,8192] (32 MiB) 4410-4452 / 5077-5152.
    keep_from_tiles=2,
    # A sweep of one row tile requests the strip two strips ahead while it computes: no later
    # tile would, and the prefetchers do not follow rows a stride apart (float32 [4,512] @
    # [512,8192]: 1238 us two strips ahead, 1368 one ahead, 1577 without).
    fetch_distance=2,
    fetch_min_bytes=0,
    # Its strips are one line wide, so a strip 16 bytes into a line (NumPy's large arrays)
    # spans two: the columns before the first line boundary are a strip of their own where
    # B's rows lie at least 2 KiB apart (rows that close share no L1 sets, and the lead strip
    # costs a whole pass of the row tiles).  B 16 bytes into a line, with / without the lead
    # strip: float32 [4,512] @ [512,2048], 8 KiB rows, 207 / 364 us, but [8,128] @ [128,128],
    # 512-byte rows, 6.44 / 5.62.
    lead_min_row_bytes=2048,
    # No requests for a transposed B's next strip: its panel's runs of each W row are 2 KiB,
    # and the requests lost (Intel Xeon, float32, us, without / with): [12,512] @ W.T, W
    # [2048,512], 452-494 / 542-569; [12,4096] @ W.T, W [4096,4096], 8862-9201 / 10073-10226.
    transposed_fetch_min_bytes=0,
    transposed_fetch_max_run=0,
)

KERNEL = Kernel(
    "avx2",
    # 12 of the 16 ymm registers hold the tile; the 14x32 tile split into ymm halves
    # spills (92 GFLOP/s measured), so AVX2 gets its own shape.  A last row panel of at most 4
    # rows takes a 4-row tile (one thread, forced on an Intel Xeon, five processes each, with /
    # without: float32 256^3 371-395 / 395-420 us, 508x256x256 739-780 / 757-808; float64 256^3
    # 763-807 / 786-854).
    shape=TileShape(rows=6, vectors=2, bits=256, fused=True, short_rows=4),
    # The few-rows stream keeps the few-rows tile up to 8 rows: the narrow tile holding
    # 5 to 8 rows whole took 1.25-1.35x as long (one broadcast per FMA: bound by loads;
    # float32, one thread, forced on a Zen 4).
    narrow=TileShape(rows=8, vectors=1, bits=256, fused=True),
    # The few-rows tile (and the narrow one) up to 32 rows of C: against the main tile, one
    # thread, forced on a Zen 4, float32 [m,512] @ [512,2048] m = 8 to 32 1.48-1.92x as
    # fast (float64 1.70-1.81x); small products within 0.90-1.23x ([16,64] @ [64,256]
    # float32 0.90x, float64 [8,64] @ [64,256] 1.23x).
    # A few rows times a B under 32 KiB take the main tile unless the few-rows tile saves a
    # quarter of the FMAs: from the L1 the stream costs more than the padding rows it saves
    # (6 x 16 main and 4 x 16 few tiles, one thread: the main tile takes 0.6 of the stream's
    # time on float32 16x32x16, 1.1 on float64 16x64x64, 32 KiB of B; forced on an Intel Xeon,
    # 64, 128 or 512 KiB instead alike, 32x32x128 to 24x256x256).
    few=TileShape(
        rows=4, vectors=2, bits=256, fused=True, up_to=32, min_b_bytes=32 << 10, stream=FEW_TILE_STREAM
    ),
    # No requests ahead in the single-row stream: with them, float32 [1,4096] @
    # [4096,4096] took 5.1-5.5 ms against 3.3-3.6.  Row dots in pairs of row blocks
    # (two FMA chains side by side): an 8 x 8 float32 block alone is a chain of 8
    # dependent FMAs per 64 multiply-adds, the bound of the loop; W @ x, one thread,
    # float32 W [2048,512]: 165 µs in pairs against 202.  Pairs only where their 16 rows
    # share no L1 set more than 8 at a time: float32 rows 4 KiB apart put all 16 in one set
    # and the pair ran 1.3-1.4x slower than one block (W [2048,2048] 1354 against 962 µs);
    # 2 KiB apart (8 a set) it gained.  And where a pair reads at most 8 rows at once or the
    # matrix is at most 16 MiB (the L3 keeps it): from memory, 16 float32 rows at once lost to
    # 8 (W [4000,4000] 6.1 against 5.0 ms) where 8 float64 rows gained.  No register strips (``strips``):
    # forced on an AVX-512 host they would have 32 registers where AVX2 has 16, so they
    # wait for a measurement on AVX2 hardware.  The single-row stream adds 8 rows of B at a
    # time into its row buffer (``wide_groups``): with B in the L2, 1.05-1.15x as fast as 4 rows
    # (forced on an Intel Xeon, one thread, us, 8 / 4 rows: float32 [1,256] @ [256,1024] 13.7-15.7
    # / 15.7-18.4, [1,512] @ [512,512] 12.5-14.0 / 14.4-18.2, float64 [1,256] @ [256,512]
    # 13.1-13.8 / 14.7-16.9); from 4 MiB of B alike (float32 [1,512] @ [512,2048] 169-176 /
    # 164-172, [1,4096] @ [4096,4096] 2559-2575 / 2508-2644).
    gemv=TileShape(
        rows=1,
        vectors=8,
        bits=256,
        fused=True,
        dot_pairs=DotPairs(max_rows_per_set=8, max_streams=8, max_bytes=16 << 20),
        wide_groups=True,
    ),
    resident=TileShape(rows=4, vectors=1, bits=256, fused=True, depth=8),
    requires=("avx2", "fma"),
    description="AVX2+FMA: 6x16 float32, 6x8 float64",
    config=KernelConfig(
        # Measured beside the model's KC: 512 for both dtypes.
        kc=BySize(512, 512),
        # Packing beats the direct tiles from 128^3 on one thread.
        one_thread_unpacked_volume=BySize(0, 0),
        # Forced on a Zen 4 core, one thread, N^3, the blocked loops' time over the direct
        # tiles': float32 112 1.16, 128 1.07; float64 112 1.05, 128 0.96.
        unpacked_max_volume=BySize(120**3, 112**3),
        # One thread, W [2048,512]: float32 m = 8 252 µs turned over against 354
        # streamed; float64 m = 2 346 against 500, m = 24 1291 against 1566.
        turned_few_rows=True,
        # Forced on a Zen 4 core (not measured on an AVX2-only CPU), two threads against one:
        # float32 even at 200 products of 16^3 (1.02x), 2000 of 8^3 (1.07x), 4000 of 4^3
        # (1.05x), short at 40 of 32^3 (0.83x); float64 even only from 400 of 16^3 (1.03x),
        # 2000 of 8^3 (1.11x), 40 of 32^3 0.94x.
        parallel_min_stack_volume=BySize(1_500_000, 1_600_000),
        stack_product_overhead=BySize(150, 100),
        # Forced on a Zen 4 core, two threads against one, [1,512] @ [512,n]: float32 n = 1024
        # 0.91-0.95x, 2048 1.30x; float64 n = 512 1.02x, 768 1.12x, 1024 1.09-1.19x.
        parallel_min_row_stream=BySize(1 << 20, 1 << 19),
        # Forced on a Zen 4 core, two threads against one, row dots (W @ x, [1,k] @ W.T),
        # [4,512] @ B and [4,512] @ W.T: float32 at 2^18 elements streamed 0.87-1.33x (W @ x
        # the 0.87), at 2^19 1.31-2.31x; float64 at 2^17 0.95-1.20x, at 2^18 1.21-1.39x.
        parallel_min_stream=BySize(1 << 19, 1 << 18),
        # [1|4,512] @ pack([512,n]), forced on a Zen 4 core: float32 n = 256 0.76-1.00x,
        # 512 1.14-1.22x; float64 n = 256 1.26-1.61x.
        parallel_min_packed_rows=BySize(1 << 18, 1 << 17),
        # Forced on a Zen 4 core, one thread, unpacked against blocked: [m,512] @ [512,2048]
        # float32 m = 24 1.13x, 32 1.14x; float64 1.07x, 1.09x.  Times W.T (W [2048,512]): the
        # turned rows win at 16 (float32 1.04x, float64 1.17x), the transposing stream loses
        # from 20 (float32 0.88-0.97x, float64 0.88-0.90x).
        few_rows_max=32,
        transposed_few_rows_max=16,
        # Not measured on this kernel: a B slice of 4096 columns is megabytes on any CPU.
        nc_max=4096,
        # Not measured on this kernel: the cache model's MC and NC on every vendor.
        vendor_corrections={},
        # Not measured on this kernel: the AVX-512 kernel's value.
        shared_a_l2s=1.5,
        # Forced on a Zen 4 core, one thread, turned over against the narrow tile: float32
        # n = 2 and 4 from 32 columns of A 1.11-1.33x (16: 1.00-1.07x, 8: 0.70-0.74x), [256,64]
        # 1.07x; float64 n = 2 lost at every size (0.57-0.94x, up to [2048,256]): never.  Against
        # the small way in (forced on an Intel Xeon, float32, one thread): as given 1.23-1.32x as
        # fast up to 24000 elements of A, even from 2^15 (0.94-1.01x).
        turned_narrow_min_depth=32,
        turned_narrow_min_a=BySize(1 << 15, NEVER),
        # Forced on a Zen 4 core, square products on two threads against one gain from 128^3
        # float32 (1.07-1.41x) and 112^3 float64 (1.09-1.39x), as on the AVX-512 kernel.
        parallel_min_volume=BySize(144**3, 112**3),
        split_k_max_elements=1 << 22,
    ),
)
