"""The AVX-512 kernel: 14x32 float32, 14x16 float64, and its tuning."""

from ..machine import cpu
from ..simd import RowFetch, StreamSettings, TileShape
from .config import BySize, KernelConfig, VendorCorrection
from .kernel import Kernel

# Intel, 2 MiB 16-way L2: with the measured KC the B panels stream through the L2 beside
# the A block, so A takes half the L2 and a B slice 1024 columns (float64 1024^3 0.96x
# NumPy against 0.85-0.89x with the model's MC).  A 1 MiB AMD L2 measured well with the model.
INTEL_L2 = VendorCorrection(l2_share_for_a=0.5, nc_max=1024)

# Intel: the single-row stream requests B's rows ahead from just past the L2 (``row_fetch``'s
# ``l3_min_bytes``), where its L3 answers too slowly for the hardware prefetchers alone; one
# Intel Xeon core (L2 2 MiB), float32, µs with / without: [1,384] @ [384,2048] (3 MiB)
# 113.7-117.9 / 129.5-134.5, [1,512] @ [512,2048] 157.0-165.7 / 187.7-200.7, float64 [1,256] @
# [256,1536] 114.9-137.6 / 125.0-129.8; 2 to 2.5 MiB and 16 MiB alike.  On AMD Zen 4 the
# same requests from the L3 lost (below), so none there.
INTEL_L3_FETCH_BYTES = cpu.caches()[1].size + 1 if cpu.vendor() == "GenuineIntel" else 0

# A few rows times a B of fewer bytes than this take the main tile (its rows in row tiles,
# each reading B again from the caches) where the few-rows tile saves less than a quarter of
# its FMAs, rather than the few-rows stream.  One AMD Zen 4 core (32 KiB L1), one thread: with
# the stream taken at any size of B, float32 13 to 28 rows times B of 8 to 24 KiB took
# 1.04-1.33x as long ([27,32] @ [32,128] 4.99 against 3.74 us), float64 within 4 %: 32 KiB.
# One Intel Xeon core (48 KiB L1, 2 MiB L2), us, the stream from 32 KiB / the main tile below
# the largest limit tried above B (``few_tile_b_bytes_avx512``, ``few_tile_large_b_avx512``):
# float64 32x32x128 (32 KiB) 6.1-6.5 / 4.3-4.6, float32 32x64x128 6.1-7.7 / 4.1-4.8, float64
# 32x64x160 (80 KiB) 14.5 / 9.7-10.5, float32 32x128x224 (112 KiB) 17.5-18.6 / 12.8-15.8; from
# 256 KiB of B alike or mixed (0.8-1.25x).
# Up to the GEMV tile's ``strips`` rows the main tile is then taken for their register strips,
# alike or faster (``gemv_strips_b_bytes_avx512``: float64 6x256x96 6.1-6.3 / 5.8-5.9, float32
# 2x1024x48 3.0-3.8 / 2.8-2.9, 12x256x128 6.5-7.2 / 6.2-7.0).
FEW_TILE_MIN_B_BYTES = 256 << 10 if cpu.vendor() == "GenuineIntel" else 32 << 10

# The few-rows stream on the few-rows tile (strips of B four lines wide), one thread, one
# Intel Xeon core unless named:
FEW_TILE_STREAM = StreamSettings(
    # Rows of B a group: 8 KiB strips, 32 rows of its 256-byte strips (two AVX-512 CPUs,
    # docs/performance.md).  Again here (us, 2 / 4 / 8 / 16 KiB): float32 [24,512] @ [512,2048]
    # 592-601 / 479-516 / 461-501 / 448-483, [8,1024] @ [1024,8192] 1830-1877 / 1714-1773 /
    # 1767-1782 / 1819-1883.
    strip_bytes=8192,
    # The first row tile keeps each strip of B in the L1 panel for the others from 2 tiles a
    # sweep, the later tiles sharing out the requests for the next strip (us, from 2 tiles /
    # from 3 / never): float32 [8,1024] @ [1024,8192] 1666-1766 / 1876-1886 / 1845-1865,
    # [24,512] @ [512,2048] 454-488 / 462-485 / 537-553; float64 [24,512] @ [512,2048] 897-940 /
    # 912-940 / 1007-1042.
    keep_from_tiles=2,
    # A sweep of one row tile requests the next strip while it computes from 64 MiB of B (read
    # from memory; the prefetchers follow a strip four lines wide from nearer).  Us, without /
    # two strips ahead / one ahead: float32 [2,4096] @ [4096,8192] (128 MiB) 11065-11779 /
    # 9754-11205 / 7721-8363, [4,4096] @ [4096,4096] 3100-3393 / 2961-3070 / 2874-3080, float64
    # [4,4096] @ [4096,2048] 3002-3347 / 2782-2834 / 2778-2857; but from 32 MiB and less, float32
    # [4,1024] @ [1024,8192] 1379-1423 / 1463-1503 / 1464-1476, [4,512] @ [512,8192] 680-708
    # without, 722-746 two ahead; float64 [4,1024] @ [1024,4096] 1336-1372 / 1364-1421.
    fetch_distance=1,
    fetch_min_bytes=64 << 20,
    # B 16 bytes into a line, the columns before the first line boundary are a strip of their
    # own where B's rows lie 2 KiB or more apart (us, with / without the lead strip): float32
    # [4,1024] @ [1024,8192] 1575-1611 / 1704-1869, [24,512] @ [512,2048] 486-510 / 487-513.
    lead_min_row_bytes=2048,
    # Float32 [8,512] / [16,512] @ W.T, W [2048,512] (4 MiB), 10-15 % faster with the requests,
    # [16,4096] @ W.T, W [4096,4096], 16 %; two threads unchanged; W [512,512] (1 MiB, in the L2)
    # lost 8 % to requests that find their lines already there; float64 (1 KiB runs) lost 0-5 %,
    # and 7-9 % with requests into the L1 (one AMD Zen 4 core).
    transposed_fetch_min_bytes=1 << 20,
    transposed_fetch_max_run=512,
)
# The few-rows stream on the narrow tile (strips one line wide: NARROW_STREAM), one thread,
# one Intel Xeon core:
NARROW_TILE_STREAM = StreamSettings(
    # Rows of B a group: 2 KiB strips, 32 rows of its one-line strips (us, 2 / 4 / 8 / 16 KiB):
    # float32 [16,512] @ [512,2048] 354-405 / 415-479 / 446-497 / 513-560, [32,512] 739-747 /
    # 709-818 / 765-827 / 865-877; float64 [16,512] 789-802 / 839-900 / 904-991 / 981-1182.
    strip_bytes=2048,
    # From 2 tiles (29 to 32 rows): float32 [32,512] @ [512,2048], B 16 bytes into a line,
    # 735-806 us kept, 886-924 not.
    keep_from_tiles=2,
    # A sweep of one row tile (13 to 16 rows) requests the strip two strips ahead (us, two
    # ahead / one / none): float32 [14,4096] @ [4096,4096] 5792-6075 / 5886-6157 / 6795-7379,
    # [16,1024] @ [1024,8192] 2785-3054 / 2858-2956 / 3025-3172, [16,512] @ [512,2048] 382-407 /
    # 385-403 / 408-430; float64 [16,512] @ [512,4096] 1430-1513 / 1389-1492 / 1464-1621.
    fetch_distance=2,
    fetch_min_bytes=0,
    # B 16 bytes into a line, a strip one line wide spans two: the columns before the first line
    # boundary are a strip of their own where B's rows lie 2 KiB or more apart (us, with /
    # without the lead strip): float32 [32,512] @ [512,2048] 754-856 / 929-996, [16,512]
    # 451-511 / 486-538; float64 [16,512] 857-1044 / 994-1182.  With 512-byte rows it lost
    # (float32 [16,128] @ [128,128] 6.7-6.8 us with it, 6.0-6.4 without).
    lead_min_row_bytes=2048,
    # The transposing stream runs the few-rows tile.
    transposed_fetch_min_bytes=0,
    transposed_fetch_max_run=0,
)

KERNEL = Kernel(
    "avx512",
    # 28 of the 32 zmm registers hold the tile; 2 hold the B row, 1 the A element.  A last
    # row panel of at most 4 rows takes a 4-row tile: m = 256 is 18 panels of 14 rows and one
    # of 4, whose 14-row tile would be 10 rows of padding (2-3 % on such products).
    shape=TileShape(rows=14, vectors=2, bits=512, fused=True, short_rows=4),
    # The few-rows stream runs the narrow tile where it pads at most 3 rows: 13 to 16 and
    # 29 to 32 rows (one thread, against the few-rows tile: float32 m = 13 to 16 1.10-1.17x,
    # m = 32 1.06x; float64 m = 13 to 16 1.13-1.17x, m = 30 and 32 1.08-1.17x; 9 to 12 rows
    # 0.88-0.92x, 25 and 28 0.94-0.95x).
    narrow=TileShape(rows=16, vectors=1, bits=512, fused=True, stream_from=13, stream=NARROW_TILE_STREAM),
    # The few-rows tile (and the narrow one) up to 32 rows of C: against the main tile on
    # unpacked operands, 1.6x as fast at m = 16, equal at m = 64; below FEW_TILE_MIN_B_BYTES of
    # B, the main tile unless the few-rows tile saves a quarter of its FMAs.
    few=TileShape(
        rows=4,
        vectors=4,
        bits=512,
        fused=True,
        up_to=32,
        min_b_bytes=FEW_TILE_MIN_B_BYTES,
        stream=FEW_TILE_STREAM,
    ),
    # The single-row stream requests B's rows 16384 elements ahead into the L2 from 16 MiB of
    # B (beyond what a 32 MiB L3 keeps between calls), and adds 8 rows at a time from 64 MiB
    # (``row_fetch``).  The hardware prefetchers alone left a 64 MiB B at ~65 % of the read
    # bandwidth; requests into the L1 (2048 elements ahead) cost the lines the row buffer
    # needs; from the L3 any request costs more than it gives (one AMD Zen 4 core, L2 1 MiB:
    # B read at 31 GB/s with requests against 23 without at 16 MiB, 43 against 48 at 8 MiB;
    # Intel's L3 differs: INTEL_L3_FETCH_BYTES).
    # 8-row groups: 1.01-1.13x as fast as 4-row with part of B still in the L3; where B stays
    # in the L3 they lost (0.80-0.97x), so not at any size (``wide_groups``; on an Intel Xeon
    # alike from 32 MiB: float32 [1,4096] @ [4096,2048] 1199-1215 us against 1197-1241).  With
    # AVX2 the requests lose.  Row dots one row block at
    # a time: two 16-row blocks side by side lost here.  Up to 12 rows of C in register
    # strips (``strips``) where B is under 16 MiB, against the few-rows stream, one thread,
    # [m,512] @ [512,2048] and [m,256] @ [256,4096]: float32 and float64 m = 2-3 1.44-1.67x,
    # 4 1.11-1.13x, 5-6 1.39-1.46x, 8 1.17-1.19x, 10-12 1.08-1.25x; m = 16 0.93x (the narrow
    # tile's stream); one row 1.15-1.8x against the row buffer.
    gemv=TileShape(
        rows=1,
        vectors=16,
        bits=512,
        fused=True,
        strips=12,
        row_fetch=RowFetch(
            min_bytes=16 << 20, ahead=16384, wide_min_bytes=64 << 20, l3_min_bytes=INTEL_L3_FETCH_BYTES
        ),
        wide_groups=False,
    ),
    # 16 zmm hold B, 8 the rows of C.
    resident=TileShape(rows=8, vectors=1, bits=512, fused=True, depth=16),
    requires=("avx512f", "fma"),
    description="AVX-512: 14x32 float32, 14x16 float64",
    config=KernelConfig(
        # The model's KC assumes the L1 alone feeds the kernel; the L2 delivers B panels
        # fast enough that a longer KC (fewer passes over C) wins: with the panel
        # prefetch, 1024 measured 1.5-5 % faster than 512 on both dtypes.
        kc=BySize(1024, 1024),
        # The direct tiles (narrow and few-rows tiles on C's edges) beat packing on one
        # thread up to 256^3: 0.91-0.98 of the blocked time from 128^3 to 384^3.
        one_thread_unpacked_volume=BySize(256**3, 256**3),
        # Packing draws even from 128^3 float32 and 112^3 float64, one thread.
        unpacked_max_volume=BySize(120**3, 96**3),
        # Not turned over: one thread, the transposing stream's time over the turned rows' for
        # [m,k] @ W.T, float32 m = 16 and 32 0.96-0.99x (W [2048,512]) and 0.80-1.05x (W
        # [4096,4096]); float64 m = 2 to 32 0.50-0.89x from a W of 8 MiB, 0.97-1.36x from 128 MiB.
        turned_few_rows=False,
        # Two threads against one drew even at ~35 us of work: float32 400 products of
        # 16^3 (1.04x), 2000 of 8^3 (1.16x; 1000 0.88x), 40 of 32^3 (1.03x), 2000 of 4^3 (1.06x);
        # float64 200 of 16^3 (1.07x), 1000 of 8^3 (0.93x), 20 of 32^3 (1.00x).  A product
        # costs ~15 ns (float32) / ~12 ns (float64) beyond its multiply-adds at ~40 / 23 per ns.
        parallel_min_stack_volume=BySize(1_600_000, 920_000),
        stack_product_overhead=BySize(600, 280),
        # Two threads against one (forced), [1,512] @ [512,n], B's strips in registers
        # (``strips``), twice each: float32 n = 1024 0.83-0.87x, 1536 0.94-1.00x, 2048 1.25x;
        # float64 n = 512 0.74-0.86x, 768 0.84-0.97x, 1024 0.92-1.12x, 1536 1.05-1.24x.
        parallel_min_row_stream=BySize(1 << 20, 3 << 18),
        # Two threads against one (forced), row dots (W @ x, [1,k] @ W.T), [4,512] @ B and
        # [4,512] @ W.T: float32 at 2^18 elements streamed [4,512] @ [512,512] 0.72x and
        # @ W.T 0.89x (row dots 1.01-1.17x), at 2^19 all 1.14-1.50x; float64 at 2^17
        # 0.93-1.28x, at 2^18 1.23-1.49x.
        parallel_min_stream=BySize(1 << 19, 1 << 18),
        # [1|4,512] @ pack([512,n]), two threads against one: float32 n = 256 0.82-0.93x,
        # 512 1.09-1.20x; float64 n = 256 0.99-1.20x, 512 1.19-1.33x (AMD Zen 4).  On the
        # Intel Xeon host two threads cost ~20 us more at any size: float32 n = 512 0.67 / 0.93x,
        # 1024 1.90 / 1.47x; float64 n = 512 2.16 / 1.51x (benchmarks/thread_thresholds.py).
        # float32 takes threads from where both gain.
        parallel_min_packed_rows=BySize(1 << 19, 1 << 18),
        # One thread, unpacked against blocked, [m,512] @ [512,2048]: float32 m = 24 1.29x,
        # 32 1.18x; float64 1.30x, 1.18x.  Times W.T (W [2048,512]): float32 m = 24 1.14x, 32
        # 1.00x; float64 1.11x, 0.99x.
        few_rows_max=32,
        transposed_few_rows_max=32,
        # Beyond 4096 columns of B nothing measurable was gained.
        nc_max=4096,
        vendor_corrections={"GenuineIntel": INTEL_L2},
        # Two threads, float32, 2 MiB L2 (Intel): one shared block 4-14 % faster up to 768
        # rows, 8 % slower at 2048.
        shared_a_l2s=1.5,
        # One thread: turned over ran float32 n = 2-4 1.10-1.6x as fast as the narrow tile,
        # but lost on a small or shallow A (1000x4x8 0.47x); float64 won from 2^17 elements of A.
        # Against the small way in (Intel Xeon, float32, one thread): as given 1.07-1.48x as fast
        # up to 24000 elements of A (64x4x256, 150x4x150, 120x4x200), turned from 2^15
        # (128x4x256 1.16x, 512x2x64 1.40x, 1000x4x64 1.49x).
        turned_narrow_min_depth=32,
        turned_narrow_min_a=BySize(1 << 15, 1 << 17),
        # Two threads drew even with one at 144^3 float32 (1.04-1.06x) and 112^3 float64 (0.98x)
        # under GNU OpenMP (one AMD Zen 4).  Under TBB, the default layer, on an Intel Xeon (best
        # of 4 alternating runs, one process): float32 144^3 0.83x, 160^3 1.03x, 192^3 1.14x;
        # float64 112^3 0.87x, 128^3 1.11x.
        parallel_min_volume=BySize(160**3, 120**3),
        split_k_max_elements=1 << 22,
    ),
)
