"""Turn a ``pytest benchmarks/ --benchmark-json=FILE`` result into plots and a Markdown fragment.

    python benchmarks/report.py results.json --out docs/

Writes ``OUT/perf_square.png`` (GFLOP/s against M for M = N, K = 1024),
``OUT/perf_few_rows.png`` (GFLOP/s against the row count m of [m, 512] @
[512, 2048]) and ``OUT/perf_efficiency.png`` (the square products as % of the
FMA peak measured in the same session), each for float32 and float64 and every
thread count in the file; then prints the Markdown: the provenance line and
one table per family of cases, each row smallgemm against NumPy of one group.

GFLOP/s use each benchmark's median time and ``extra_info["flops"]``.  The
provenance (command, date, CPU model, OpenBLAS kernel, smallgemm kernel,
scale) and the peak come from the JSON's top-level ``smallgemm`` record
written by ``benchmarks/conftest.py``.  The plots need matplotlib (``pip
install "smallgemm[plots]"``); without it only the Markdown is produced.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

FAMILIES = ("square", "cube", "training", "few-rows", "transposed", "batched")  # table order


@dataclass(frozen=True)
class Result:
    """One benchmark of the JSON: what ran and how fast."""

    family: str
    case: str
    dtype: str
    threads: int
    library: str
    shape: tuple[int, int, int, int]  # batch, m, n, k as run (scaled)
    gflops: float
    peak_gflops: float | None

    @property
    def percent_of_peak(self) -> float | None:
        return 100.0 * self.gflops / self.peak_gflops if self.peak_gflops else None


def _peak(session: dict, dtype: str, threads: int) -> float | None:
    """The session's FMA peak for ``dtype`` at smallgemm's vector width on ``threads`` cores.

    For several threads, the larger of the measured all-cores figure and
    ``threads`` times the one-core figure: another process on a shared machine
    lowers the all-cores measurement, and the products would then exceed 100 %.
    """
    entry = session.get("peak", {}).get("fma_gflops", {}).get(f"{dtype}_{session.get('vector_bits')}")
    if entry is None:
        return None
    scaled = entry["one_core"] * threads
    return max(entry["all_cores"], scaled) if threads == entry["threads"] else scaled


def load(path: Path) -> tuple[list[Result], dict]:
    """The results of a pytest-benchmark JSON file and its session record (provenance, peak)."""
    data = json.loads(path.read_text())
    machine = data.get("machine_info", {})
    session = {
        "command": "?",
        "date": data.get("datetime", "?"),
        "cpu_model": machine.get("cpu_model", "?"),
        "openblas": machine.get("openblas", "?"),
        "kernel": machine.get("smallgemm_kernel", "?"),
        **data.get("smallgemm", {}),
    }
    results = []
    for bench in data["benchmarks"]:
        info = bench["extra_info"]
        results.append(
            Result(
                info["family"],
                info["case"],
                info["dtype"],
                info["threads"],
                info["library"],
                tuple(info["shape"]),
                info["flops"] / bench["stats"]["median"] / 1e9,
                _peak(session, info["dtype"], info["threads"]),
            )
        )
    return results, session


def provenance(session: dict) -> str:
    """One line naming what produced the figures: command, date, CPU, BLAS kernel, smallgemm kernel."""
    line = (
        f"`{session['command']}`, {session['date']}, CPU {session['cpu_model']}, NumPy with "
        f"{session['openblas']}, smallgemm kernel {session['kernel']}, size scale {session.get('scale', 1.0):g}"
    )
    if session.get("openblas_forcing"):
        line += f" (warning: {' '.join(session['openblas_forcing'])} was set: NumPy on a slower kernel)"
    return line


def _pairs(results: list[Result]) -> dict[tuple, dict[str, Result]]:
    """Results keyed by (family, case, dtype, threads), then by library."""
    pairs: dict[tuple, dict[str, Result]] = defaultdict(dict)
    for r in results:
        pairs[(r.family, r.case, r.dtype, r.threads)][r.library] = r
    return pairs


def _cell(value: float | None, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def markdown(results: list[Result], session: dict, images: list[Path]) -> str:
    """Tables of smallgemm against NumPy per family, under the provenance line and the plots."""
    lines = [f"Measured with {provenance(session)}.", ""]
    lines += [f"![{image.stem}]({image.name})" for image in images]
    by_family: dict[str, list] = defaultdict(list)
    for key, libs in _pairs(results).items():
        by_family[key[0]].append((key, libs))
    for family, rows in sorted(by_family.items(), key=lambda item: ((*FAMILIES, item[0])).index(item[0])):
        lines += [
            "",
            f"#### {family}",
            "",
            "| case | dtype | threads | smallgemm GFLOP/s | NumPy GFLOP/s | smallgemm / NumPy "
            "| smallgemm % of peak | NumPy % of peak |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for (_, case, dtype, threads), libs in rows:
            ours, theirs = libs.get("smallgemm"), libs.get("numpy")
            ratio = ours.gflops / theirs.gflops if ours and theirs else None
            lines.append(
                f"| {case} | {dtype} | {threads} | {_cell(ours and ours.gflops, '.1f')} | "
                f"{_cell(theirs and theirs.gflops, '.1f')} | {_cell(ratio, '.2f')} | "
                f"{_cell(ours and ours.percent_of_peak, '.0f')} | {_cell(theirs and theirs.percent_of_peak, '.0f')} |"
            )
    return "\n".join(lines)


def _plot(
    results: list[Result],
    session: dict,
    family: str,
    x_of,
    y_of,
    xlabel: str,
    ylabel: str,
    title: str,
    path: Path,
) -> Path | None:
    """One figure, a panel per dtype, a line per (library, threads, variant); None if ``family`` is absent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = [r for r in results if r.family == family and y_of(r) is not None]
    if not chosen:
        return None
    dtypes = sorted({r.dtype for r in chosen})
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6 * len(dtypes), 4.5), squeeze=False)
    for ax, dtype in zip(axes[0], dtypes):
        lines: dict[str, list[Result]] = defaultdict(list)
        for r in chosen:
            if r.dtype == dtype:
                variant = " B transposed" if r.case.endswith("transposed") else ""
                lines[f"{r.library}, {r.threads} thread(s){variant}"].append(r)
        for label, points in sorted(lines.items()):
            points.sort(key=x_of)
            ax.plot(
                [x_of(p) for p in points],
                [y_of(p) for p in points],
                marker="o",
                linestyle="-" if label.startswith("smallgemm") else "--",
                label=label,
            )
        ax.set_xscale("log", base=2)
        ax.set(title=f"{title}, {dtype}", xlabel=xlabel, ylabel=ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.text(0.01, 0.01, provenance(session), fontsize=6, wrap=True)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plots(results: list[Result], session: dict, out: Path) -> list[Path]:
    """Write the PNGs under ``out``; return the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    figures = [
        (
            "square",
            lambda r: r.shape[1],
            lambda r: r.gflops,
            "M = N (K = 1024)",
            "GFLOP/s",
            "Square products",
            "perf_square.png",
        ),
        (
            "few-rows",
            lambda r: r.shape[1],
            lambda r: r.gflops,
            "rows m of [m, 512] @ [512, 2048]",
            "GFLOP/s",
            "Few rows",
            "perf_few_rows.png",
        ),
        (
            "square",
            lambda r: r.shape[1],
            lambda r: r.percent_of_peak,
            "M = N (K = 1024)",
            "% of measured FMA peak",
            "Efficiency",
            "perf_efficiency.png",
        ),
    ]
    written = [
        _plot(results, session, family, x_of, y_of, xlabel, ylabel, title, out / name)
        for family, x_of, y_of, xlabel, ylabel, title, name in figures
    ]
    return [path for path in written if path is not None]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", type=Path, help="pytest-benchmark JSON (--benchmark-json)")
    parser.add_argument("--out", type=Path, default=Path("docs"), help="folder for the PNGs (default docs/)")
    args = parser.parse_args(argv)
    results, session = load(args.json)
    try:
        images = plots(results, session, args.out)
    except ImportError:
        print("matplotlib is not installed: no plots (pip install 'smallgemm[plots]')", file=sys.stderr)
        images = []
    print(markdown(results, session, images))
    return 0


if __name__ == "__main__":
    sys.exit(main())
