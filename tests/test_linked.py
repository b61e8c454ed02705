"""Linked routines (``simd.linked``): compiled once per signature, called by name, cached.

A caller of a linked routine holds a call to its name, not its code; a caller loaded from
the cache in a fresh process links the routines it calls before its machine code is loaded.
"""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import njit, typeof, types
from numba.core.errors import TypingError
from test_packing import expected_a

from smallgemm.drivers import blocked, packing
from smallgemm.drivers.unpacked import row_dots, stream
from smallgemm.kernels import KERNELS
from smallgemm.plan import dispatch, entries
from smallgemm.simd import address


@njit
def _first_caller(shape, a, rows, depth, buf):
    z = np.intp(0)
    packing.pack_a(shape, address(a), z, a.shape[1], 1, rows, depth, address(buf), z)


@njit
def _second_caller(shape, a, rows, depth, buf):
    packing.pack_a(shape, address(a), 0, a.shape[1], 1, rows, depth, address(buf), 0)


def test_a_linked_routine_is_compiled_once_and_called_by_name():
    """Two callers (one passing literal zeros): one compiled routine; each caller's code declares
    its name and holds none of its body; both pack as ``pack_a`` does."""
    kernel = dispatch.current()
    rng = np.random.default_rng(0)
    block = rng.standard_normal((20, 9))
    mr = kernel.mr()
    routine = packing.pack_a.linked
    before = set(routine.compiled)
    for caller in (_first_caller, _second_caller):
        buf = np.full(-(-20 // mr) * mr * 9, np.nan)
        caller(kernel.shape, block, 20, 9, buf)
        assert np.array_equal(buf, expected_a(block, mr))
    added = set(routine.compiled) - before
    assert len(routine.compiled) >= 1 and len(added) <= 1, added
    signature = next(
        t for t in routine.compiled if t[0] == typeof(kernel.shape) and t[1] == types.CPointer(types.float64)
    )
    symbol = routine.symbol(signature)
    for caller in (_first_caller, _second_caller):
        llvm_ir = next(iter(caller.inspect_llvm().values()))
        assert re.search(rf'@"?{re.escape(symbol)}"? = external global', llvm_ir), symbol
        assert "pack_a" not in llvm_ir.replace(symbol, "")


@njit
def _passing_an_array(shape, a, buf):
    packing.pack_a(shape, a, 0, a.shape[1], 1, 4, 4, address(buf), 0)


def test_a_routine_takes_pointers_and_scalars_only():
    """An array where the C function takes a pointer is refused when the caller is typed."""
    with pytest.raises(TypingError, match="pack_a"):
        _passing_an_array(dispatch.current().shape, np.ones((4, 4)), np.ones(64))
    assert blocked.macro_kernel.linked.name == "smallgemm.drivers.blocked.macro_kernel"


FRESH = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, {tests!r})
    import smallgemm
    from reference import chain_reference
    from smallgemm.plan import dispatch, entries

    smallgemm.set_num_threads(1)
    rng = np.random.default_rng(2)
    for dtype in (np.float32, np.float64):
        a = rng.standard_normal((150, 90)).astype(dtype)
        b = np.asfortranarray(rng.standard_normal((90, 120)).astype(dtype))
        assert np.array_equal(smallgemm.matmul(a, b), chain_reference(1.0, a, b))
    hits = sum(entries.BLOCKED.dispatcher.stats.cache_hits.values())
    print("hits", hits)
""")


def test_a_cached_caller_links_its_routines_in_a_fresh_process(tmp_path):
    """First process: BLOCKED compiled into an empty cache.  Second: loaded from it (its linked
    routines loaded and named first, else the process would die), the same bits."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    script = FRESH.format(tests=os.path.dirname(__file__))
    runs = [
        subprocess.run(
            [sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env, timeout=600
        )
        for _ in range(2)
    ]
    for run in runs:
        assert run.returncode == 0, run.stdout + run.stderr
    assert runs[0].stdout.split()[-1] == "0"
    assert runs[1].stdout.split()[-1] == "2"  # both dtypes' BLOCKED loaded, not compiled


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
def test_a_way_only_some_kernels_take_is_linked_for_those_only(dtype):
    """The narrow tile's row stream (``TileShape.stream_from``: AVX-512) and row dots in pairs
    of row blocks (``dot_pairs``: AVX2 and portable): a kernel's UNPACKED entry links each where its tiles
    take it, and compiles nothing for it on the other kernels."""
    for kernel in KERNELS:
        entries.UNPACKED.link_routines(kernel, np.dtype(dtype))
        streams = {t[0].shape for t in stream.stream_tiles.linked.compiled}
        pairs = {t[0].shape for t in row_dots.dot_row_pairs.linked.compiled}
        assert (kernel.narrow in streams) == (kernel.narrow.stream_from > 0), kernel.name
        assert kernel.few in streams, kernel.name  # the few-rows tile's stream, on every kernel
        assert (kernel.gemv in pairs) == (kernel.gemv.dot_pairs is not None), kernel.name
    assert {k.name for k in KERNELS if k.narrow.stream_from} == {"avx512"}
    assert {k.name for k in KERNELS if k.gemv.dot_pairs} == {"avx2", "portable"}


ROUTES = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, {tests!r})
    import smallgemm
    from reference import chain_reference
    from smallgemm.drivers import blocked
    from smallgemm.plan import dispatch
    from smallgemm.drivers.unpacked import row_dots, tiles

    smallgemm.set_num_threads(1)
    rng = np.random.default_rng(3)
    reached = lambda routine: len(routine.linked.compiled)
    held = dispatch.current().resident  # the largest B the kernel holds in registers
    k, n = held.depth, held.vectors * held.bits // 32
    a, b = rng.standard_normal((16, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    assert np.array_equal(smallgemm.matmul(a, b), chain_reference(1.0, a, b))
    print("resident", reached(tiles.resident_tiles), "gemv", reached(row_dots.gemv_rows))
    x, w = rng.standard_normal((1, 64)).astype(np.float32), rng.standard_normal((64, 300)).astype(np.float32)
    assert np.array_equal(smallgemm.matmul(x, w), chain_reference(1.0, x, w))
    print("gemv", reached(row_dots.gemv_rows))
    mr, short_rows = dispatch.current().mr(), dispatch.current().shape.short_rows
    for short in (short_rows + 1, short_rows):  # rows in the last panel of the product's one block
        rows = 300 // mr * mr + short
        a, b = rng.standard_normal((rows, 300)), np.asfortranarray(rng.standard_normal((300, 300)))
        assert smallgemm.explain(a, b).block_sizes[0] >= rows
        assert np.array_equal(smallgemm.matmul(a, b), chain_reference(1.0, a, b))
        print("short rows", reached(blocked.short_rows_tile))
""")


def test_a_product_links_only_the_routines_its_route_reaches(tmp_path):
    """Compiled in process into an empty cache, then loaded from it in a fresh process: a tiny
    product links B held in registers (``resident_tiles``) and not the one-row routine
    (``gemv_rows``), which the first one-row product links; a blocked product links the
    short-rows tile only once a block ends in a panel of at most the main tile's ``short_rows`` rows (on a
    kernel that has them).  All give the chain's bits."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "SMALLGEMM_FIRST_USE": "compile"}
    script = ROUTES.format(tests=os.path.dirname(__file__))
    for _ in range(2):
        run = subprocess.run(
            [sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env, timeout=600
        )
        assert run.returncode == 0, run.stdout + run.stderr
        short_tile = int(dispatch.current().shape.short_rows > 0)
        assert run.stdout.split("\n")[:4] == [
            "resident 1 gemv 0",
            "gemv 1",
            "short rows 0",
            f"short rows {short_tile}",
        ], run.stdout


PRANGE = textwrap.dedent("""
    import sys
    import numba
    import numpy as np
    sys.path.insert(0, {tests!r})
    from reference import chain_reference
    from smallgemm.njit import matmul

    @numba.njit(parallel=True, cache=True)
    def each(a, b, out):
        for i in numba.prange(a.shape[0]):
            matmul(a[i], b[i], out[i])

    rng = np.random.default_rng(4)
    a = rng.standard_normal((8, 70, 90))
    b = rng.standard_normal((8, 90, 60))
    out = np.empty((8, 70, 60))
    each(a, b, out)
    assert all(np.array_equal(out[i], chain_reference(1.0, a[i], b[i])) for i in range(8))
    print("loaded" if each.stats.cache_hits else "compiled")
""")


def test_products_in_a_users_prange_loop_find_their_routines_linked(tmp_path):
    """A user's ``parallel=True`` function calling ``smallgemm.njit.matmul`` in a ``prange``
    loop, compiled into an empty cache, then loaded from it in a fresh process: compiled or
    loaded outside ``lazily``, it has the routines its products reach linked before it runs,
    and gives the chain's bits."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "products.py").write_text(PRANGE.format(tests=os.path.dirname(__file__)))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_NUM_THREADS": "2"}
    outcomes = []
    for _ in range(2):
        run = subprocess.run(
            [sys.executable, str(user / "products.py")],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        outcomes.append(run.stdout.split()[-1])
    assert outcomes == ["compiled", "loaded"]


def test_the_threaded_runners_entries_release_the_gil():
    """Every entry a row's threaded runner calls releases the GIL: the caller's other Python
    threads run while its workers compute."""
    from smallgemm.plan import strategies

    rows = strategies.PRODUCT + strategies.PREPACKED + strategies.STACK
    threaded = {entry for row in rows for entry in row.parallel_entries}
    assert {entries.PARALLEL, entries.UNPACKED_PARALLEL, entries.BATCH_TASKS} <= threaded
    for entry in threaded:
        assert entry.dispatcher.targetoptions.get("nogil"), entry
