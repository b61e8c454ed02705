"""Row dots and GEMV: a matrix with contiguous rows times one vector, in order or
lane-wise, and the AXPY rows of the single-row stream.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .memory import copy_args, shape_constant, tile_args
from .pack import transpose_vectors
from .tile import lane_mask, masked_load
from .types import I64, TileShape, TileType, declare_fma, float_pointer, splat_vector, vector_ptr, vector_type

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
        found = tile_args(shape, ptr)
        if found is None:
            return None
        s, dtype = found
        block = TileType(block_shape(s), dtype)

        def codegen(context, builder, signature, args):
            return ir.Constant(ir.ArrayType(vector_type(s, dtype), block.vector_count()), None)

        return block(shape, ptr), codegen

    typer.__name__, typer.__doc__ = name, doc
    return intrinsic(typer)


dot_zero = _zeros_of(
    _dot_shape,
    "dot_zero",
    """A dot block of zeros for the shape's vectors and rule and the dtype of ``ptr``:
    a one-row tile whose lanes are rows of the matrix (``tile_store`` writes it out).""",
)

dot_pair_zero = _zeros_of(
    _dot_pair_shape,
    "dot_pair_zero",
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
    vec = vector_type(s, dtype)
    lanes = vec.count
    fma = declare_fma(builder.module, s.fused, vec)
    mask = None if live is None else lane_mask(builder, live, 0, lanes)
    last = builder.sub(rows, ir.Constant(I64, 1))

    def splats(base):
        steps = []  # (x splat, whether step p is taken: None when always)
        for p in range(lanes):
            step = ir.Constant(I64, p)
            taken = None if live is None else builder.icmp_signed("<", step, live)
            at = (
                step if taken is None else builder.select(taken, step, ir.Constant(I64, 0))
            )  # v past live_k unread
            x = builder.load(builder.gep(vp, [builder.add(base, builder.mul(at, vstride))]))
            steps.append((splat_vector(builder, x, vec), taken))
        return steps

    for g in range(s.vectors):
        steps = splats(voff if g == 0 else _opaque(builder, voff))
        offsets = []
        for r in range(lanes):
            row = ir.Constant(I64, g * lanes + r)
            row = builder.select(builder.icmp_signed("<", row, rows), row, last)
            offsets.append(builder.add(moff, builder.mul(row, ld)))
        if mask is None:
            columns = transpose_vectors(
                builder, [builder.load(vector_ptr(builder, mp, o, vec), align=1) for o in offsets], lanes
            )
        else:
            columns = transpose_vectors(
                builder, [masked_load(builder, mp, o, vec, mask) for o in offsets], lanes
            )
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
    if float_pointer(v) != block.dtype or mat != v:
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


lane_dot_width = shape_constant(lambda s, size: 2 * s.lanes(size), needs_pointer=True)
lane_dot_width.__doc__ = (
    "lane_dot_width(shape, ptr): k steps one ``lane_dot_steps`` takes, a compile-time constant."
)


lane_dot_zero = _zeros_of(
    _lane_dot_shape,
    "lane_dot_zero",
    "A block of lane-wise row dots at zero, for the shape's width and rule and the dtype of ``ptr``.",
)


def _lane_dot_update(builder, s, dtype, acc, vp, voff, mp, moff, ld, rows, live):
    """The body of ``lane_dot_steps`` / ``lane_dot_tail``: ``live`` None for two whole vectors of k."""
    vec = vector_type(s, dtype)
    lanes = vec.count
    fma = declare_fma(builder.module, s.fused, vec)
    last = builder.sub(rows, ir.Constant(I64, 1))

    def load(ptr, off, half):
        at = builder.add(off, ir.Constant(I64, half * lanes))
        if live is None:
            return builder.load(vector_ptr(builder, ptr, at, vec), align=1)
        return masked_load(builder, ptr, at, vec, lane_mask(builder, live, half * lanes, lanes))

    xs = [load(vp, voff, half) for half in range(2)]
    for r in range(LANE_DOT_ROWS):
        row = ir.Constant(I64, r)
        row = builder.select(builder.icmp_signed("<", row, rows), row, last)
        off = builder.add(moff, builder.mul(row, ld))
        for half in range(2):
            sums = builder.call(
                fma, [load(mp, off, half), xs[half], builder.extract_value(acc, 2 * r + half)]
            )
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
    if (
        not isinstance(block, TileType)
        or block.shape != _lane_dot_shape(block.shape)
        or float_pointer(buf) != block.dtype
    ):
        return None

    def codegen(context, builder, signature, args):
        acc, bp = args
        i32 = ir.IntType(32)
        for r in range(LANE_DOT_ROWS):
            total = builder.fadd(builder.extract_value(acc, 2 * r), builder.extract_value(acc, 2 * r + 1))
            width = total.type.count
            while width > 1:
                width //= 2
                low = builder.shuffle_vector(
                    total, total, ir.Constant(ir.VectorType(i32, width), list(range(width)))
                )
                high = builder.shuffle_vector(
                    total, total, ir.Constant(ir.VectorType(i32, width), list(range(width, 2 * width)))
                )
                total = builder.fadd(low, high)
            builder.store(
                builder.extract_element(total, ir.Constant(i32, 0)), builder.gep(bp, [ir.Constant(I64, r)])
            )
        return context.get_dummy_value()

    return types.void(block, buf), codegen


@intrinsic
def axpy_vector(typingctx, shape, x, src, src_off, dst, dst_off):
    """dst[dst_off : +LANES] = x * src[src_off : +LANES] + dst[...], one vector, the shape's rule.

    The streaming step of a single-row product: LLVM does not vectorise the
    equivalent scalar loop on its own (it cannot prove the two rows apart).
    """
    found = copy_args(shape, src, dst)
    if found is None or x != found[1]:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, xv, sp, so, dp, do = args
        vec = vector_type(s, dtype)
        fma = declare_fma(builder.module, s.fused, vec)
        target = vector_ptr(builder, dp, do, vec)
        value = builder.call(
            fma,
            [
                splat_vector(builder, xv, vec),
                builder.load(vector_ptr(builder, sp, so, vec), align=1),
                builder.load(target, align=1),
            ],
        )
        builder.store(value, target, align=1)
        return context.get_dummy_value()

    return types.void(shape, x, src, src_off, dst, dst_off), codegen


# Rows of ``src`` that one ``axpy_rows`` (``axpy_rows_wide``) adds into a vector of ``dst``: the
# two group sizes the single-row stream chooses between by its kernel's GEMV tile (``wide_groups``,
# ``row_fetch.wide_min_bytes``).
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
        found = copy_args(shape, src, dst)
        if found is None or x != src:
            return None
        s, dtype = found

        def codegen(context, builder, signature, args):
            _, xp, xo, xs, sp, so, rsv, dp, do = args
            vec = vector_type(s, dtype)
            fma = declare_fma(builder.module, s.fused, vec)
            target = vector_ptr(builder, dp, do, vec)
            value = builder.load(target, align=1)
            for q in range(count):
                step = ir.Constant(I64, q)
                scale = builder.load(builder.gep(xp, [builder.add(xo, builder.mul(step, xs))]))
                row = builder.load(
                    vector_ptr(builder, sp, builder.add(so, builder.mul(step, rsv)), vec), align=1
                )
                value = builder.call(fma, [splat_vector(builder, scale, vec), row, value])
            builder.store(value, target, align=1)
            return context.get_dummy_value()

        return types.void(
            shape, x, types.intp, types.intp, src, types.intp, types.intp, dst, types.intp
        ), codegen

    return axpy_rows


axpy_rows = _axpy_rows(AXPY_ROWS)
axpy_rows_wide = _axpy_rows(AXPY_ROWS_WIDE)
