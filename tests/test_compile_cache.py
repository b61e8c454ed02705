"""The on-disk compile cache: one source stamp for the whole package, so that an
edit to a callee's module invalidates its cached callers."""

import importlib
import os
import subprocess
import sys

import smallgemm
from smallgemm.drivers import unpacked
from smallgemm.machine import compile_cache

PACKAGE = os.path.dirname(os.path.realpath(smallgemm.__file__))


def test_package_functions_are_stamped_with_all_package_sources():
    for function in (unpacked.gemv_rows, importlib.import_module("smallgemm.kernels.microkernel").write_back):
        locator = function._cache._impl.locator
        assert isinstance(locator, compile_cache.PackageStampLocator)
        assert locator.get_source_stamp() == compile_cache.source_fingerprint(PACKAGE)


def test_fingerprint_follows_every_python_source_and_nothing_else(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text("X = 1\n")
    (tmp_path / "sub" / "b.py").write_text("Y = 1\n")
    (tmp_path / "notes.txt").write_text("one\n")

    def fingerprint():
        compile_cache.source_fingerprint.cache_clear()
        return compile_cache.source_fingerprint(str(tmp_path))

    first = fingerprint()
    (tmp_path / "notes.txt").write_text("two\n")
    assert fingerprint() == first
    (tmp_path / "sub" / "b.py").write_text("Y = 2\n")
    changed = fingerprint()
    assert changed != first
    (tmp_path / "sub" / "b.py").rename(tmp_path / "sub" / "c.py")
    assert fingerprint() not in (first, changed)


# A caller whose cached machine code inlines a callee defined in another module.
CALLER = """
from numba import njit
from .callee import value

@njit(cache=True)
def product():
    return value() * 10
"""
CALLEE = """
from numba import njit

@njit(cache=True)
def value():
    return {}
"""
RUN = """
import sys
sys.path.insert(0, {root!r})
from smallgemm.machine import compile_cache
compile_cache.watch({package!r})
from pkg.caller import product
print(product(), product.stats.cache_hits.get(product.signatures[0], 0) if product.signatures else 0)
"""


def test_an_edit_to_a_callee_module_recompiles_its_cached_callers(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "caller.py").write_text(CALLER)
    (package / "callee.py").write_text(CALLEE.format(1))
    script = RUN.format(root=str(tmp_path), package=str(package))

    def run():
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        result, hits = done.stdout.split()
        return int(result), int(hits)

    assert run() == (10, 0)  # compiled and saved
    assert run() == (10, 1)  # loaded from the cache
    (package / "callee.py").write_text(CALLEE.format(2))  # the caller's file is untouched
    assert run() == (20, 0)  # recompiled: Numba alone would load 10 from the caller's cache
    assert run() == (20, 1)
