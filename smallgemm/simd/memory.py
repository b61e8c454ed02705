"""Intrinsics over pointers and single vectors: addresses and offsets, compile-time
shape constants, vector copies, atomics, fences and prefetches.
"""

from __future__ import annotations

from dataclasses import replace

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .types import (
    I64,
    OUTER_LEVELS,
    PREFETCH_READ,
    RowDotsRuleType,
    TileShapeType,
    declare_fma,
    element_bytes,
    emit_prefetch,
    float_pointer,
    lane_type,
    vector_ptr,
    vector_type,
)

# --- scalars and pointers -------------------------------------------------------


@intrinsic
def address(typingctx, arr):
    """Pointer to element [0, ..., 0] of an array, whatever its strides; a pointer is its
    own address (a function may then take either: the task counters, called from Python
    with an array and from linked routines with a pointer)."""
    if isinstance(arr, types.CPointer):
        return arr(arr), lambda context, builder, signature, args: args[0]
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, signature, args):
        return context.make_array(signature.args[0])(context, builder, args[0]).data

    return types.CPointer(arr.dtype)(arr), codegen


@intrinsic
def buffer_at(typingctx, addr, like):
    """Pointer to the elements of ``like`` (an array or a pointer) at the integer address
    ``addr``: a workspace that the caller keeps alive, passed to an entry as its address (an
    int unboxes for nothing, an array for ~0.05 us: a tenth of a 16x16 product's native call)."""
    if not isinstance(addr, types.Integer) or not isinstance(like, (types.Array, types.CPointer)):
        return None
    pointer = types.CPointer(like.dtype)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(pointer))

    return pointer(addr, like), codegen


def pointer_constant(value, of_element: bool):
    """An intrinsic ``f(ptr)`` returning ``value(dtype)`` for the element dtype of the float
    pointer ``ptr``, as a compile-time constant of that dtype (``of_element``) or an int64."""

    def typer(typingctx, ptr):
        dtype = float_pointer(ptr)
        if dtype is None:
            return None
        kind = dtype if of_element else types.int64

        def codegen(context, builder, signature, args):
            return context.get_constant(kind, value(dtype))

        return kind(ptr), codegen

    return intrinsic(lambda typingctx, ptr: typer(typingctx, ptr))


zero_of = pointer_constant(lambda dtype: 0, of_element=True)
zero_of.__doc__ = (
    "zero_of(ptr): zero in the element type of ``ptr``: the padding of packed panels (a zero made "
    "from an element, ``buf[0] * 0``, is NaN when that element is an infinity)."
)
one_of = pointer_constant(lambda dtype: 1, of_element=True)
one_of.__doc__ = (
    "one_of(ptr): one in the element type of ``ptr``: the alpha of a KC block whose chain goes on."
)
element_size = pointer_constant(element_bytes, of_element=False)
element_size.__doc__ = "element_size(ptr): the bytes of one element of the float pointer ``ptr``, a constant."


@intrinsic
def advance(typingctx, ptr, count):
    """``ptr + count`` elements (pointer arithmetic, e.g. one thread's part of a buffer)."""
    if not isinstance(ptr, types.CPointer) or not isinstance(count, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.gep(args[0], [args[1]])

    return ptr(ptr, count), codegen


def _elements_to_boundary(boundary_bytes):
    """An intrinsic ``f(shape, ptr, offset)``: elements from ``ptr + offset`` to the next
    address that is a multiple of ``boundary_bytes(TileShape, itemsize)`` (0 when it is
    one, and when the address is not a multiple of the element size: such a pointer
    never reaches one)."""

    def typer(typingctx, shape, ptr, offset):
        dtype = float_pointer(ptr)
        if not isinstance(shape, TileShapeType) or dtype is None or not isinstance(offset, types.Integer):
            return None
        size = element_bytes(dtype)
        boundary = boundary_bytes(shape.shape, size)

        def codegen(context, builder, signature, args):
            _, p, off = args
            at = builder.ptrtoint(builder.gep(p, [off]), I64)
            into = builder.and_(at, ir.Constant(I64, boundary - 1))
            to_boundary = builder.and_(
                builder.sub(ir.Constant(I64, boundary), into), ir.Constant(I64, boundary - 1)
            )
            whole = builder.icmp_unsigned(
                "==", builder.and_(at, ir.Constant(I64, size - 1)), ir.Constant(I64, 0)
            )
            return builder.select(
                whole, builder.udiv(to_boundary, ir.Constant(I64, size)), ir.Constant(I64, 0)
            )

        return types.int64(shape, ptr, offset), codegen

    return intrinsic(typer)


elements_to_vector_boundary = _elements_to_boundary(lambda s, size: s.lanes(size) * size)
elements_to_vector_boundary.__doc__ = (
    "elements_to_vector_boundary(shape, ptr, offset): elements to the next multiple of the shape's "
    "vector size; loads from there on never straddle two lines."
)
elements_to_line_boundary = _elements_to_boundary(lambda s, size: 64)
elements_to_line_boundary.__doc__ = (
    "elements_to_line_boundary(shape, ptr, offset): elements to the next 64-byte cache line; strips "
    "of whole lines from there on read no line twice."
)


@intrinsic
def multiply_add(typingctx, shape, x, y, z):
    """x*y + z with the shape's rule: fused (one rounding) or ``llvm.fmuladd``.

    Scalar edge code uses this so that it rounds exactly as the vector tile does.
    """
    if not isinstance(shape, TileShapeType) or x not in (types.float32, types.float64):
        return None
    if y != x or z != x:
        return None

    def codegen(context, builder, signature, args):
        fn = declare_fma(builder.module, shape.shape.fused, lane_type(x))
        return builder.call(fn, args[1:])

    return x(shape, x, y, z), codegen


def shape_constant(value, needs_pointer: bool, doc: str | None = None):
    """An intrinsic returning ``value(TileShape, itemsize)`` as a compile-time int64, documented
    by ``doc``."""

    def typer(typingctx, shape, ptr=None):
        dtype = float_pointer(ptr) if needs_pointer else types.float64
        if not isinstance(shape, TileShapeType) or dtype is None:
            return None
        constant = ir.Constant(I64, value(shape.shape, element_bytes(dtype)))

        def codegen(context, builder, signature, args):
            return constant

        return (types.int64(shape, ptr) if needs_pointer else types.int64(shape)), codegen

    if needs_pointer:
        constant = intrinsic(lambda typingctx, shape, ptr: typer(typingctx, shape, ptr))
    else:
        constant = intrinsic(lambda typingctx, shape: typer(typingctx, shape))
    constant.__doc__ = doc
    return constant


tile_rows = shape_constant(
    lambda s, size: s.rows,
    needs_pointer=False,
    doc="tile_rows(shape): MR of the shape, as a compile-time constant.",
)
tile_cols = shape_constant(
    lambda s, size: s.cols(size),
    needs_pointer=True,
    doc="tile_cols(shape, ptr): NR of the shape for the pointer's dtype, as a compile-time constant.",
)
tile_lanes = shape_constant(
    lambda s, size: s.lanes(size),
    needs_pointer=True,
    doc="tile_lanes(shape, ptr): lanes per vector for the pointer's dtype, as a compile-time constant.",
)
line_elements = shape_constant(
    lambda s, size: 64 // size,
    needs_pointer=True,
    doc="line_elements(shape, ptr): elements of the pointer's dtype in a 64-byte cache line, a compile-time constant.",
)
tile_step_fmas = shape_constant(
    lambda s, size: s.rows * s.vectors,
    needs_pointer=False,
    doc="tile_step_fmas(shape): vector FMAs of one k step of the tile, as a compile-time constant.",
)
resident_depth = shape_constant(
    lambda s, size: s.depth,
    needs_pointer=False,
    doc="resident_depth(shape): the rows of B a resident-B tile holds, as a compile-time constant.",
)
tile_strips = shape_constant(
    lambda s, size: s.strips,
    needs_pointer=False,
    doc="tile_strips(shape): the rows of C up to which a GEMV tile's driver holds strips of them in"
    " registers, 0 for never (compile-time).",
)
tile_streams_from = shape_constant(
    lambda s, size: s.stream_from,
    needs_pointer=False,
    doc="tile_streams_from(shape): the rows of C from which the narrow tile runs the few-rows stream, 0 for never"
    " (compile-time).",
)
tile_chosen_up_to = shape_constant(
    lambda s, size: s.up_to,
    needs_pointer=False,
    doc="tile_chosen_up_to(shape): the rows of C up to which the unpacked driver takes the few-rows tile, 0 for"
    " never (compile-time).",
)
tile_few_min_b_bytes = shape_constant(
    lambda s, size: s.min_b_bytes,
    needs_pointer=False,
    doc="tile_few_min_b_bytes(shape): the bytes of B from which the unpacked driver takes the few-rows tile or"
    " stream where the main tile computes no more FMAs (compile-time).",
)
tile_dot_pairs = shape_constant(
    lambda s, size: int(s.dot_pairs is not None),
    needs_pointer=False,
    doc="tile_dot_pairs(shape): 1 where a GEMV tile's row dots take row blocks in pairs, else 0 (compile-time).",
)
tile_wide_groups = shape_constant(
    lambda s, size: int(s.wide_groups),
    needs_pointer=False,
    doc="tile_wide_groups(shape): 1 where a GEMV tile's single-row stream adds B's rows AXPY_ROWS_WIDE at a time"
    " at any size, else 0 (compile-time).",
)
tile_short_rows = shape_constant(
    lambda s, size: s.short_rows,
    needs_pointer=False,
    doc="tile_short_rows(shape): the rows of a main tile's last panel up to which it takes a tile that high, 0 for"
    " never (compile-time).",
)


def _record_setting(record: str, name: str):
    """The field ``name`` of a tile's settings record ``record`` (``stream``, ``row_fetch``,
    ``dot_pairs``), compile-time; 0 on a tile that carries no such record."""

    def value(shape, size):
        settings = getattr(shape, record)
        return getattr(settings, name) if settings is not None else 0

    return shape_constant(
        value,
        needs_pointer=False,
        doc=f"{record}_{name}(shape): the tile's ``{record}.{name}``, 0 where it has no ``{record}``.",
    )


stream_strip_bytes = _record_setting("stream", "strip_bytes")
stream_keep_from_tiles = _record_setting("stream", "keep_from_tiles")
stream_fetch_distance = _record_setting("stream", "fetch_distance")
stream_fetch_min_bytes = _record_setting("stream", "fetch_min_bytes")
stream_lead_min_row_bytes = _record_setting("stream", "lead_min_row_bytes")
stream_transposed_fetch_min_bytes = _record_setting("stream", "transposed_fetch_min_bytes")
stream_transposed_fetch_max_run = _record_setting("stream", "transposed_fetch_max_run")
row_fetch_min_bytes = _record_setting("row_fetch", "min_bytes")
row_fetch_ahead = _record_setting("row_fetch", "ahead")
row_fetch_wide_min_bytes = _record_setting("row_fetch", "wide_min_bytes")
row_fetch_l3_min_bytes = _record_setting("row_fetch", "l3_min_bytes")
dot_pair_max_rows_per_set = _record_setting("dot_pairs", "max_rows_per_set")
dot_pair_max_streams = _record_setting("dot_pairs", "max_streams")
dot_pair_max_bytes = _record_setting("dot_pairs", "max_bytes")


@intrinsic
def row_dots_rule(typingctx, shape, lane_sums):
    """row_dots_rule(shape, lane_sums): the GEMV tile ``shape`` as the row-dots rule that
    sums lane-wise when ``lane_sums`` (a run-time bool: an entry takes it as an argument,
    which unboxes for nothing, where an attribute of the tile would be looked up by name
    on every call)."""
    if type(shape) is not TileShapeType or not isinstance(lane_sums, types.Boolean):
        return None
    rule = RowDotsRuleType(shape.shape)

    def codegen(context, builder, signature, args):
        return builder.zext(args[1], ir.IntType(8))

    return rule(shape, lane_sums), codegen


@intrinsic
def sums_lane_wise(typingctx, shape):
    """sums_lane_wise(shape): whether a row-dots rule sums lane-wise (the opt-in), read from
    the value at run time: one compiled rule serves both settings.  False for a plain
    TileShape (no flag travels with it)."""
    if not isinstance(shape, TileShapeType):
        return None

    def codegen(context, builder, signature, args):
        if not isinstance(shape, RowDotsRuleType):
            return ir.Constant(ir.IntType(1), 0)
        return builder.icmp_unsigned("!=", args[0], ir.Constant(ir.IntType(8), 0))

    return types.boolean(shape), codegen


@intrinsic
def short_rows_shape(typingctx, shape):
    """The main tile ``shape`` cut to its ``short_rows`` rows, the same width: the tile of a
    short last row panel (``blocked.short_rows_tile``)."""
    if not isinstance(shape, TileShapeType) or shape.shape.short_rows < 1:
        return None
    cut = TileShapeType(replace(shape.shape.geometry(), rows=shape.shape.short_rows))

    def codegen(context, builder, signature, args):
        return context.get_constant_null(cut)

    return cut(shape), codegen


# Vectors of the one-row tile over packed panels side by side (``panel_row``): as many
# independent FMA chains as a vector FMA's latency times its throughput on the CPUs we know.
PANEL_ROW_VECTORS = 8


@intrinsic
def panel_row(typingctx, shape):
    """The one-row tile over ``panel_row_count(shape)`` packed panels of ``shape``'s width,
    side by side (``tile_rank1_panels``): one row times several panels runs that many
    independent FMA chains per k step, where one panel alone runs ``shape.vectors``."""
    if not isinstance(shape, TileShapeType):
        return None
    s = shape.shape
    panels = max(1, PANEL_ROW_VECTORS // s.vectors)
    row = TileShapeType(replace(s.geometry(), rows=1, vectors=panels * s.vectors))

    def codegen(context, builder, signature, args):
        return context.get_constant_null(row)

    return row(shape), codegen


panel_row_count = shape_constant(
    lambda s, size: max(1, PANEL_ROW_VECTORS // s.vectors),
    needs_pointer=False,
    doc="panel_row_count(shape): the packed panels ``panel_row(shape)`` spans, compile-time.",
)


@intrinsic
def atomic_fetch_add(typingctx, ptr, value):
    """Atomically add ``value`` to ``*ptr`` and return the previous value."""
    if not (isinstance(ptr, types.CPointer) and ptr.dtype == types.int64 and value == types.int64):
        return None

    def codegen(context, builder, signature, args):
        return builder.atomic_rmw("add", args[0], args[1], "seq_cst")

    return types.int64(ptr, value), codegen


def tile_args(shape, ptr):
    """(TileShape, dtype) when the arguments name a valid tile, else None."""
    dtype = float_pointer(ptr)
    if not isinstance(shape, TileShapeType) or dtype is None:
        return None
    return shape.shape, dtype


def copy_args(shape, src, dst):
    """(TileShape, dtype) for an intrinsic moving data from ``src`` to a same-typed ``dst``, else None."""
    if dst != src:
        return None
    return tile_args(shape, src)


def _copy_one_vector(shape, src, src_off, dst, dst_off, streaming):
    """Typing and codegen of the one-vector copies (``copy_vector``, ``copy_vector_streaming``)."""
    found = copy_args(shape, src, dst)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, sp, so, dp, do = args
        vec = vector_type(s, dtype)
        value = builder.load(vector_ptr(builder, sp, so, vec), align=1)
        store = builder.store(value, vector_ptr(builder, dp, do, vec), align=s.bits // 8 if streaming else 1)
        if streaming:
            store.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)]))
        return context.get_dummy_value()

    return types.void(shape, src, src_off, dst, dst_off), codegen


@intrinsic
def copy_vector(typingctx, shape, src, src_off, dst, dst_off):
    """Copy one vector of the shape's width (unaligned) from src+src_off to dst+dst_off."""
    return _copy_one_vector(shape, src, src_off, dst, dst_off, streaming=False)


@intrinsic
def copy_vector_streaming(typingctx, shape, src, src_off, dst, dst_off):
    """copy_vector with a non-temporal store: the line is written to memory whole,
    without first being read for ownership, and copies in other cores' caches are
    dropped.  ``dst + dst_off`` must be aligned to the vector; ``store_fence``
    before other threads read it."""
    return _copy_one_vector(shape, src, src_off, dst, dst_off, streaming=True)


@intrinsic
def store_fence(typingctx):
    """Order every earlier store, non-temporal ones included, before any later memory access."""

    def codegen(context, builder, signature, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def prefetch_read(typingctx, ptr, off):
    """Hint that ``ptr + off`` will be read soon (no effect on results; never faults)."""
    if float_pointer(ptr) is None or not isinstance(off, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        emit_prefetch(builder, builder.gep(args[0], [args[1]]), 0, PREFETCH_READ)
        return context.get_dummy_value()

    return types.void(ptr, off), codegen


@intrinsic
def prefetch_read_l2(typingctx, ptr, off):
    """Hint that ``ptr + off`` will be read, but not before what the L1 holds now
    has been used: the line comes into the L2, not the L1."""
    if float_pointer(ptr) is None or not isinstance(off, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        emit_prefetch(builder, builder.gep(args[0], [args[1]]), 0, PREFETCH_READ, OUTER_LEVELS)
        return context.get_dummy_value()

    return types.void(ptr, off), codegen
