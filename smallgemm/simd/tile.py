"""The register tile: zero, rank-1 update, load, store and write-back of C (the
BLAS beta rule), direct (unpacked) updates with masked edges, and resident B.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .memory import tile_args
from .types import (
    I64,
    PREFETCH_READ,
    PREFETCH_WRITE,
    TileShapeType,
    TileType,
    declare_fma,
    element_bytes,
    emit_prefetch,
    float_pointer,
    splat_vector,
    vector_ptr,
    vector_type,
)

# --- the register tile -------------------------------------------------------------


@intrinsic
def tile_zero(typingctx, shape, ptr):
    """A tile of zeros for the dtype of ``ptr``."""
    found = tile_args(shape, ptr)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        return ir.Constant(ir.ArrayType(vector_type(s, dtype), s.rows * s.vectors), None)

    return TileType(s, dtype)(shape, ptr), codegen


@intrinsic
def tile_rank1(typingctx, tile, a, a_off, b, b_off):
    """tile[i, :] += a[a_off + i] * b[b_off : b_off + NR] for every row i."""
    if not isinstance(tile, TileType) or float_pointer(a) != tile.dtype or b != a:
        return None
    s, dtype = tile.shape, tile.dtype

    def codegen(context, builder, signature, args):
        acc, ap, aoff, bp, boff = args
        vec = vector_type(s, dtype)
        bvecs = [
            builder.load(
                vector_ptr(builder, bp, builder.add(boff, ir.Constant(I64, v * vec.count)), vec), align=1
            )
            for v in range(s.vectors)
        ]
        rows = [builder.add(aoff, ir.Constant(I64, i)) for i in range(s.rows)]
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
    dtype = float_pointer(a)
    if not isinstance(shape, TileShapeType) or dtype is None or b != a:
        return None
    s = shape.shape

    def codegen(context, builder, signature, args):
        _, ap, aoff, bp, boff = args
        size = element_bytes(dtype)
        for ptr, off, count in ((ap, aoff, s.rows), (bp, boff, s.cols(size))):
            base = builder.gep(ptr, [off])
            for byte in range(0, count * size, 64):
                emit_prefetch(builder, base, byte, PREFETCH_READ)
        return context.get_dummy_value()

    return types.void(shape, a, a_off, b, b_off), codegen


@intrinsic
def tile_store(typingctx, tile, buf):
    """Store the raw tile row-major (row stride NR) into buf[0 : MR*NR]."""
    if not isinstance(tile, TileType) or float_pointer(buf) != tile.dtype:
        return None
    s, dtype = tile.shape, tile.dtype

    def codegen(context, builder, signature, args):
        acc, bp = args
        vec = vector_type(s, dtype)
        for idx in range(s.rows * s.vectors):
            builder.store(
                builder.extract_value(acc, idx),
                vector_ptr(builder, bp, ir.Constant(I64, idx * vec.count), vec),
                align=1,
            )
        return context.get_dummy_value()

    return types.void(tile, buf), codegen


@intrinsic
def tile_load(typingctx, shape, buf):
    """A tile read back from buf[0 : MR*NR], row-major as ``tile_store`` wrote it."""
    found = tile_args(shape, buf)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, bp = args
        vec = vector_type(s, dtype)
        value = ir.Constant(ir.ArrayType(vec, s.rows * s.vectors), None)
        for idx in range(s.rows * s.vectors):
            loaded = builder.load(vector_ptr(builder, bp, ir.Constant(I64, idx * vec.count), vec), align=1)
            value = builder.insert_value(value, loaded, idx)
        return value

    return TileType(s, dtype)(shape, buf), codegen


# Update rules when a finished tile is merged into C.  Every path of the library
# (vector write, scalar edge write, few-rows kernels) applies exactly these, so an
# element of C gets the same bits whichever path wrote it.  With CONTINUE the tile
# did not start from zero but from C (``tile_read``): the FMA chain of each element
# goes on across KC blocks, and C holds the chain so far between them.
OVERWRITE = 0  # first kc block, beta == 0:  C = alpha*AB        (C is never read)
SCALE = 1  # first kc block, beta != 0:      C = alpha*AB + beta*C
ACCUMULATE = 2  # later kc blocks, not exact: C = alpha*AB + C
CONTINUE = 3  # the chain went on from C:     C = alpha*AB        (AB started as C)


def _write_args(tile, c, alpha, beta):
    """(TileShape, dtype) when a tile can be merged into ``c`` with these scalars, else None."""
    if not isinstance(tile, TileType) or float_pointer(c) != tile.dtype:
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
    fma = declare_fma(builder.module, s.fused, vec)
    va = splat_vector(builder, alpha_v, vec)
    vb = splat_vector(builder, beta_v, vec)
    masks = [
        None if live is None else lane_mask(builder, live[1], v * vec.count, vec.count)
        for v in range(s.vectors)
    ]

    def load(ptr, v):
        if masks[v] is None:
            return builder.load(ptr, align=1)
        return masked_load(builder, ptr, None, vec, masks[v])

    def store(value, ptr, v):
        if masks[v] is None:
            builder.store(value, ptr, align=1)
        else:
            masked_store(builder, value, ptr, masks[v])

    fn = builder.function
    blocks = {m: fn.append_basic_block(f"tile_write_{m}") for m in (OVERWRITE, SCALE, ACCUMULATE)}
    done = fn.append_basic_block("tile_write_done")
    switch = builder.switch(builder.sext(mode_v, I64) if mode_v.type != I64 else mode_v, blocks[ACCUMULATE])
    switch.add_case(ir.Constant(I64, OVERWRITE), blocks[OVERWRITE])
    switch.add_case(ir.Constant(I64, CONTINUE), blocks[OVERWRITE])
    switch.add_case(ir.Constant(I64, SCALE), blocks[SCALE])
    for m, block in blocks.items():
        builder.position_at_end(block)
        for i in range(s.rows):
            if i > 0 and live is not None:
                next_row = fn.append_basic_block("tile_write_row")
                builder.cbranch(builder.icmp_signed(">", live[0], ir.Constant(I64, i)), next_row, done)
                builder.position_at_end(next_row)
            row = builder.add(coff, builder.mul(rstride, ir.Constant(I64, i)))
            for v in range(s.vectors):
                ptr = vector_ptr(builder, cp, builder.add(row, ir.Constant(I64, v * vec.count)), vec)
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


def _read_tile(builder, s, dtype, cp, coff, rstride, live=None):
    """A tile of C's elements, rows of C unit-stride; with ``live`` = (rows, cols), rows at
    or past ``rows`` and lanes at or past ``cols`` are not read (zero)."""
    vec = vector_type(s, dtype)
    value = ir.Constant(ir.ArrayType(vec, s.rows * s.vectors), None)
    for i in range(s.rows):
        row = builder.add(coff, builder.mul(rstride, ir.Constant(I64, i)))
        for v in range(s.vectors):
            ptr = vector_ptr(builder, cp, builder.add(row, ir.Constant(I64, v * vec.count)), vec)
            if live is None:
                loaded = builder.load(ptr, align=1)
            else:
                lanes = lane_mask(builder, live[1], v * vec.count, vec.count)
                row_live = builder.icmp_signed(">", live[0], ir.Constant(I64, i))
                mask = builder.and_(lanes, splat_vector(builder, row_live, lanes.type))
                loaded = masked_load(builder, ptr, None, vec, mask)
            value = builder.insert_value(value, loaded, i * s.vectors + v)
    return value


@intrinsic
def tile_read(typingctx, shape, c, c_off, rs):
    """A full MR x NR tile of C, rows unit-stride (row stride ``rs``): the start of a
    chain that goes on from C (CONTINUE)."""
    found = tile_args(shape, c)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, cp, coff, rstride = args
        return _read_tile(builder, s, dtype, cp, coff, rstride)

    return TileType(s, dtype)(shape, c, c_off, rs), codegen


@intrinsic
def tile_read_part(typingctx, shape, c, c_off, rs, live_rows, live_cols):
    """``tile_read`` of the top-left ``live_rows x live_cols`` only (masked loads); the rest
    of the tile is zero and nothing else of C is read."""
    found = tile_args(shape, c)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, cp, coff, rstride, rows, cols = args
        return _read_tile(builder, s, dtype, cp, coff, rstride, live=(rows, cols))

    return TileType(s, dtype)(shape, c, c_off, rs, live_rows, live_cols), codegen


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
    dtype = float_pointer(c)
    if not isinstance(shape, TileShapeType) or dtype is None:
        return None
    s = shape.shape

    def codegen(context, builder, signature, args):
        _, cp, coff, rstride = args
        row_bytes = s.cols(element_bytes(dtype)) * element_bytes(dtype)
        for i in range(s.rows):
            row = builder.add(coff, builder.mul(rstride, ir.Constant(I64, i)))
            base = builder.gep(cp, [row])
            for byte in (*range(0, row_bytes, 64), row_bytes - 1):
                emit_prefetch(builder, base, byte, PREFETCH_WRITE)
        return context.get_dummy_value()

    return types.void(shape, c, c_off, rs), codegen


def lane_mask(builder, live, first_lane, count):
    """<count x i1>: lane i is on when first_lane + i < live."""
    idx = ir.Constant(ir.VectorType(I64, count), [first_lane + i for i in range(count)])
    return builder.icmp_unsigned("<", idx, splat_vector(builder, live, ir.VectorType(I64, count)))


def masked_load(builder, ptr, off, vec, mask):
    """Load the lanes of ``mask`` from ``ptr + off`` elements (``off`` None: ``ptr`` is a vector pointer); others are zero."""
    fn = builder.module.declare_intrinsic(
        f"llvm.masked.load.v{vec.count}{'f32' if isinstance(vec.element, ir.FloatType) else 'f64'}.p0",
        fnty=ir.FunctionType(vec, [vec.as_pointer(), ir.IntType(32), mask.type, vec]),
    )
    zero = ir.Constant(vec, None)
    vptr = ptr if off is None else vector_ptr(builder, ptr, off, vec)
    return builder.call(fn, [vptr, ir.Constant(ir.IntType(32), 1), mask, zero])


def masked_store(builder, value, ptr, mask):
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
    if not isinstance(tile, TileType) or float_pointer(a) != tile.dtype or b != a:
        return None
    keep = not isinstance(kept, types.NoneType)
    if keep and kept != a:
        return None
    s, dtype = tile.shape, tile.dtype

    def codegen(context, builder, signature, args):
        acc, ap, aoff, rsa, rows, bp, boff, cols, kp, koff = args
        bvecs = _direct_b_row(builder, s, dtype, bp, boff, cols)
        if keep:
            vec = vector_type(s, dtype)
            for v, bvec in enumerate(bvecs):
                at = builder.add(koff, ir.Constant(I64, v * vec.count))
                builder.store(bvec, vector_ptr(builder, kp, at, vec), align=1)
        return _rank1_update(builder, s, dtype, acc, ap, row_starts(builder, s, aoff, rsa, rows), bvecs)

    return tile(tile, a, a_off, rs_a, live_rows, b, b_off, live_cols, kept, kept_off), codegen


@intrinsic
def tile_rank1_panels(typingctx, tile, panel, a, a_off, b, b_off, panel_stride):
    """tile[0, :] += a[a_off] * the rows at ``b_off`` of the packed panels of ``panel``'s width
    that lie ``panel_stride`` elements apart: a one-row tile (``panel_row``) over several
    panels side by side, their columns consecutive in C."""
    if not isinstance(tile, TileType) or tile.shape.rows != 1 or not isinstance(panel, TileShapeType):
        return None
    if float_pointer(a) != tile.dtype or b != a or tile.shape.vectors % panel.shape.vectors:
        return None
    s, dtype, per_panel = tile.shape, tile.dtype, panel.shape.vectors

    def codegen(context, builder, signature, args):
        acc, _, ap, aoff, bp, boff, stride = args
        vec = vector_type(s, dtype)
        bvecs = []
        for v in range(s.vectors):
            start = builder.add(builder.mul(ir.Constant(I64, v // per_panel), stride), boff)
            at = builder.add(start, ir.Constant(I64, v % per_panel * vec.count))
            bvecs.append(builder.load(vector_ptr(builder, bp, at, vec), align=1))
        return _rank1_update(builder, s, dtype, acc, ap, [aoff], bvecs)

    return tile(tile, panel, a, a_off, b, b_off, panel_stride), codegen


def _direct_b_row(builder, s, dtype, bp, boff, cols):
    """The NR elements of a contiguous row of B at ``boff`` as vectors, zero past ``cols`` (masked loads)."""
    vec = vector_type(s, dtype)
    bvecs = []
    for v in range(s.vectors):
        mask = lane_mask(builder, cols, v * vec.count, vec.count)
        bvecs.append(masked_load(builder, bp, builder.add(boff, ir.Constant(I64, v * vec.count)), vec, mask))
    return bvecs


def row_starts(builder, s, aoff, rsa, rows):
    """Offsets ``aoff + i*rsa`` of the tile's rows of A; rows at or past ``rows`` repeat the last live row."""
    last = builder.sub(rows, ir.Constant(I64, 1))
    starts = []
    for i in range(s.rows):
        row = ir.Constant(I64, i)
        row = builder.select(builder.icmp_signed("<", row, rows), row, last)
        starts.append(builder.add(aoff, builder.mul(row, rsa)))
    return starts


def _rank1_update(builder, s, dtype, acc, ap, a_offsets, bvecs):
    """acc[i, :] += a[a_offsets[i]] * bvecs for each row i of the tile: one FMA per vector."""
    vec = vector_type(s, dtype)
    fma = declare_fma(builder.module, s.fused, vec)
    for i, offset in enumerate(a_offsets):
        av = splat_vector(builder, builder.load(builder.gep(ap, [offset])), vec)
        for v in range(s.vectors):
            idx = i * s.vectors + v
            acc = builder.insert_value(
                acc, builder.call(fma, [av, bvecs[v], builder.extract_value(acc, idx)]), idx
            )
    return acc
