"""SIMD layer: Numba types and intrinsics over LLVM vector types.

This is the only module of smallgemm that writes LLVM IR.  Everything above it
reads as plain loops over pointers and vector values.

Why intrinsics: a Numba loop nest that keeps the C tile in a local array runs at
3 % of the FMA peak (the tile lives on the heap), and one scalar local per
accumulator reaches ~14 % (LLVM vectorises over k, not over the tile).  An
explicit tile of LLVM vectors, updated by one rank-1 intrinsic per k, compiles to
nothing but broadcasts, loads and vector FMAs (~97 % of peak, docs/design.md).

A kernel's geometry is a :class:`TileShape` value passed as an argument; its
Numba type carries rows, vectors per row, vector bits and the multiply-add rule,
so Numba compiles (and caches) one specialisation per kernel and dtype and the
shape is a compile-time constant everywhere.

Memory is addressed through ``CPointer`` values plus signed element offsets:
negative strides are plain negative offsets, and no index is wrapped or
bounds-checked in the hot loops.
"""

from __future__ import annotations

from .dots import (  # noqa: F401
    AXPY_ROWS,
    AXPY_ROWS_WIDE,
    LANE_DOT_ROWS,
    axpy_rows,
    axpy_rows_wide,
    axpy_vector,
    dot_pair_zero,
    dot_steps,
    dot_tail,
    dot_zero,
    lane_dot_steps,
    lane_dot_sums,
    lane_dot_tail,
    lane_dot_width,
    lane_dot_zero,
)
from .memory import (  # noqa: F401
    address,
    advance,
    atomic_fetch_add,
    buffer_at,
    copy_vector,
    copy_vector_streaming,
    dot_pair_max_bytes,
    dot_pair_max_rows_per_set,
    dot_pair_max_streams,
    element_size,
    elements_to_line_boundary,
    elements_to_vector_boundary,
    line_elements,
    multiply_add,
    one_of,
    panel_row,
    panel_row_count,
    prefetch_read,
    prefetch_read_l2,
    resident_depth,
    row_dots_rule,
    row_fetch_ahead,
    row_fetch_l3_min_bytes,
    row_fetch_min_bytes,
    row_fetch_wide_min_bytes,
    short_rows_shape,
    store_fence,
    stream_fetch_distance,
    stream_fetch_min_bytes,
    stream_keep_from_tiles,
    stream_lead_min_row_bytes,
    stream_strip_bytes,
    stream_transposed_fetch_max_run,
    stream_transposed_fetch_min_bytes,
    sums_lane_wise,
    tile_chosen_up_to,
    tile_cols,
    tile_dot_pairs,
    tile_few_min_b_bytes,
    tile_lanes,
    tile_rows,
    tile_short_rows,
    tile_step_fmas,
    tile_streams_from,
    tile_strips,
    tile_wide_groups,
    zero_of,
)
from .pack import copy_column, fma_throughput_loop, pack_a_rows_block, pack_b_cols_block  # noqa: F401
from .resident import ResidentType, resident_b, resident_product  # noqa: F401
from .strips import STRIP_ROWS, strip_sums, strip_vectors, strip_width  # noqa: F401
from .tile import (  # noqa: F401
    ACCUMULATE,
    CONTINUE,
    OVERWRITE,
    SCALE,
    panel_prefetch,
    tile_load,
    tile_prefetch,
    tile_rank1,
    tile_rank1_direct,
    tile_rank1_panels,
    tile_read,
    tile_read_part,
    tile_store,
    tile_write,
    tile_write_part,
    tile_zero,
)
from .types import (  # noqa: F401
    DotPairs,
    RowDotsRuleType,
    RowFetch,
    StreamSettings,
    TileShape,
    TileShapeType,
    TileType,
)
