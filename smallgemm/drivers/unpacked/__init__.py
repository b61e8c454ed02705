"""Products that skip packing: the microkernel reads A and B where they are.

For small products (and few rows) packing costs more than it saves.  This
driver walks the same KC blocks and MR x NR tiles as the blocked driver and
runs the same tile, FMA chain and merge (``direct_microkernel``), so a product
gives the same bits whichever driver its size selects.  It reads B's rows with
vector loads where they are contiguous; a B with contiguous columns (few rows
only) is packed a small panel at a time (``stream_tiles``).  A may have any
strides.
"""

from __future__ import annotations

from .entry import (  # noqa: F401
    CALL_ANSWERS,
    CALL_CONTEXT,
    SMALL_DONE,
    SMALL_MADE,
    SMALL_PLANNED,
    SMALL_REFUSED,
    SMALL_WAY_CONTEXT,
    byte_span,
    column_swaps,
    narrow_turns,
    small_product,
    small_product_route,
    spans_meet,
    unpacked_call,
    unpacked_entry,
    workspace_at,
)
from .route import (  # noqa: F401
    DOTS_OF_A_ROWS,
    DOTS_OF_B_COLUMNS,
    FEW_TILE,
    GEMV_TILE,
    MAIN_TILE,
    NARROW_STREAM,
    NARROW_TILE,
    RESIDENT_TILE,
    TILE_NAMES,
    TILES,
    TRANSPOSING_STREAM,
    padded_fmas,
    tile_choice,
    tile_of,
    unpacked_form,
    unpacked_route,
)
from .row_dots import (  # noqa: F401
    L1_SET_PERIOD_BYTES,
    dot_pairs_suit,
    dot_row_blocks,
    dot_rows,
    dot_rows_lane_wise,
    dot_rows_of,
    gemv_rows,
    merge_sums,
)
from .stream import (  # noqa: F401
    STREAM_PANEL,
    STREAM_SIZE,
    STREAM_SUMS,
    fetches_ahead,
    narrow_stream_tiles,
    stream_strips,
    stream_tiles,
    strip_rows,
)
from .tiles import (  # noqa: F401
    gemm_unpacked,
    gemm_unpacked_stack,
    main_tiles,
    resident_strip,
    resident_strips,
    resident_tiles,
    unpacked_part,
    unpacked_tiles,
)
