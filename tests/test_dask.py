"""smallgemm.dask: products of Dask arrays on the threaded scheduler and on a distributed
cluster of two worker processes, bit for bit those of smallgemm on the whole arrays."""

from __future__ import annotations

import concurrent.futures
import os
import pathlib
import random
import signal
import subprocess
import sys
import threading
import time

import dask
import dask.array as da
import distributed
import numpy as np
import pytest
import zarr
from reference import chain_reference

import smallgemm
import smallgemm.dask as sgd
from smallgemm.api import precompile
from smallgemm.plan import dispatch, entries, strategies

pytestmark = pytest.mark.xdist_group("dask")  # one xdist worker, one cluster for the module

DTYPES = [np.float32, np.float64]
# Each worker's memory limit (distributed's defaults: blocks held for later tasks spilled to
# disk from 60 % of it, the worker paused at 80 %, terminated at 95 %).
MEMORY_LIMIT = 400 * 2**20


def _warm_up() -> None:
    """Every entry a one-thread task can run (the serial entries of the strategies for plain
    products and stacks, the small way in for stacks and gemm's multiply-add), compiled or loaded here for the host's
    kernel, whatever ran in this process before: the workers load them from the on-disk cache.
    A worker that compiled would hold LLVM's memory, and distributed pauses a worker at 80 %
    of its limit, for good where the memory stays held."""
    names = {entries.name_of(entry) for row in strategies.PRODUCT + strategies.STACK for entry in row.serial_entries}
    precompile.compile_entries([dispatch.current()], ["float32", "float64"], sorted(names | {"SMALL_STACK", "SCALE_ADD"}))


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The test process's own products (the references) on one thread, as the tasks run: the
    bits do not depend on it (tests/test_threads.py), and the threaded entries are not
    compiled for this file."""
    with smallgemm.num_threads(1):
        yield


@pytest.fixture(scope="module")
def client():
    _warm_up()
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=MEMORY_LIMIT,
                                       dashboard_address=":0")
    try:
        with distributed.Client(cluster) as client:
            yield client
    finally:
        cluster.close()


@pytest.fixture(params=["threads", "distributed"])
def scheduler(request):
    """What ``compute`` runs on: the local threaded scheduler (two threads), or the cluster."""
    if request.param == "threads":
        return {"scheduler": "threads", "num_workers": 2}
    return {"scheduler": request.getfixturevalue("client")}


def _chunked(x: np.ndarray, chunks) -> da.Array:
    return da.from_array(x, chunks=chunks)


def _random(rng, shape, dtype) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def _graph_names(x: da.Array) -> set[str]:
    return {dask.utils.key_split(key) for key in dict(x.__dask_graph__())}


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_is_the_one_machine_product(scheduler, dtype):
    """Uneven chunks along m, n and k (a chunk of one column, and chunks across smallgemm's
    KC = 1024 blocks): the bits of smallgemm.matmul and of the scalar chain."""
    rng = np.random.default_rng(1)
    a, b = _random(rng, (70, 2500), dtype), _random(rng, (2500, 45), dtype)
    k_chunks = (1000, 1, 1299, 200)
    x, y = _chunked(a, ((30, 40), k_chunks)), _chunked(b, (k_chunks, (20, 25)))
    product = sgd.matmul(x, y)
    assert product.chunks == ((30, 40), (20, 25)) and product.dtype == dtype
    assert "smallgemm-chain" in _graph_names(product)
    result = product.compute(**scheduler)
    assert np.array_equal(result, smallgemm.matmul(a, b))
    assert np.array_equal(result, chain_reference(1.0, a, b))


class _ShuffledPool(concurrent.futures.ThreadPoolExecutor):
    """Four threads on which tasks finish in a shuffled order: each waits 0-4 ms first."""

    def __init__(self, seed: int) -> None:
        super().__init__(4)
        self._rng = random.Random(seed)

    def submit(self, fn, /, *args, **kwargs):
        return super().submit(_after, self._rng.uniform(0, 0.004), fn, *args, **kwargs)


def _after(delay: float, fn, *args, **kwargs):
    time.sleep(delay)
    return fn(*args, **kwargs)


def test_any_completion_order():
    rng = np.random.default_rng(15)
    a, b, c = _random(rng, (50, 900), np.float32), _random(rng, (900, 40), np.float32), _random(rng, (50, 40), np.float32)
    product = sgd.gemm(2.5, _chunked(a, (20, 150)), _chunked(b, (150, 15)), beta=-0.5, c=c)
    expected = smallgemm.gemm(2.5, a, b, beta=-0.5, c=c)
    for seed in range(3):
        with _ShuffledPool(seed) as pool:
            assert np.array_equal(product.compute(scheduler="threads", pool=pool), expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_transposed_operands(scheduler, dtype):
    """a.T and b.T (transposed blocks, read in place) in matmul, and gemm's trans_a, trans_b."""
    rng = np.random.default_rng(2)
    at, bt = _random(rng, (300, 50), dtype), _random(rng, (40, 300), dtype)  # a = at.T, b = bt.T
    x, y = _chunked(at, ((120, 180), (25, 25))), _chunked(bt, ((15, 25), (100, 200)))
    expected = smallgemm.matmul(at.T, bt.T)
    assert np.array_equal(sgd.matmul(x.T, y.T).compute(**scheduler), expected)
    assert np.array_equal(sgd.gemm(1.0, x, y, trans_a=True, trans_b=True).compute(**scheduler), expected)
    assert np.array_equal(expected, chain_reference(1.0, at.T, bt.T))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha, beta", [(2.5, -0.5), (1.0, 1.0), (2.5, 0.0), (1.0, -0.5), (0.0, -0.5)])
def test_gemm_alpha_beta(scheduler, dtype, alpha, beta):
    """C = fma(alpha, s, beta*C0) by smallgemm's rule; beta == 1 (alpha 1) continues each chain
    from C0; beta == 0 never reads c, which holds NaN; alpha == 0 is beta*C0. c is not modified."""
    rng = np.random.default_rng(3)
    a, b = _random(rng, (60, 1300), dtype), _random(rng, (1300, 35), dtype)
    c = np.full((60, 35), np.nan, dtype) if beta == 0 else _random(rng, (60, 35), dtype)
    before = c.copy()
    x, y = _chunked(a, (25, (700, 600))), _chunked(b, ((700, 600), (10, 25)))
    product = sgd.gemm(alpha, x, y, beta=beta, c=_chunked(c, (30, 20)))
    result = product.compute(**scheduler)
    assert np.array_equal(result, smallgemm.gemm(alpha, a, b, beta=beta, c=c))
    assert np.array_equal(result, chain_reference(alpha, a, b, beta, c))
    assert not np.isnan(result).any()
    assert np.array_equal(c, before, equal_nan=True)


def test_gemm_promotes_to_float64_and_numpy_c():
    """float32 operands with a float64 c give float64, smallgemm.gemm's bits; c may be a NumPy array."""
    rng = np.random.default_rng(4)
    a, b, c = _random(rng, (30, 50), np.float32), _random(rng, (50, 20), np.float32), _random(rng, (30, 20), np.float64)
    product = sgd.gemm(2.5, _chunked(a, 10), _chunked(b, 25), beta=-0.5, c=c)
    assert product.dtype == np.float64
    assert np.array_equal(product.compute(scheduler="threads"), smallgemm.gemm(2.5, a, b, beta=-0.5, c=c))


@pytest.mark.parametrize("dtype", DTYPES)
def test_stacks_and_vectors(scheduler, dtype):
    """Batch dimensions broadcast (a size-1 batch dimension, a missing one), chunked along
    batch, m and k; 1-D operands as numpy.matmul treats them."""
    rng = np.random.default_rng(5)
    a, b = _random(rng, (3, 1, 20, 37), dtype), _random(rng, (4, 37, 15), dtype)
    x, y = _chunked(a, (2, 1, 12, (17, 20))), _chunked(b, (3, (17, 20), 15))
    product = sgd.matmul(x, y)
    assert product.shape == (3, 4, 20, 15)
    assert np.array_equal(product.compute(**scheduler), smallgemm.matmul(a, b))
    v, w = _random(rng, 37, dtype), _random(rng, 20, dtype)
    cases = [(v, b[0]), (a[0, 0], v), (v, v), (w, a), (b, _random(rng, 15, dtype))]
    for left, right in cases:
        got = sgd.matmul(_chunked(left, 11), _chunked(right, 11)).compute(**scheduler)
        assert got.shape == np.matmul(left, right).shape
        assert np.array_equal(got, smallgemm.matmul(left, right))


def test_other_dtypes_go_to_dask_matmul(scheduler):
    rng = np.random.default_rng(6)
    a, b = rng.integers(-50, 50, (30, 40)), rng.integers(-50, 50, (40, 20))
    product = sgd.matmul(_chunked(a, 15), _chunked(b, 15))
    assert product.dtype == np.int64
    assert not any(name.startswith("smallgemm") for name in _graph_names(product))
    assert np.array_equal(product.compute(**scheduler), a @ b)
    mixed = sgd.matmul(_chunked(a.astype(np.int32), 15), _chunked(b.astype(np.float32), 15))
    assert mixed.dtype == np.float64 and not any(name.startswith("smallgemm") for name in _graph_names(mixed))


def test_mismatched_chunks_are_rechunked():
    """Along k the smaller operand takes the larger one's chunks; so along a shared batch dimension."""
    rng = np.random.default_rng(7)
    a, b = _random(rng, (2, 40, 130), np.float64), _random(rng, (2, 130, 30), np.float64)
    x, y = _chunked(a, (1, 20, (40, 90))), _chunked(b, (2, (100, 30), 15))  # y has fewer elements
    aligned_x, aligned_y = sgd.graph.matching(x, y)
    assert aligned_x is x and aligned_y.chunks == ((1, 1), (40, 90), (15, 15))
    product = sgd.matmul(x, y)
    assert product.chunks == ((1, 1), (20, 20), (15, 15))
    assert np.array_equal(product.compute(scheduler="threads"), smallgemm.matmul(a, b))
    wide = _chunked(_random(rng, (130, 300), np.float64), ((100, 30), 100))  # now x is the smaller
    assert sgd.graph.matching(x[0], wide)[0].chunks == ((20, 20), (100, 30))


def test_bad_shapes_and_dtypes():
    x, y = da.ones((3, 4), chunks=2), da.ones((5, 6), chunks=2)
    with pytest.raises(ValueError, match="do not match"):
        sgd.matmul(x, y)
    with pytest.raises(ValueError, match="batch dimensions"):
        sgd.matmul(da.ones((2, 3, 4)), da.ones((3, 4, 5)))
    with pytest.raises(ValueError, match="does not have enough dimensions"):
        sgd.matmul(da.ones(()), x)
    with pytest.raises(ValueError, match="shapes do not match"):
        sgd.gemm(1.0, x, y)
    with pytest.raises(ValueError, match="c has shape"):
        sgd.gemm(1.0, x, y.T[:4], beta=1.0, c=da.ones((3, 3)))
    with pytest.raises(ValueError, match="must be 2-D"):
        sgd.gemm(1.0, da.ones((2, 3, 4)), y)
    with pytest.raises(TypeError, match="only float32 and float64"):
        sgd.gemm(1.0, x.astype(np.int64), y.T)


def test_memmapped_operands_into_an_open_memmap(tmp_path):
    """Operands from .npy files mapped with np.load(mmap_mode='r'), the result stored into an
    open_memmap by da.store (threaded scheduler; the cluster's case is below)."""
    rng = np.random.default_rng(8)
    a, b = _random(rng, (90, 300), np.float32), _random(rng, (300, 70), np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    x = da.from_array(np.load(tmp_path / "a.npy", mmap_mode="r"), chunks=(40, 128))
    y = da.from_array(np.load(tmp_path / "b.npy", mmap_mode="r"), chunks=(128, 32))
    out = np.lib.format.open_memmap(tmp_path / "c.npy", mode="w+", dtype=np.float32, shape=(90, 70))
    da.store(sgd.matmul(x, y), out, scheduler="threads")
    out.flush()
    assert np.array_equal(np.load(tmp_path / "c.npy"), smallgemm.matmul(a, b))


def test_task_threads_follow_the_scheduler(client):
    """One thread per task where a process runs several tasks at once, else smallgemm's setting."""
    probe = dask.delayed(sgd.task_threads, pure=False)
    inside = dask.delayed(_threads_inside_a_task, pure=False)
    with smallgemm.num_threads(3):
        assert probe().compute(scheduler="threads", num_workers=2) == 1
        assert inside().compute(scheduler="threads", num_workers=2) == 1
        assert probe().compute(scheduler="threads", num_workers=1) == 3
        assert probe().compute(scheduler="sync") == 3
        assert inside().compute(scheduler="sync") == 3
        a = np.random.default_rng(14).standard_normal((64, 64))
        product = sgd.matmul(_chunked(a, 16), _chunked(a, 16)).compute(scheduler="threads", num_workers=2)
        assert np.array_equal(product, smallgemm.matmul(a, a))
        assert smallgemm.get_num_threads() == 3  # restored when the last task was done
    client.run(smallgemm.set_num_threads, 2)
    try:
        assert probe().compute(scheduler=client) == 2  # workers of one thread: their own setting
    finally:
        client.run(smallgemm.set_num_threads, 1)


def _threads_inside_a_task() -> int:
    with sgd.tasks._task_threads():
        return smallgemm.get_num_threads()


def test_npy_files_on_the_cluster(client, tmp_path):
    """NpyFile: blocks read from and written to .npy files by the workers; to_zarr too."""
    rng = np.random.default_rng(9)
    a, b = _random(rng, (100, 260), np.float64), _random(rng, (260, 50), np.float64)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    np.lib.format.open_memmap(tmp_path / "c.npy", mode="w+", dtype=np.float64, shape=(100, 50)).flush()
    x = da.from_array(sgd.NpyFile(tmp_path / "a.npy"), chunks=(40, 100))
    y = da.from_array(sgd.NpyFile(tmp_path / "b.npy"), chunks=(100, 25))
    product = sgd.matmul(x, y)
    da.store(product, sgd.NpyFile(tmp_path / "c.npy", mode="r+"), lock=False, scheduler=client)
    expected = smallgemm.matmul(a, b)
    assert np.array_equal(np.load(tmp_path / "c.npy"), expected)
    with dask.config.set(scheduler=client.get):
        product.to_zarr(str(tmp_path / "c.zarr"))
    assert np.array_equal(zarr.open_array(str(tmp_path / "c.zarr"), mode="r")[...], expected)
    with pytest.raises(ValueError, match="read-only"):
        sgd.NpyFile(tmp_path / "a.npy")[0:1] = 0


def _write_npy(path, shape, dtype, seed, rows=8192) -> None:
    """A random .npy file written a few rows at a time (never whole in memory)."""
    rng = np.random.default_rng(seed)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
    for top in range(0, shape[0], rows):
        out[top:top + rows] = rng.standard_normal((min(rows, shape[0] - top), shape[1])).astype(dtype)
    out.flush()
    del out


def _peak_rss(status: str) -> int:
    """VmHWM of a /proc/<pid>/status text, in bytes: the process's peak RSS since its last reset."""
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def test_peak_memory_is_bounded(client, tmp_path):
    """Operands larger than both workers' memory together, from .npy files, result stored into
    a .npy file: no worker's peak RSS during the product reaches its limit, none was restarted.
    (The peak is /proc's VmHWM, reset before the product: ru_maxrss would count the test
    process's RSS at the moment it spawned the worker.)"""
    k = 458752
    _write_npy(tmp_path / "a.npy", (128, k), np.float64, 10, rows=16)
    _write_npy(tmp_path / "b.npy", (k, 128), np.float64, 11)
    np.lib.format.open_memmap(tmp_path / "c.npy", mode="w+", dtype=np.float64, shape=(128, 128)).flush()
    operands = os.path.getsize(tmp_path / "a.npy") + os.path.getsize(tmp_path / "b.npy")
    assert operands > 2 * MEMORY_LIMIT
    pids = client.run(os.getpid)
    client.run(pathlib.Path("/proc/self/clear_refs").write_text, "5")
    x = da.from_array(sgd.NpyFile(tmp_path / "a.npy"), chunks=(128, 8192))  # 8 MiB blocks
    y = da.from_array(sgd.NpyFile(tmp_path / "b.npy"), chunks=(8192, 64))  # 4 MiB blocks
    da.store(sgd.matmul(x, y), sgd.NpyFile(tmp_path / "c.npy", mode="r+"), lock=False, scheduler=client)
    peaks = {worker: _peak_rss(status) for worker, status in
             client.run(pathlib.Path("/proc/self/status").read_text).items()}
    assert client.run(os.getpid) == pids
    assert all(peak < MEMORY_LIMIT for peak in peaks.values()), peaks
    expected = smallgemm.matmul(np.load(tmp_path / "a.npy", mmap_mode="r"), np.load(tmp_path / "b.npy", mmap_mode="r"))
    assert np.array_equal(np.load(tmp_path / "c.npy"), expected)


def _spilled_and_paused(dask_worker) -> tuple[int, bool]:
    """What a worker wrote to disk since it started (distributed's spill metrics) and whether
    its memory monitor ever paused it (its log)."""
    written = dask_worker.data.cumulative_metrics.get(("disk-write", "count"), 0)
    paused = any("Pausing worker" in message for _, message in dask_worker.get_logs())
    return written, paused


# The workers of the result test: distributed spills from 60 % of the limit by the process's
# memory, and a worker with smallgemm's entries loaded starts at about 210 MiB.
RESULT_MEMORY_LIMIT = 640 * 2**20


def test_a_result_larger_than_a_worker_is_stored_block_by_block(tmp_path):
    """C (684 MiB) larger than each worker's memory limit (640 MiB), from small operands,
    stored block by block into a .npy file by two workers: none pauses, spills or reaches
    its limit (peak RSS, /proc's VmHWM reset before the product, printed), and each stored
    block equals smallgemm.matmul on its rows and columns."""
    m = n = 9472
    k = 48
    rng = np.random.default_rng(16)
    a, b = _random(rng, (m, k), np.float64), _random(rng, (k, n), np.float64)
    result_bytes = m * n * 8
    assert result_bytes > RESULT_MEMORY_LIMIT
    np.lib.format.open_memmap(tmp_path / "c.npy", mode="w+", dtype=np.float64, shape=(m, n)).flush()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  memory_limit=RESULT_MEMORY_LIMIT, dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        client.run(smallgemm.set_num_threads, 1)
        client.run(pathlib.Path("/proc/self/clear_refs").write_text, "5")
        x, y = _chunked(a, (1184, k)), _chunked(b, (k, 1184))  # C in 8 x 8 blocks of 10.7 MiB
        da.store(sgd.matmul(x, y), sgd.NpyFile(tmp_path / "c.npy", mode="r+"), lock=False, scheduler=client)
        peaks = {worker: _peak_rss(status) for worker, status in
                 client.run(pathlib.Path("/proc/self/status").read_text).items()}
        spilled_and_paused = client.run(_spilled_and_paused)
    print(f"result {result_bytes / 2**20:.0f} MiB, worker limit {RESULT_MEMORY_LIMIT / 2**20:.0f} MiB, peak RSS "
          + ", ".join(f"{peak / 2**20:.0f} MiB" for peak in peaks.values()))
    assert all(state == (0, False) for state in spilled_and_paused.values()), spilled_and_paused
    assert all(peak < RESULT_MEMORY_LIMIT for peak in peaks.values()), peaks
    stored = np.load(tmp_path / "c.npy", mmap_mode="r")
    for top in range(0, m, 2048):
        for left in range(0, n, 2048):
            block = smallgemm.matmul(a[top:top + 2048], b[:, left:left + 2048])
            assert np.array_equal(stored[top:top + 2048, left:left + 2048], block)


def test_a_killed_worker_recomputes_the_same_bits(client):
    """A worker killed (SIGKILL) while a product runs: distributed recomputes its lost operand
    blocks and chain partials on the other worker and the restarted one; the same bits."""
    x = da.random.default_rng(12).standard_normal((1536, 3072), chunks=(384, 384))
    y = da.random.default_rng(13).standard_normal((3072, 1536), chunks=(384, 384))
    a, b = dask.compute(x, y, scheduler="threads")
    expected = smallgemm.matmul(a, b)
    future = client.compute(sgd.matmul(x, y))
    deadline = time.monotonic() + 60
    while True:  # until a worker holds a chain's partial block
        holding = {worker: keys for worker, keys in client.has_what().items()
                   if any(str(key[0]).startswith("smallgemm-chain") for key in keys)}
        if holding or time.monotonic() > deadline:
            break
        time.sleep(0.005)
    assert holding and not future.done()
    victim = next(iter(holding))
    nanny = next(nanny for nanny in client.cluster.workers.values() if nanny.worker_address == victim)
    os.kill(nanny.process.process.pid, signal.SIGKILL)
    assert np.array_equal(future.result(timeout=120), expected)
    client.wait_for_workers(2, timeout=60)


def test_every_task_leaves_its_inputs_unchanged():
    """start, start_from, step (plain and stacked) and finish return new blocks and change
    none they receive, writeable or not."""
    rng = np.random.default_rng(17)
    a, b, c0 = _random(rng, (9, 7), np.float64), _random(rng, (7, 5), np.float64), _random(rng, (9, 5), np.float64)
    stack = _random(rng, (3, 9, 5), np.float64)
    calls = [(sgd.tasks.start, a, b, np.dtype(np.float64)), (sgd.tasks.start_from, c0, a, b, np.dtype(np.float64)),
             (sgd.tasks.step, c0, a, b), (sgd.tasks.step, stack, a, b), (sgd.tasks.finish, c0, 0.5, 0.0, None),
             (sgd.tasks.finish, c0, 0.5, 1.5, c0 + 1)]
    for task, *inputs in calls:
        arrays = [x for x in inputs if isinstance(x, np.ndarray)]
        kept = [x.copy() for x in arrays]
        result = task(*inputs)
        assert all(np.array_equal(x, y) for x, y in zip(arrays, kept)), task
        assert not any(np.shares_memory(result, x) for x in arrays), task
    assert np.array_equal(sgd.tasks.step(c0, a, b), smallgemm.gemm(1.0, a, b, beta=1.0, c=c0))


class FailsOncePartWay:
    """``tasks.gemm`` that, the first time a k-step continues a chain, updates the top half of
    the block it writes and then raises: a task that dies part-way through its update."""

    def __init__(self, gemm):
        self.gemm = gemm
        self.lock = threading.Lock()
        self.failed = 0

    def __call__(self, alpha, a, b, beta=0.0, c=None, **options):
        with self.lock:
            fail = not self.failed and beta == 1.0
            self.failed += fail
        if fail:
            half = c.shape[0] // 2
            self.gemm(alpha, a[:half], b, beta=beta, c=c[:half], **options)
            raise RuntimeError("a k-step failed part-way through its update")
        return self.gemm(alpha, a, b, beta=beta, c=c, **options)


@pytest.mark.parametrize("operation", ["matmul", "gemm"])
def test_a_step_retried_after_failing_part_way_gives_the_same_bits(monkeypatch, operation):
    """A k-step raises after updating half its block; with ``retries=1`` distributed runs it
    again from its inputs, which it left unchanged: the bits of smallgemm.  (A cluster of
    threads in this process, which the patched ``tasks.gemm`` reaches, holding each block
    as the object a task returned, as a worker process holds it between tasks.)"""
    rng = np.random.default_rng(15)
    a, b, c0 = _random(rng, (60, 90), np.float64), _random(rng, (90, 50), np.float64), _random(rng, (60, 50), np.float64)
    x, y, z = _chunked(a, (30, 30)), _chunked(b, (30, 25)), _chunked(c0, (30, 25))
    if operation == "matmul":
        product, expected = sgd.matmul(x, y), smallgemm.matmul(a, b)
    else:
        product, expected = sgd.gemm(0.5, x, y, beta=1.5, c=z), smallgemm.gemm(0.5, a, b, beta=1.5, c=c0)
    failing = FailsOncePartWay(sgd.tasks.gemm)
    monkeypatch.setattr(sgd.tasks, "gemm", failing)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as threads_client:
        result = threads_client.compute(product, retries=1).result(timeout=120)
    assert failing.failed == 1
    assert np.array_equal(result, expected)


def test_import_smallgemm_does_not_import_dask():
    script = "import sys, smallgemm; print('dask' in sys.modules, 'smallgemm.dask' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "False"], done.stderr
