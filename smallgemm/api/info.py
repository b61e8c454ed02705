"""``smallgemm.info()``: what runs here and why — CPU, kernel, block sizes, threads, versions."""

from __future__ import annotations

import os

import llvmlite
import numba
import numpy as np

from ..machine import compile_cache, cpu, threading_layer, threads
from ..plan import dispatch, in_force, warmup
from ..version import __version__
from . import precompile


def info() -> dict:
    """A JSON-ready description of smallgemm on this machine."""
    kernel = dispatch.current()
    return {
        "smallgemm": __version__,
        "cpu": cpu.describe(),
        "kernel": {
            "name": kernel.name,
            "detected": dispatch.detect().name,
            "description": kernel.description,
            "tiles": {dt: kernel.tile_name(dt) for dt in ("float32", "float64")},
            "exact": dispatch.get_exact(),
        },
        "configuration": in_force.tuned_configuration(),
        "block_sizes": {
            dt: in_force.block_sizes(kernel, np.dtype(dt)).blocks._asdict() for dt in ("float32", "float64")
        },
        "threads": {
            "num_threads": threads.get_num_threads(),
            "workers": threads.workers(),
            "numba_pool": threads.pool_size(),
            "threading_layer": threading_layer.describe(),
        },
        "versions": {"numba": numba.__version__, "llvmlite": llvmlite.__version__, "numpy": np.__version__},
        "compile_cache": {
            **compile_cache.describe(os.path.dirname(__file__)),
            "compiled": {dt: precompile.cache_status(kernel, np.dtype(dt)) for dt in ("float32", "float64")},
        },
        "first_use": {
            "mode": warmup.get_first_use(),
            "runs": warmup.first_use_runs(),  # products this process ran on the first-use driver
            "compiling": warmup.compiling(),
        },
    }


def format_info(data: dict) -> str:
    """``info()`` as the text ``python -m smallgemm info`` prints."""
    c = data["cpu"]
    lines = [
        f"smallgemm {data['smallgemm']}",
        f"CPU            {c['model']} ({c['llvm_cpu']}, {c['machine']}), {c['cores']} cores",
        f"SIMD features  {' '.join(c['features'])}",
        "caches         "
        + ", ".join(
            f"L{x['level']} {x['size'] // 1024} KiB {x['ways']}-way ({x['source']})" for x in c["caches"]
        ),
        f"kernel         {data['kernel']['name']} (detected: {data['kernel']['detected']}): "
        + ", ".join(data["kernel"]["tiles"].values())
        + ("; exact products" if data["kernel"]["exact"] else "; not exact (row dots lane-wise, split-K)"),
    ]
    tuned = data["configuration"]
    lines.append(
        "configuration  "
        + (
            f"{tuned['path']} (schema {tuned['schema']}: {', '.join(tuned['tunings'])})"
            if tuned
            else "none (default block sizes)"
        )
    )
    for dt, sizes in data["block_sizes"].items():
        lines.append(f"blocks {dt:<8}MC={sizes['mc']} NC={sizes['nc']} KC={sizes['kc']}")
    t = data["threads"]
    used = "" if t["workers"] == t["num_threads"] else f", {t['workers']} used here"
    lines.append(
        f"threads        {t['num_threads']}{used} (Numba pool {t['numba_pool']}, layer {t['threading_layer']})"
    )
    v = data["versions"]
    lines.append(f"versions       numba {v['numba']}, llvmlite {v['llvmlite']}, numpy {v['numpy']}")
    cache = data["compile_cache"]
    lines.append(
        f"compile cache  {cache['directory'] or 'none (not writable)'} (sources {cache['stamp'][:12]})"
    )
    for dt, status in cache["compiled"].items():
        missing = [name for name, ready in status.items() if not ready]
        lines.append(
            f"compiled       {dt}: {len(status) - len(missing)} of {len(status)} entries"
            + (f"; not yet: {', '.join(missing)}" if missing else "")
        )
    first = data["first_use"]
    lines.append(
        f"first use      {first['mode']}: {first['runs']} products on the first-use driver here"
        + (f"; compiling {', '.join(first['compiling'])}" if first["compiling"] else "")
    )
    return "\n".join(lines)


def format_peak(data: dict) -> str:
    """``peak()`` as text: GFLOP/s per dtype and vector width, and the read bandwidth."""
    lines = []
    for name, figures in data["fma_gflops"].items():
        dtype, bits = name.split("_")
        lines.append(
            f"FMA peak       {dtype} {bits}-bit: {figures['one_core']:.0f} GFLOP/s one core, "
            f"{figures['all_cores']:.0f} on {figures['threads']} threads"
        )
    lines.append(f"read bandwidth {data['read_gb_per_s']:.1f} GB/s one core")
    return "\n".join(lines)
