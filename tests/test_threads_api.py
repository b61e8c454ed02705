"""Thread settings: the functions, the context manager, threadpoolctl, info()."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import threadpoolctl

import smallgemm
from smallgemm.api.info import format_info
from smallgemm.machine import compile_cache


def test_set_get_and_context_manager():
    before = smallgemm.get_num_threads()
    try:
        smallgemm.set_num_threads(3)
        assert smallgemm.get_num_threads() == 3
        with smallgemm.num_threads(1):
            assert smallgemm.get_num_threads() == 1
        assert smallgemm.get_num_threads() == 3
    finally:
        smallgemm.set_num_threads(before)


@pytest.mark.parametrize("bad,error", [(0, ValueError), (-2, ValueError), (1.5, TypeError), ("2", TypeError)])
def test_bad_thread_counts(bad, error):
    with pytest.raises(error, match="number of threads"):
        smallgemm.set_num_threads(bad)


def test_threadpoolctl_lists_and_limits_smallgemm():
    entries = [lib for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "smallgemm"]
    assert len(entries) == 1 and entries[0]["num_threads"] == smallgemm.get_num_threads()
    before = smallgemm.get_num_threads()
    with threadpoolctl.threadpool_limits(1):
        assert smallgemm.get_num_threads() == 1
    assert smallgemm.get_num_threads() == before
    with threadpoolctl.threadpool_limits(limits=1, user_api="smallgemm"):
        assert smallgemm.get_num_threads() == 1


def run_python(code, **env):
    import os

    full_env = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=full_env
    )


def test_environment_variables():
    done = run_python(
        "import smallgemm; print(smallgemm.get_num_threads(), smallgemm.get_kernel())",
        SMALLGEMM_NUM_THREADS="3",
        SMALLGEMM_KERNEL="avx2",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "avx2"]
    bad = run_python("import smallgemm", SMALLGEMM_NUM_THREADS="many")
    assert bad.returncode != 0 and "SMALLGEMM_NUM_THREADS" in bad.stderr
    bad = run_python("import smallgemm", SMALLGEMM_KERNEL="sse9")
    assert bad.returncode != 0 and "unknown kernel 'sse9'" in bad.stderr
    done = run_python("import smallgemm; print(smallgemm.get_exact())", SMALLGEMM_EXACT="0")
    assert done.returncode == 0 and done.stdout.split() == ["False"], done.stderr
    done = run_python("import smallgemm; print(smallgemm.get_exact())", SMALLGEMM_BATCH_INVARIANT="0")
    assert done.returncode == 0 and done.stdout.split() == ["False"], done.stderr
    bad = run_python("import smallgemm", SMALLGEMM_EXACT="yes")
    assert bad.returncode != 0 and "SMALLGEMM_EXACT must be 0 or 1" in bad.stderr
    bad = run_python("import smallgemm", SMALLGEMM_BATCH_INVARIANT="no")
    assert bad.returncode != 0 and "SMALLGEMM_BATCH_INVARIANT must be 0 or 1" in bad.stderr


def test_exact_setting():
    """On by default; the setter, the context manager (which restores it, even on an
    error) and info() agree; anything but a bool is refused."""
    assert smallgemm.get_exact() and smallgemm.info()["kernel"]["exact"]
    with smallgemm.exact(False):
        assert not smallgemm.get_exact() and not smallgemm.info()["kernel"]["exact"]
        assert "not exact (row dots lane-wise, split-K)" in format_info(smallgemm.info())
    assert "exact products" in format_info(smallgemm.info())
    assert smallgemm.get_exact()
    with pytest.raises(RuntimeError), smallgemm.exact(False):
        raise RuntimeError
    assert smallgemm.get_exact()
    smallgemm.set_exact(False)
    try:
        assert not smallgemm.get_exact()
    finally:
        smallgemm.set_exact(True)
    with pytest.raises(TypeError, match="True or False"):
        smallgemm.set_exact(0)


def test_kernel_the_cpu_cannot_run_is_a_clear_error(monkeypatch):
    from smallgemm.machine import cpu

    monkeypatch.setattr(cpu, "features", lambda: frozenset({"sse2"}))
    with pytest.raises(ValueError, match="needs CPU features avx512f"):
        smallgemm.set_kernel("avx512")
    smallgemm.set_kernel("portable")
    smallgemm.set_kernel(None)


def test_info_describes_the_machine():
    data = smallgemm.info()
    json.dumps(data)  # JSON-ready
    assert data["kernel"]["name"] == smallgemm.get_kernel()
    assert data["threads"]["num_threads"] == smallgemm.get_num_threads()
    l1, l2, l3 = data["cpu"]["caches"]
    assert 0 < l1["size"] < l2["size"] < l3["size"]
    for sizes in data["block_sizes"].values():
        assert min(sizes.values()) > 0
    assert set(data["versions"]) == {"numba", "llvmlite", "numpy"}
    package = os.path.dirname(os.path.realpath(smallgemm.__file__))
    assert data["compile_cache"]["stamp"] == compile_cache.source_fingerprint(package)
    assert os.path.isdir(data["compile_cache"]["directory"])
    done = run_python(
        "import runpy, sys; sys.argv = ['smallgemm', 'info']; runpy.run_module('smallgemm', run_name='__main__')"
    )
    assert done.returncode == 0, done.stderr
    assert "kernel" in done.stdout and "MC=" in done.stdout
    assert f"compile cache  {data['compile_cache']['directory']}" in done.stdout


def test_info_with_a_forced_kernel_reports_it():
    with smallgemm.use_kernel("portable"):
        data = smallgemm.info()
    assert data["kernel"]["name"] == "portable"
    assert data["kernel"]["tiles"]["float32"] == "sgemm_portable_4x8"
    np.testing.assert_equal(data["kernel"]["detected"] in ("avx512", "avx2", "portable"), True)
