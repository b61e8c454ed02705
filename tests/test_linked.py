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
from numba import njit
from numba.core.errors import TypingError

from smallgemm.drivers import blocked, unpacked
from smallgemm.plan import dispatch
from smallgemm.simd import address


@njit
def _first_caller(rule, vec, mat, c, sums):
    z = np.intp(0)
    unpacked.gemv_rows(rule, mat.shape[1], mat.shape[0], 1.0, 0.0, address(vec), z, 1, address(mat), z,
                       mat.shape[1], address(c), z, 1, 1 << 40, address(sums))


@njit
def _second_caller(rule, vec, mat, c, sums):
    unpacked.gemv_rows(rule, mat.shape[1], mat.shape[0], 1.0, 0.0, address(vec), 0, 1, address(mat), 0,
                       mat.shape[1], address(c), 0, 1, 1 << 40, address(sums))


def test_a_linked_routine_is_compiled_once_and_called_by_name():
    """Two callers (one passing literal zeros): one compiled routine; each caller's code declares
    its name and holds none of its body."""
    kernel = dispatch.current()
    rule = kernel.gemv
    rng = np.random.default_rng(0)
    vec, mat = rng.standard_normal(70), rng.standard_normal((70, 90))
    sums = np.zeros(1 << 16)
    routine = unpacked.gemv_rows.linked
    for caller in (_first_caller, _second_caller):
        c = np.full(90, np.nan)
        caller(rule, vec, mat, c, sums)
        np.testing.assert_allclose(c, vec @ mat, rtol=1e-12)
    signatures = [t for t in routine.compiled if t[0] == type(rule) or str(t[0]) == str(_typeof(rule))]
    assert len(signatures) == 1, signatures
    symbol = routine.symbol(signatures[0])
    for caller in (_first_caller, _second_caller):
        llvm_ir = next(iter(caller.inspect_llvm().values()))
        assert re.search(rf'declare \S+ @"?{re.escape(symbol)}"?\(', llvm_ir), symbol
        assert "gemv_rows" not in llvm_ir.replace(symbol, "")


def _typeof(value):
    from numba import typeof

    return typeof(value)


@njit
def _passing_an_array(rule, vec, mat, c, sums):
    unpacked.gemv_rows(rule, mat.shape[1], mat.shape[0], 1.0, 0.0, vec, 0, 1, address(mat), 0,
                       mat.shape[1], address(c), 0, 1, 1 << 40, address(sums))


def test_a_routine_takes_pointers_and_scalars_only():
    """An array where the C function takes a pointer is refused when the caller is typed."""
    vec, mat, c, sums = np.ones(4), np.ones((4, 4)), np.ones(4), np.ones(64)
    with pytest.raises(TypingError, match="gemv_rows"):
        _passing_an_array(dispatch.current().gemv, vec, mat, c, sums)
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
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
            for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stdout + run.stderr
    assert runs[0].stdout.split()[-1] == "0"
    assert runs[1].stdout.split()[-1] == "2"  # both dtypes' BLOCKED loaded, not compiled
