"""Register strips: a few rows of C, a strip of columns at a time, each element's sum held in
a register across all of k while B's rows stream past (one row times B and few rows times a
B the caches hold: ``unpacked.gemv_rows``).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, register_jitable

from .memory import copy_args, tile_cols, tile_lanes
from .records import Matrix
from .subroutine import subroutine
from .tile import lane_mask, masked_load, masked_store
from .types import I64, declare_fma, splat_vector, vector_ptr, vector_type

# Rows of C one ``strip_sums`` computes at most, and the accumulators it holds at most
# (of 32 vector registers: the rows' broadcasts and a row of B's strip take the rest).
STRIP_ROWS = 4
STRIP_SUMS = 24
# strip_sums's switch: case rows * CASES + vectors, more than any strip's vectors.
CASES = 256


@register_jitable
def strip_vectors(vectors: int, rows: int) -> int:
    """Vectors a strip of ``rows`` rows spans (``strip_sums`` takes up to one more), for a tile
    of ``vectors`` vectors: the tile's for one row, else as many as leave room for one more
    vector a row within STRIP_SUMS sums.  Plain Python, and compiled into its callers."""
    return vectors if rows == 1 else STRIP_SUMS // rows - 1


@subroutine
def strip_width(shape, rows, ptr):
    """``strip_vectors`` of the tile ``shape`` in elements of ``ptr``'s dtype."""
    lanes = tile_lanes(shape, ptr)
    return strip_vectors(tile_cols(shape, ptr) // lanes, rows) * lanes


def _is_matrix(t) -> bool:
    return isinstance(t, types.NamedTuple) and t.instance_class is Matrix


@intrinsic
def strip_sums(typingctx, shape, rows, x, src, depth, dst, columns):
    """For each of ``rows`` rows r (1 to STRIP_ROWS) and each of ``columns`` columns j, the FMA
    chain over q < depth, in increasing q, of x[r, q] * src[q, j], from zero, into dst[r, j]
    (``Matrix`` records; src's and dst's rows contiguous); the shape's rule; ``columns`` from 1
    to ``strip_vectors(rows)`` vectors and one more.

    A few rows of C a strip at a time: the strip's sums stay in registers across all of
    ``depth``, so each step loads a row of B's strip once for all the rows, and nothing else
    (``axpy_rows`` also loads and stores a row buffer).  The same multiply-adds in the same
    order: ``fma(x, b, 0)``, the rounded product, is each chain's first step.  One loop is
    compiled for each count of rows and of vectors, which ``rows`` and ``columns`` pick at
    run time; the last vector's loads and its stores are masked to the columns.  A loop that
    serves several counts of vectors, masking the vectors past the columns, ran 1.07-1.26x
    as long (all loads of its vectors past the fewest it serves masked; one Zen 4 core), for
    2.1 s less compile time of UNPACKED (15.6 against 17.7 s, float32).
    """
    if not (_is_matrix(x) and _is_matrix(src) and _is_matrix(dst)) or x != src:
        return None
    found = copy_args(shape, src.types[0], dst.types[0])
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, live_rows, x_value, src_value, count, dst_value, live = args
        x_fields = cgutils.unpack_tuple(builder, x_value, 4)
        sp, so, rsv, _ = cgutils.unpack_tuple(builder, src_value, 4)
        dp, do, drs, _ = cgutils.unpack_tuple(builder, dst_value, 4)
        vec = vector_type(s, dtype)
        fma = declare_fma(builder.module, s.fused, vec)
        lanes = ir.Constant(I64, vec.count)
        vectors = builder.udiv(builder.add(live, ir.Constant(I64, vec.count - 1)), lanes)
        # The last vector's live lanes: columns - (vectors - 1) * LANES.
        last = builder.sub(live, builder.mul(builder.sub(vectors, ir.Constant(I64, 1)), lanes))
        mask = lane_mask(builder, last, 0, vec.count)
        sums = [cgutils.alloca_once(builder, vec) for _ in range(max(STRIP_SUMS, s.vectors + 1))]
        done = builder.append_basic_block("strip_done")
        # One case per (rows, vectors): rows * CASES + vectors.
        choice = builder.switch(builder.add(builder.mul(live_rows, ir.Constant(I64, CASES)), vectors), done)
        for height in range(1, STRIP_ROWS + 1):
            for width in range(1, strip_vectors(s.vectors, height) + 2):
                block = builder.append_basic_block(f"strip_{height}x{width}")
                choice.add_case(ir.Constant(I64, height * CASES + width), block)
                builder.position_at_end(block)
                _strip_loop(builder, fma, vec, sums, height, width, mask, x_fields, (sp, so, rsv), count)
                for r in range(height):
                    row = builder.add(do, builder.mul(ir.Constant(I64, r), drs))
                    for v in range(width):
                        target = vector_ptr(
                            builder, dp, builder.add(row, ir.Constant(I64, v * vec.count)), vec
                        )
                        value = builder.load(sums[r * width + v])
                        if v == width - 1:
                            masked_store(builder, value, target, mask)
                        else:
                            builder.store(value, target, align=1)
                builder.branch(done)
        builder.position_at_end(done)
        return context.get_dummy_value()

    return types.void(shape, types.intp, x, src, types.intp, dst, types.intp), codegen


def _strip_loop(builder, fma, vec, sums, height, width, mask, x_fields, src_fields, count):
    """The k loop of ``strip_sums`` for ``height`` rows of ``width`` vectors: each step loads
    the rows' elements of A (``x_fields``: pointer, offset, row and column strides), then each
    vector of B's strip (``src_fields``: pointer, offset, row stride) once, for every row's FMA."""
    xp, xo, xrs, xcs = x_fields
    sp, so, rsv = src_fields
    for total in sums[: height * width]:
        builder.store(ir.Constant(vec, None), total)
    with cgutils.for_range(builder, count) as loop:
        step = loop.index
        at_x = builder.add(xo, builder.mul(step, xcs))
        scales = [
            splat_vector(
                builder,
                builder.load(builder.gep(xp, [builder.add(at_x, builder.mul(ir.Constant(I64, r), xrs))])),
                vec,
            )
            for r in range(height)
        ]
        row = builder.add(so, builder.mul(step, rsv))
        for v in range(width):
            at = builder.add(row, ir.Constant(I64, v * vec.count))
            if v == width - 1:
                value = masked_load(builder, sp, at, vec, mask)
            else:
                value = builder.load(vector_ptr(builder, sp, at, vec), align=1)
            for r in range(height):
                total = sums[r * width + v]
                builder.store(builder.call(fma, [scales[r], value, builder.load(total)]), total)
