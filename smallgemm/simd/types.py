"""Numba types of the SIMD layer: tile shapes, register blocks, and the LLVM helpers
the intrinsics share (vector types, pointers, prefetch, FMA declarations).
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields, is_dataclass, replace

from llvmlite import ir
from numba import types
from numba.core.imputils import lower_constant
from numba.extending import NativeValue, models, register_model, typeof_impl, unbox

I64 = ir.IntType(64)


@dataclass(frozen=True)
class StreamSettings:
    """How the few-rows stream (``unpacked.stream_tiles``) runs on one kernel: its few-rows
    and narrow tiles carry the same settings (``TileShape.stream``).

    ``strip_bytes``: the rows of a B with contiguous rows taken at a time, so that one strip
    of them (a tile wide) holds this many bytes; then the tiles' partial sums go to the
    stream buffer and the next column strip reads the same rows (``strip_rows``).
    ``keep_from_tiles``: from this many row tiles per sweep, the first tile keeps the strip
    of B it reads in the L1 panel for the others (rows of B a row stride apart share a few
    L1 sets and evict each other between tiles); 0: never.  ``fetch_distance``: a sweep of
    one row tile requests the strip this many strips ahead while it computes, where B spans
    at least ``fetch_min_bytes``; 0: no requests.  ``lead_min_row_bytes``: where B's rows lie at least this many bytes apart,
    the columns before B's first line boundary are a strip of their own, so that the others
    start on cache lines; 0: never.  ``transposed_fetch_min_bytes``: from this many bytes of
    a transposed B (``x @ W.T``), the row tiles request the next strip's W rows into the L2
    while they compute, where the panel's runs of each W row are at most
    ``transposed_fetch_max_run`` bytes; 0: never.
    """

    strip_bytes: int
    keep_from_tiles: int
    fetch_distance: int
    fetch_min_bytes: int
    lead_min_row_bytes: int
    transposed_fetch_min_bytes: int
    transposed_fetch_max_run: int


@dataclass(frozen=True)
class RowFetch:
    """The single-row stream's requests ahead (``unpacked.gemv_rows``; ``TileShape.row_fetch``).

    From ``min_bytes`` of B (read from memory) it requests B's rows ``ahead`` elements ahead
    into the L2; from ``wide_min_bytes`` it adds rows ``AXPY_ROWS_WIDE`` at a time, its
    requests twice as far.  From ``l3_min_bytes`` (0: never) it requests them where B is read
    from the L3 too: one row only, since the register strips of a few rows read B from the
    caches up to ``min_bytes``."""

    min_bytes: int
    ahead: int
    wide_min_bytes: int
    l3_min_bytes: int


@dataclass(frozen=True)
class DotPairs:
    """Row dots (``unpacked.dot_rows``) on two row blocks side by side (``TileShape.dot_pairs``):
    only where the pair's rows share no L1 set more than ``max_rows_per_set`` at a time, and
    it reads at most ``max_streams`` rows at once or the matrix is at most ``max_bytes``."""

    max_rows_per_set: int
    max_streams: int
    max_bytes: int


@dataclass(frozen=True)
class TileShape:
    """Register tile of a microkernel: ``rows`` x (``vectors`` vectors of ``bits`` bits),
    and the settings of the loops that run it on its kernel.

    ``fused`` selects ``llvm.fma`` (one rounding; needs hardware FMA) for every
    multiply-add; otherwise ``llvm.fmuladd``, which LLVM fuses only where that is
    fast, so a portable kernel never becomes a chain of FMA library calls.

    ``short_rows`` is for the main tile only: a last row panel of at most this many rows
    takes a tile of this height, same width (``blocked.short_rows_tile``); 0: never.

    ``depth`` is for resident-B tiles only (``resident_b``): how many rows of B
    (k steps) the tile keeps in registers while rows of C stream past.

    ``row_fetch`` and ``dot_pairs`` are for the single-row (GEMV) tile only, as the
    kernel's choices for its memory-bound loops: whether the single-row stream
    (``unpacked.gemv_rows``) requests B ahead and adds rows in wider groups from a large
    B (``RowFetch``), and whether row dots (``unpacked.dot_rows``) take two row blocks side
    by side (``DotPairs``); None: never.
    ``wide_groups`` too: whether the single-row stream adds B's rows into its row buffer
    ``AXPY_ROWS_WIDE`` at a time at any size of B, not only from ``row_fetch.wide_min_bytes``.
    ``strips`` too: up to how many rows of C the GEMV tile's driver (``unpacked.gemv_rows``)
    holds a strip of them in registers across all of k where B is not read from memory
    (``strip_sums``: one row in the tile's vectors, up to STRIP_ROWS at once), rather than
    adding B's rows to a row buffer in the L1 (one row) or taking the few-rows stream; 0: never.

    ``up_to`` is for the few-rows tile only: the rows of C up to which the unpacked driver
    chooses it, or the narrow tile, over the main tile on a B read along its rows
    (``unpacked.tile_choice``); at most ``shared.STREAM_ROWS``, so that such a product
    sweeps B once; 0: never.  ``min_b_bytes`` too: below this many bytes of B the main tile
    is kept unless the few-rows tile saves a quarter of its FMAs (the main tile reads B from
    the caches again for each row tile, where the stream costs more than the padding rows).

    ``stream_from`` is for the narrow tile only: from this many rows of C, where its row
    tiles pad at most ``rows - stream_from`` rows, the few-rows stream of a B read along
    its rows runs the narrow tile instead of the few-rows tile (``unpacked.narrow_streams``:
    NARROW_STREAM); 0: never.  ``stream`` is for the tiles that run the few-rows stream
    (the few-rows and the narrow tile): its settings on this kernel (``StreamSettings``).

    ``lane_sums`` is for the row-dots rule only (``unpacked.dot_rows``): each
    row's dot product summed lane by lane along k, then across the lanes
    (BLAS's order, faster, but not that of the other paths: an opt-in).
    Unlike the rest it is not part of the Numba type: the entries take it as a
    bool argument beside the ``gemv`` tile and join the two into a
    ``RowDotsRuleType`` (``row_dots_rule``), whose flag is read at run time
    (``sums_lane_wise``): giving exact products up or back compiles nothing.
    """

    rows: int
    vectors: int
    bits: int
    fused: bool
    short_rows: int = 0
    depth: int = 1
    row_fetch: RowFetch | None = None
    dot_pairs: DotPairs | None = None
    wide_groups: bool = False
    strips: int = 0
    stream_from: int = 0
    up_to: int = 0
    min_b_bytes: int = 0
    stream: StreamSettings | None = None
    lane_sums: bool = False

    def lanes(self, itemsize: int) -> int:
        """Elements per vector for a dtype of ``itemsize`` bytes."""
        return self.bits // (8 * itemsize)

    def cols(self, itemsize: int) -> int:
        """NR: the tile's width in elements for a dtype of ``itemsize`` bytes."""
        return self.vectors * self.lanes(itemsize)

    def geometry(self) -> TileShape:
        """The tile alone: its rows, vectors, bits and FMA, none of its loops' settings."""
        return TileShape(rows=self.rows, vectors=self.vectors, bits=self.bits, fused=self.fused)


def _settings_label(shape: TileShape) -> str:
    """The settings that differ from a bare tile's, for the Numba type's name."""
    bare = shape.geometry()
    parts = []
    for field in fields(shape)[4:]:
        value = getattr(shape, field.name)
        if value != getattr(bare, field.name):
            if is_dataclass(value):
                value = "/".join(str(x) for x in astuple(value))
            parts.append(f"{field.name}={value}")
    return f"[{','.join(parts)}]" if parts else ""


class TileShapeType(types.Type):
    """A TileShape's compile-time part: everything but ``lane_sums``.  The value itself
    is empty (unboxed for nothing: an entry takes five of them on every call)."""

    label = "TileShape"

    def __init__(self, shape: TileShape):
        self.shape = s = replace(shape, lane_sums=False)
        super().__init__(
            name=f"{self.label}({s.rows}x{s.vectors}x{s.bits}{'f' if s.fused else 'm'}{_settings_label(s)})"
        )


class RowDotsRuleType(TileShapeType):
    """The GEMV tile as the row-dots rule: a TileShape whose value is one byte, its
    ``lane_sums`` flag, built in compiled code (``row_dots_rule``) and read at run time
    (``sums_lane_wise``): one compiled entry serves both settings of the exact mode."""

    label = "RowDotsRule"


@typeof_impl.register(TileShape)
def _typeof_tile_shape(val, c):
    return TileShapeType(val)


register_model(TileShapeType)(models.OpaqueModel)


@unbox(TileShapeType)
def _unbox_tile_shape(typ, obj, c):
    return NativeValue(c.context.get_constant_null(typ))


@lower_constant(TileShapeType)
def _constant_tile_shape(context, builder, typ, pyval):
    return context.get_constant_null(typ)


@register_model(RowDotsRuleType)
class _RowDotsRuleModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.IntType(8))


class RegisterBlock(types.Type):
    """A block of LLVM vectors held in registers, sized by a TileShape, for one dtype."""

    label = ""

    def __init__(self, shape: TileShape, dtype: types.Float):
        self.shape = shape
        self.dtype = dtype
        super().__init__(name=f"{self.label}({shape}, {dtype})")

    def vector_count(self) -> int:
        raise NotImplementedError


class RegisterBlockModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        vec = vector_type(fe_type.shape, fe_type.dtype)
        super().__init__(dmm, fe_type, ir.ArrayType(vec, fe_type.vector_count()))


class TileType(RegisterBlock):
    """The C tile held in registers: rows*vectors LLVM vectors."""

    label = "Tile"

    def vector_count(self) -> int:
        return self.shape.rows * self.shape.vectors


register_model(TileType)(RegisterBlockModel)


def lane_type(dtype):
    return ir.FloatType() if dtype == types.float32 else ir.DoubleType()


def element_bytes(dtype):
    return 4 if dtype == types.float32 else 8


def vector_type(shape: TileShape, dtype):
    return ir.VectorType(lane_type(dtype), shape.lanes(element_bytes(dtype)))


def float_pointer(ptr):
    """The element type of a float32/float64 pointer, or None."""
    if isinstance(ptr, types.CPointer) and ptr.dtype in (types.float32, types.float64):
        return ptr.dtype
    return None


PREFETCH_READ, PREFETCH_WRITE = 0, 1


# Locality hints of llvm.prefetch: every cache level (prefetcht0), or the L2
# and beyond but not the L1 (prefetcht1).
ALL_LEVELS, OUTER_LEVELS = 3, 2


def emit_prefetch(builder, ptr, byte_offset, rw, locality=ALL_LEVELS):
    """Emit a prefetch hint (``PREFETCH_READ`` or ``PREFETCH_WRITE``, into the cache levels ``locality``
    names) of the line at ``ptr`` plus ``byte_offset`` bytes."""
    i8p = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
    fn = builder.module.declare_intrinsic("llvm.prefetch.p0i8", fnty=fnty)
    addr = builder.gep(builder.bitcast(ptr, i8p), [ir.Constant(I64, byte_offset)])
    builder.call(fn, [addr, ir.Constant(i32, rw), ir.Constant(i32, locality), ir.Constant(i32, 1)])


def declare_fma(module, fused, ty):
    """Declare ``llvm.fma`` / ``llvm.fmuladd`` overloaded on a scalar or vector type."""
    name = "llvm.fma" if fused else "llvm.fmuladd"
    lane = ty.element if isinstance(ty, ir.VectorType) else ty
    suffix = "f32" if isinstance(lane, ir.FloatType) else "f64"
    if isinstance(ty, ir.VectorType):
        suffix = f"v{ty.count}{suffix}"
    return module.declare_intrinsic(f"{name}.{suffix}", fnty=ir.FunctionType(ty, [ty, ty, ty]))


def vector_ptr(builder, ptr, off, vec):
    return builder.bitcast(builder.gep(ptr, [off]), vec.as_pointer())


def splat_vector(builder, scalar, vec):
    undef = ir.Constant(vec, ir.Undefined)
    one = builder.insert_element(undef, scalar, ir.Constant(ir.IntType(32), 0))
    mask = ir.Constant(ir.VectorType(ir.IntType(32), vec.count), [0] * vec.count)
    return builder.shuffle_vector(one, undef, mask)
