"""``smallgemm.njit``: ``matmul`` and ``gemm`` for code compiled with ``@numba.njit``.

Numba's own ``np.dot`` and ``@`` need SciPy's BLAS, take contiguous arrays only without a
warning, and give whatever bits that BLAS gives.  These are smallgemm's exact products,
called from compiled code, on 2-D float32 or float64 arrays of any layout (C, F, transposed,
sliced with steps, negative strides, Numba's 'A' arrays, read-only inputs)::

    matmul(a, b, out)               # out[...] = a @ b; returns out
    gemm(alpha, a, b, beta, c)      # c[...] = alpha * a @ b + beta * c; returns c

They give the bits of ``smallgemm.matmul(a, b, out=out)`` and of
``smallgemm.gemm(alpha, a, b, beta=beta, c=c, overwrite_c=True)`` (exact products, the
default): every element is one FMA chain in increasing k (docs/design.md, section 4), with
the Python API's rules for the scalars: C not read when beta == 0, C = beta*C when k == 0 or
alpha == 0, and alpha == beta == 1 continuing each chain from C.  They are always exact, so
the bits of the Python API under ``set_exact(False)`` (lane-wise row dots, split-K) can differ.

Kernel: the kernel in force (detected, or forced by ``SMALLGEMM_KERNEL``, ``set_kernel``,
``use_kernel``) and the block sizes in force (``in_force.block_sizes``) when Numba compiles the
calling function are frozen into it: ``matmul`` and ``gemm`` are looked up then, inlined
into the caller with that kernel's tile and those sizes as constants (``_FrozenAtCompile``).
A caller compiled earlier keeps its kernel, one with ``cache=True`` the kernel it was first
compiled with; no kernel changes a bit.  Called from Python, they use the kernel in force at
the call.  The work is in ``product_entry`` (one compiled, disk-cached function per kernel and
dtype); each caller holds its machine code, so compiling a caller takes ~3 s more.

Threads: each product runs on the calling thread (the serial blocked loops, which match the
Python API on one thread); smallgemm.njit never starts threads and ignores
``smallgemm.set_num_threads``.  From a ``prange`` body, each iteration's product runs on the
thread Numba gave that iteration: the caller's ``prange`` is the only parallelism, never
nested.

Workspace: each call allocates its packing buffers with one ``np.empty`` sized to the
product (at most an MC x KC block of A and a KC x NC slice of B, plus m*n elements where C
overlaps A or B, or beta is kept over several KC blocks); nothing is shared between calls,
so concurrent calls are safe.

``out`` and ``c``: written in place, and may overlap ``a`` or ``b`` (the product is then
computed into a copy and copied back, as the Python API does).  Errors: operands that are not
2-D float32/float64 arrays of one dtype, a read-only ``out`` or ``c``, and ``alpha`` or
``beta`` that are not real numbers fail when the caller is compiled (Numba's ``TypingError``,
naming the argument); shapes that do not match raise ``ValueError`` at run time, matmul's
in ``smallgemm.matmul``'s words.  Strides that are not whole elements (a structured array's
field) raise ``ValueError`` too: the Python API copies such operands, here the caller does.
No dtype is converted: mix float32 and float64 by casting first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import MappingProxyType
from typing import NamedTuple

import numpy as np
from numba import njit, types
from numba.core.errors import TypingError
from numba.extending import overload

from ..drivers.standalone import standalone_product
from ..drivers.unpacked import byte_span, spans_meet
from ..plan import blocking, dispatch, in_force
from ..simd import address
from ..simd.records import Blocks, matrix, product

_FLOATS = (types.float32, types.float64)
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)

_depth_blocks = njit(cache=True)(blocking.depth_blocks)


# --- the checks: types when the caller is compiled, shapes when it runs ----------------------


def _describe(typ) -> str:
    return f"a {typ.ndim}-D {typ.dtype} array" if isinstance(typ, types.Array) else str(typ)


def _check_types(function: str, arrays: dict, scalars: dict, output: str) -> None:
    """TypingError unless ``arrays`` (name -> Numba type) are 2-D float32 or float64 arrays of
    one dtype, ``output`` among them writable, and ``scalars`` real numbers."""
    for name, typ in arrays.items():
        if not (isinstance(typ, types.Array) and typ.ndim == 2 and typ.dtype in _FLOATS):
            raise TypingError(
                f"smallgemm.njit.{function}: {name} must be a 2-D float32 or float64 array, "
                f"got {_describe(typ)}"
            )
    if len({typ.dtype for typ in arrays.values()}) > 1:
        found = ", ".join(f"{name} {typ.dtype}" for name, typ in arrays.items())
        raise TypingError(
            f"smallgemm.njit.{function}: the arrays must have one dtype, got {found} "
            f"(no dtype is converted: cast first)"
        )
    if not arrays[output].mutable:
        raise TypingError(f"smallgemm.njit.{function}: {output} is read-only")
    for name, typ in scalars.items():
        if isinstance(typ, types.Boolean) or not isinstance(typ, (types.Integer, types.Float)):
            raise TypingError(f"smallgemm.njit.{function}: {name} must be a real number, got {typ}")


def _matmul_types(a, b, out):
    """Compiles to nothing: typing it checks ``matmul``'s arguments."""


@overload(_matmul_types)
def _matmul_types_checked(a, b, out):
    _check_types("matmul", {"a": a, "b": b, "out": out}, {}, "out")
    return lambda a, b, out: None


def _gemm_types(alpha, a, b, beta, c):
    """Compiles to nothing: typing it checks ``gemm``'s arguments."""


@overload(_gemm_types)
def _gemm_types_checked(alpha, a, b, beta, c):
    _check_types("gemm", {"a": a, "b": b, "c": c}, {"alpha": alpha, "beta": beta}, "c")
    return lambda alpha, a, b, beta, c: None


@njit(cache=True)
def _pair(rows, cols):
    return "(" + str(rows) + ", " + str(cols) + ")"


@njit(cache=True)
def _check_shapes(is_gemm, m, k, k_b, n, m_c, n_c):
    """ValueError, in the Python API's words, unless A (m, k) @ B (k_b, n) fits C (m_c, n_c)."""
    if is_gemm:
        if k != k_b:
            raise ValueError(
                "gemm: shapes do not match: a is "
                + _pair(m, k)
                + " and b is "
                + _pair(k_b, n)
                + "; a must have as many columns as b has rows"
            )
        if m_c != m or n_c != n:
            raise ValueError("gemm: c has shape " + _pair(m_c, n_c) + " but a @ b has shape " + _pair(m, n))
        return
    if k != k_b:
        raise ValueError(
            "matmul: operands with shapes "
            + _pair(m, k)
            + " and "
            + _pair(k_b, n)
            + " do not match: the last dimension of the first ("
            + str(k)
            + ") differs from the second-to-last dimension of the second ("
            + str(k_b)
            + ")"
        )
    for dim, have, want in ((0, m_c, m), (1, n_c, n)):
        if have != want:
            raise ValueError(
                "matmul: Output operand 0 has a mismatch in its core dimension "
                + str(dim)
                + ", with gufunc signature (n?,k),(k,m?)->(n?,m?) (size "
                + str(have)
                + " is different from "
                + str(want)
                + ")"
            )


# --- the product: one compiled entry per kernel and dtype, called from each caller -----------

MATMUL, GEMM = 0, 1


@njit(cache=True)
def _element_strides(function, a_strides, b_strides, c_strides, size):
    """The strides of A, B and C in elements (each array's row then column stride), or
    ValueError for a stride that is not a whole number of elements (``size`` bytes)."""
    names = ("a", "b", "out" if function == MATMUL else "c")
    found = (a_strides, b_strides, c_strides)
    for i in range(3):
        if found[i][0] % size or found[i][1] % size:
            raise ValueError(
                ("matmul: " if function == MATMUL else "gemm: ")
                + names[i]
                + " has strides "
                + _pair(found[i][0], found[i][1])
                + " bytes, not whole elements of "
                + str(size)
                + " bytes: pass a copy (np.ascontiguousarray)"
            )
    return (
        a_strides[0] // size,
        a_strides[1] // size,
        b_strides[0] // size,
        b_strides[1] // size,
        c_strides[0] // size,
        c_strides[1] // size,
    )


class ArrayFields(NamedTuple):
    """An operand as ``product_entry`` takes it: a pointer to its element [0, 0], that
    element's address, its shape and its strides in bytes."""

    pointer: object
    at: int
    shape: tuple
    strides: tuple


@njit(cache=True)
def product_entry(shape, fixed, alpha64, beta64, alpha, beta, size, a, b, c):
    """C = alpha*A.B + beta*C after the run-time checks: A, B, C as ``ArrayFields``, ``size``
    bytes an element; ``fixed``: (MATMUL or GEMM, whose words the errors take, MR, MC, NC, KC)."""
    function, mr, mc, nc, kc = fixed
    m, k = a.shape
    k_b, n = b.shape
    _check_shapes(function == GEMM, m, k, k_b, n, c.shape[0], c.shape[1])
    rs_a, cs_a, rs_b, cs_b, rs_c, cs_c = _element_strides(function, a.strides, b.strides, c.strides, size)
    c_span = byte_span(c.at, c.shape, c.strides, size)
    apart = not (
        spans_meet(c_span, byte_span(a.at, a.shape, a.strides, size))
        or spans_meet(c_span, byte_span(b.at, b.shape, b.strides, size))
    )
    mc, kc = _depth_blocks(mc, kc, k, mr)
    standalone_product(
        shape,
        alpha64,
        beta64,
        product(m, n, k, alpha, beta),
        matrix(a.pointer, 0, rs_a, cs_a),
        matrix(b.pointer, 0, rs_b, cs_b),
        matrix(c.pointer, 0, rs_c, cs_c),
        apart,
        Blocks(mc, nc, kc),
    )


def _compiled(kernel, sizes: dict) -> tuple:
    """(matmul, gemm) for ``kernel`` and ``sizes`` (its block sizes by dtype), the kernel's tile
    and the block sizes frozen in as constants.  They only read the arrays: all else is
    ``product_entry``'s, compiled (and cached) once per kernel and dtype."""
    shape = kernel.shape
    # Tuples, whose ints are typed int64, not as literals: one product_entry serves every block size.
    fixed = {
        dtype: tuple((function, kernel.mr(), s.mc, s.nc, s.kc) for function in (MATMUL, GEMM))
        for dtype, s in sizes.items()
    }
    fixed32, fixed64 = fixed[_F32], fixed[_F64]

    @njit
    def matmul(a, b, out):
        _matmul_types(a, b, out)
        fixed = fixed32[MATMUL] if a.itemsize == 4 else fixed64[MATMUL]
        one = a.dtype.type(1.0)
        product_entry(
            shape,
            fixed,
            1.0,
            0.0,
            one,
            one - one,
            a.itemsize,
            ArrayFields(address(a), a.ctypes.data, a.shape, a.strides),
            ArrayFields(address(b), b.ctypes.data, b.shape, b.strides),
            ArrayFields(address(out), out.ctypes.data, out.shape, out.strides),
        )
        return out

    @njit
    def gemm(alpha, a, b, beta, c):
        _gemm_types(alpha, a, b, beta, c)
        fixed = fixed32[GEMM] if a.itemsize == 4 else fixed64[GEMM]
        alpha64, beta64 = np.float64(alpha), np.float64(beta)
        product_entry(
            shape,
            fixed,
            alpha64,
            beta64,
            a.dtype.type(alpha64),
            a.dtype.type(beta64),
            a.itemsize,
            ArrayFields(address(a), a.ctypes.data, a.shape, a.strides),
            ArrayFields(address(b), b.ctypes.data, b.shape, b.strides),
            ArrayFields(address(c), c.ctypes.data, c.shape, c.strides),
        )
        return c

    return matmul, gemm


made_functions: dict[tuple, tuple] = {}
_lock = threading.Lock()


def _in_force(index: int):
    """Function ``index`` of ``_compiled`` for the kernel and block sizes in force."""
    kernel = dispatch.current()
    sizes = {dtype: in_force.block_sizes(kernel, dtype) for dtype in (_F32, _F64)}
    key = (kernel.name, tuple(sizes.values()))
    with _lock:
        made = made_functions.get(key)
        if made is None:
            made = made_functions[key] = _compiled(kernel, sizes)
    return made[index]


class _FrozenAtCompile:
    """A function for compiled callers, standing for the ``_compiled`` function of the kernel
    and block sizes in force whenever Numba compiles a caller: it inlines that function's
    Python source (``py_func``, as for ``@njit(inline="always")``), or else types the call as
    one to it (``_numba_type_``).  Called from Python, it runs the one in force at the call."""

    def __init__(self, index: int, name: str, doc: str):
        self._index = index
        self.__name__ = self.__qualname__ = name
        self.__module__ = "smallgemm.njit"
        self.__doc__ = doc

    @property
    def _numba_type_(self) -> types.Dispatcher:
        return types.Dispatcher(_in_force(self._index))

    # What Numba reads of a called global to inline it (a dispatcher's options and function).
    # Inlined, compiling a caller builds the product's machine code once, not once more for a
    # compiled function per argument types: a first caller 3 s, not 9 (warm cache).
    targetoptions = MappingProxyType({"inline": "always"})

    @property
    def py_func(self) -> Callable:
        return _in_force(self._index).py_func

    def __call__(self, *args) -> np.ndarray:
        return _in_force(self._index)(*args)

    def __repr__(self) -> str:
        return f"<function smallgemm.njit.{self.__name__}>"


matmul = _FrozenAtCompile(
    0,
    "matmul",
    """matmul(a, b, out) -> out: out[...] = a @ b, from @numba.njit code.

a (m, k), b (k, n), out (m, n): 2-D arrays of one dtype, float32 or float64, any strides;
out may overlap a or b.  The bits of ``smallgemm.matmul(a, b, out=out)``.""",
)

gemm = _FrozenAtCompile(
    1,
    "gemm",
    """gemm(alpha, a, b, beta, c) -> c: c[...] = alpha * a @ b + beta * c, from @numba.njit code.

a (m, k), b (k, n), c (m, n): 2-D arrays of one dtype, float32 or float64, any strides;
alpha and beta real numbers.  c is not read when beta == 0; alpha == beta == 1 continues
each element's FMA chain from c.  The bits of
``smallgemm.gemm(alpha, a, b, beta=beta, c=c, overwrite_c=True)``.""",
)
