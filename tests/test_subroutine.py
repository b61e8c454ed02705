"""Subroutines (``simd.subroutine``): lowered once per signature into IR that callers link in.

A subroutine never becomes a program of its own (no machine code, no cache file); its callers
hold its code, linked whole with everything it calls.
"""

import os
import re
import subprocess
import sys
import textwrap

import pytest
from numba import njit, types

from smallgemm.simd.subroutine import subroutine


@subroutine
def _scaled(x, s):
    return x * s


@subroutine(inline=True)
def _twice(x):
    return _scaled(x, 2.0)


@subroutine
def _checked(x):
    if x < 0:
        raise ValueError("a negative argument")
    return x


@njit
def _float_caller(x):
    return _twice(x) + _scaled(x, 3.0)


@njit
def _other_float_caller(x):
    return _scaled(x, 0.5)


@njit
def _int_caller(x):
    return _scaled(x, 3)


@njit
def _checking_caller(x):
    return _checked(x) + 1.0


def test_a_subroutine_is_lowered_once_per_argument_types_and_never_finalised():
    assert _float_caller(1.5) == 7.5
    assert _other_float_caller(3.0) == 1.5
    assert _int_caller(4) == 12
    assert set(_scaled.subroutine.compiled) == {(types.float64, types.float64), (types.int64, types.int64)}
    for result, _ in _scaled.subroutine.compiled.values():
        assert not result.library._finalized  # no machine code of its own
    # inline=True: LLVM inlined _twice into its caller, which keeps no copy of it.
    llvm_ir = next(iter(_float_caller.inspect_llvm().values()))
    assert not re.search(r"define[^\n]*_twice", llvm_ir)


def test_an_exception_raised_in_a_subroutine_reaches_the_caller():
    assert _checking_caller(2.0) == 3.0
    with pytest.raises(ValueError, match="a negative argument"):
        _checking_caller(-1.0)


def test_a_subroutine_called_from_python_runs_its_jitted_copy():
    assert _scaled(2.0, 3.0) == 6.0
    assert _scaled.python_copy.signatures == [(types.float64, types.float64)]


MODULE = """
from numba import njit
from smallgemm.simd.subroutine import subroutine


@subroutine
def leaf(x):
    return x + 1.0


@subroutine
def first(x):
    return leaf(x) * 2.0


@subroutine
def second(x):
    return leaf(x) * 3.0


@njit(cache=True)
def caller(x):
    n = 3
    if n * 2 == 7:  # folded by LLVM, not by Numba: the call to ``first`` is typed, then removed
        return first(x)
    return second(x)
"""


def _run(tmp_path, script: str) -> str:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr  # a callee left unlinked is a call to address 0
    return done.stdout


def test_a_call_the_optimiser_removed_leaves_the_other_calls_callees_linked(tmp_path):
    """``first`` and ``second`` both call ``leaf``: with ``first``'s call removed, the caller
    still links ``leaf`` for ``second`` (a subroutine's IR holds its callees')."""
    (tmp_path / "subs.py").write_text(MODULE)
    assert _run(tmp_path, "import subs\nprint(subs.caller(1.0))\n").split() == ["6.0"]


def test_a_caller_loaded_from_the_cache_lowers_no_subroutine(tmp_path):
    (tmp_path / "subs.py").write_text(MODULE)
    script = """
        import subs
        result = subs.caller(2.0)
        print(result, len(subs.second.subroutine.compiled), sum(subs.caller.stats.cache_hits.values()))
    """
    assert _run(tmp_path, script).split() == ["9.0", "1", "0"]  # compiled, and saved
    assert _run(tmp_path, script).split() == ["9.0", "0", "1"]  # loaded: nothing lowered


def _count_function_rounds(monkeypatch) -> list:
    """Record each library whose functions Numba's first optimisation round runs on."""
    from smallgemm.simd import optimised_once

    rounds = []
    original = optimised_once._optimize_functions
    monkeypatch.setattr(
        optimised_once,
        "_optimize_functions",
        lambda library, module: rounds.append(library) or original(library, module),
    )
    return rounds


def test_engine_code_skips_the_function_round_and_other_code_keeps_it(monkeypatch):
    """Within ``engine_code`` a compile leaves all optimisation to finalising its library; a user's
    function compiled outside it is optimised as Numba does; both compute the same."""
    from smallgemm.simd.optimised_once import engine_code

    rounds = _count_function_rounds(monkeypatch)

    def product(x, y):
        return x * y + 1.0

    users = njit(product)
    assert users(3.0, 4.0) == 13.0
    assert rounds, "a user's function is optimised function by function"
    rounds.clear()
    engines = njit(product)
    with engine_code():
        engines.compile((types.float64, types.float64))
    assert rounds == []
    assert engines(3.0, 4.0) == 13.0


def test_engine_code_is_per_thread_and_restored_after_an_error():
    """The scope holds on the thread that entered it only, and ends when it raises."""
    import threading

    from smallgemm.simd import optimised_once
    from smallgemm.simd.optimised_once import engine_code

    def in_scope() -> bool:
        return optimised_once._engine.value

    seen = []
    with pytest.raises(RuntimeError), engine_code():
        worker = threading.Thread(target=lambda: seen.append(in_scope()))
        worker.start()
        worker.join()
        seen.append(in_scope())
        raise RuntimeError
    assert seen == [False, True]
    assert not in_scope()
