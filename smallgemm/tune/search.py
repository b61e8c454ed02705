"""The search: validate every candidate on its boundary shapes, then time the valid ones.

No candidate is timed before it has reproduced the reference on the shapes just
below, at and above each of its tile and block sizes; a wrong one is reported
and dropped.  Timing alternates between candidates in short bursts until the
budget is spent, so turbo and a neighbour's load drift spread over all of them
alike; the first call of each burst (which may reallocate the workspace for new
block sizes) is not timed.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np

from ..api.matmul import matmul
from ..kernels import kernel_by_name
from ..plan import blocking, in_force, strategies, warmup
from ..progress import ProgressBar
from .candidates import (
    DEFAULT_WORKSPACE_LIMIT,
    Candidate,
    RunFunction,
    configured,
    enumerate_candidates,
    execute_candidate,
)
from .inputs import reference_gemm, reproducible_matrix
from .validate import reorder_tolerance, validate_gemm

Shape = tuple[int, int, int]
# Seconds of timed calls per candidate, shape and burst.
BURST_SECONDS = 0.05


def boundary_shapes(candidate: Candidate) -> list[Shape]:
    """(m, n, k) shapes at s-1, s, s+1 for s in MR, MC (m), NR, NC (n) and KC (k).

    One dimension varies at a time; the others sit one past a tile (and, for k,
    one past KC, so two k blocks are summed), large enough that the product
    takes the blocked path the block sizes drive.  Fixed order, no duplicates.
    """
    kernel = kernel_by_name(candidate.kernel)
    mr, nr = kernel.mr(), kernel.nr(candidate.dtype)
    config = in_force.config_of(kernel)
    m0 = max(3 * mr, config.few_rows_max, config.transposed_few_rows_max) + 1
    n0, k0 = 2 * nr + 1, candidate.kc + 1
    while m0 * n0 * k0 <= config.unpacked_max_volume.of(np.dtype(candidate.dtype).itemsize):
        n0 += nr
    around = lambda *sizes: [s + d for s in sizes for d in (-1, 0, 1) if s + d >= 1]  # noqa: E731
    shapes = [(m, n0, k0) for m in around(mr, candidate.mc)]
    shapes += [(m0, n, k0) for n in around(nr, candidate.nc)]
    shapes += [(m0, n0, k) for k in around(candidate.kc)]
    return list(dict.fromkeys(shapes))


def operands(seed: int, shape: Shape, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Reproducible A (seed) and B (seed + 1) for an (m, n, k) product."""
    m, n, k = shape
    return reproducible_matrix(seed, m, k, "row", dtype), reproducible_matrix(seed + 1, k, n, "row", dtype)


@dataclass(frozen=True)
class Rejection:
    """A candidate that did not reproduce the reference (``mismatches`` is None: it did not run)."""

    candidate: Candidate
    shape: Shape
    mismatches: int | None


def validate_candidate(
    candidate: Candidate,
    seed: int = 1,
    workspace_limit: int = DEFAULT_WORKSPACE_LIMIT,
    run: RunFunction | None = None,
    references: dict | None = None,
) -> Rejection | None:
    """Run the candidate once on each boundary shape; the first failure, or None if all pass.

    ``references`` caches the reference products by (seed, shape) across candidates.
    """
    references = {} if references is None else references
    for shape in boundary_shapes(candidate):
        a, b = operands(seed, shape, candidate.dtype)
        got = execute_candidate(candidate, a, b, workspace_limit, run)
        if got is None:
            return Rejection(candidate, shape, None)
        key = (seed, shape)
        if key not in references:
            references[key] = reference_gemm(a, b)
        bad = validate_gemm(got, references[key], reorder_tolerance(shape[2], candidate.dtype))
        if bad:
            return Rejection(candidate, shape, bad)
    return None


@dataclass(frozen=True)
class Measurement:
    """Median seconds per timed shape of one candidate, and the GFLOP/s they amount to."""

    candidate: Candidate
    seconds: tuple[float, ...]
    gflops: float
    runs: int


@dataclass
class SearchResult:
    """Everything a search did: its parameters, the candidates and what became of each."""

    kernel: str
    dtype: str
    shapes: list[Shape]
    thread_counts: list[int]
    budget: float
    seed: int
    workspace_limit: int
    analytic: blocking.BlockSizes
    default: blocking.BlockSizes
    candidates: list[Candidate]
    rejected: list[Rejection] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)

    def ranking(self) -> list[Measurement]:
        """The measurements of the first group (threads, scope, allocation), fastest first.

        Only timings of one group are comparable; the first group is that of the
        first thread count, scope and allocation asked for.
        """
        if not self.measurements:
            return []
        group = self.measurements[0].candidate.group
        same = [m for m in self.measurements if m.candidate.group == group]
        return sorted(same, key=lambda m: -m.gflops)

    def best(self) -> Measurement | None:
        ranking = self.ranking()
        return ranking[0] if ranking else None

    def measured(self, sizes: blocking.BlockSizes) -> Measurement | None:
        """The measurement of these block sizes in the first group, if they were timed."""
        return next((m for m in self.ranking() if m.candidate.sizes == sizes), None)


def _timed_calls(candidate: Candidate, a, b, c, count: int, run: RunFunction) -> list[float]:
    """``count`` timed products under the candidate's scope and allocation (after one untimed)."""
    fresh = candidate.allocation == "fresh"
    seconds = []
    for i in range(count + 1):
        if candidate.scope == "compute":
            out = np.empty_like(c) if fresh else c
            start = time.perf_counter()
            run(1.0, a, b, 0.0, out)
        else:
            start = time.perf_counter()
            matmul(a, b) if fresh else matmul(a, b, out=c)
        if i:
            seconds.append(time.perf_counter() - start)
    return seconds


def search(
    kernel: str,
    dtype: str,
    shapes: Sequence[Shape],
    thread_counts: Sequence[int] = (1,),
    budget: float = 10.0,
    scopes: Sequence[str] = ("compute",),
    allocations: Sequence[str] = ("reused",),
    workspace_limit: int = DEFAULT_WORKSPACE_LIMIT,
    seed: int = 1,
    run: RunFunction | None = None,
    candidates: Sequence[Candidate] | None = None,
    out: TextIO | None = sys.stderr,
) -> SearchResult:
    """Validate, then time, the candidates for ``kernel`` and ``dtype`` on ``shapes``.

    ``budget`` bounds the timing (seconds; every valid candidate is timed at
    least once); validation always runs in full.  ``candidates`` overrides the
    enumeration; ``run`` replaces ``strategies.compute`` (compute scope) for tests.
    """
    with warmup.first_use(warmup.COMPILE):  # candidates are timed on their own entries, compiled here
        return _search(
            kernel,
            dtype,
            shapes,
            thread_counts,
            budget,
            scopes,
            allocations,
            workspace_limit,
            seed,
            run,
            candidates,
            out,
        )


def _search(
    kernel,
    dtype,
    shapes,
    thread_counts,
    budget,
    scopes,
    allocations,
    workspace_limit,
    seed,
    run,
    candidates,
    out,
) -> SearchResult:
    k = kernel_by_name(kernel)
    dt = np.dtype(dtype)
    if candidates is None:
        candidates = enumerate_candidates(
            kernel, dt.name, thread_counts, scopes, allocations, workspace_limit
        )
    result = SearchResult(
        kernel,
        dt.name,
        [tuple(s) for s in shapes],
        [int(t) for t in thread_counts],
        float(budget),
        seed,
        workspace_limit,
        blocking.analytic(k, dt),
        blocking.default(k, dt),
        list(candidates),
    )
    references: dict = {}
    valid = []
    checking = None if out is None else ProgressBar(len(candidates), "validate", stream=out)
    for i, candidate in enumerate(candidates):
        rejection = validate_candidate(candidate, seed, workspace_limit, run, references)
        if rejection is None:
            valid.append(candidate)
        else:
            result.rejected.append(rejection)
        if checking is not None:
            checking.update(i + 1)
    if checking is not None:
        checking.close()
    references.clear()
    for r in result.rejected:
        detail = "could not run" if r.mismatches is None else f"{r.mismatches} wrong elements"
        if out is not None:
            out.write(f"rejected {r.candidate.label()}: {detail} at m,n,k={r.shape}\n")
    if not valid:
        return result

    run = run or strategies.compute
    problems = []
    for shape in shapes:
        a, b = operands(seed, shape, dt)
        problems.append((a, b, np.empty((shape[0], shape[1]), dt), 2.0 * shape[0] * shape[1] * shape[2]))
    samples = {c: [[] for _ in problems] for c in valid}
    bursts = {}
    timing = None if out is None else ProgressBar(int(budget), "time", stream=out)
    start = time.perf_counter()
    for c in valid:  # probe: one timed call per shape sets the burst length
        with configured(c):
            probe = [_timed_calls(c, a, b, cc, 1, run)[0] for a, b, cc, _ in problems]
        bursts[c] = [max(1, int(BURST_SECONDS / max(t, 1e-9))) for t in probe]
        for s, t in zip(samples[c], probe):
            s.append(t)
    while time.perf_counter() - start < budget:
        for c in valid:
            with configured(c):
                for (a, b, cc, _), s, count in zip(problems, samples[c], bursts[c]):
                    s.extend(_timed_calls(c, a, b, cc, count, run))
        if timing is not None:
            timing.update(min(int(time.perf_counter() - start), int(budget)), "s")
    if timing is not None:
        timing.close("s")
    for c in valid:
        medians = tuple(statistics.median(s) for s in samples[c])
        flops = sum(p[3] for p in problems)
        result.measurements.append(
            Measurement(c, medians, flops / sum(medians) / 1e9, sum(len(s) for s in samples[c]))
        )
    return result


def format_table(result: SearchResult, top: int = 10) -> str:
    """The fastest candidates of the first group, beside the analytic and default sizes."""
    ranking = result.ranking()
    if not ranking:
        return "no valid candidate was timed"
    base = result.measured(result.analytic)
    first = ranking[0].candidate
    lines = [
        f"{first.kernel} {first.dtype}, {first.threads} thread(s), {first.scope}/{first.allocation}, "
        f"shapes {', '.join('x'.join(map(str, s)) for s in result.shapes)}",
        f"{'rank':>4} {'MC':>6} {'NC':>6} {'KC':>5} {'GFLOP/s':>8} {'vs analytic':>11}  runs  note",
    ]
    shown = ranking[:top] + [
        m for m in ranking[top:] if m.candidate.sizes in (result.analytic, result.default)
    ]
    for m in shown:
        c = m.candidate
        notes = [n for n, s in (("analytic", result.analytic), ("default", result.default)) if c.sizes == s]
        ratio = f"{m.gflops / base.gflops:.3f}" if base else "-"
        lines.append(
            f"{ranking.index(m) + 1:>4} {c.mc:>6} {c.nc:>6} {c.kc:>5} {m.gflops:>8.1f} {ratio:>11} "
            f"{m.runs:>5}  {' '.join(notes)}"
        )
    if result.rejected:
        lines.append(f"{len(result.rejected)} candidate(s) rejected before timing")
    return "\n".join(lines)
