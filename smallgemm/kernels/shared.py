"""Tuning constants compiled into the drivers, the same for every kernel.

Each value was chosen by measurement; where a figure is quoted, it is the one
that decided the value, and its comment names the kernels it was measured on (a
value some kernel needs of its own is a field of that kernel's tile shapes, as the
few-rows tile's ``up_to``).  The driver modules import them by name (``from
..kernels.shared import X``), so each stays a module global there and Numba
freezes it into the compiled code.  Plain ints only: this module imports
nothing, so it adds no import cycle.
Structural values (tile geometry, buffer layouts, hardware facts) stay with
the code they describe.
"""

# --- The blocked driver (drivers/blocked.py) ---

# A last row panel with at most this many rows takes a tile of this height
# (same width) instead of the full MR: m = 256 is 18 panels of 14 rows and
# one of 4, whose 14-row tile would be 10 rows of padding (2-3 % on such products).
SHORT_ROWS = 4

# --- Packing (drivers/packing.py) ---

# Rows of B requested ahead while a panel is packed from contiguous rows.  A
# panel takes NR elements from each of KC rows a whole row stride apart (8 KiB
# for n = 2048 float32): every row is a new page, which the hardware
# prefetchers do not cross.  The requests gain 3-6 % GFLOP/s (one thread, float32,
# 256x2048x2048 to 4096x1024x4096); 8 rows ahead gained less, 64 no more.
PACK_B_AHEAD = 32
# Panels of an A with contiguous columns packed together, column by column:
# each column of A is then read in runs of this many panels' rows (8 x 6 float32:
# three lines), not a piece of a line per panel with the line read again by the
# next panel after KC columns.  All of a column-major 1024 x 1024 float32 A, one
# thread: 0.45 ms in groups of 8, 0.70 a panel at a time (groups of 4 / 16 / 64:
# 0.49 / 0.56 / 0.83).
PACK_A_COLUMN_PANELS = 8
# Full panels of a B with contiguous rows packed together, row by row
# (``pack_b_rows``), and how many rows ahead their lines are requested.  All KC
# slices of a float32 B [4096, 2048] (8 KiB rows), one thread: 3.0 ms in groups of
# 8 panels, 6.3 a panel at a time; groups of 4-16 and 4-16 rows ahead measured alike.
# The one-row-block driver packs B a group at a time just before its use, and
# the parallel pack tasks (``parallel.pack_task_panels``) take as many panels.
PACK_B_GROUP = 8
PACK_B_ROWS_AHEAD = 8

# --- The microkernel (kernels/microkernel.py) ---

# The packed panels are requested this many k steps ahead of the FMAs: with panels
# streaming from the L2 (AVX-512, float64) the kernel alone keeps 95 % of the FMA peak,
# 83-86 % without the requests (docs/design.md).  8 to 24 measured alike.
PREFETCH_STEPS = 16
# The tile's lines of C are requested this many vector FMAs before the end of
# its k loop (64 steps of the 14-row, 2-vector AVX-512 tiles): asked for before
# the first step, they leave the L1 again by the write-back (the panels stream
# through it).  64 steps: float64 4096x4096x1024 2.3 % faster on one thread, float32
# unchanged; requesting them both first and late gained less (0.8 %), 256 steps
# 1.9 %.  Counted in FMAs, not steps, so that the lines get the same time to
# arrive whatever the tile (149 steps of the AVX2 6x2-vector tiles).
C_PREFETCH_FMAS = 64 * 28

# --- Tasks of the parallel drivers (drivers/parallel/) ---

# At least this many row-block tasks per worker, so that uneven tasks even out;
# when rows are too few for that, columns are split too.  The unpacked parallel
# driver cuts row dots and a transposed B's stream into as many tasks per worker,
# and the planner (``plan.rules``) reads it for stacks too few to share out evenly.
TASKS_PER_WORKER = 3

# --- Stacks of products (drivers/batched.py) ---

# An unpacked stack is cut into at most this many tasks per worker (runs of
# consecutive products: tiny products are not worth a claim each); a blocked
# stack's products are one task each.
UNPACKED_TASKS_PER_WORKER = 8

# --- The unpacked driver's tile choice (drivers/unpacked/route.py) ---

# A resident-B product is up to this many tiles wide: each column strip of B is
# held in registers in turn while all rows of C pass (the strips share A from
# the L1): small products and stacks of them run 1.3-1.7x as fast as through the
# narrow or main tile (AVX-512, one thread; docs/performance.md).
RESIDENT_STRIPS = 4
# A few rows times a B of fewer bytes than this take the main tile unless the
# few-rows tile saves a quarter of the FMAs: from the L1, the few-rows stream
# costs more than the padding rows it saves (AVX2, 6 x 16 main and 4 x 16 few tiles,
# one thread: the main tile takes 0.6 of the stream's time on float32 16x32x16, 1.1 on
# float64 16x64x64, 32 KiB of B; docs/performance.md).  The same on AVX-512 (one Zen 4
# core, one thread): with the stream taken at any size of B, float32 13 to 28 rows times
# B of 8 to 24 KiB took 1.04-1.33x as long ([27,32] @ [32,128] 4.99 against 3.74 us), float64
# within 4 %.  The portable kernel's few-rows tile takes at most 2 rows (``up_to``).
FEW_TILE_MIN_B_BYTES = 32 * 1024

# --- The few-rows stream (drivers/unpacked/stream.py) ---

# The row stream (``stream_tiles``): rows of B taken at a time so that one strip
# of them (a tile wide) holds this many bytes (then the tiles' partial sums go to
# the stream buffer and the next column strip reads the same rows: ``strip_rows``),
# columns whose partial sums the buffer holds at once, and rows of A per sweep.
# 8 KiB is 32 rows of the AVX-512 tile's strips (256 bytes), measured on two AVX-512
# CPUs (docs/performance.md); the AVX2 tile's strips are one line, and 128 rows of
# them beat 32 (one thread, float32 [16,512] @ [512,2048]: 1.17x; 64 rows 1.11x).
# STREAM_ROWS x STREAM_COLS partial sums (128 KiB of float32) size each worker's
# stream buffer, kept in the L2.  STREAM_ROWS is a sweep height, not a routing limit:
# every stream takes it (a transposed B, the main tiles' edge rows, the parallel
# driver's row chunks of up to 64 rows); no kernel's few-rows tile is chosen for more
# rows (its ``up_to``), so that a few-rows product sweeps B once.
STREAM_STRIP_BYTES = 8192
STREAM_COLS = 1024
STREAM_ROWS = 32
# A single row tile (m <= MR) streaming a B whose rows span this many bytes or more
# (from memory rather than the L3) takes at most STREAM_FROM_MEMORY_ROWS rows of B a
# group: the lines it requests two strips ahead are then still there when it reads
# them (AVX2, 128-row groups otherwise, one thread, float32 [4,1024] @ [1024,16384]:
# 4.60 ms against 8.39 with 128 rows; docs/performance.md).  From the L3 (16 MiB:
# 0.85 against 0.80 ms), or with several row tiles ([8,4096] @ [4096,4096]: 6.78
# against 6.00), 32-row groups lose.  Rows of B (a depth, k), where STREAM_ROWS counts
# rows of A: equal by measurement, not by definition.
STREAM_FROM_MEMORY_MIN_BYTES = 32 << 20
STREAM_FROM_MEMORY_ROWS = 32
# The row stream starts its strips on cache lines (``stream_tiles``) only where B's
# rows lie at least this many bytes apart: rows that close share no L1 sets, lines
# split between two strips cost little, and the lead columns' strip of their own
# costs a whole pass of the row tiles (AVX2, one thread, B 16 bytes into a line, with /
# without the lead strip: float32 [4,512] @ [512,2048], 8 KiB rows, 207 / 364 µs, but
# [8,128] @ [128,128], 512-byte rows, 6.44 / 5.62).
STREAM_LEAD_MIN_ROW_BYTES = 2048
# From this many row tiles per sweep, a strip of contiguous B rows is kept in
# the L1 panel for the other tiles: its ``strip_rows`` rows lie a row stride
# apart (8 KiB for n = 2048 float32), so they share a few L1 sets and evict
# each other between tiles.  The first tile stores the rows it reads into the
# panel (``direct_steps`` with ``kept``); a separate copy first waits on memory
# (float32 [16,512] @ [512,2048], µs: no panel 365, separate copy 337, kept 288-300).
# The second tile then requests the next strip while it computes from the
# panel (``panel_steps_fetching``: 4-7 % faster, m = 8 to 32, one thread); every
# later tile requesting all of it lost that, but the later tiles sharing its rows
# out (each requests every (tiles - 1)-th row) gain 4-8 % more (m = 12 to 32; m = 8
# has one later tile).
STREAM_PACK_MIN_TILES = 2
# A row tile that takes each strip alone (rows within one tile's height) requests
# the strip this many strips ahead while it computes (``direct_steps_fetching``):
# no later tile would, and the prefetchers do not follow rows a stride apart.
# (AVX2, one thread, float32 [4,512] @ [512,8192]: 1238 µs two strips ahead, 1368
# one ahead, 1577 without).
FETCH_DISTANCE = 2
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
# 1196 with 128 rows and requests ahead; float64 alike; docs/performance.md).
TRANSPOSED_PANEL_BYTES = 32768
# While the row tiles of a sweep compute from a transposed strip's panel, they
# request the W rows of the next strip into the L2, when the whole B is larger
# than TRANSPOSED_FETCH_MIN_BYTES and the panel's runs of each W row are at
# most TRANSPOSED_FETCH_MAX_RUN bytes.  Float32, one thread, paired runs in
# one process: [8,512] / [16,512] @ W.T, W [2048,512] (4 MiB), 10-15 %
# faster, [16,4096] @ W.T, W [4096,4096], 16 %; two threads unchanged; W
# [512,512] (1 MiB, in the L2) lost 8 % to requests that find their lines
# already there; float64 (1 KiB runs) lost 0-5 %, and 7-9 % with requests
# into the L1.
TRANSPOSED_FETCH_MIN_BYTES = 1 << 20
TRANSPOSED_FETCH_MAX_RUN = 512

# --- Row dots and the single-row stream (drivers/unpacked/row_dots.py) ---

# Columns of C accumulated at once by ``gemv_rows`` (its row buffer: 16 KiB of
# float32, resident in L1 while B streams past).  The stream buffer holds one chunk.
GEMV_CHUNK = 4096
# From this many bytes of B (beyond what the L3 keeps between calls), the
# single-row stream requests B's rows GEMV_FETCH_AHEAD elements ahead (rounded
# up to whole rows of the chunk, so that the request is for the columns the
# chunk reads next) into the L2: the hardware prefetchers alone leave a 64 MiB
# B at ~65 % of the read bandwidth.  Requests into the L1 (2048 elements
# ahead) cost the L1 lines the row buffer needs; from the L3, any
# request costs more than it gives (L1 32 KiB, L2 1 MiB, L3 32 MiB, one thread:
# B read at 31 GB/s with requests against 23 without at 16 MiB, 43 against 48 at 8 MiB).
GEMV_FETCH_MIN_BYTES = 16 << 20
GEMV_FETCH_AHEAD = 16384
# From this many bytes of B (twice a 32 MiB L3), rows are added
# AXPY_ROWS_WIDE at a time (``axpy_rows_wide``), the requests twice as many rows
# ahead: the row buffer's loads and stores halve.  One thread: 8-row groups 1.01-1.13x
# as fast as 4-row with part of B still in the L3, even with B from memory only; where
# B stays in the L3 they lost (0.80-0.97x).  The requests and the 8-row groups are
# for the kernels whose GEMV tile sets ``fetch_ahead`` (``kernels/avx512.py``).
GEMV_WIDE_MIN_BYTES = 64 << 20
# A pair only where its rows share no L1 set more than this many at a time (the
# ways; rows ``row_dots.L1_SET_PERIOD_BYTES`` apart share a set): float32 rows 4 KiB
# apart put all 16 in one set and the pair ran 1.3-1.4x slower than one block
# (W [2048,2048] 1354 against 962 µs); 2 KiB apart (8 a set) it gained, as above.
DOT_PAIR_MAX_ROWS_PER_SET = 8
# And where the pair reads at most this many rows at once or the matrix is at most
# this many bytes (the L3 keeps it): from memory, 16 float32 rows at once lost to 8
# (W [4000,4000] 6.1 against 5.0 ms) where 8 float64 rows gained.
DOT_PAIR_MAX_STREAMS = 8
DOT_PAIR_MAX_BYTES = 16 << 20
