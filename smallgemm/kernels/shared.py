"""Tuning constants compiled into the drivers, the same for every kernel.

A value here was measured on every kernel (AVX-512 natively; AVX2 and the portable
kernel forced on the same host) and the same value served them all, or it sizes a
buffer or a schedule rather than a kernel's loop; its comment says which.  A value
some kernel needs of its own is a field of that kernel's tile shapes (the main tile's
``short_rows``, the few-rows tile's ``up_to``, the streaming tiles' ``stream`` settings, the
GEMV tile's ``row_fetch``, ``wide_groups`` and ``dot_pairs``: ``kernels/avx512.py``,
``avx2.py``, ``portable.py``).
The driver modules import these by name (``from ..kernels.shared import X``), so each
stays a module global there and Numba freezes it into the compiled code.  Plain ints
only: this module imports nothing, so it adds no import cycle.  Structural values (tile
geometry, buffer layouts, hardware facts) stay with the code they describe.
"""

# --- Packing (drivers/packing.py) ---

# Rows of B requested ahead while a panel is packed from contiguous rows.  A
# panel takes NR elements from each of KC rows a whole row stride apart (8 KiB
# for n = 2048 float32): every row is a new page, which the hardware
# prefetchers do not cross.  They gained 3-6 % GFLOP/s in a first measurement (AVX-512,
# one thread, float32, 256x2048x2048 to 4096x1024x4096; 8 rows ahead less, 64 no more) and
# neither gain nor lose on any kernel in the latest (one thread, forced on an Intel Xeon,
# ms, with / without): AVX-512 float32 256x2048x2048 15.5-15.7 /
# 14.8-16.2, float64 256x1024x2048 14.4-16.1 / 15.6-16.3; AVX2 23.9-25.3 / 24.3-24.9 and
# 24.9-25.9 / 23.9-25.6; portable (half the rows) 25.5-25.6 / 25.3-26.0.
PACK_B_AHEAD = 32
# Panels of an A with contiguous columns packed together, column by column:
# each column of A is then read in runs of this many panels' rows (8 x 6 float32:
# three lines on AVX2), not a piece of a line per panel with the line read again by the
# next panel after KC columns.  All of a column-major 1024 x 1024 float32 A, one
# thread, AMD Zen 3 (AVX2): 0.45 ms in groups of 8, 0.70 a panel at a time (groups of 4 /
# 16 / 64: 0.49 / 0.56 / 0.83).  The product of such an A [1024,1024] and B [1024,256],
# float32, groups of 8 / one panel at a time, ms (forced on an Intel Xeon; portable 512
# rows): AVX-512 3.87-3.90 / 3.95-4.07, AVX2 6.32-6.54 / 6.74-7.25, portable 5.93-6.17 /
# 6.17-6.30.
PACK_A_COLUMN_PANELS = 8
# Full panels of a B with contiguous rows packed together, row by row
# (``pack_b_rows``), and how many rows ahead their lines are requested.  All KC
# slices of a float32 B [4096, 2048] (8 KiB rows), one thread, AMD Zen 3 (AVX2): 3.0 ms
# in groups of 8 panels, 6.3 a panel at a time; groups of 4-16 and 4-16 rows ahead measured
# alike.  Products, groups of 8 / one panel at a time, ms (forced on an Intel Xeon):
# float32 256x2048x2048 AVX-512 15.5-15.7 / 16.7-16.8, AVX2 23.9-25.3 / 28.5-28.9, portable
# (128 rows) 25.5-25.6 / 30.2-31.0; float64 256x1024x2048 AVX-512 14.4-16.1 / 16.8-17.4.
# The one-row-block driver packs B a group at a time just before its use, and
# the parallel pack tasks (``parallel.pack_task_panels``) take as many panels.
PACK_B_GROUP = 8
PACK_B_ROWS_AHEAD = 8

# --- The microkernel (kernels/microkernel.py) ---

# The packed panels are requested this many k steps ahead of the FMAs: with panels
# streaming from the L2 (AVX-512, float64) the kernel alone keeps 95 % of the FMA peak,
# 83-86 % without the requests (docs/design.md); 8 to 24 measured alike.  The same on the
# other kernels (one thread, forced on an Intel Xeon, ms): AVX2 1024^3, 0 / 8 / 16 / 24
# steps ahead, float32 24.2-25.2 / 22.4-23.6 / 22.5-24.1 / 22.5-23.8, float64 54.0-60.6 /
# 50.6-53.1 / 49.3-53.3 / 48.2-50.3; portable 512^3, 0 / 8 / 16 steps ahead, float32
# 6.24-6.34 / 5.65-5.92 / 5.85-6.01, float64 13.7-14.3 / 13.1-13.6 / 12.76-12.80.
PREFETCH_STEPS = 16
# The tile's lines of C are requested this many vector FMAs before the end of
# its k loop (64 steps of the 14-row, 2-vector AVX-512 tiles): asked for before
# the first step, they leave the L1 again by the write-back (the panels stream
# through it).  64 steps: float64 4096x4096x1024 2.3 % faster on one thread, float32
# unchanged; requesting them both first and late gained less (0.8 %), 256 steps
# 1.9 %.  Counted in FMAs, not steps, so that the lines get the same time to
# arrive whatever the tile (149 steps of the AVX2 6x2-vector tiles).  Forced on an Intel
# Xeon, one thread, without the requests: portable 512^3 float64 13.0-14.4 ms against
# 12.76-12.80, float32 5.63-5.98 against 5.85-6.01; AVX2 4096x1024x4096 float64 814-821
# against 816-827, float32 390-392 against 385-393 (requested before the first step:
# 808-834 and 381-399): no kernel loses by them.
C_PREFETCH_FMAS = 64 * 28

# --- Tasks of the parallel drivers (drivers/parallel/) ---

# A schedule, not a kernel's loop: at least this many row-block tasks per worker, so
# that uneven tasks even out; when rows are too few for that, columns are split too.  The unpacked parallel
# driver cuts row dots and a transposed B's stream into as many tasks per worker,
# and the planner (``plan.rules``) reads it for stacks too few to share out evenly.
TASKS_PER_WORKER = 3

# --- Stacks of products (drivers/batched.py) ---

# A schedule, not a kernel's loop: an unpacked stack is cut into at most this many
# tasks per worker (runs of consecutive products: tiny products are not worth a claim
# each); a blocked stack's products are one task each.
UNPACKED_TASKS_PER_WORKER = 8

# --- The unpacked driver's tile choice (drivers/unpacked/route.py) ---

# A resident-B product is up to this many tiles wide: each column strip of B is
# held in registers in turn while all rows of C pass (the strips share A from
# the L1): small products and stacks of them run 1.3-1.7x as fast as through the
# narrow or main tile (AVX-512, one thread; docs/performance.md).  Four strips served
# the other kernels too (stacks of 1000 products, one thread, forced on an Intel Xeon, 4 /
# 2 / 1 strips, us): AVX2 float32 16x8x32 189-202 / 253-262 / 263-271, float64 8x8x8 43-46 /
# 41-46 / 70-77, 16x8x16 173-182 / 226-235 / 223-227; portable float32 8x8x16 68-75 / 88-96 /
# 95-97, float64 8x8x8 73-79 / 92-100 / 97-103.
RESIDENT_STRIPS = 4
# Rows that one row tile of the main tile holds, where the few-rows tile would compute as many
# FMAs or more (13 or 14 rows of AVX-512's 14-row tile, 5 or 6 of AVX2's 6-row tile), take the
# main tile below this many bytes of B, which it then reads once, from the caches; from here the
# stream reads B from memory as fast.  One thread, Intel Xeon (L2 2 MiB), the stream against
# the main tile, µs (``python benchmarks/source_variants.py benchmarks/kernel_settings.json
# one_row_tile_avx512 one_row_tile_avx2``): AVX-512 float32 [14,512] @ [512,512] (1 MiB)
# 82-83 against 56-59, [13,256] @ [256,512] 39-40 against 27-28, float64 [14,256] @ [256,512]
# 76-82 against 65-70; AVX2 forced, float32 [6,512] @ [512,512] 57-59 against 39-40, float64
# [5,128] @ [128,256] 14-15 against 10; at 2 MiB alike.  Two row tiles read B twice: float64
# [28,256] @ [256,512] keeps the stream.  The portable kernel's few-rows tile (2 rows) always
# saves FMAs: the bound never decides there.
ONE_ROW_TILE_MAX_B_BYTES = 2 << 20

# --- The few-rows stream (drivers/unpacked/stream.py) ---

# The row stream (``stream_tiles``): the largest strip of B rows a kernel's stream takes
# (its tiles' ``stream.strip_bytes``: the panel keeps one), the columns whose partial sums
# the stream buffer holds at once, and rows of A per sweep: buffer sizes.  STREAM_ROWS x
# STREAM_COLS partial sums (128 KiB of float32) size each worker's stream buffer, kept in
# the L2.  STREAM_ROWS is a sweep height, not a routing limit: every stream takes it (a
# transposed B, the main tiles' edge rows, the parallel driver's row chunks of up to 64
# rows); no kernel's few-rows tile is chosen for more rows (its ``up_to``), so that a
# few-rows product sweeps B once.
STREAM_STRIP_MAX_BYTES = 8192
STREAM_COLS = 1024
STREAM_ROWS = 32
# A single row tile (m <= MR) streaming a B whose rows span this many bytes or more
# (from memory rather than the L3) takes at most STREAM_FROM_MEMORY_ROWS rows of B a
# group: the lines it requests ahead are then still there when it reads them.  One
# thread, float32: AVX2 [4,1024] @ [1024,16384] 4.60 ms against 8.39 with 128-row groups;
# the portable kernel with 8 KiB strips (forced on an Intel Xeon) [2,1024] @ [1024,16384]
# 4.36-4.45 ms against 10.3-11.2 with 256-row groups.  From the L3 (16 MiB: 0.85 against
# 0.80 ms), or with several row tiles ([8,4096] @ [4096,4096]: 6.78 against 6.00), 32-row
# groups lost (AVX2).  The AVX-512 and the portable few-rows tiles' strips take 32 rows
# already.  Rows of B (a depth, k), where STREAM_ROWS counts rows of A: equal by
# measurement, not by definition.
STREAM_FROM_MEMORY_MIN_BYTES = 32 << 20
STREAM_FROM_MEMORY_ROWS = 32
# Rows of a B whose rows are not contiguous (``x @ W.T``) packed at once into
# the panel, one strip wide, so that the panel holds this many bytes
# (``strip_rows``): W's rows are then read in long runs, which the
# prefetchers follow, where runs of 128 bytes (32 rows), a thousand rows apart,
# left it waiting on the L3.  For the AVX-512 few-rows tile (64 float32
# columns) that is 128 rows, runs of 512 bytes (one thread, [16,512] @ W.T,
# W [2048,512]: 376 µs against 458 with 32 rows); 512 rows (a panel in the L2)
# read the L3 faster still but lost 25 % in the L2.  The AVX2 tile's strips are
# a quarter as wide (16 float32, 8 float64), and its panel of the same bytes takes
# 512 rows, a whole KC block (one thread, float32 [32,512] @ W.T: 1049 µs against
# 1196 with 128 rows and requests ahead; float64 alike; docs/performance.md).  The
# portable tile's strips are 8 float32 wide, 1024 rows a panel (forced on an Intel Xeon,
# float32 [3,512] @ W.T, W [2048,512]: 491-495 us, 524-552 with 8 KiB panels, 480-498 with
# 128 KiB; [3,4096] @ W.T, W [4096,4096]: 9063-9652, 10626-11141, 9077-9630).
TRANSPOSED_PANEL_BYTES = 32768

# --- Row dots and the single-row stream (drivers/unpacked/row_dots.py) ---

# A buffer's size, not a kernel's loop: columns of C accumulated at once by
# ``gemv_rows`` (its row buffer: 16 KiB of float32, resident in L1 while B streams past).  The stream buffer holds one chunk.
GEMV_CHUNK = 4096
