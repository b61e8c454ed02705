"""The portable kernel: 128-bit vectors, 4x8 float32, 4x4 float64, and its tuning."""

from ..simd import TileShape
from .config import BySize, KernelConfig
from .kernel import Kernel

KERNEL = Kernel(
    "portable",
    # 128-bit vectors exist on every x86-64 (SSE2) and AArch64 (NEON) CPU.  Fused
    # (``llvm.fma``) like the others, so that its bits are every kernel's: on a CPU
    # without an FMA unit each multiply-add becomes an exact, slow library call.
    shape=TileShape(rows=4, vectors=2, bits=128, fused=True),
    # The few-rows stream keeps the few-rows tile: the narrow tile holding 3 or 4 rows
    # whole took 1.7-1.8x as long (one broadcast per FMA: bound by loads; float32, one
    # thread, forced on a Zen 4).
    narrow=TileShape(rows=4, vectors=1, bits=128, fused=True),
    few=TileShape(rows=2, vectors=2, bits=128, fused=True),
    gemv=TileShape(rows=1, vectors=4, bits=128, fused=True),
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
    ),
)
