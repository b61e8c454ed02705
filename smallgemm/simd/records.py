"""The records compiled calls pass: an operand, a stack of them, a kernel's tiles, a merge
rule, block sizes and a worker's workspace, each one argument.

They are named tuples, which Numba passes as LLVM structures: a field costs what a separate
argument cost (a linked routine takes a structure's fields in registers, an inlined one
keeps them as SSA values), and a call reads as what it passes.  Records are built by the
functions below, which fix each field's type (an offset or stride is always an ``intp``):
one record type per dtype and kernel, so a linked routine is compiled once per signature.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .memory import advance
from .subroutine import subroutine


class Matrix(NamedTuple):
    """A matrix in memory: element [i, j] at ``data[offset + i*rs + j*cs]`` (``data`` a pointer
    of the dtype; strides in elements, any sign).  A packed panel is one too: MR rows of a
    packed A block are ``Matrix(abuf, at, 1, MR)``."""

    data: object
    offset: int
    rs: int
    cs: int


class Vector(NamedTuple):
    """A vector in memory: element i at ``data[offset + i*stride]``."""

    data: object
    offset: int
    stride: int


class Stack(NamedTuple):
    """Matrices of one shape and strides: matrix t starts at ``data[offsets[t]]`` (``offsets``
    a pointer to ``intp``), its elements ``rs`` and ``cs`` apart."""

    data: object
    offsets: object
    rs: int
    cs: int


class Tiles(NamedTuple):
    """A kernel's tiles as the unpacked drivers choose among them (``simd.TileShape`` values):
    the main tile, the narrow tile, the few-rows tile, the GEMV rule and the resident-B tile."""

    main: object
    narrow: object
    few: object
    gemv: object
    resident: object


class Product(NamedTuple):
    """C = alpha*A.B + beta*C with C m x n and k the common dimension: what a driver that cuts
    a product into tasks is given (the tile loops take the sizes one by one, as they cut them)."""

    m: int
    n: int
    k: int
    alpha: object
    beta: object


class Merge(NamedTuple):
    """How a finished tile goes into C: ``mode`` (simd.OVERWRITE, SCALE, ACCUMULATE, CONTINUE)
    with ``alpha`` and ``beta``."""

    alpha: object
    beta: object
    mode: int


class Blocks(NamedTuple):
    """The block sizes in force: MC rows of A, NC columns of B, KC steps of k."""

    mc: int
    nc: int
    kc: int


class Workspace(NamedTuple):
    """A product's workspace, pointers of the dtype: packed A blocks, packed B panels, an edge
    tile (``scratch``) and the streams' sums (``sums``, STREAM_SIZE elements a worker)."""

    abuf: object
    bbuf: object
    scratch: object
    sums: object


class TaskLogs(NamedTuple):
    """The tests' task logs (``tasks.record``): a count per pack task and per row task, and
    how many each holds (none in normal calls)."""

    packs: object
    packs_count: int
    rows: object
    rows_count: int


@subroutine(inline=True)
def matrix(data, offset, rs, cs):
    """The ``Matrix`` at ``data`` (a pointer) with this offset and these strides."""
    return Matrix(data, np.intp(offset), np.intp(rs), np.intp(cs))


@subroutine(inline=True)
def moved(x, rows, cols):
    """``x`` from its element [rows, cols] on: the same matrix, ``rows`` rows and ``cols``
    columns in."""
    return Matrix(x.data, x.offset + rows * x.rs + cols * x.cs, x.rs, x.cs)


@subroutine(inline=True)
def unit_columns(x):
    """``x`` with a column stride of 1 that the compiler knows (the caller checked it): a
    loop inlined with it reads rows with plain vector loads."""
    return Matrix(x.data, x.offset, x.rs, np.intp(1))


@subroutine(inline=True)
def stack(data, offsets, rs, cs):
    """The ``Stack`` at ``data`` (a pointer), matrices at ``offsets`` (a pointer to ``intp``)."""
    return Stack(data, offsets, np.intp(rs), np.intp(cs))


@subroutine(inline=True)
def matrix_of(x, t):
    """Matrix ``t`` of the stack ``x``."""
    return Matrix(x.data, x.offsets[t], x.rs, x.cs)


@subroutine(inline=True)
def later_matrices(x, first):
    """The stack ``x`` from its matrix ``first`` on."""
    return Stack(x.data, advance(x.offsets, first), x.rs, x.cs)


@subroutine(inline=True)
def product(m, n, k, alpha, beta):
    """The ``Product`` of these sizes and scalars."""
    return Product(np.intp(m), np.intp(n), np.intp(k), alpha, beta)


@subroutine(inline=True)
def merge(alpha, beta, mode):
    """The ``Merge`` of this mode with ``alpha`` and ``beta``."""
    return Merge(alpha, beta, np.intp(mode))


@subroutine(inline=True)
def transposed(x):
    """The transpose of ``x``: the same elements, rows and columns swapped."""
    return Matrix(x.data, x.offset, x.cs, x.rs)


@subroutine(inline=True)
def first_row(x):
    """Row 0 of ``x`` as a ``Vector``."""
    return Vector(x.data, x.offset, x.cs)


@subroutine(inline=True)
def first_column(x):
    """Column 0 of ``x`` as a ``Vector``."""
    return Vector(x.data, x.offset, x.rs)


@subroutine(inline=True)
def advanced(v, count):
    """The vector ``v`` from its element ``count`` on."""
    return Vector(v.data, v.offset + count * v.stride, v.stride)
