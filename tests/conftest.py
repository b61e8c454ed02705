import contextlib
import importlib.metadata
import os
import tempfile

# Tests run with the default block sizes: no tuned configuration from the user's
# environment or cache directory (tests/test_tune.py sets its own). The cache
# directory is removed when the test process exits.
os.environ.pop("SMALLGEMM_CONFIG", None)
_CACHE_HOME = tempfile.TemporaryDirectory(prefix="smallgemm-tests-")
os.environ["XDG_CACHE_HOME"] = _CACHE_HOME.name
# Every product runs on the driver its strategy names: entries compile in the test process
# (and in the processes tests start), never on the first-use driver while another process
# compiles them; tests/test_warmup.py tests that tier.
os.environ["SMALLGEMM_FIRST_USE"] = "compile"
# smallgemm.cuda's kernels run on a GPU where there is one, else in numba-cuda's simulator
# (tests/test_cuda.py): never skipped.  Set before Numba reads its configuration.
if "NUMBA_ENABLE_CUDASIM" not in os.environ and not os.path.exists("/dev/nvidiactl"):
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

import numpy as np
import pytest

import smallgemm
from smallgemm.kernels import KERNELS, BySize, kernel_by_name
from smallgemm.machine import cpu
from smallgemm.plan import blocking, in_force

KERNEL_NAMES = [k.name for k in KERNELS]
DTYPES = [np.float32, np.float64]


@contextlib.contextmanager
def forced_kernel(name: str):
    """Force kernel ``name`` even where the CPU lacks its features.

    Numba compiles for the host CPU, so on an AVX2 machine LLVM splits the avx512 kernel's
    512-bit vectors into pairs of 256-bit ones: each lane gets the same operations and so
    the same bits, and its tiles, packing and edges are tested on every machine (its speed
    is not). Outside the tests, forcing such a kernel stays an error.
    """
    host = cpu.features()
    missing = frozenset(kernel_by_name(name).requires) - host
    with pytest.MonkeyPatch.context() as patch:
        if missing:
            patch.setattr(cpu, "features", lambda: host | missing)
        with smallgemm.use_kernel(name):
            yield smallgemm.plan.dispatch.current()


@pytest.fixture(params=KERNEL_NAMES)
def kernel(request):
    """Run the test once per microkernel: all three, whatever the CPU (see forced_kernel)."""
    with forced_kernel(request.param) as forced:
        yield forced


@pytest.fixture(params=DTYPES, ids=["float32", "float64"])
def dtype(request):
    return np.dtype(request.param)


@pytest.fixture
def tiny_blocks(kernel, dtype):
    """Small block sizes so that edges around MC, NC and KC are cheap to reach."""
    mr, nr = kernel.mr(), kernel.nr(dtype)
    sizes = blocking.BlockSizes(mc=2 * mr, nc=2 * nr, kc=5)
    in_force.set_block_sizes(kernel, dtype, sizes)
    yield sizes
    in_force.set_block_sizes(kernel, dtype, None)


@contextlib.contextmanager
def pinned_blocks(kernel):
    """Block sizes fixed for both dtypes inside a with block: KC = 64 (products of a larger
    k cross KC blocks), MC and NC four tiles.  The default KC follows the host's caches,
    and KC decides the bits."""
    try:
        for dtype in DTYPES:
            in_force.set_block_sizes(
                kernel,
                np.dtype(dtype),
                blocking.BlockSizes(mc=4 * kernel.mr(), nc=4 * kernel.nr(np.dtype(dtype)), kc=64),
            )
        yield
    finally:
        for dtype in DTYPES:
            in_force.set_block_sizes(kernel, np.dtype(dtype), None)


def random_matrix(rng, shape, dtype, order="C"):
    data = rng.standard_normal(shape).astype(dtype)
    return np.asfortranarray(data) if order == "F" else np.ascontiguousarray(data)


def configured(**changes):
    """Every kernel's configuration with ``changes`` (``KernelConfig`` fields: unpacked_max_volume,
    few_rows_max, ...) inside a with block (``in_force.override_config``, which rebuilds the prepared
    states on entry and exit: a value changed after a product is never silently ignored)."""
    return in_force.override_config(**changes)


@pytest.fixture
def limits():
    """``configured`` until the end of the test: ``limits(field=value, ...)``."""
    with contextlib.ExitStack() as stack:
        yield lambda **values: stack.enter_context(configured(**values))


@pytest.fixture
def always_parallel(limits):
    """Every product large enough for threads (``parallel_min_volume`` zero)."""
    limits(parallel_min_volume=BySize(0, 0))


def b_layouts(rng, k, n, dtype):
    """B (k x n) row-major, transposed (W stored [N, K]), strided and reversed."""
    yield "row_major", random_matrix(rng, (k, n), dtype)
    yield "transposed", random_matrix(rng, (n, k), dtype).T
    yield "strided", random_matrix(rng, (k, 2 * n + 1), dtype)[:, 1::2]
    yield "reversed", random_matrix(rng, (k, n), dtype)[::-1]


def blocked_product(a, b):
    """a @ b on the blocked driver, whatever its size and however few rows a has: the
    reference bits the unpacked paths must give."""
    with configured(
        unpacked_max_volume=BySize(0, 0),
        one_thread_unpacked_volume=BySize(0, 0),
        few_rows_max=0,
        transposed_few_rows_max=0,
    ):
        return smallgemm.matmul(a, b)


# Modules whose tests start fresh processes that compile into the shared cache what the
# in-process tests compile too (tests/test_default_path.py warms every entry the host's
# products run; tests/test_benchmarks.py runs the benchmark suite, whose start compiles every
# entry: 59 s of a cold suite run first): last, so that they find it filled (with
# --no-loadscope-reorder, pyproject's addopts, xdist hands out the modules in this order).
RUN_LAST = ("test_benchmarks.py", "test_default_path.py")


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.path.name in RUN_LAST)  # stable: the rest keep their order


def _groups_ignored() -> bool:
    """Whether pytest-xdist tags a grouped test in a way this pytest drops: 3.8 sets the node
    id's legacy field, which pytest 9.2 no longer reads."""
    xdist = tuple(int(part) for part in importlib.metadata.version("pytest-xdist").split(".")[:2])
    return pytest.version_tuple[:2] >= (9, 2) and xdist <= (3, 8)


def pytest_configure(config):
    if config.getoption("dist", "no") == "loadgroup" and _groups_ignored():
        raise pytest.UsageError(
            "pytest 9.2 with pytest-xdist 3.8 ignores xdist_group (pytest-xdist#1386): the Dask "
            "modules would start a cluster on every worker; install pytest<9.2 (the dev extra does)"
        )
    # The markers of NumPy's test module (test_numpy_matmul_suite.py runs its TestMatmul),
    # which NumPy's own conftest registers.
    for marker in ("leaks_references", "slow", "thread_unsafe", "valgrind_error"):
        config.addinivalue_line("markers", f"{marker}: one of NumPy's test markers")


@pytest.fixture(scope="session")
def client():
    """The Dask test modules' cluster (``dask_support.two_workers``), started once: they share
    one xdist worker (``xdist_group("dask")``)."""
    import dask_support

    with dask_support.two_workers() as dask_client:
        yield dask_client


def padded_fmas(tile, m: int, n: int, dtype) -> int:
    """Vector FMAs per k step of an m x n C in tiles of ``tile``, padding included (as
    ``unpacked.padded_fmas`` counts them)."""
    return -(-m // tile.rows) * tile.rows * -(-n // tile.cols(np.dtype(dtype).itemsize)) * tile.vectors
