"""The tasks of a smallgemm product on Dask, and the threads each one gives smallgemm.

A product's graph (``graph``) runs, per output block, one task per k-chunk in
increasing order: ``start`` (or ``start_from`` C0) and then ``step``, each
continuing every element's chain of fused multiply-adds from the block the
previous task returned, and, for ``gemm`` with alpha or beta to apply, ``finish``.
Every task is pure: it returns a new block and changes none it receives, so
Dask may retry it or run it again.  A task holds one block of each operand and
two of C (the one it received and the one it returns).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

import numpy as np

from ..api.gemm import gemm
from ..api.matmul import matmul
from ..machine.threads import get_num_threads, num_threads
from ..plan import prepared, runners

# The rows of a block ``finish`` combines with C0 at once, so each strip stays in cache.
_FINISH_STRIP_BYTES = 1 << 20


def _runs_alone() -> bool:
    """Whether the task calling it is the only one its process runs at once: on a
    distributed worker of one thread, on a local threaded scheduler's pool of one
    thread, or on the main thread (the synchronous scheduler, a process pool's worker)."""
    worker_module = sys.modules.get("distributed.worker")
    if worker_module is not None:
        try:
            return worker_module.get_worker().state.nthreads == 1
        except ValueError:  # not in a distributed worker's task
            pass
    thread = threading.current_thread()
    if thread is threading.main_thread():
        return True
    return _local_pool_size(thread) == 1


def _local_pool_size(thread: threading.Thread) -> int | None:
    """The threads of the local threaded scheduler's pool that ``thread`` belongs to; None for any other thread."""
    threaded = sys.modules.get("dask.threaded")
    if threaded is None:
        return None
    pools = [
        threaded.default_pool,
        *(pool for by_size in list(threaded.pools.values()) for pool in by_size.values()),
    ]
    for pool in pools:
        # A ThreadPoolExecutor names its threads f"{prefix}_{i}" (a thread may run its first
        # task before the pool adds it to its set of threads).
        prefix = getattr(pool, "_thread_name_prefix", None)
        if prefix and thread.name.startswith(prefix + "_"):
            return pool._max_workers
    return None


def task_threads() -> int:
    """The threads a smallgemm product uses inside a ``smallgemm.dask`` task that runs here.

    smallgemm's own setting (``smallgemm.get_num_threads()``) where the task is the only
    one its process runs at once: on a ``distributed`` worker of one thread, on the local
    threaded scheduler with a pool of one thread, on the synchronous scheduler and in the
    processes of the multiprocessing scheduler.  Everywhere else (a worker or a pool of
    several threads, any other thread) one thread, so that the tasks running at once use
    one core each.
    """
    return get_num_threads() if _runs_alone() else 1


class _OneThread:
    """smallgemm on one thread while any task that needs it runs (the setting is process-wide:
    the first task in sets it, the last one out restores the previous one)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._restore: contextlib.ExitStack | None = None

    def __enter__(self) -> None:
        with self._lock:
            if self._inside == 0:
                self._restore = contextlib.ExitStack()
                self._restore.enter_context(num_threads(1))
            self._inside += 1

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0:
                self._restore.close()
                self._restore = None


_one_thread = _OneThread()


@contextlib.contextmanager
def threads_of_a_task() -> Iterator[None]:
    """Inside the block, smallgemm runs on ``task_threads()`` threads: its own setting where the
    task runs alone in its process, else one thread while any such task runs."""
    if _runs_alone():
        yield
    else:
        with _one_thread:
            yield


def _as(block, dtype: np.dtype) -> np.ndarray:
    block = np.asarray(block)
    return block if block.dtype == dtype else block.astype(dtype)


def start(a_block, b_block, dtype: np.dtype) -> np.ndarray:
    """The first k-chunk of an output block: each element's chain from zero."""
    with threads_of_a_task():
        return matmul(_as(a_block, dtype), _as(b_block, dtype))


def start_from(c_block, a_block, b_block, dtype: np.dtype) -> np.ndarray:
    """The first k-chunk of gemm's continued chain: each element's chain from C0, in a copy
    of its block."""
    return _continued(np.array(c_block, dtype=dtype), a_block, b_block)


def step(partial: np.ndarray, a_block, b_block) -> np.ndarray:
    """The next k-chunk: each element's chain goes on from ``partial`` in a copy of it.

    Tasks are pure: ``partial`` is left as it came, so a task retried after an exception
    (``retries=``), or run again from a kept input, starts from the whole previous
    chunk.  The copy is one block per k-chunk, read and written once against the
    chunk's multiply-adds (``benchmarks/dask_matmul.py`` measures it)."""
    return _continued(np.array(partial), a_block, b_block)


def _continued(sums: np.ndarray, a_block, b_block) -> np.ndarray:
    """Each element's chain in ``sums``, an array this task owns, continued over the
    k-chunk ``a_block`` @ ``b_block``, in place."""
    a_block, b_block = _as(a_block, sums.dtype), _as(b_block, sums.dtype)
    with threads_of_a_task():
        if sums.ndim == 2:
            gemm(1.0, a_block, b_block, beta=1.0, c=sums, overwrite_c=True)
        else:  # a stack (batch dimensions broadcast): one continued chain per product
            batch = sums.shape[:-2]
            a_stack = np.broadcast_to(a_block, batch + a_block.shape[-2:])
            b_stack = np.broadcast_to(b_block, batch + b_block.shape[-2:])
            for at in np.ndindex(batch):
                gemm(1.0, a_stack[at], b_stack[at], beta=1.0, c=sums[at], overwrite_c=True)
    return sums


def finish(sums: np.ndarray, alpha: float, beta: float, c_block) -> np.ndarray:
    """A new block: C = alpha*sums where beta == 0 (C0 not read), else C = fma(alpha, sums,
    beta*C0) by smallgemm's own multiply-add (``runners.scale_add``); ``sums`` and C0 are
    left as they came."""
    dtype = sums.dtype
    if beta == 0:
        return np.multiply(sums, dtype.type(alpha))
    prep = prepared.current_prepared(dtype)
    out = np.array(c_block, dtype=dtype)
    rows = max(1, _FINISH_STRIP_BYTES // max(1, sums.shape[1] * dtype.itemsize))
    for top in range(0, sums.shape[0], rows):
        runners.scale_add(prep, alpha, sums[top : top + rows], beta, out[top : top + rows])
    return out
