"""The benchmark tooling runs: the pytest-benchmark suite at tiny sizes, the report, the ladder, the peak.

No time is asserted anywhere: these tests check that the tools work, not how
fast anything is.
"""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from reference import assert_close

import smallgemm
from smallgemm.tools import ladder

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "data" / "benchmark_results.json"


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    # A session of its own, not one of this run's xdist workers (pytest-benchmark would
    # take it for one and time nothing).
    inherited = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_XDIST_")}
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env={**inherited, **(env or {})},
    )


def test_benchmark_suite_runs_at_tiny_sizes(tmp_path):
    """Every case runs once (--benchmark-disable); one dtype and thread count also writes a JSON."""
    done = _run(
        "-m",
        "pytest",
        "benchmarks/",
        "--bench-small",
        "--benchmark-disable",
        "-p",
        "no:cacheprovider",
        "-q",
        env={"OPENBLAS_CORETYPE": "Haswell"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OPENBLAS_CORETYPE" in done.stdout + done.stderr  # the warning about NumPy's forced kernel

    results = tmp_path / "results.json"
    done = _run(
        "-m",
        "pytest",
        "benchmarks/",
        "--bench-small",
        "--benchmark-only",
        "--benchmark-min-rounds=1",
        "--benchmark-max-time=0",
        "-p",
        "no:cacheprovider",
        "-q",
        "-k",
        "float64 and 1t and square",
        f"--benchmark-json={results}",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(results.read_text())
    libraries = {b["extra_info"]["library"] for b in data["benchmarks"]}
    assert libraries == {"smallgemm", "numpy"}
    groups = {b["group"] for b in data["benchmarks"]}
    assert len(groups) * 2 == len(data["benchmarks"])  # smallgemm and NumPy share each group
    assert data["smallgemm"]["peak"]["fma_gflops"]
    assert data["machine_info"]["cpu_model"]


def test_report_markdown_without_matplotlib(tmp_path):
    """With matplotlib unimportable the report still prints its Markdown (and writes no PNG)."""
    code = (
        "import runpy, sys; sys.modules['matplotlib'] = None; "
        f"sys.argv = ['report.py', {str(FIXTURE)!r}, '--out', {str(tmp_path)!r}]; "
        "runpy.run_path('benchmarks/report.py', run_name='__main__')"
    )
    done = _run("-c", code)
    assert done.returncode == 0, done.stderr
    assert "matplotlib is not installed" in done.stderr
    session = json.loads(FIXTURE.read_text())["smallgemm"]
    for text in (
        "#### square",
        "#### few-rows",
        session["cpu_model"],
        session["openblas"],
        session["command"],
    ):
        assert text in done.stdout
    assert not list(tmp_path.glob("*.png"))


def test_report_writes_plots(tmp_path):
    pytest.importorskip("matplotlib")
    done = _run("benchmarks/report.py", str(FIXTURE), "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    for name in ("perf_square.png", "perf_few_rows.png", "perf_efficiency.png"):
        assert (tmp_path / name).stat().st_size > 0
        assert f"({name})" in done.stdout
    assert "| smallgemm GFLOP/s |" in done.stdout


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ladder_runs_at_tiny_size(dtype):
    out = io.StringIO()
    rungs = ladder.run_ladder(dtype, out, size=32)
    assert len(rungs) == 5
    assert all(r.gflops > 0 and r.peak_gflops > 0 for r in rungs)
    text = out.getvalue()
    assert "smaller" in text  # the slow rungs say they ran on smaller cubes
    assert text.count("\n| ") == 6  # header and five rungs


@pytest.mark.parametrize("product", [ladder.naive_ijk, ladder.reordered_ikj, ladder.blocked_scalar])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "m, n, k", [(1, 1, 1), (5, 13, 7), (ladder.MC + 3, ladder.NR * 3 + 1, ladder.KC + 5)]
)
def test_ladder_rungs_compute_the_product(product, dtype, m, n, k):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = np.full((m, n), np.nan, dtype)
    product(a, b, c)
    assert_close(c, 1.0, a, b)  # the float64 reference and its error bound


def test_peak_is_sane():
    data = smallgemm.peak()
    assert data["read_gb_per_s"] > 0
    fma = data["fma_gflops"]
    assert fma
    for name, figures in fma.items():
        assert figures["one_core"] > 0 and figures["all_cores"] > 0
        assert figures["all_cores"] >= 0.8 * figures["one_core"], name
        assert figures["threads"] >= 1
    for bits in {name.split("_")[1] for name in fma}:
        assert fma[f"float32_{bits}"]["one_core"] >= fma[f"float64_{bits}"]["one_core"]


def test_read_pass_reads_every_element():
    from smallgemm.api.peak import read_pass

    x = np.arange(1001, dtype=np.float64)
    assert read_pass(x) == 1000 * 1001 / 2
    assert read_pass(x[:0]) == 0.0


def test_microkernel_efficiency_row(capsys, monkeypatch):
    """The targets' microkernel line: the engine's KC is named, the figures parse and are positive."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import targets

    monkeypatch.setattr(targets, "ALTERNATIONS", 1)
    engine_kc = smallgemm.plan.in_force.block_sizes(
        smallgemm.plan.dispatch.current(), np.dtype(np.float32)
    ).kc
    targets.microkernel_efficiency(np.float32, engine_kc)
    targets.microkernel_efficiency(np.float32, 64)
    engine_row, short_row = capsys.readouterr().out.splitlines()
    assert f"KC = {engine_kc} (the engine's)" in engine_row and "KC = 64 |" in short_row
    for row in (engine_row, short_row):
        speed, peak, share = (cell.strip().split()[-2] for cell in row.split("|")[2:5])
        assert float(speed) > 0 and float(peak) > 0
        # The row prints each figure to 0.1: allow what that rounding moves the ratio by.
        speed, peak = float(speed), float(peak)
        rounding = 100 * 0.05 * (1 / peak + speed / peak**2) + 0.05
        assert float(share) == pytest.approx(100 * speed / peak, abs=rounding)


def test_source_variants_lay_out_operands_as_named():
    """``benchmarks/source_variants.py``: B 16 bytes into a line, an F-ordered A, B as W.T, a
    stack and a ``pack``ed W.T, each of the shape asked for; and every group of ``kernel_settings.json`` names a
    kernel, a commit, edits of three strings and products of six fields."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import source_variants
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    rng = np.random.default_rng(0)
    for dtype in ("float32", "float64"):
        a, b = source_variants.operands(3, 70, 50, dtype, "off16,fa", rng)
        assert a.shape == (3, 70) and a.flags.f_contiguous and not a.flags.c_contiguous
        assert b.shape == (70, 50) and b.flags.c_contiguous and b.ctypes.data % 64 == 16
        a, b = source_variants.operands(3, 70, 50, dtype, "bt", rng)
        assert b.shape == (70, 50) and b.flags.f_contiguous and a.dtype == b.dtype == dtype
        a, b = source_variants.operands(3, 7, 5, dtype, "stack:4", rng)
        assert a.shape == (4, 3, 7) and b.shape == (4, 7, 5)
        a, b = source_variants.operands(1, 70, 50, dtype, "pack_t", rng)
        assert isinstance(b, smallgemm.PackedMatrix) and b.shape == (70, 50)
    groups = json.loads((ROOT / "benchmarks" / "kernel_settings.json").read_text())
    for name, group in groups.items():
        assert group["kernel"] in {"avx512", "avx2", "portable"} and len(group["commit"]) == 40, name
        assert all(len(edit) == 3 for edits in group["variants"].values() for edit in edits), name
        assert all(len(product) == 6 for product in group["products"]), name
