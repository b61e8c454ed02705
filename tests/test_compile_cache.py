"""The on-disk compile cache: one source stamp for the whole package, so that an
edit to a callee's module invalidates its cached callers."""

import contextlib
import importlib
import os
import pathlib
import re
import subprocess
import sys
import threading

import smallgemm
from smallgemm.drivers import unpacked
from smallgemm.machine import compile_cache

PACKAGE = os.path.dirname(os.path.realpath(smallgemm.__file__))


def test_package_functions_are_stamped_with_all_package_sources():
    for function in (
        unpacked.unpacked_entry,
        importlib.import_module("smallgemm.drivers.blocked").gemm_entry,
    ):
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


def test_fingerprint_leaves_out_the_subpackages_that_cache_nothing(tmp_path):
    """An edit to smallgemm.cuda, .dask or .nn keeps the CPU entries' cache; the same names
    deeper down are sources like any other."""
    (tmp_path / "a.py").write_text("X = 1\n")
    for name in compile_cache.UNCACHED_SUBPACKAGES:
        (tmp_path / name).mkdir()
        (tmp_path / name / "m.py").write_text("Y = 1\n")
    (tmp_path / "sub" / "cuda").mkdir(parents=True)
    (tmp_path / "sub" / "cuda" / "m.py").write_text("Z = 1\n")

    def fingerprint():
        compile_cache.source_fingerprint.cache_clear()
        return compile_cache.source_fingerprint(str(tmp_path))

    first = fingerprint()
    for name in compile_cache.UNCACHED_SUBPACKAGES:
        (tmp_path / name / "m.py").write_text("Y = 2\n")
    assert fingerprint() == first
    (tmp_path / "sub" / "cuda" / "m.py").write_text("Z = 2\n")
    assert fingerprint() != first


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
import threading
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
        done = subprocess.run(
            [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        result, hits = done.stdout.split()
        return int(result), int(hits)

    assert run() == (10, 0)  # compiled and saved
    assert run() == (10, 1)  # loaded from the cache
    (package / "callee.py").write_text(CALLEE.format(2))  # the caller's file is untouched
    assert run() == (20, 0)  # recompiled: Numba alone would load 10 from the caller's cache
    assert run() == (20, 1)


def test_concurrent_saves_of_different_signatures_keep_each_its_own_code(tmp_path, monkeypatch):
    """Two savers of one function's index, interleaved the way two processes compiling
    different signatures at once are (each reads the index before the other writes it):
    each signature must still load its own data, never the other's."""
    from numba.core import caching

    stamp = compile_cache.source_fingerprint(PACKAGE)  # a watched root's stamp: saved under the lock
    numba_load_index = caching.IndexDataCacheFile._load_index
    both_reading = threading.Barrier(2, timeout=2)

    def slow_load_index(self):
        overloads = numba_load_index(self)
        # Without the lock both read the empty index here, and both pick .1; with it the second
        # reader waits for the first saver, past the barrier's timeout.
        with contextlib.suppress(threading.BrokenBarrierError):
            both_reading.wait()
        return overloads

    monkeypatch.setattr(caching.IndexDataCacheFile, "_load_index", slow_load_index)
    files = [caching.IndexDataCacheFile(str(tmp_path), "f-1.py311", stamp) for _ in range(2)]
    savers = [
        threading.Thread(target=f.save, args=(key, f"code of {key}")) for f, key in zip(files, ("s1", "s2"))
    ]
    for saver in savers:
        saver.start()
    for saver in savers:
        saver.join()
    monkeypatch.setattr(caching.IndexDataCacheFile, "_load_index", numba_load_index)
    reader = caching.IndexDataCacheFile(str(tmp_path), "f-1.py311", stamp)
    assert [reader.load(key) for key in ("s1", "s2")] == ["code of s1", "code of s2"]


# Matrix-vector products: one light entry (UNPACKED) and the row-dots routines it links, so that
# both processes save signatures of the same functions at about the same time.
TWO_AT_ONCE = """
import numpy as np, smallgemm
for dtype in {order}:
    rng = np.random.default_rng(7)
    w, x = rng.standard_normal((300, 200)).astype(dtype), rng.standard_normal(200).astype(dtype)
    for name, got, want in (("w @ x", smallgemm.matmul(w, x), w.astype(np.float64) @ x),
                            ("x @ w.T", smallgemm.matmul(x, w.T), x.astype(np.float64) @ w.T)):
        assert np.allclose(got, want, rtol=1e-3, atol=1e-3), name
        print(dtype.__name__, name, got.tobytes().hex()[:64])
"""


def test_two_processes_started_together_on_an_empty_cache(tmp_path):
    """Two processes compiling the same entries into one empty cache at once (dtypes in
    opposite orders) both compute right, and a third one, loading what they left, gives
    their bits: the cache is not left corrupt."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}

    def start(order):
        script = TWO_AT_ONCE.format(order=order)
        return subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )

    first, second = start("(np.float32, np.float64)"), start("(np.float64, np.float32)")
    outputs = []
    for process in (first, second):
        stdout, stderr = process.communicate(timeout=600)
        assert process.returncode == 0, stderr
        outputs.append(sorted(stdout.splitlines()))
    assert outputs[0] == outputs[1]
    third = subprocess.run(
        [sys.executable, "-c", TWO_AT_ONCE.format(order="(np.float32, np.float64)")],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert third.returncode == 0, third.stderr
    assert sorted(third.stdout.splitlines()) == outputs[0]
    assert any(name.endswith(".nbc") for _, _, names in os.walk(tmp_path) for name in names)


def test_the_uncached_subpackages_cache_nothing_and_feed_no_cached_code():
    """What leaving them out of the stamp relies on: no ``cache=True`` in them, and no module
    outside them imports them."""
    names = "|".join(sorted(compile_cache.UNCACHED_SUBPACKAGES))
    imports = re.compile(
        rf"^\s*(from\s+(smallgemm|\.+)\.?({names})\b|import\s+smallgemm\.({names})\b)", re.MULTILINE
    )
    for path in pathlib.Path(PACKAGE).rglob("*.py"):
        inside = path.relative_to(PACKAGE).parts[0] in compile_cache.UNCACHED_SUBPACKAGES
        text = path.read_text()
        assert not (inside and "cache=True" in text), path
        assert inside or not imports.search(text), path


SAVE_ORDER = """
import numpy as np
from numba.core import caching
from smallgemm.plan import dispatch, entries

save = caching.FunctionCache.save_overload


def logged(cache, signature, result):
    print(cache._impl.locator._py_file.rsplit("/", 1)[-1], result.fndesc.qualname)
    save(cache, signature, result)


caching.FunctionCache.save_overload = logged
entries.BLOCKED.link_routines(dispatch.current(), np.dtype("float32"))
"""


def test_an_entry_compiled_by_the_compile_command_is_saved_after_its_routines(tmp_path):
    """``python -m smallgemm compile`` (``Entry.link_routines``) into an empty cache: the entry
    is written last, so a process that finds it in the cache (the first-use tier loads it then)
    finds the routines its products reach there too, and compiles none at their first calls."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-c", SAVE_ORDER], check=False, capture_output=True, text=True, env=env, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr
    saved = [line.split()[-1] for line in run.stdout.splitlines()]
    assert saved[-1] == "gemm_entry", saved
    assert {"gemm_serial", "macro_kernel", "pack_a"} <= set(saved[:-1]), saved
