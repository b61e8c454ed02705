"""B held in registers: the resident-B tile's loads and its product (tiny products whose
whole k fits in the tile's depth, ``drivers/unpacked`` ``resident_tiles``)."""

from __future__ import annotations

from llvmlite import ir
from numba.extending import intrinsic, register_model

from .memory import tile_args
from .tile import lane_mask, masked_load, row_starts
from .types import (
    I64,
    RegisterBlock,
    RegisterBlockModel,
    TileType,
    declare_fma,
    float_pointer,
    splat_vector,
    vector_type,
)


class ResidentType(RegisterBlock):
    """Rows of B held in registers by a resident-B tile: depth x vectors LLVM vectors."""

    label = "Resident"

    def vector_count(self) -> int:
        return self.shape.depth * self.shape.vectors


register_model(ResidentType)(RegisterBlockModel)


@intrinsic
def resident_b(typingctx, shape, b, b_off, rs_b, live_depth, live_cols):
    """Load rows ``b[b_off + p*rs_b : ... + NR]``, p < depth, into registers (unit-stride rows).

    For products whose whole k fits in the tile's depth: B is loaded once and
    every row of C is computed from registers (``resident_row``).  Rows at or
    past ``live_depth`` and lanes at or past ``live_cols`` load zero (masked
    loads), so nothing outside B is read.
    """
    found = tile_args(shape, b)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, bp, boff, rsb, depth, cols = args
        vec = vector_type(s, dtype)
        value = ir.Constant(ir.ArrayType(vec, s.depth * s.vectors), None)
        for p in range(s.depth):
            live_row = splat_vector(
                builder,
                builder.icmp_signed(">", depth, ir.Constant(I64, p)),
                ir.VectorType(ir.IntType(1), vec.count),
            )
            row = builder.add(boff, builder.mul(rsb, ir.Constant(I64, p)))
            for v in range(s.vectors):
                mask = builder.and_(lane_mask(builder, cols, v * vec.count, vec.count), live_row)
                loaded = masked_load(
                    builder, bp, builder.add(row, ir.Constant(I64, v * vec.count)), vec, mask
                )
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
    if tile.shape != resident.shape or tile.dtype != resident.dtype or float_pointer(a) != tile.dtype:
        return None
    s, dtype = tile.shape, tile.dtype

    def codegen(context, builder, signature, args):
        acc, rb, ap, aoff, rsa, csa, rows, depth = args
        vec = vector_type(s, dtype)
        fma = declare_fma(builder.module, s.fused, vec)
        starts = row_starts(builder, s, aoff, rsa, rows)
        done = builder.function.append_basic_block("resident_product_done")
        finished = []  # (tile, block) of every way out of the chain, for the phi
        for p in range(s.depth):
            if p > 0:  # stop after live_depth steps: A is never read past its k
                step = builder.function.append_basic_block("resident_product_step")
                finished.append((acc, builder.block))
                builder.cbranch(builder.icmp_signed(">", depth, ir.Constant(I64, p)), step, done)
                builder.position_at_end(step)
            column = builder.mul(csa, ir.Constant(I64, p))
            for i in range(s.rows):
                av = splat_vector(
                    builder, builder.load(builder.gep(ap, [builder.add(starts[i], column)])), vec
                )
                for v in range(s.vectors):
                    idx = i * s.vectors + v
                    bv = builder.extract_value(rb, p * s.vectors + v)
                    acc = builder.insert_value(
                        acc, builder.call(fma, [av, bv, builder.extract_value(acc, idx)]), idx
                    )
        finished.append((acc, builder.block))
        builder.branch(done)
        builder.position_at_end(done)
        result = builder.phi(acc.type)
        for value, block in finished:
            result.add_incoming(value, block)
        return result

    return tile(tile, resident, a, a_off, rs_a, cs_a, live_rows, live_depth), codegen
