"""The portable kernel: 128-bit vectors, 4x8 float32, 4x4 float64, and its tuning."""

from ..simd import DotPairs, StreamSettings, TileShape
from .config import BySize, KernelConfig
from .kernel import Kernel

# The few-rows stream on the few-rows tile (strips of B half a line wide), one thread,
# forced on an Intel Xeon:
FEW_TILE_STREAM = StreamSettings(
    # Rows of B a group: 1 KiB strips, 32 rows of its half-line strips, whose lines the next
    # strip reads again (us, 1 / 2 / 4 / 8 KiB): float32 [2,512] @ [512,2048] 271-290 / 279-333 /
    # 522-545 / 522-592, [2,1024] @ [1024,4096] 1057-1069 / 1085-1708 / 2019-2097 / 2183-2219;
    # float64 [2,512] @ [512,2048] 501-544 / 637-714 / 1031-1050 / 1090-1173; [2,64] @ [64,2048]
    # and [2,512] @ [512,512] alike.
    strip_bytes=1024,
    # A sweep of 3 to 8 rows (the main tile's edge rows) took as long whether the first row
    # tile kept each strip for the others or not (us, kept / not): float32 [3,512] @ [512,2048]
    # 473-511 / 485-519, [7,512] @ [512,2048] 675-684 / 637-684, float64 [3,512] @ [512,1024]
    # 483-540 / 501-530.
    keep_from_tiles=2,
    # No requests strips ahead (us, without / two strips ahead / one ahead): float64 [2,1024] @
    # [1024,4096] 1836-1965 / 2007-2105 / 1954-1978; float32 [2,1024] @ [1024,16384] 4165-4517
    # / 4274-4569 / 4319-4521.
    fetch_distance=0,
    fetch_min_bytes=0,
    # A lead strip where B's rows lie 2 KiB or more apart, as on the other kernels: B 16 bytes
    # into a line, float32 [2,512] @ [512,2048] 564-576 us with it, 571-591 without.
    lead_min_row_bytes=2048,
    # No requests for a transposed B's next strip (4 KiB runs of each W row): float32 [3,4096]
    # @ W.T, W [4096,4096], 9105-9864 us without, 11162-12025 with.
    transposed_fetch_min_bytes=0,
    transposed_fetch_max_run=0,
)

KERNEL = Kernel(
    "portable",
    # 128-bit vectors exist on every x86-64 (SSE2) and AArch64 (NEON) CPU.  Fused
    # (``llvm.fma``) like the others, so that its bits are every kernel's: on a CPU
    # without an FMA unit each multiply-add becomes an exact, slow library call.  No
    # short-rows tile: the tile is 4 rows high already.
    shape=TileShape(rows=4, vectors=2, bits=128, fused=True),
    # The few-rows stream keeps the few-rows tile: the narrow tile holding 3 or 4 rows
    # whole took 1.7-1.8x as long (one broadcast per FMA: bound by loads; float32, one
    # thread, forced on a Zen 4).
    narrow=TileShape(rows=4, vectors=1, bits=128, fused=True),
    # The few-rows tile up to 2 rows of C, its own height: against the main tile, one thread,
    # forced on a Zen 4, float32 m = 2 1.05-1.42x as fast ([2,256] @ [256,256], [2,512] @
    # [512,2048]), but m = 3 and 4 0.59-0.69x and 8 to 32 0.59-0.70x (two FMAs per vector of
    # B loaded); float64 alike.
    # At most 2 rows (``up_to``), which always saves half of the 4-row main tile's FMAs: the
    # bytes of B never decide (``min_b_bytes``).
    few=TileShape(
        rows=2, vectors=2, bits=128, fused=True, up_to=2, min_b_bytes=32 << 10, stream=FEW_TILE_STREAM
    ),
    # No register strips (``strips``): not measured on the 16-register hosts it targets.  No
    # requests ahead in the single-row stream (us, without / with): float32 [1,4096] @
    # [4096,4096] 2748-2899 / 3222-3283, [1,8192] @ [8192,4096] 8671-8813 / 8379-8734.  Row dots
    # in pairs of row blocks (two FMA chains side by side), within the AVX2 kernel's limits:
    # W @ x, float32 W [2048,512] 201-236 / 346-357 one block at a time, W [4096,4096]
    # 2887-3099 / 5495-5733, float64 W [2048,512] 368-399 / 638-670 (forced on an Intel Xeon).
    # The single-row stream adds 4 rows of B at a time, not 8 (``wide_groups``): with B in the
    # L2, us, 4 / 8 rows: float32 [1,512] @ [512,512] 22.5-23.8 / 23.7-27.2, float64 [1,256] @
    # [256,512] 21.5-23.5 / 23.6-27.1; from 4 MiB alike.
    gemv=TileShape(
        rows=1,
        vectors=4,
        bits=128,
        fused=True,
        dot_pairs=DotPairs(max_rows_per_set=8, max_streams=8, max_bytes=16 << 20),
        wide_groups=False,
    ),
    resident=TileShape(rows=4, vectors=1, bits=128, fused=True, depth=8),
    requires=(),
    description="portable 128-bit: 4x8 float32, 4x4 float64",
    config=KernelConfig(
        # Flat within 2 % over KC = 256..1024: the cache model's KC.
        kc=None,
        one_thread_unpacked_volume=BySize(0, 0),
        # Forced on a Zen 4 core, one thread, N^3, the blocked loops' time over the direct
        # tiles': float32 112 1.05, 128 0.99; float64 112 1.01, 128 0.91.
        unpacked_max_volume=BySize(120**3, 112**3),
        # Turned over gains as on the AVX2 kernel.
        turned_few_rows=True,
        # Forced on a Zen 4 core, two threads against one: float32 even at 4000 products of
        # 4^3 (1.01x), 1000 of 8^3 (1.05x), 100 of 16^3 (0.97x), 20 of 32^3 (1.06x); float64
        # at 500 of 8^3 (0.96x), 100 of 16^3 (1.29x), 10 of 32^3 (1.10x), 4000 of 4^3 (1.30x).
        parallel_min_stack_volume=BySize(700_000, 400_000),
        stack_product_overhead=BySize(100, 100),
        # Forced on a Zen 4 core, two threads against one, [1,512] @ [512,n]: float32 n = 512
        # 0.96x, 1024 1.12x; float64 n = 512 1.07x, 1024 1.31x.
        parallel_min_row_stream=BySize(1 << 19, 1 << 18),
        # Forced on a Zen 4 core, two threads against one, row dots (W @ x, [1,k] @ W.T),
        # [4,512] @ B and [4,512] @ W.T: float32 at 2^16 elements streamed 0.82-0.90x, at
        # 2^17 1.08-1.31x; float64 at 2^16 0.78-1.31x ([4,512] @ W.T the 0.78), at 2^17
        # 1.07-1.56x.
        parallel_min_stream=BySize(1 << 17, 1 << 17),
        # [1,512] @ pack([512,n]), forced on a Zen 4 core: float32 n = 256 0.92x, 512 1.21x;
        # float64 n = 256 1.25x.
        parallel_min_packed_rows=BySize(1 << 18, 1 << 17),
        # Forced on a Zen 4 core, one thread, unpacked against blocked (benchmarks/
        # few_rows_limits.py): [m,512] @ [512,2048] m = 2 1.16-1.25x; float32 m = 3 and 4
        # 0.88-0.89x, 8 to 32 0.46-0.65x; float64 m = 3 and 4 1.22x, 8 to 32 0.57-0.92x.  Times
        # W.T (W [2048,512]): up to 8 rows 1.11-1.83x but float32 m = 3 and 4 0.71-0.89x, from
        # 16 rows 0.57-0.60x.
        few_rows_max=2,
        transposed_few_rows_max=8,
        # Not measured on this kernel: a B slice of 4096 columns is megabytes on any CPU.
        nc_max=4096,
        # Not measured on this kernel: the cache model's MC and NC on every vendor.
        vendor_corrections={},
        # Not measured on this kernel: the AVX-512 kernel's value.
        shared_a_l2s=1.5,
        # Forced on a Zen 4 core, one thread, turned over against the narrow tile, float32
        # n = 2: 1.11-1.13x from 128 columns of A, 0.94-1.03x at 16 to 64 (float64: no C is at
        # most half as wide as its 2-column narrow tile).
        turned_narrow_min_depth=128,
        turned_narrow_min_a=BySize(1 << 16, 1 << 16),
        # Forced on a Zen 4 core, square products on two threads against one gain from 128^3
        # float32 (1.07-1.41x) and 112^3 float64 (1.09-1.39x), as on the AVX-512 kernel.
        parallel_min_volume=BySize(144**3, 112**3),
        split_k_max_elements=1 << 22,
    ),
)
