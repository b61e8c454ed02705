"""Tuning candidates: what one configuration is, what it costs, and how it runs.

A candidate is everything that decides what a timing means: block sizes, kernel,
dtype, thread count, timing scope and allocation mode.  All of them belong to
its identity, so a compute-only time is never compared with an end-to-end one.
Its workspace is computed from the parameters and checked against a hard limit
before anything runs; an invalid candidate or shape yields None, never a result
that could look like a fast, empty product.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..kernels import Kernel, kernel_by_name
from ..machine import cpu, threads
from ..plan import blocking, dispatch, in_force, strategies

SCOPES = ("compute", "end_to_end")  # strategies.compute on ready operands | the public matmul call
ALLOCATIONS = ("reused", "fresh")  # one output buffer for every call | a new one per call
DTYPES = ("float32", "float64")
# Packing workspace above this is refused: 64 MiB is far beyond any cache, so a
# candidate needing more only wastes memory.
DEFAULT_WORKSPACE_LIMIT = 64 << 20
# KC values tried besides the analytic one: the range docs/design.md swept.
KC_GRID = (256, 384, 512, 768, 1024)
# MC relative to the L2 model for each KC: half, the model, twice (over the L2).
MC_FACTORS = (0.5, 1.0, 2.0)

RunFunction = Callable[[float, np.ndarray, np.ndarray, float, np.ndarray], None]


@dataclass(frozen=True)
class Candidate:
    """One configuration to validate and time."""

    kernel: str
    dtype: str
    mc: int
    nc: int
    kc: int
    threads: int = 1
    scope: str = "compute"
    allocation: str = "reused"

    @property
    def sizes(self) -> blocking.BlockSizes:
        return blocking.BlockSizes(mc=self.mc, nc=self.nc, kc=self.kc)

    @property
    def group(self) -> tuple[str, str, int, str, str]:
        """What must be equal for two candidates' timings to be comparable."""
        return (self.kernel, self.dtype, self.threads, self.scope, self.allocation)

    def label(self) -> str:
        return (
            f"{self.kernel}/{self.dtype} MC={self.mc} NC={self.nc} KC={self.kc} "
            f"threads={self.threads} {self.scope}/{self.allocation}"
        )


def _kernel_of(candidate: Candidate) -> Kernel:
    return kernel_by_name(candidate.kernel)


def workspace_bytes(candidate: Candidate) -> int:
    """Bytes of packing buffers the candidate needs (as ``workspace.get`` allocates them)."""
    kernel = _kernel_of(candidate)
    dtype = np.dtype(candidate.dtype)
    return candidate.sizes.workspace_bytes(kernel.mr(), kernel.nr(dtype), dtype.itemsize, candidate.threads)


def invalid_reason(candidate: Candidate, workspace_limit: int = DEFAULT_WORKSPACE_LIMIT) -> str | None:
    """Why the candidate must not run here, or None when it is valid."""
    try:
        kernel = _kernel_of(candidate)
    except ValueError as error:
        return str(error)
    if not kernel.runs_on(cpu.features()):
        return f"kernel {kernel.name!r} needs {', '.join(kernel.requires)}, which this CPU lacks"
    if candidate.dtype not in DTYPES:
        return f"dtype must be one of {DTYPES}, got {candidate.dtype!r}"
    if candidate.scope not in SCOPES:
        return f"scope must be one of {SCOPES}, got {candidate.scope!r}"
    if candidate.allocation not in ALLOCATIONS:
        return f"allocation must be one of {ALLOCATIONS}, got {candidate.allocation!r}"
    if candidate.threads < 1:
        return f"threads must be at least 1, got {candidate.threads}"
    try:
        candidate.sizes.check(kernel.mr(), kernel.nr(candidate.dtype))
    except ValueError as error:
        return str(error)
    need = workspace_bytes(candidate)
    if need > workspace_limit:
        return f"workspace {need} bytes exceeds the limit of {workspace_limit}"
    return None


def _round_down(value: float, multiple: int) -> int:
    return max(multiple, int(value) // multiple * multiple)


def enumerate_candidates(
    kernel: str,
    dtype: str,
    thread_counts: Sequence[int] = (1,),
    scopes: Sequence[str] = ("compute",),
    allocations: Sequence[str] = ("reused",),
    workspace_limit: int = DEFAULT_WORKSPACE_LIMIT,
    caches=None,
    vendor: str | None = None,
) -> list[Candidate]:
    """The valid candidates, in a fixed order: the same list on every call.

    Per (threads, scope, allocation), in that nesting: first the analytic block
    sizes (Low et al. 2016, the search's starting point), then the library's
    defaults (for ``vendor``, by default the host's), then for each KC of the
    analytic one and KC_GRID (ascending) the MC of the L2 model for that KC
    times MC_FACTORS, with NC from the L3 model capped at the configuration's ``nc_max``.
    Duplicates and candidates over the workspace limit are left out.
    """
    k = kernel_by_name(kernel)
    dt = np.dtype(dtype)
    l1, l2, l3 = caches or cpu.caches()
    mr, nr, size = k.mr(), k.nr(dt), dt.itemsize
    analytic = blocking.analytic(k, dt, (l1, l2, l3))
    default = blocking.default(k, dt, (l1, l2, l3), vendor)
    sizes = [analytic, default]
    for kc in sorted({analytic.kc, *KC_GRID}):
        model_mc = blocking.analytic_mc(mr, nr, kc, size, l2)
        for factor in MC_FACTORS:
            mc = _round_down(model_mc * factor, mr)
            nc = min(blocking.analytic_nc(mr, nr, kc, mc, size, l3), _round_down(k.config.nc_max, nr))
            sizes.append(blocking.BlockSizes(mc=mc, nc=nc, kc=kc))
    unique = list(dict.fromkeys(sizes))
    found = []
    for t in thread_counts:
        for scope in scopes:
            for allocation in allocations:
                for s in unique:
                    c = Candidate(kernel, dt.name, s.mc, s.nc, s.kc, int(t), scope, allocation)
                    if invalid_reason(c, workspace_limit) is None:
                        found.append(c)
    return found


@contextlib.contextmanager
def configured(candidate: Candidate) -> Iterator[None]:
    """Run with the candidate's kernel, threads and block sizes; restore all three after."""
    kernel = _kernel_of(candidate)
    dtype = np.dtype(candidate.dtype)
    with dispatch.use_kernel(candidate.kernel), threads.num_threads(candidate.threads):
        previous = in_force.block_sizes(kernel, dtype)
        in_force.set_block_sizes(kernel, dtype, candidate.sizes)
        try:
            yield
        finally:
            in_force.set_block_sizes(kernel, dtype, previous)


def _valid_operands(candidate: Candidate, a, b) -> bool:
    dtype = np.dtype(candidate.dtype)
    return (
        isinstance(a, np.ndarray)
        and isinstance(b, np.ndarray)
        and a.ndim == 2
        and b.ndim == 2
        and a.shape[1] == b.shape[0]
        and a.dtype == dtype
        and b.dtype == dtype
    )


def execute_candidate(
    candidate: Candidate,
    a: np.ndarray,
    b: np.ndarray,
    workspace_limit: int = DEFAULT_WORKSPACE_LIMIT,
    run: RunFunction | None = None,
) -> np.ndarray | None:
    """A @ B computed under the candidate's configuration, or None if it cannot run.

    None when the candidate is invalid (see ``invalid_reason``) or the operands
    are not two 2-D arrays of its dtype with matching inner dimensions.  ``run``
    replaces ``strategies.compute`` (same signature, C = alpha A B + beta C): the hook by
    which a test injects a broken product and checks it is caught.
    """
    if invalid_reason(candidate, workspace_limit) is not None or not _valid_operands(candidate, a, b):
        return None
    c = np.empty((a.shape[0], b.shape[1]), dtype=candidate.dtype)
    with configured(candidate):
        (run or strategies.compute)(1.0, a, b, 0.0, c)
    return c
