"""smallgemm.dask on a cluster: threads per task, .npy files, memory bounds, a lost worker,
pure tasks under retries."""

from __future__ import annotations

import os
import pathlib
import signal
import threading
import time

import dask
import dask.array as da
import distributed
import numpy as np
import pytest
import zarr
from dask_support import (
    MEMORY_LIMIT,
    chunked,
    normal,
    one_thread,  # noqa: F401  (an autouse fixture: the references on one thread)
)

import smallgemm
import smallgemm.dask as sgd

pytestmark = pytest.mark.xdist_group("dask")  # one xdist worker: the Dask modules share one cluster

DTYPES = [np.float32, np.float64]


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
        product = sgd.matmul(chunked(a, 16), chunked(a, 16)).compute(scheduler="threads", num_workers=2)
        assert np.array_equal(product, smallgemm.matmul(a, a))
        assert smallgemm.get_num_threads() == 3  # restored when the last task was done
    client.run(smallgemm.set_num_threads, 2)
    try:
        assert probe().compute(scheduler=client) == 2  # workers of one thread: their own setting
    finally:
        client.run(smallgemm.set_num_threads, 1)


def _threads_inside_a_task() -> int:
    with sgd.tasks.threads_of_a_task():
        return smallgemm.get_num_threads()


def test_npy_files_on_the_cluster(client, tmp_path):
    """NpyFile: blocks read from and written to .npy files by the workers; to_zarr too."""
    rng = np.random.default_rng(9)
    a, b = normal(rng, (100, 260), np.float64), normal(rng, (260, 50), np.float64)
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
        out[top : top + rows] = rng.standard_normal((min(rows, shape[0] - top), shape[1])).astype(dtype)
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
    peaks = {
        worker: _peak_rss(status)
        for worker, status in client.run(pathlib.Path("/proc/self/status").read_text).items()
    }
    assert client.run(os.getpid) == pids
    assert all(peak < MEMORY_LIMIT for peak in peaks.values()), peaks
    expected = smallgemm.matmul(
        np.load(tmp_path / "a.npy", mmap_mode="r"), np.load(tmp_path / "b.npy", mmap_mode="r")
    )
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
    a, b = normal(rng, (m, k), np.float64), normal(rng, (k, n), np.float64)
    result_bytes = m * n * 8
    assert result_bytes > RESULT_MEMORY_LIMIT
    np.lib.format.open_memmap(tmp_path / "c.npy", mode="w+", dtype=np.float64, shape=(m, n)).flush()
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit=RESULT_MEMORY_LIMIT,
            dashboard_address=":0",
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.run(smallgemm.set_num_threads, 1)
        client.run(pathlib.Path("/proc/self/clear_refs").write_text, "5")
        x, y = chunked(a, (1184, k)), chunked(b, (k, 1184))  # C in 8 x 8 blocks of 10.7 MiB
        da.store(sgd.matmul(x, y), sgd.NpyFile(tmp_path / "c.npy", mode="r+"), lock=False, scheduler=client)
        peaks = {
            worker: _peak_rss(status)
            for worker, status in client.run(pathlib.Path("/proc/self/status").read_text).items()
        }
        spilled_and_paused = client.run(_spilled_and_paused)
    print(
        f"result {result_bytes / 2**20:.0f} MiB, worker limit {RESULT_MEMORY_LIMIT / 2**20:.0f} MiB, peak RSS "
        + ", ".join(f"{peak / 2**20:.0f} MiB" for peak in peaks.values())
    )
    assert all(state == (0, False) for state in spilled_and_paused.values()), spilled_and_paused
    assert all(peak < RESULT_MEMORY_LIMIT for peak in peaks.values()), peaks
    stored = np.load(tmp_path / "c.npy", mmap_mode="r")
    for top in range(0, m, 2048):
        for left in range(0, n, 2048):
            block = smallgemm.matmul(a[top : top + 2048], b[:, left : left + 2048])
            assert np.array_equal(stored[top : top + 2048, left : left + 2048], block)


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
        holding = {
            worker: keys
            for worker, keys in client.has_what().items()
            if any(str(key[0]).startswith("smallgemm-chain") for key in keys)
        }
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
    a, b, c0 = (
        normal(rng, (9, 7), np.float64),
        normal(rng, (7, 5), np.float64),
        normal(rng, (9, 5), np.float64),
    )
    stack = normal(rng, (3, 9, 5), np.float64)
    calls = [
        (sgd.tasks.start, a, b, np.dtype(np.float64)),
        (sgd.tasks.start_from, c0, a, b, np.dtype(np.float64)),
        (sgd.tasks.step, c0, a, b),
        (sgd.tasks.step, stack, a, b),
        (sgd.tasks.finish, c0, 0.5, 0.0, None),
        (sgd.tasks.finish, c0, 0.5, 1.5, c0 + 1),
    ]
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
    a, b, c0 = (
        normal(rng, (60, 90), np.float64),
        normal(rng, (90, 50), np.float64),
        normal(rng, (60, 50), np.float64),
    )
    x, y, z = chunked(a, (30, 30)), chunked(b, (30, 25)), chunked(c0, (30, 25))
    if operation == "matmul":
        product, expected = sgd.matmul(x, y), smallgemm.matmul(a, b)
    else:
        product, expected = sgd.gemm(0.5, x, y, beta=1.5, c=z), smallgemm.gemm(0.5, a, b, beta=1.5, c=c0)
    failing = FailsOncePartWay(sgd.tasks.gemm)
    monkeypatch.setattr(sgd.tasks, "gemm", failing)
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as threads_client,
    ):
        result = threads_client.compute(product, retries=1).result(timeout=120)
    assert failing.failed == 1
    assert np.array_equal(result, expected)
