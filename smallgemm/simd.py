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

from dataclasses import dataclass, replace

from llvmlite import ir
from numba import types
from numba.core.imputils import lower_constant
from numba.extending import (
    NativeValue,
    intrinsic,
    models,
    register_model,
    typeof_impl,
    unbox,
)

_I64 = ir.IntType(64)


@dataclass(frozen=True)
class TileShape:
    """Register tile of a microkernel: ``rows`` x (``vectors`` vectors of ``bits`` bits).

    ``fused`` selects ``llvm.fma`` (one rounding; needs hardware FMA) for every
    multiply-add; otherwise ``llvm.fmuladd``, which LLVM fuses only where that is
    fast, so a portable kernel never becomes a chain of FMA library calls.

    ``depth`` is for resident-B tiles only (``resident_b``): how many rows of B
    (k steps) the tile keeps in registers while rows of C stream past.

    ``lane_sums`` is for the row-dots rule only (``unpacked.dot_rows``): each
    row's dot product summed lane by lane along k, then across the lanes
    (BLAS's order, faster, but not that of the other paths: an opt-in).
    Unlike the rest it is not part of the Numba type: the entries take it as a
    bool argument beside the ``gemv`` tile and join the two into a
    ``RowDotsRuleType`` (``row_dots_rule``), whose flag is read at run time
    (``sums_lane_wise``): giving batch invariance up or back compiles nothing.
    """

    rows: int
    vectors: int
    bits: int
    fused: bool
    depth: int = 1
    lane_sums: bool = False

    def lanes(self, itemsize: int) -> int:
        """Elements per vector for a dtype of ``itemsize`` bytes."""
        return self.bits // (8 * itemsize)

    def cols(self, itemsize: int) -> int:
        """NR: the tile's width in elements for a dtype of ``itemsize`` bytes."""
        return self.vectors * self.lanes(itemsize)


class TileShapeType(types.Type):
    """A TileShape's compile-time part: everything but ``lane_sums``.  The value itself
    is empty (unboxed for nothing: an entry takes five of them on every call)."""

    label = "TileShape"

    def __init__(self, shape: TileShape):
        self.shape = s = replace(shape, lane_sums=False)
        depth = f"d{s.depth}" if s.depth != 1 else ""
        super().__init__(name=f"{self.label}({s.rows}x{s.vectors}x{s.bits}{'f' if s.fused else 'm'}{depth})")


class RowDotsRuleType(TileShapeType):
    """The GEMV tile as the row-dots rule: a TileShape whose value is one byte, its
    ``lane_sums`` flag, built in compiled code (``row_dots_rule``) and read at run time
    (``sums_lane_wise``): one compiled entry serves both batch-invariance settings."""

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


class _RegisterBlock(types.Type):
    """A block of LLVM vectors held in registers, sized by a TileShape, for one dtype."""

    label = ""

    def __init__(self, shape: TileShape, dtype: types.Float):
        self.shape = shape
        self.dtype = dtype
        super().__init__(name=f"{self.label}({shape}, {dtype})")

    def vector_count(self) -> int:
        raise NotImplementedError


class _RegisterBlockModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        vec = _vector_type(fe_type.shape, fe_type.dtype)
        super().__init__(dmm, fe_type, ir.ArrayType(vec, fe_type.vector_count()))


class TileType(_RegisterBlock):
    """The C tile held in registers: rows*vectors LLVM vectors."""

    label = "Tile"

    def vector_count(self) -> int:
        return self.shape.rows * self.shape.vectors


register_model(TileType)(_RegisterBlockModel)


def _lane_type(dtype):
    return ir.FloatType() if dtype == types.float32 else ir.DoubleType()


def _itemsize(dtype):
    return 4 if dtype == types.float32 else 8


def _vector_type(shape: TileShape, dtype):
    return ir.VectorType(_lane_type(dtype), shape.lanes(_itemsize(dtype)))


def _float_pointer(ptr):
    """The element type of a float32/float64 pointer, or None."""
    if isinstance(ptr, types.CPointer) and ptr.dtype in (types.float32, types.float64):
        return ptr.dtype
    return None


_READ, _WRITE = 0, 1


# Locality hints of llvm.prefetch: every cache level (prefetcht0), or the L2
# and beyond but not the L1 (prefetcht1).
_ALL_LEVELS, _OUTER_LEVELS = 3, 2


def _prefetch(builder, ptr, byte_offset, rw, locality=_ALL_LEVELS):
    """Emit a prefetch hint (``_READ`` or ``_WRITE``, into the cache levels ``locality``
    names) of the line at ``ptr`` plus ``byte_offset`` bytes."""
    i8p = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
    fn = builder.module.declare_intrinsic("llvm.prefetch.p0i8", fnty=fnty)
    addr = builder.gep(builder.bitcast(ptr, i8p), [ir.Constant(_I64, byte_offset)])
    builder.call(fn, [addr, ir.Constant(i32, rw), ir.Constant(i32, locality), ir.Constant(i32, 1)])


def _declare_fma(module, fused, ty):
    """Declare ``llvm.fma`` / ``llvm.fmuladd`` overloaded on a scalar or vector type."""
    name = "llvm.fma" if fused else "llvm.fmuladd"
    lane = ty.element if isinstance(ty, ir.VectorType) else ty
    suffix = "f32" if isinstance(lane, ir.FloatType) else "f64"
    if isinstance(ty, ir.VectorType):
        suffix = f"v{ty.count}{suffix}"
    return module.declare_intrinsic(f"{name}.{suffix}", fnty=ir.FunctionType(ty, [ty, ty, ty]))


def _vector_ptr(builder, ptr, off, vec):
    return builder.bitcast(builder.gep(ptr, [off]), vec.as_pointer())


def _splat(builder, scalar, vec):
    undef = ir.Constant(vec, ir.Undefined)
    one = builder.insert_element(undef, scalar, ir.Constant(ir.IntType(32), 0))
    mask = ir.Constant(ir.VectorType(ir.IntType(32), vec.count), [0] * vec.count)
    return builder.shuffle_vector(one, undef, mask)


# --- scalars and pointers -------------------------------------------------------


@intrinsic
def address(typingctx, arr):
    """Pointer to element [0, ..., 0] of an array, whatever its strides."""
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, signature, args):
        return context.make_array(signature.args[0])(context, builder, args[0]).data

    return types.CPointer(arr.dtype)(arr), codegen


@intrinsic
def buffer_at(typingctx, addr, like):
    """Pointer to ``like``'s elements at the integer address ``addr``: a workspace that the
    caller keeps alive, passed to an entry as its address (an int unboxes for nothing, an
    array for ~0.05 us: a tenth of a 16x16 product's native call)."""
    if not isinstance(addr, types.Integer) or not isinstance(like, types.Array):
        return None
    pointer = types.CPointer(like.dtype)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(pointer))

    return pointer(addr, like), codegen


@intrinsic
def zero_of(typingctx, ptr):
    """Zero in the element type of ``ptr``: the padding of packed panels (a zero made
    from an element, ``buf[0] * 0``, is NaN when that element is an infinity)."""
    dtype = _float_pointer(ptr)
    if dtype is None:
        return None

    def codegen(context, builder, signature, args):
        return context.get_constant(dtype, 0)

    return dtype(ptr), codegen


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
        dtype = _float_pointer(ptr)
        if not isinstance(shape, TileShapeType) or dtype is None or not isinstance(offset, types.Integer):
            return None
        size = _itemsize(dtype)
        boundary = boundary_bytes(shape.shape, size)

        def codegen(context, builder, signature, args):
            _, p, off = args
            at = builder.ptrtoint(builder.gep(p, [off]), _I64)
            into = builder.and_(at, ir.Constant(_I64, boundary - 1))
            to_boundary = builder.and_(builder.sub(ir.Constant(_I64, boundary), into), ir.Constant(_I64, boundary - 1))
            whole = builder.icmp_unsigned("==", builder.and_(at, ir.Constant(_I64, size - 1)), ir.Constant(_I64, 0))
            return builder.select(whole, builder.udiv(to_boundary, ir.Constant(_I64, size)), ir.Constant(_I64, 0))

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
        fn = _declare_fma(builder.module, shape.shape.fused, _lane_type(x))
        return builder.call(fn, args[1:])

    return x(shape, x, y, z), codegen


def _shape_constant(value, needs_pointer: bool):
    """An intrinsic returning ``value(TileShape, itemsize)`` as a compile-time int64."""

    def typer(typingctx, shape, ptr=None):
        dtype = _float_pointer(ptr) if needs_pointer else types.float64
        if not isinstance(shape, TileShapeType) or dtype is None:
            return None
        constant = ir.Constant(_I64, value(shape.shape, _itemsize(dtype)))

        def codegen(context, builder, signature, args):
            return constant

        return (types.int64(shape, ptr) if needs_pointer else types.int64(shape)), codegen

    if needs_pointer:
        return intrinsic(lambda typingctx, shape, ptr: typer(typingctx, shape, ptr))
    return intrinsic(lambda typingctx, shape: typer(typingctx, shape))


tile_rows = _shape_constant(lambda s, size: s.rows, needs_pointer=False)
tile_rows.__doc__ = "tile_rows(shape): MR of the shape, as a compile-time constant."
tile_cols = _shape_constant(lambda s, size: s.cols(size), needs_pointer=True)
tile_cols.__doc__ = "tile_cols(shape, ptr): NR of the shape for the pointer's dtype, as a compile-time constant."
tile_lanes = _shape_constant(lambda s, size: s.lanes(size), needs_pointer=True)
tile_lanes.__doc__ = "tile_lanes(shape, ptr): lanes per vector for the pointer's dtype, as a compile-time constant."
line_elements = _shape_constant(lambda s, size: 64 // size, needs_pointer=True)
line_elements.__doc__ = "line_elements(shape, ptr): elements of the pointer's dtype in a 64-byte cache line, a compile-time constant."
tile_step_fmas = _shape_constant(lambda s, size: s.rows * s.vectors, needs_pointer=False)
tile_step_fmas.__doc__ = "tile_step_fmas(shape): vector FMAs of one k step of the tile, as a compile-time constant."
resident_depth = _shape_constant(lambda s, size: s.depth, needs_pointer=False)
resident_depth.__doc__ = "resident_depth(shape): the rows of B a resident-B tile holds, as a compile-time constant."


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
def tile_with_rows(typingctx, shape, rows):
    """The tile ``shape`` with ``rows`` rows (a compile-time integer) and the same width."""
    if not isinstance(shape, TileShapeType) or not isinstance(rows, types.IntegerLiteral):
        return None
    s = shape.shape
    cut = TileShapeType(TileShape(rows=rows.literal_value, vectors=s.vectors, bits=s.bits, fused=s.fused))

    def codegen(context, builder, signature, args):
        return context.get_constant_null(cut)

    return cut(shape, rows), codegen


@intrinsic
def atomic_fetch_add(typingctx, ptr, value):
    """Atomically add ``value`` to ``*ptr`` and return the previous value."""
    if not (isinstance(ptr, types.CPointer) and ptr.dtype == types.int64 and value == types.int64):
        return None

    def codegen(context, builder, signature, args):
        return builder.atomic_rmw("add", args[0], args[1], "seq_cst")

    return types.int64(ptr, value), codegen


def _tile_args(shape, ptr):
    """(TileShape, dtype) when the arguments name a valid tile, else None."""
    dtype = _float_pointer(ptr)
    if not isinstance(shape, TileShapeType) or dtype is None:
        return None
    return shape.shape, dtype


def _copy_args(shape, src, dst):
    """(TileShape, dtype) for an intrinsic moving data from ``src`` to a same-typed ``dst``, else None."""
    if dst != src:
        return None
    return _tile_args(shape, src)


def _copy_one_vector(shape, src, src_off, dst, dst_off, streaming):
    """Typing and codegen of the one-vector copies (``copy_vector``, ``copy_vector_streaming``)."""
    found = _copy_args(shape, src, dst)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, sp, so, dp, do = args
        vec = _vector_type(s, dtype)
        value = builder.load(_vector_ptr(builder, sp, so, vec), align=1)
        store = builder.store(value, _vector_ptr(builder, dp, do, vec), align=s.bits // 8 if streaming else 1)
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


# --- the register tile -------------------------------------------------------------


@intrinsic
def tile_zero(typingctx, shape, ptr):
    """A tile of zeros for the dtype of ``ptr``."""
    found = _tile_args(shape, ptr)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        return ir.Constant(ir.ArrayType(_vector_type(s, dtype), s.rows * s.vectors), None)

    return TileType(s, dtype)(shape, ptr), codegen


@intrinsic
def tile_rank1(typingctx, tile, a, a_off, b, b_off):
    """tile[i, :] += a[a_off + i] * b[b_off : b_off + NR] for every row i."""
    if not isinstance(tile, TileType) or _float_pointer(a) != tile.dtype or b != a:
        return None
    s, dtype = tile.shape, tile.dtype

    def codegen(context, builder, signature, args):
        acc, ap, aoff, bp, boff = args
        vec = _vector_type(s, dtype)
        bvecs = [
            builder.load(_vector_ptr(builder, bp, builder.add(boff, ir.Constant(_I64, v * vec.count)), vec), align=1)
            for v in range(s.vectors)
        ]
        rows = [builder.add(aoff, ir.Constant(_I64, i)) for i in range(s.rows)]
        return _rank1_update(builder, s, dtype, acc, ap, rows, bvecs)

    return tile(tile, a, a_off, b, b_off), codegen


@intrinsic
def panel_prefetch(typingctx, shape, a, a_off, b, b_off):
    """Prefetch one k step of packed panels: the MR elements of A at ``a_off`` and the NR of B at ``b_off``.

    One hint per 64 bytes of each step; as the steps are contiguous, every
    cache line of both panels is requested once they have all been issued.
    Issued some steps ahead in the k loop, the lines of panels that stream
    from the L2 (float64 panels for KC = 512 exceed the L1) arrive before the
    FMAs need them.  No effect on results.
    """
    dtype = _float_pointer(a)
    if not isinstance(shape, TileShapeType) or dtype is None or b != a:
        return None
    s = shape.shape

    def codegen(context, builder, signature, args):
        _, ap, aoff, bp, boff = args
        size = _itemsize(dtype)
        for ptr, off, count in ((ap, aoff, s.rows), (bp, boff, s.cols(size))):
            base = builder.gep(ptr, [off])
            for byte in range(0, count * size, 64):
                _prefetch(builder, base, byte, _READ)
        return context.get_dummy_value()

    return types.void(shape, a, a_off, b, b_off), codegen


@intrinsic
def tile_store(typingctx, tile, buf):
    """Store the raw tile row-major (row stride NR) into buf[0 : MR*NR]."""
    if not isinstance(tile, TileType) or _float_pointer(buf) != tile.dtype:
        return None
    s, dtype = tile.shape, tile.dtype

    def codegen(context, builder, signature, args):
        acc, bp = args
        vec = _vector_type(s, dtype)
        for idx in range(s.rows * s.vectors):
            builder.store(builder.extract_value(acc, idx), _vector_ptr(builder, bp, ir.Constant(_I64, idx * vec.count), vec), align=1)
        return context.get_dummy_value()

    return types.void(tile, buf), codegen


@intrinsic
def tile_load(typingctx, shape, buf):
    """A tile read back from buf[0 : MR*NR], row-major as ``tile_store`` wrote it."""
    found = _tile_args(shape, buf)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, bp = args
        vec = _vector_type(s, dtype)
        value = ir.Constant(ir.ArrayType(vec, s.rows * s.vectors), None)
        for idx in range(s.rows * s.vectors):
            loaded = builder.load(_vector_ptr(builder, bp, ir.Constant(_I64, idx * vec.count), vec), align=1)
            value = builder.insert_value(value, loaded, idx)
        return value

    return TileType(s, dtype)(shape, buf), codegen


# Update rules when a finished tile is merged into C.  Every path of the library
# (vector write, scalar edge write, few-rows kernels) applies exactly these, so an
# element of C gets the same bits whichever path wrote it.
OVERWRITE = 0  # first kc block, beta == 0:  C = alpha*AB        (C is never read)
SCALE = 1  # first kc block, beta != 0:      C = alpha*AB + beta*C
ACCUMULATE = 2  # later kc blocks:            C = alpha*AB + C


def _write_args(tile, c, alpha, beta):
    """(TileShape, dtype) when a tile can be merged into ``c`` with these scalars, else None."""
    if not isinstance(tile, TileType) or _float_pointer(c) != tile.dtype:
        return None
    if alpha != tile.dtype or beta != tile.dtype:
        return None
    return tile.shape, tile.dtype


def _write_tile(builder, s, acc, cp, coff, rstride, alpha_v, beta_v, mode_v, live=None):
    """Merge ``acc`` into C by ``mode`` (see OVERWRITE / SCALE / ACCUMULATE), rows of C unit-stride.

    With ``live`` = (rows, cols), run-time counts, rows at or past ``rows`` are
    skipped and lanes at or past ``cols`` are neither read nor written (masked
    loads and stores).
    """
    vec = acc.type.element
    fma = _declare_fma(builder.module, s.fused, vec)
    va = _splat(builder, alpha_v, vec)
    vb = _splat(builder, beta_v, vec)
    masks = [None if live is None else _lane_mask(builder, live[1], v * vec.count, vec.count) for v in range(s.vectors)]

    def load(ptr, v):
        if masks[v] is None:
            return builder.load(ptr, align=1)
        return _masked_load(builder, ptr, None, vec, masks[v])

    def store(value, ptr, v):
        if masks[v] is None:
            builder.store(value, ptr, align=1)
        else:
            _masked_store_lanes(builder, value, ptr, masks[v])

    fn = builder.function
    blocks = {m: fn.append_basic_block(f"tile_write_{m}") for m in (OVERWRITE, SCALE, ACCUMULATE)}
    done = fn.append_basic_block("tile_write_done")
    switch = builder.switch(builder.sext(mode_v, _I64) if mode_v.type != _I64 else mode_v, blocks[ACCUMULATE])
    switch.add_case(ir.Constant(_I64, OVERWRITE), blocks[OVERWRITE])
    switch.add_case(ir.Constant(_I64, SCALE), blocks[SCALE])
    for m, block in blocks.items():
        builder.position_at_end(block)
        for i in range(s.rows):
            if i > 0 and live is not None:
                next_row = fn.append_basic_block("tile_write_row")
                builder.cbranch(builder.icmp_signed(">", live[0], ir.Constant(_I64, i)), next_row, done)
                builder.position_at_end(next_row)
            row = builder.add(coff, builder.mul(rstride, ir.Constant(_I64, i)))
            for v in range(s.vectors):
                ptr = _vector_ptr(builder, cp, builder.add(row, ir.Constant(_I64, v * vec.count)), vec)
                t = builder.extract_value(acc, i * s.vectors + v)
                if m == OVERWRITE:
                    new = builder.fmul(va, t)
                elif m == SCALE:
                    new = builder.call(fma, [va, t, builder.fmul(vb, load(ptr, v))])
                else:
                    new = builder.call(fma, [va, t, load(ptr, v)])
                store(new, ptr, v)
        builder.branch(done)
    builder.position_at_end(done)


@intrinsic
def tile_write(typingctx, tile, c, c_off, rs, alpha, beta, mode):
    """Merge a full tile into C whose rows are unit-stride (row stride ``rs``).

    ``mode`` is OVERWRITE, SCALE or ACCUMULATE (see above); with OVERWRITE, C is
    never loaded, so NaN or garbage in C cannot leak into the result.
    """
    found = _write_args(tile, c, alpha, beta)
    if found is None:
        return None

    def codegen(context, builder, signature, args):
        _write_tile(builder, found[0], *args)
        return context.get_dummy_value()

    return types.void(tile, c, c_off, rs, alpha, beta, mode), codegen


@intrinsic
def tile_write_part(typingctx, tile, c, c_off, rs, live_rows, live_cols, alpha, beta, mode):
    """``tile_write`` of the top-left ``live_rows x live_cols`` only: an edge tile
    merged with masked vector loads and stores and the same arithmetic per
    element; nothing else of C is read or written."""
    found = _write_args(tile, c, alpha, beta)
    if found is None:
        return None

    def codegen(context, builder, signature, args):
        acc, cp, coff, rstride, rows, cols, alpha_v, beta_v, mode_v = args
        _write_tile(builder, found[0], acc, cp, coff, rstride, alpha_v, beta_v, mode_v, live=(rows, cols))
        return context.get_dummy_value()

    return types.void(tile, c, c_off, rs, live_rows, live_cols, alpha, beta, mode), codegen


@intrinsic
def tile_prefetch(typingctx, shape, c, c_off, rs):
    """Prefetch (for writing) the cache lines of an MR x NR tile of C with unit-stride rows.

    Issued before the last k steps, so C's lines arrive while the tile is computed
    instead of stalling the write-back (BLIS kernels do the same).  The last
    byte of each row is requested too: a row that does not start on a line
    (NumPy's large arrays start 16 bytes into one) spans one line more, and
    that line from memory stalled the write-back (requesting it too: float64
    4096x4096x1024 5 % faster on one thread).
    """
    dtype = _float_pointer(c)
    if not isinstance(shape, TileShapeType) or dtype is None:
        return None
    s = shape.shape

    def codegen(context, builder, signature, args):
        _, cp, coff, rstride = args
        row_bytes = s.cols(_itemsize(dtype)) * _itemsize(dtype)
        for i in range(s.rows):
            row = builder.add(coff, builder.mul(rstride, ir.Constant(_I64, i)))
            base = builder.gep(cp, [row])
            for byte in (*range(0, row_bytes, 64), row_bytes - 1):
                _prefetch(builder, base, byte, _WRITE)
        return context.get_dummy_value()

    return types.void(shape, c, c_off, rs), codegen


def _lane_mask(builder, live, first_lane, count):
    """<count x i1>: lane l is on when first_lane + l < live."""
    idx = ir.Constant(ir.VectorType(_I64, count), [first_lane + l for l in range(count)])
    return builder.icmp_unsigned("<", idx, _splat(builder, live, ir.VectorType(_I64, count)))


def _masked_load(builder, ptr, off, vec, mask):
    """Load the lanes of ``mask`` from ``ptr + off`` elements (``off`` None: ``ptr`` is a vector pointer); others are zero."""
    fn = builder.module.declare_intrinsic(
        f"llvm.masked.load.v{vec.count}{'f32' if isinstance(vec.element, ir.FloatType) else 'f64'}.p0",
        fnty=ir.FunctionType(vec, [vec.as_pointer(), ir.IntType(32), mask.type, vec]),
    )
    zero = ir.Constant(vec, None)
    vptr = ptr if off is None else _vector_ptr(builder, ptr, off, vec)
    return builder.call(fn, [vptr, ir.Constant(ir.IntType(32), 1), mask, zero])


def _masked_store_lanes(builder, value, ptr, mask):
    """Store the lanes of ``value`` selected by ``mask`` (<n x i1>) at the vector pointer ``ptr``."""
    vec = value.type
    lane = "f32" if isinstance(vec.element, ir.FloatType) else "f64"
    fn = builder.module.declare_intrinsic(
        f"llvm.masked.store.v{vec.count}{lane}.p0v{vec.count}{lane}",
        fnty=ir.FunctionType(ir.VoidType(), [vec, vec.as_pointer(), ir.IntType(32), mask.type]),
    )
    builder.call(fn, [value, ptr, ir.Constant(ir.IntType(32), 1), mask])


@intrinsic
def tile_rank1_direct(typingctx, tile, a, a_off, rs_a, live_rows, b, b_off, live_cols, kept, kept_off):
    """tile[i, :] += a[a_off + i*rs_a] * b[b_off : b_off + NR], straight from unpacked operands.

    For products that skip packing: A is read with its row stride, B's row is
    contiguous.  Rows at or past ``live_rows`` re-read the last live row and
    lanes at or past ``live_cols`` load zero (masked loads), so nothing outside
    the operands is ever touched; those parts of the tile are never written back.

    Unless ``kept`` is None, the row of B read is also stored at
    ``kept[kept_off : kept_off + NR]``, as ``pack_b_panel`` packs it (zero past
    ``live_cols``): a first row tile packs a strip for the others while it
    computes, instead of a separate copy that waits on memory.
    """
    if not isinstance(tile, TileType) or _float_pointer(a) != tile.dtype or b != a:
        return None
    keep = not isinstance(kept, types.NoneType)
    if keep and kept != a:
        return None
    s, dtype = tile.shape, tile.dtype

    def codegen(context, builder, signature, args):
        acc, ap, aoff, rsa, rows, bp, boff, cols, kp, koff = args
        bvecs = _direct_b_row(builder, s, dtype, bp, boff, cols)
        if keep:
            vec = _vector_type(s, dtype)
            for v, bvec in enumerate(bvecs):
                at = builder.add(koff, ir.Constant(_I64, v * vec.count))
                builder.store(bvec, _vector_ptr(builder, kp, at, vec), align=1)
        return _rank1_update(builder, s, dtype, acc, ap, _row_starts(builder, s, aoff, rsa, rows), bvecs)

    return tile(tile, a, a_off, rs_a, live_rows, b, b_off, live_cols, kept, kept_off), codegen


def _direct_b_row(builder, s, dtype, bp, boff, cols):
    """The NR elements of a contiguous row of B at ``boff`` as vectors, zero past ``cols`` (masked loads)."""
    vec = _vector_type(s, dtype)
    bvecs = []
    for v in range(s.vectors):
        mask = _lane_mask(builder, cols, v * vec.count, vec.count)
        bvecs.append(_masked_load(builder, bp, builder.add(boff, ir.Constant(_I64, v * vec.count)), vec, mask))
    return bvecs


def _row_starts(builder, s, aoff, rsa, rows):
    """Offsets ``aoff + i*rsa`` of the tile's rows of A; rows at or past ``rows`` repeat the last live row."""
    last = builder.sub(rows, ir.Constant(_I64, 1))
    starts = []
    for i in range(s.rows):
        row = ir.Constant(_I64, i)
        row = builder.select(builder.icmp_signed("<", row, rows), row, last)
        starts.append(builder.add(aoff, builder.mul(row, rsa)))
    return starts


def _rank1_update(builder, s, dtype, acc, ap, a_offsets, bvecs):
    """acc[i, :] += a[a_offsets[i]] * bvecs for each row i of the tile: one FMA per vector."""
    vec = _vector_type(s, dtype)
    fma = _declare_fma(builder.module, s.fused, vec)
    for i, offset in enumerate(a_offsets):
        av = _splat(builder, builder.load(builder.gep(ap, [offset])), vec)
        for v in range(s.vectors):
            idx = i * s.vectors + v
            acc = builder.insert_value(acc, builder.call(fma, [av, bvecs[v], builder.extract_value(acc, idx)]), idx)
    return acc


class ResidentType(_RegisterBlock):
    """Rows of B held in registers by a resident-B tile: depth x vectors LLVM vectors."""

    label = "Resident"

    def vector_count(self) -> int:
        return self.shape.depth * self.shape.vectors


register_model(ResidentType)(_RegisterBlockModel)


@intrinsic
def resident_b(typingctx, shape, b, b_off, rs_b, live_depth, live_cols):
    """Load rows ``b[b_off + p*rs_b : ... + NR]``, p < depth, into registers (unit-stride rows).

    For products whose whole k fits in the tile's depth: B is loaded once and
    every row of C is computed from registers (``resident_row``).  Rows at or
    past ``live_depth`` and lanes at or past ``live_cols`` load zero (masked
    loads), so nothing outside B is read.
    """
    found = _tile_args(shape, b)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, bp, boff, rsb, depth, cols = args
        vec = _vector_type(s, dtype)
        value = ir.Constant(ir.ArrayType(vec, s.depth * s.vectors), None)
        for p in range(s.depth):
            live_row = _splat(builder, builder.icmp_signed(">", depth, ir.Constant(_I64, p)), ir.VectorType(ir.IntType(1), vec.count))
            row = builder.add(boff, builder.mul(rsb, ir.Constant(_I64, p)))
            for v in range(s.vectors):
                mask = builder.and_(_lane_mask(builder, cols, v * vec.count, vec.count), live_row)
                loaded = _masked_load(builder, bp, builder.add(row, ir.Constant(_I64, v * vec.count)), vec, mask)
                value = builder.insert_value(value, loaded, p * s.vectors + v)
        return value

    return ResidentType(s, dtype)(shape, b, b_off, rs_b, live_depth, live_cols), codegen


@intrinsic
def resident_product(typingctx, tile, resident, a, a_off, rs_a, cs_a, live_rows, live_depth):
    """tile[i, :] + sum over p < ``live_depth`` of a[a_off + i*rs_a + p*cs_a] * B[p, :], B from registers.

    The same FMA chain per row, in increasing p, as ``tile_rank1`` over those k
    steps, so a row of C gets the bits every other path gives it.  Rows at or
    past ``live_rows`` repeat the last live row (never written back); A is never
    read past ``live_depth``.
    """
    if not isinstance(tile, TileType) or not isinstance(resident, ResidentType):
        return None
    if tile.shape != resident.shape or tile.dtype != resident.dtype or _float_pointer(a) != tile.dtype:
        return None
    s, dtype = tile.shape, tile.dtype

    def codegen(context, builder, signature, args):
        acc, rb, ap, aoff, rsa, csa, rows, depth = args
        vec = _vector_type(s, dtype)
        fma = _declare_fma(builder.module, s.fused, vec)
        starts = _row_starts(builder, s, aoff, rsa, rows)
        done = builder.function.append_basic_block("resident_product_done")
        finished = []  # (tile, block) of every way out of the chain, for the phi
        for p in range(s.depth):
            if p > 0:  # stop after live_depth steps: A is never read past its k
                step = builder.function.append_basic_block("resident_product_step")
                finished.append((acc, builder.block))
                builder.cbranch(builder.icmp_signed(">", depth, ir.Constant(_I64, p)), step, done)
                builder.position_at_end(step)
            column = builder.mul(csa, ir.Constant(_I64, p))
            for i in range(s.rows):
                av = _splat(builder, builder.load(builder.gep(ap, [builder.add(starts[i], column)])), vec)
                for v in range(s.vectors):
                    idx = i * s.vectors + v
                    bv = builder.extract_value(rb, p * s.vectors + v)
                    acc = builder.insert_value(acc, builder.call(fma, [av, bv, builder.extract_value(acc, idx)]), idx)
        finished.append((acc, builder.block))
        builder.branch(done)
        builder.position_at_end(done)
        result = builder.phi(acc.type)
        for value, block in finished:
            result.add_incoming(value, block)
        return result

    return tile(tile, resident, a, a_off, rs_a, cs_a, live_rows, live_depth), codegen


def _transpose(builder, rows, lanes):
    """Transpose a square block of ``lanes`` vectors of ``lanes`` lanes (butterfly of 2-input shuffles).

    Stage ``h`` swaps bit ``h`` of the row index with bit ``h`` of the lane
    index; after all log2(lanes) stages, out[r][c] = in[c][r].
    """
    i32 = ir.IntType(32)
    h = 1
    while h < lanes:
        new = list(rows)
        for r in range(lanes):
            if r & h:
                continue
            lo, hi = rows[r], rows[r + h]
            # new[r][c]   = lo[c]        if c&h == 0 else hi[c-h]
            # new[r+h][c] = lo[c+h]      if c&h == 0 else hi[c]
            m_lo = [c if not c & h else lanes + c - h for c in range(lanes)]
            m_hi = [c + h if not c & h else lanes + c for c in range(lanes)]
            new[r] = builder.shuffle_vector(lo, hi, ir.Constant(ir.VectorType(i32, lanes), m_lo))
            new[r + h] = builder.shuffle_vector(lo, hi, ir.Constant(ir.VectorType(i32, lanes), m_hi))
        rows = new
        h *= 2
    return rows


def _store_first_lanes(builder, value, base, off, live):
    """Store the first ``live`` (a compile-time count) lanes of ``value`` at element ``off`` of ``base``.

    As whole-vector stores of power-of-two pieces (for 6 of 8 lanes: 4, then 2),
    never a masked store: AVX2's masked store is microcoded on AMD cores (about
    12 cycles each), and packing A wrote one per column.
    """
    vec = value.type
    i32 = ir.IntType(32)
    undef = ir.Constant(vec, ir.Undefined)
    first = 0
    while first < live:
        piece = 1 << ((live - first).bit_length() - 1)
        at = builder.add(off, ir.Constant(_I64, first))
        if piece == 1:
            builder.store(builder.extract_element(value, ir.Constant(i32, first)), builder.gep(base, [at]))
        else:
            part = value if piece == vec.count else builder.shuffle_vector(
                value, undef, ir.Constant(ir.VectorType(i32, piece), list(range(first, first + piece)))
            )
            builder.store(part, _vector_ptr(builder, base, at, ir.VectorType(vec.element, piece)), align=1)
        first += piece


@intrinsic
def pack_a_rows_block(typingctx, shape, src, src_off, rs, dst, dst_off):
    """Pack a full MR x LANES block of A whose rows are unit-stride (row stride ``rs``).

    Reads LANES consecutive k of each of the MR rows at ``src + src_off + i*rs``
    with vector loads, transposes them in registers and writes the LANES columns
    (MR elements each) contiguously at ``dst + dst_off``: the panel layout of
    ``pack_a`` for k = 0..LANES-1.  A plain copy: no arithmetic on the values.

    The pieces are stored in address order, and a piece shorter than a vector
    (MR not a multiple of LANES) is stored whole when the next store covers
    what it writes past its end: one vector store instead of two or three
    smaller ones.  Nothing past the block's last element is written.
    """
    found = _copy_args(shape, src, dst)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, sp, so, rstride, dp, do = args
        vec = _vector_type(s, dtype)
        lanes = vec.count
        undef = ir.Constant(vec, ir.Undefined)
        pieces = [[] for _ in range(lanes)]  # per k: (value, lanes live) of each LANES-row group
        for q0 in range(0, s.rows, lanes):
            live = min(lanes, s.rows - q0)
            rows = []
            for i in range(lanes):
                if i < live:
                    off = builder.add(so, builder.mul(rstride, ir.Constant(_I64, q0 + i)))
                    rows.append(builder.load(_vector_ptr(builder, sp, off, vec), align=1))
                else:
                    rows.append(undef)
            for p, column in enumerate(_transpose(builder, rows, lanes)):
                pieces[p].append((column, live))
        stores = [piece for column in pieces for piece in column]
        at = 0
        for index, (value, live) in enumerate(stores):
            off = builder.add(do, ir.Constant(_I64, at))
            spill_covered = index + 1 < len(stores) and lanes - live <= stores[index + 1][1]
            _store_first_lanes(builder, value, dp, off, lanes if spill_covered else live)
            at += live
        return context.get_dummy_value()

    return types.void(shape, src, src_off, rs, dst, dst_off), codegen


@intrinsic
def fma_throughput_loop(typingctx, shape, src, iterations):
    """Run ``iterations`` rounds of rows*vectors independent vector FMAs on registers.

    Operands come from ``src`` (a few vectors) and the accumulators are reduced
    into one scalar at the end, so LLVM can neither fold nor drop the loop: the
    FMA peak of the core for this vector width and dtype, measured with the same
    IR the kernels use.  Performs 2 * lanes * rows * vectors * iterations flops.
    """
    found = _tile_args(shape, src)
    if found is None or not isinstance(iterations, types.Integer):
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, sp, count = args
        vec = _vector_type(s, dtype)
        fma = _declare_fma(builder.module, True, vec)
        x = builder.load(_vector_ptr(builder, sp, ir.Constant(_I64, 0), vec), align=1)
        y = builder.load(_vector_ptr(builder, sp, ir.Constant(_I64, vec.count), vec), align=1)
        start = [builder.load(_vector_ptr(builder, sp, ir.Constant(_I64, 2 * vec.count), vec), align=1)]
        n_acc = s.rows * s.vectors
        entry = builder.block
        loop = builder.append_basic_block("fma_loop")
        done = builder.append_basic_block("fma_done")
        builder.branch(loop)
        builder.position_at_end(loop)
        counter = builder.phi(_I64)
        counter.add_incoming(ir.Constant(_I64, 0), entry)
        accs = []
        for _ in range(n_acc):
            phi = builder.phi(vec)
            phi.add_incoming(start[0], entry)
            accs.append(phi)
        new = [builder.call(fma, [acc, x, y]) for acc in accs]
        nxt = builder.add(counter, ir.Constant(_I64, 1))
        counter.add_incoming(nxt, loop)
        for phi, value in zip(accs, new):
            phi.add_incoming(value, loop)
        builder.cbranch(builder.icmp_signed("<", nxt, count), loop, done)
        builder.position_at_end(done)
        total = new[0]
        for value in new[1:]:
            total = builder.fadd(total, value)
        result = builder.extract_element(total, ir.Constant(ir.IntType(32), 0))
        return result

    return dtype(shape, src, iterations), codegen


@intrinsic
def copy_column(typingctx, shape, src, src_off, live, dst, dst_off):
    """Copy ``live`` (<= MR) contiguous elements to dst and zero the rest up to MR.

    One column of an A panel when A's columns are contiguous: masked vector
    loads (lanes past ``live`` read nothing and give zero) and stores of exactly
    MR lanes, so nothing outside the source column or the panel column
    is touched.
    """
    found = _copy_args(shape, src, dst)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, sp, so, count, dp, do = args
        vec = _vector_type(s, dtype)
        for first in range(0, s.rows, vec.count):
            lanes = min(vec.count, s.rows - first)
            load_mask = _lane_mask(builder, count, first, vec.count)
            value = _masked_load(builder, sp, builder.add(so, ir.Constant(_I64, first)), vec, load_mask)
            _store_first_lanes(builder, value, dp, builder.add(do, ir.Constant(_I64, first)), lanes)
        return context.get_dummy_value()

    return types.void(shape, src, src_off, live, dst, dst_off), codegen


@intrinsic
def pack_b_cols_block(typingctx, shape, src, src_off, cs, dst, dst_off):
    """Pack one LANES x LANES block of a B panel whose columns are unit-stride.

    Column j is read at ``src + src_off + j*cs`` (LANES consecutive k) with a
    vector load, the block is transposed in registers, and its LANES rows are
    written at ``dst + dst_off`` with the panel's row stride NR.  B transposed
    (a linear layer's W stored [N, K]) packs this way.  A plain copy: no
    arithmetic on the values.
    """
    found = _copy_args(shape, src, dst)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, sp, so, cstride, dp, do = args
        vec = _vector_type(s, dtype)
        lanes = vec.count
        nr = s.vectors * lanes
        cols = []
        for j in range(lanes):
            off = builder.add(so, builder.mul(cstride, ir.Constant(_I64, j)))
            cols.append(builder.load(_vector_ptr(builder, sp, off, vec), align=1))
        rows = _transpose(builder, cols, lanes)
        for p in range(lanes):
            off = builder.add(do, ir.Constant(_I64, p * nr))
            builder.store(rows[p], _vector_ptr(builder, dp, off, vec), align=1)
        return context.get_dummy_value()

    return types.void(shape, src, src_off, cs, dst, dst_off), codegen


# --- row dots: a matrix with contiguous rows times one vector ------------------

def _dot_shape(shape: TileShape, blocks: int = 1) -> TileShape:
    """The tile of a dot block: one row of ``blocks`` vectors of sums, ``shape``'s width
    and rule; each vector holds the sums of LANES rows (a row block)."""
    return TileShape(rows=1, vectors=blocks, bits=shape.bits, fused=shape.fused)


def _dot_pair_shape(shape: TileShape) -> TileShape:
    """The tile of a pair of dot blocks (``dot_pair_zero``)."""
    return _dot_shape(shape, 2)


def _opaque(builder, value):
    """``value`` passed through an empty inline-assembly statement: the same number at run
    time, but one LLVM cannot prove equal to ``value``, so loads addressed from it are not
    merged with the loads addressed from ``value`` (no instruction is emitted)."""
    return builder.asm(ir.FunctionType(value.type, [value.type]), "", "=r,0", [value], False, "opaque")


def _zeros_of(block_shape, name: str, doc: str):
    """An intrinsic ``name(shape, ptr)``: a register block of ``block_shape(shape)``, all
    zeros, for the dtype of ``ptr`` (the dot blocks' starting sums)."""

    def typer(typingctx, shape, ptr):
        found = _tile_args(shape, ptr)
        if found is None:
            return None
        s, dtype = found
        block = TileType(block_shape(s), dtype)

        def codegen(context, builder, signature, args):
            return ir.Constant(ir.ArrayType(_vector_type(s, dtype), block.vector_count()), None)

        return block(shape, ptr), codegen

    typer.__name__, typer.__doc__ = name, doc
    return intrinsic(typer)


dot_zero = _zeros_of(
    _dot_shape, "dot_zero",
    """A dot block of zeros for the shape's vectors and rule and the dtype of ``ptr``:
    a one-row tile whose lanes are rows of the matrix (``tile_store`` writes it out).""",
)

dot_pair_zero = _zeros_of(
    _dot_pair_shape, "dot_pair_zero",
    """``dot_zero`` for a pair of row blocks (2 x LANES rows, two vectors of sums), whose
    two FMA chains ``dot_steps`` runs side by side.""",
)


def _dot_rows_update(builder, s, dtype, acc, vp, voff, vstride, mp, moff, ld, rows, live):
    """The body of ``dot_steps`` / ``dot_tail``: ``live`` None for LANES whole steps.

    Each row block of the dot block (``s.vectors``) loads its own splats of v, the
    later ones from an opaque copy of ``voff``: shared, the LANES splats would stay in
    registers across the blocks and push the loaded rows out to the stack (a pair of
    float32 blocks ran 1.4x slower than one); a reloaded splat is one
    more load, which the loop has slots for.
    """
    vec = _vector_type(s, dtype)
    lanes = vec.count
    fma = _declare_fma(builder.module, s.fused, vec)
    mask = None if live is None else _lane_mask(builder, live, 0, lanes)
    last = builder.sub(rows, ir.Constant(_I64, 1))

    def splats(base):
        steps = []  # (x splat, whether step p is taken: None when always)
        for p in range(lanes):
            step = ir.Constant(_I64, p)
            taken = None if live is None else builder.icmp_signed("<", step, live)
            at = step if taken is None else builder.select(taken, step, ir.Constant(_I64, 0))  # v past live_k unread
            x = builder.load(builder.gep(vp, [builder.add(base, builder.mul(at, vstride))]))
            steps.append((_splat(builder, x, vec), taken))
        return steps

    for g in range(s.vectors):
        steps = splats(voff if g == 0 else _opaque(builder, voff))
        offsets = []
        for r in range(lanes):
            row = ir.Constant(_I64, g * lanes + r)
            row = builder.select(builder.icmp_signed("<", row, rows), row, last)
            offsets.append(builder.add(moff, builder.mul(row, ld)))
        if mask is None:
            columns = _transpose(builder, [builder.load(_vector_ptr(builder, mp, o, vec), align=1) for o in offsets], lanes)
        else:
            columns = _transpose(builder, [_masked_load(builder, mp, o, vec, mask) for o in offsets], lanes)
        sums = builder.extract_value(acc, g)
        for p, (x, taken) in enumerate(steps):
            step = builder.call(fma, [x, columns[p], sums])
            sums = step if taken is None else builder.select(taken, step, sums)
        acc = builder.insert_value(acc, sums, g)
    return acc


def _dot_args(block, v, mat, block_shape=None):
    """(TileShape, dtype) when the arguments suit the update of a dot block (of
    ``block_shape``'s shape: one or a pair of row blocks unless given), else None."""
    if not isinstance(block, TileType):
        return None
    if block_shape is None:
        shapes = (_dot_shape(block.shape), _dot_pair_shape(block.shape))
    else:
        shapes = (block_shape(block.shape),)
    if block.shape not in shapes:
        return None
    if _float_pointer(v) != block.dtype or mat != v:
        return None
    return block.shape, block.dtype


@intrinsic
def dot_steps(typingctx, block, v, v_off, v_stride, mat, m_off, ldm, live_rows):
    """block[r] + sum over p < LANES of v[v_off + p*v_stride] * mat[m_off + r*ldm + p], k increasing.

    LANES k steps of the dot products of rows r of ``mat`` (contiguous along
    k) with the vector ``v``: each row's LANES elements are one vector load, a
    LANES x LANES block of rows is transposed in registers, and lane r of a
    vector then takes row r's FMA chain in increasing k: the chain every
    other path gives an element of C.  A pair of blocks (``dot_pair_zero``)
    runs two such chains, independent, side by side.  Rows at or past ``live_rows`` re-read
    the last live row (their sums are never used).  Nothing is requested
    ahead: the prefetchers follow the rows (a request 512 bytes ahead of each
    row measured from 20 % slower to 4 % faster, depending on the CPU).
    """
    found = _dot_args(block, v, mat)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        acc, vp, voff, vstride, mp, moff, ld, rows = args
        return _dot_rows_update(builder, s, dtype, acc, vp, voff, vstride, mp, moff, ld, rows, None)

    return block(block, v, v_off, v_stride, mat, m_off, ldm, live_rows), codegen


@intrinsic
def dot_tail(typingctx, block, v, v_off, v_stride, mat, m_off, ldm, live_rows, live_k):
    """``dot_steps`` for the last ``live_k`` < LANES steps of the rows: masked
    loads (nothing past a row's end is read) and the steps past it skipped."""
    found = _dot_args(block, v, mat)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        acc, vp, voff, vstride, mp, moff, ld, rows, live = args
        return _dot_rows_update(builder, s, dtype, acc, vp, voff, vstride, mp, moff, ld, rows, live)

    return block(block, v, v_off, v_stride, mat, m_off, ldm, live_rows, live_k), codegen


# --- lane-wise row dots: the opt-in that sums as BLAS's GEMV does ---------------

# Rows whose dot products run at once (``lane_dot_steps``), each in two vectors
# of partial sums: eight independent FMA chains, as many as a vector FMA's
# latency times its throughput on the CPUs we know.
LANE_DOT_ROWS = 4


def _lane_dot_shape(shape: TileShape) -> TileShape:
    """The block of lane-wise row dots: LANE_DOT_ROWS rows of two vectors, ``shape``'s width and rule."""
    return TileShape(rows=LANE_DOT_ROWS, vectors=2, bits=shape.bits, fused=shape.fused)


lane_dot_width = _shape_constant(lambda s, size: 2 * s.lanes(size), needs_pointer=True)
lane_dot_width.__doc__ = "lane_dot_width(shape, ptr): k steps one ``lane_dot_steps`` takes, a compile-time constant."


lane_dot_zero = _zeros_of(
    _lane_dot_shape, "lane_dot_zero",
    "A block of lane-wise row dots at zero, for the shape's width and rule and the dtype of ``ptr``.",
)


def _lane_dot_update(builder, s, dtype, acc, vp, voff, mp, moff, ld, rows, live):
    """The body of ``lane_dot_steps`` / ``lane_dot_tail``: ``live`` None for two whole vectors of k."""
    vec = _vector_type(s, dtype)
    lanes = vec.count
    fma = _declare_fma(builder.module, s.fused, vec)
    last = builder.sub(rows, ir.Constant(_I64, 1))

    def load(ptr, off, half):
        at = builder.add(off, ir.Constant(_I64, half * lanes))
        if live is None:
            return builder.load(_vector_ptr(builder, ptr, at, vec), align=1)
        return _masked_load(builder, ptr, at, vec, _lane_mask(builder, live, half * lanes, lanes))

    xs = [load(vp, voff, half) for half in range(2)]
    for r in range(LANE_DOT_ROWS):
        row = ir.Constant(_I64, r)
        row = builder.select(builder.icmp_signed("<", row, rows), row, last)
        off = builder.add(moff, builder.mul(row, ld))
        for half in range(2):
            sums = builder.call(fma, [load(mp, off, half), xs[half], builder.extract_value(acc, 2 * r + half)])
            acc = builder.insert_value(acc, sums, 2 * r + half)
    return acc


@intrinsic
def lane_dot_steps(typingctx, block, v, v_off, mat, m_off, ldm, live_rows):
    """block + the products of two vectors of k of rows r < LANE_DOT_ROWS of ``mat`` (from
    ``m_off + r*ldm``, contiguous) with v[v_off:] (contiguous), lane by lane: each lane a
    chain of its own k.  Rows at or past ``live_rows`` re-read the last live row."""
    found = _dot_args(block, v, mat, _lane_dot_shape)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        acc, vp, voff, mp, moff, ld, rows = args
        return _lane_dot_update(builder, s, dtype, acc, vp, voff, mp, moff, ld, rows, None)

    return block(block, v, v_off, mat, m_off, ldm, live_rows), codegen


@intrinsic
def lane_dot_tail(typingctx, block, v, v_off, mat, m_off, ldm, live_rows, live_k):
    """``lane_dot_steps`` for the last ``live_k`` < two vectors of k: masked loads (nothing
    past a row's end is read; the lanes past it add 0 * 0)."""
    found = _dot_args(block, v, mat, _lane_dot_shape)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        acc, vp, voff, mp, moff, ld, rows, live = args
        return _lane_dot_update(builder, s, dtype, acc, vp, voff, mp, moff, ld, rows, live)

    return block(block, v, v_off, mat, m_off, ldm, live_rows, live_k), codegen


@intrinsic
def lane_dot_sums(typingctx, block, buf):
    """buf[r] = the sum of row r's partial sums: its two vectors added, then halves added
    until one lane is left (a fixed order)."""
    if not isinstance(block, TileType) or block.shape != _lane_dot_shape(block.shape) or _float_pointer(buf) != block.dtype:
        return None

    def codegen(context, builder, signature, args):
        acc, bp = args
        i32 = ir.IntType(32)
        for r in range(LANE_DOT_ROWS):
            total = builder.fadd(builder.extract_value(acc, 2 * r), builder.extract_value(acc, 2 * r + 1))
            width = total.type.count
            while width > 1:
                width //= 2
                low = builder.shuffle_vector(total, total, ir.Constant(ir.VectorType(i32, width), list(range(width))))
                high = builder.shuffle_vector(total, total, ir.Constant(ir.VectorType(i32, width), list(range(width, 2 * width))))
                total = builder.fadd(low, high)
            builder.store(builder.extract_element(total, ir.Constant(i32, 0)), builder.gep(bp, [ir.Constant(_I64, r)]))
        return context.get_dummy_value()

    return types.void(block, buf), codegen


@intrinsic
def axpy_vector(typingctx, shape, x, src, src_off, dst, dst_off):
    """dst[dst_off : +LANES] = x * src[src_off : +LANES] + dst[...], one vector, the shape's rule.

    The streaming step of a single-row product: LLVM does not vectorise the
    equivalent scalar loop on its own (it cannot prove the two rows apart).
    """
    found = _copy_args(shape, src, dst)
    if found is None or x != found[1]:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, xv, sp, so, dp, do = args
        vec = _vector_type(s, dtype)
        fma = _declare_fma(builder.module, s.fused, vec)
        target = _vector_ptr(builder, dp, do, vec)
        value = builder.call(fma, [_splat(builder, xv, vec), builder.load(_vector_ptr(builder, sp, so, vec), align=1),
                                   builder.load(target, align=1)])
        builder.store(value, target, align=1)
        return context.get_dummy_value()

    return types.void(shape, x, src, src_off, dst, dst_off), codegen


# Rows of ``src`` that one ``axpy_rows`` (``axpy_rows_wide``) adds into a vector of ``dst``.
AXPY_ROWS = 4
AXPY_ROWS_WIDE = 8


def _axpy_rows(count):
    """An intrinsic adding ``count`` rows of ``src`` into a vector of ``dst``."""

    @intrinsic
    def axpy_rows(typingctx, shape, x, x_off, x_stride, src, src_off, rs, dst, dst_off):
        """dst[dst_off : +LANES] = the FMA chain over q < count, in increasing q, of
        x[x_off + q*x_stride] * src[src_off + q*rs : +LANES], from dst's vector; the shape's rule.

        ``axpy_vector`` count times in one: the same multiply-adds in the same
        order, with ``dst``'s vector loaded and stored once, not once per row.
        """
        found = _copy_args(shape, src, dst)
        if found is None or x != src:
            return None
        s, dtype = found

        def codegen(context, builder, signature, args):
            _, xp, xo, xs, sp, so, rsv, dp, do = args
            vec = _vector_type(s, dtype)
            fma = _declare_fma(builder.module, s.fused, vec)
            target = _vector_ptr(builder, dp, do, vec)
            value = builder.load(target, align=1)
            for q in range(count):
                step = ir.Constant(_I64, q)
                scale = builder.load(builder.gep(xp, [builder.add(xo, builder.mul(step, xs))]))
                row = builder.load(_vector_ptr(builder, sp, builder.add(so, builder.mul(step, rsv)), vec), align=1)
                value = builder.call(fma, [_splat(builder, scale, vec), row, value])
            builder.store(value, target, align=1)
            return context.get_dummy_value()

        return types.void(shape, x, types.intp, types.intp, src, types.intp, types.intp, dst, types.intp), codegen

    return axpy_rows


axpy_rows = _axpy_rows(AXPY_ROWS)
axpy_rows_wide = _axpy_rows(AXPY_ROWS_WIDE)


@intrinsic
def prefetch_read(typingctx, ptr, off):
    """Hint that ``ptr + off`` will be read soon (no effect on results; never faults)."""
    if _float_pointer(ptr) is None or not isinstance(off, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        _prefetch(builder, builder.gep(args[0], [args[1]]), 0, _READ)
        return context.get_dummy_value()

    return types.void(ptr, off), codegen


@intrinsic
def prefetch_read_l2(typingctx, ptr, off):
    """Hint that ``ptr + off`` will be read, but not before what the L1 holds now
    has been used: the line comes into the L2, not the L1."""
    if _float_pointer(ptr) is None or not isinstance(off, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        _prefetch(builder, builder.gep(args[0], [args[1]]), 0, _READ, _OUTER_LEVELS)
        return context.get_dummy_value()

    return types.void(ptr, off), codegen
