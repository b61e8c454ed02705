"""Packing intrinsics: rows of A and columns of B into panels (in-register
transposes), column copies, and the FMA throughput loop that measures the peak.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .memory import copy_args, tile_args
from .tile import lane_mask, masked_load
from .types import I64, declare_fma, vector_ptr, vector_type


def transpose_vectors(builder, rows, lanes):
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
        at = builder.add(off, ir.Constant(I64, first))
        if piece == 1:
            builder.store(builder.extract_element(value, ir.Constant(i32, first)), builder.gep(base, [at]))
        else:
            part = (
                value
                if piece == vec.count
                else builder.shuffle_vector(
                    value, undef, ir.Constant(ir.VectorType(i32, piece), list(range(first, first + piece)))
                )
            )
            builder.store(part, vector_ptr(builder, base, at, ir.VectorType(vec.element, piece)), align=1)
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
    found = copy_args(shape, src, dst)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, sp, so, rstride, dp, do = args
        vec = vector_type(s, dtype)
        lanes = vec.count
        undef = ir.Constant(vec, ir.Undefined)
        pieces = [[] for _ in range(lanes)]  # per k: (value, lanes live) of each LANES-row group
        for q0 in range(0, s.rows, lanes):
            live = min(lanes, s.rows - q0)
            rows = []
            for i in range(lanes):
                if i < live:
                    off = builder.add(so, builder.mul(rstride, ir.Constant(I64, q0 + i)))
                    rows.append(builder.load(vector_ptr(builder, sp, off, vec), align=1))
                else:
                    rows.append(undef)
            for p, column in enumerate(transpose_vectors(builder, rows, lanes)):
                pieces[p].append((column, live))
        stores = [piece for column in pieces for piece in column]
        at = 0
        for index, (value, live) in enumerate(stores):
            off = builder.add(do, ir.Constant(I64, at))
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
    found = tile_args(shape, src)
    if found is None or not isinstance(iterations, types.Integer):
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, sp, count = args
        vec = vector_type(s, dtype)
        fma = declare_fma(builder.module, True, vec)
        x = builder.load(vector_ptr(builder, sp, ir.Constant(I64, 0), vec), align=1)
        y = builder.load(vector_ptr(builder, sp, ir.Constant(I64, vec.count), vec), align=1)
        start = [builder.load(vector_ptr(builder, sp, ir.Constant(I64, 2 * vec.count), vec), align=1)]
        n_acc = s.rows * s.vectors
        entry = builder.block
        loop = builder.append_basic_block("fma_loop")
        done = builder.append_basic_block("fma_done")
        builder.branch(loop)
        builder.position_at_end(loop)
        counter = builder.phi(I64)
        counter.add_incoming(ir.Constant(I64, 0), entry)
        accs = []
        for _ in range(n_acc):
            phi = builder.phi(vec)
            phi.add_incoming(start[0], entry)
            accs.append(phi)
        new = [builder.call(fma, [acc, x, y]) for acc in accs]
        nxt = builder.add(counter, ir.Constant(I64, 1))
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
    found = copy_args(shape, src, dst)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, sp, so, count, dp, do = args
        vec = vector_type(s, dtype)
        for first in range(0, s.rows, vec.count):
            lanes = min(vec.count, s.rows - first)
            load_mask = lane_mask(builder, count, first, vec.count)
            value = masked_load(builder, sp, builder.add(so, ir.Constant(I64, first)), vec, load_mask)
            _store_first_lanes(builder, value, dp, builder.add(do, ir.Constant(I64, first)), lanes)
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
    found = copy_args(shape, src, dst)
    if found is None:
        return None
    s, dtype = found

    def codegen(context, builder, signature, args):
        _, sp, so, cstride, dp, do = args
        vec = vector_type(s, dtype)
        lanes = vec.count
        nr = s.vectors * lanes
        cols = []
        for j in range(lanes):
            off = builder.add(so, builder.mul(cstride, ir.Constant(I64, j)))
            cols.append(builder.load(vector_ptr(builder, sp, off, vec), align=1))
        rows = transpose_vectors(builder, cols, lanes)
        for p in range(lanes):
            off = builder.add(do, ir.Constant(I64, p * nr))
            builder.store(rows[p], vector_ptr(builder, dp, off, vec), align=1)
        return context.get_dummy_value()

    return types.void(shape, src, src_off, cs, dst, dst_off), codegen
