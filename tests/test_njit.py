"""smallgemm.njit: matmul and gemm called from @numba.njit code give the bits of the Python API
and of the scalar chain reference, on every layout, edge shapes, both dtypes, forced kernels
and block sizes, from a prange loop, and report bad arguments clearly.

Compilations are few: each caller takes its operands as base arrays and slicing parameters,
so every view it multiplies is typed 'A' and one compiled caller per (kernel, dtype) serves
every layout and shape."""

import itertools
import os
import pathlib
import re
import subprocess
import sys

import numba
import numpy as np
import pytest
from conftest import DTYPES, forced_kernel, pinned_blocks, random_matrix
from numba.core.errors import TypingError
from reference import chain_reference

import smallgemm
from smallgemm.njit import gemm, matmul
from smallgemm.plan import dispatch

LAYOUTS = ("C", "F", "strided", "negative", "transposed strided")
SCALARS = list(itertools.product((1.0, 2.5), (0.0, 1.0, -0.5)))


@numba.njit(cache=True)
def _view(base, spec):
    """``base[r0::rs, c0::cs][:rows, :cols]``, transposed when ``spec[6]``: always typed 'A'.
    The NumPy view of the same spec is ``_view.py_func(base, spec)``."""
    r0, rs, rows, c0, cs, cols, transposed = spec
    v = base[r0::rs, c0::cs][:rows, :cols]
    return v.T if transposed else v


def _callers():
    """A new compiled caller, which freezes the kernel and block sizes in force when it
    first runs: matmul into one view and gemm into another, both from views of A and B."""

    @numba.njit
    def both(a_base, a_spec, b_base, b_spec, out_base, out_spec, alpha, beta, c_base, c_spec):
        a, b = _view(a_base, a_spec), _view(b_base, b_spec)
        matmul(a, b, _view(out_base, out_spec))
        gemm(alpha, a, b, beta, _view(c_base, c_spec))

    return both


def _operand(rng, rows, cols, layout, dtype):
    """(base, spec): a C array and the spec of a (rows, cols) view of it with ``layout``."""
    if layout == "C":
        return random_matrix(rng, (rows, cols), dtype), (0, 1, rows, 0, 1, cols, 0)
    if layout == "F":
        return random_matrix(rng, (cols, rows), dtype), (0, 1, cols, 0, 1, rows, 1)
    if layout == "strided":
        return random_matrix(rng, (2 * rows + 1, 3 * cols + 2), dtype), (1, 2, rows, 2, 3, cols, 0)
    if layout == "negative":
        return random_matrix(rng, (rows + 1, 2 * cols + 1), dtype), (rows, -1, rows, 2 * cols, -2, cols, 0)
    return random_matrix(rng, (3 * cols + 1, 2 * rows + 1), dtype), (1, 3, cols, 0, 2, rows, 1)


def _case(rng, m, n, k, layouts, dtype):
    """Operands (base, spec) for A (m, k), B (k, n), out and C (m, n) with the given layouts."""
    la, lb, lc = layouts
    return (
        _operand(rng, m, k, la, dtype),
        _operand(rng, k, n, lb, dtype),
        _operand(rng, m, n, lc, dtype),
        _operand(rng, m, n, lc, dtype),
    )


def _check(caller, case, alpha, beta, label, python_api=True):
    """Run ``caller`` on ``case``; out and C (its views) must equal the chain reference and,
    with ``python_api``, smallgemm.matmul and smallgemm.gemm on the same views, bit for bit."""
    (a_base, a_spec), (b_base, b_spec), (out_base, out_spec), (c_base, c_spec) = case
    view = _view.py_func
    a, b = view(a_base, a_spec), view(b_base, b_spec)
    c0 = view(c_base, c_spec).copy()
    caller(a_base, a_spec, b_base, b_spec, out_base, out_spec, alpha, beta, c_base, c_spec)
    out, c = view(out_base, out_spec), view(c_base, c_spec)
    assert out.shape == c.shape == (a.shape[0], b.shape[1]), label
    np.testing.assert_array_equal(out, chain_reference(1.0, a, b), err_msg=f"matmul {label}")
    np.testing.assert_array_equal(c, chain_reference(alpha, a, b, beta, c0), err_msg=f"gemm {label}")
    if python_api:
        np.testing.assert_array_equal(out, smallgemm.matmul(a, b), err_msg=f"matmul {label}")
        expected = smallgemm.gemm(alpha, a, b, beta=beta, c=c0.copy(), overwrite_c=True)
        np.testing.assert_array_equal(c, expected, err_msg=f"gemm {label}")


def _edge_shapes(kernel, dtype):
    """m, n, k at 0, 1 and around the kernel's tile (MR, NR, and the 4-row short panel)."""
    mr, nr = kernel.mr(), kernel.nr(dtype)
    return [
        (0, 5, 3),
        (4, 0, 3),
        (4, 5, 0),
        (1, 1, 1),
        (1, nr + 1, 7),
        (mr + 1, 1, 9),
        (mr - 1, nr - 1, 2),
        (mr, nr, 16),
        (mr + 1, nr + 1, 17),
        (2 * mr + 4, 2 * nr + 3, 33),
        (5, 3 * nr - 1, 1),
    ]


@pytest.fixture(scope="module")
def callers():
    """One caller per dtype compiled under the kernel detected here and its block sizes."""
    return {np.dtype(dtype): _callers() for dtype in DTYPES}


@pytest.mark.parametrize("dtype", [np.dtype(d) for d in DTYPES], ids=["float32", "float64"])
def test_every_layout_and_edge_shape_gives_the_python_apis_bits(callers, dtype):
    """All 125 layouts of A, B and C (C, F, strided, negative strides, transposed and
    strided) on a shape off the tiles, then edge shapes, each with every alpha and beta."""
    rng = np.random.default_rng(1)
    caller = callers[dtype]
    for i, layouts in enumerate(itertools.product(LAYOUTS, repeat=3)):
        alpha, beta = SCALARS[i % len(SCALARS)]
        _check(
            caller,
            _case(rng, 13, 17, 19, layouts, dtype),
            alpha,
            beta,
            f"{layouts} alpha {alpha} beta {beta}",
        )
    layouts = itertools.cycle(itertools.product(LAYOUTS, repeat=3))
    for m, n, k in _edge_shapes(dispatch.current(), dtype):
        for alpha, beta in SCALARS:
            case = _case(rng, m, n, k, next(layouts), dtype)
            _check(caller, case, alpha, beta, f"{m}x{n}x{k} alpha {alpha} beta {beta}")


@pytest.mark.parametrize("dtype", [np.dtype(d) for d in DTYPES], ids=["float32", "float64"])
def test_a_depth_over_kc_and_nan_in_c(callers, dtype):
    """k over the kernel's KC: beta == 1 with alpha == 1 continues each chain across the KC
    blocks in C, beta == -0.5 takes the chains into a buffer first; and beta == 0 never
    reads C: NaN in it does not leak."""
    rng = np.random.default_rng(2)
    caller = callers[dtype]
    kernel = dispatch.current()
    k = smallgemm.plan.in_force.block_sizes(kernel, dtype).kc + 37
    for alpha, beta in SCALARS:
        case = _case(rng, 2 * kernel.mr() + 3, 19, k, ("strided", "F", "C"), dtype)
        _check(caller, case, alpha, beta, f"k {k} alpha {alpha} beta {beta}")
    case = _case(rng, 9, 11, 13, ("C", "C", "negative"), dtype)
    case[3][0][...] = np.nan
    _check(caller, case, 2.5, 0.0, "NaN in C, beta 0")
    assert not np.isnan(_view.py_func(*case[3])).any()


def test_block_sizes_in_force_are_frozen_into_a_new_caller():
    """Small pinned block sizes (KC 64, MC and NC four tiles) frozen into a new caller: shapes
    that cross every MC, NC and KC edge keep the chain's bits; the old caller still runs."""
    rng = np.random.default_rng(3)
    kernel = dispatch.current()
    dtype = np.dtype(np.float32)
    mr, nr = kernel.mr(), kernel.nr(dtype)
    with pinned_blocks(kernel):
        caller = _callers()
        for (m, n, k), layouts in zip(
            [(4 * mr + 3, 4 * nr + 5, 2 * 64 + 7), (5 * mr, 9, 64), (3, 9 * nr + 1, 65)],
            [("C", "C", "C"), ("F", "strided", "negative"), ("negative", "F", "F")],
        ):
            for alpha, beta in SCALARS:
                _check(
                    caller, _case(rng, m, n, k, layouts, dtype), alpha, beta, f"{m}x{n}x{k}, {alpha}, {beta}"
                )
    _check(caller, _case(rng, 4 * mr + 3, 70, 200, ("C", "F", "C"), dtype), 2.5, -0.5, "after the with block")


@pytest.mark.parametrize("name, dtype", [("avx2", np.dtype(np.float32)), ("portable", np.dtype(np.float64))])
def test_a_forced_kernel_is_frozen_when_the_caller_compiles(callers, name, dtype):
    """A caller compiled under a forced kernel runs that kernel's tiles (its TileShape is in
    the caller's code) after the kernel is restored, with the chain's bits; the callers
    compiled before keep the detected kernel's tiles.  (One dtype each: a kernel's first
    product of a dtype compiles its blocked loops, ~20 s cold.)"""
    rng = np.random.default_rng(4)
    detected = dispatch.current()
    with forced_kernel(name) as kernel:
        forced = _callers()
        for m, n, k in _edge_shapes(kernel, dtype)[4:]:
            _check(
                forced,
                _case(rng, m, n, k, ("strided", "F", "negative"), dtype),
                2.5,
                -0.5,
                f"{name} {m}x{n}x{k}",
                python_api=False,
            )
    case = _case(rng, 3 * kernel.mr() + 1, 2 * kernel.nr(dtype) + 3, 41, ("C", "negative", "F"), dtype)
    _check(forced, case, 1.0, 1.0, f"{name} after the with block")
    _check(callers[dtype], case, 1.0, 1.0, "detected kernel")
    label = "TileShape_28{0.rows}x{0.vectors}x{0.bits}".format  # as in mangled names: "(" is "_28"
    (forced_code,) = forced.inspect_llvm().values()
    assert label(kernel.shape) in forced_code and label(detected.shape) not in forced_code
    assert label(detected.shape) in callers[dtype].inspect_llvm(forced.signatures[0])


def test_calls_from_a_prange_loop():
    """One product per prange iteration, on the caller's threads, matmul and gemm continuing
    chains: each equals the chain reference and smallgemm.matmul."""

    @numba.njit(parallel=True)
    def each(a, b, out, c):
        for i in numba.prange(a.shape[0]):
            matmul(a[i], b[i], out[i])
            gemm(1.0, a[i], b[i], 1.0, c[i])

    rng = np.random.default_rng(5)
    a = random_matrix(rng, (12, 33, 70), np.float32)
    b = random_matrix(rng, (12, 70, 45), np.float32)
    out = np.empty((12, 33, 45), np.float32)
    c = random_matrix(rng, (12, 33, 45), np.float32)
    c0 = c.copy()
    each(a, b, out, c)
    for i in range(12):
        np.testing.assert_array_equal(out[i], chain_reference(1.0, a[i], b[i]), err_msg=f"product {i}")
        np.testing.assert_array_equal(out[i], smallgemm.matmul(a[i], b[i]), err_msg=f"product {i}")
        np.testing.assert_array_equal(c[i], chain_reference(1.0, a[i], b[i], 1.0, c0[i]), err_msg=f"gemm {i}")


def test_typed_layouts_overlap_and_calls_from_python():
    """C- and F-typed arrays and a read-only input in one caller; an out that overlaps its
    operands (computed into a copy); and calls from Python, which return out and c."""
    rng = np.random.default_rng(6)

    @numba.njit
    def typed(a, b, out):
        return matmul(a, b, out)

    a = random_matrix(rng, (21, 30), np.float64)
    b = random_matrix(rng, (30, 18), np.float64, order="F")
    b.flags.writeable = False
    out = np.empty((21, 18))
    assert typed(a, b, out) is out
    np.testing.assert_array_equal(out, chain_reference(1.0, a, b))

    x = random_matrix(rng, (24, 24), np.float32)
    expected = chain_reference(1.0, x, x)
    assert matmul(x, x, x) is x  # out is both operands
    np.testing.assert_array_equal(x, expected)
    buf = random_matrix(rng, (40, 24), np.float32)
    a, c = buf[:24], buf[10:34]  # C overlaps A's last rows
    expected = smallgemm.gemm(2.5, a, x, beta=-0.5, c=c.copy())
    np.testing.assert_array_equal(expected, chain_reference(2.5, a, x, -0.5, c))
    assert gemm(2.5, a, x, -0.5, c) is c
    np.testing.assert_array_equal(c, expected)


def test_shapes_that_do_not_match_raise_the_python_apis_value_error():
    """Inside compiled code: matmul's messages are smallgemm.matmul's, gemm's name the shapes."""

    @numba.njit
    def product(a, b, out):
        matmul(a, b, out)

    @numba.njit
    def scaled(a, b, c):
        gemm(2.0, a, b, 0.5, c)

    a, b = np.ones((3, 4)), np.ones((5, 6))
    for out in (np.empty((3, 6)), np.empty((2, 6))):
        with pytest.raises(ValueError) as python_error:
            smallgemm.matmul(a, b if out.shape[0] == 3 else b[:4], out=out)
        with pytest.raises(ValueError, match=re.escape(str(python_error.value))):
            product(a, b if out.shape[0] == 3 else b[:4], out)
    with pytest.raises(ValueError, match=re.escape("gemm: shapes do not match: a is (3, 4) and b is (5, 6)")):
        scaled(a, b, np.empty((3, 6)))
    with pytest.raises(ValueError, match=re.escape("gemm: c has shape (3, 5) but a @ b has shape (3, 6)")):
        scaled(a, b[:4], np.empty((3, 5)))
    rec = np.zeros((4, 4), dtype=[("x", np.float64), ("y", np.int16)])
    with pytest.raises(ValueError, match=r"matmul: a has strides \(40, 10\) bytes, not whole elements"):
        product(rec["x"], np.ones((4, 4)), np.empty((4, 4)))


@pytest.mark.parametrize(
    "args, message",
    [
        (
            (np.ones((2, 2), np.float32), np.ones((2, 2)), np.empty((2, 2))),
            "smallgemm.njit.matmul: the arrays must have one dtype, got a float32, b float64, out float64",
        ),
        (
            (np.ones(2), np.ones((2, 2)), np.empty((1, 2))),
            "smallgemm.njit.matmul: a must be a 2-D float32 or float64 array, got a 1-D float64 array",
        ),
        (
            (np.ones((2, 2), np.int64), np.ones((2, 2), np.int64), np.empty((2, 2), np.int64)),
            "smallgemm.njit.matmul: a must be a 2-D float32 or float64 array, got a 2-D int64 array",
        ),
    ],
)
def test_wrong_types_fail_when_the_caller_compiles(args, message):
    @numba.njit
    def product(a, b, out):
        matmul(a, b, out)

    with pytest.raises(TypingError, match=re.escape(message)):
        product(*args)


def test_wrong_scalars_and_a_read_only_output_fail_when_the_caller_compiles():
    @numba.njit
    def scaled(alpha, a, b, beta, c):
        gemm(alpha, a, b, beta, c)

    a = np.ones((2, 2))
    with pytest.raises(
        TypingError, match=re.escape("smallgemm.njit.gemm: alpha must be a real number, got bool")
    ):
        scaled(True, a, a, 0.0, np.empty((2, 2)))
    with pytest.raises(
        TypingError, match=re.escape("smallgemm.njit.gemm: beta must be a real number, got complex128")
    ):
        scaled(1.0, a, a, 1j, np.empty((2, 2)))
    read_only = np.empty((2, 2))
    read_only.flags.writeable = False
    with pytest.raises(TypingError, match=re.escape("smallgemm.njit.gemm: c is read-only")):
        scaled(1.0, a, a, 0.0, read_only)


def test_importing_compiles_nothing():
    """``import smallgemm`` and ``import smallgemm.njit`` compile no function."""
    code = (
        "import smallgemm, smallgemm.njit\n"
        "from smallgemm.api import njit\n"
        "from smallgemm.drivers import standalone\n"
        "assert not njit.made_functions\n"
        "assert not (standalone.standalone_product.subroutine.compiled or njit.product_entry.overloads)\n"
    )
    root = pathlib.Path(smallgemm.__file__).parent.parent  # this checkout, not another installed copy
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
    }
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, env=env)
