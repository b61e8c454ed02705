"""smallgemm.dask.matmul against dask.array.matmul (NumPy blocks) on a local cluster; print Markdown.

    python benchmarks/dask_matmul.py [--repeats 3] [--scale 1] [--dtypes float32,float64]

A ``distributed.LocalCluster`` of 2 worker processes of 1 thread each (smallgemm
and NumPy's BLAS on one thread per task).  Products: 8192 x 8192 x 8192 in
2048-chunks, and few rows ``[16, 8192] @ [8192, 65536]`` with ``b`` in 8192-column
chunks (k in one chunk: one task per output block).  The operands are generated
on the workers and held there (persisted); each timing is the product computed
and held on the workers (no gather), the two libraries interleaved, the median of
``--repeats`` after one warm-up run of each.  ``--scale N`` divides every dimension
by N (a quick run).  The result of smallgemm.dask is also computed on a cluster of
one worker and compared bit for bit.  Then one k-step of the square product's blocks,
timed pure (as the tasks run it: the partial block copied first) and in place: what
keeping the tasks pure costs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import dask.array as da
import distributed
import numpy as np
import threadpoolctl
from targets import rerun_clean

import smallgemm
import smallgemm.dask as sgd
from smallgemm.tools import bench


def products(scale: int):
    """(name, (m, k), (k, n), a's chunks, b's chunks) of each product."""
    big, chunk = 8192 // scale, 2048 // scale
    yield f"{big}x{big}x{big}, {chunk}-chunks", (big, big), (big, big), chunk, chunk
    rows, k, n, columns = 16, 8192 // scale, 65536 // scale, 8192 // scale
    yield (
        f"[{rows},{k}] @ [{k},{n}], b in {columns}-column chunks",
        (rows, k),
        (k, n),
        (rows, k),
        (k, columns),
    )


def operands(dtype, a_shape, b_shape, a_chunks, b_chunks):
    """The operands, generated block by block where they are computed (fixed seeds)."""
    a = da.random.default_rng(1).standard_normal(a_shape, dtype=dtype, chunks=a_chunks)
    b = da.random.default_rng(2).standard_normal(b_shape, dtype=dtype, chunks=b_chunks)
    return a, b


def seconds(client: distributed.Client, product: da.Array) -> float:
    """Wall time of computing ``product`` and holding it on the workers."""
    start = time.perf_counter()
    held = client.persist(product)
    distributed.wait(held)
    elapsed = time.perf_counter() - start
    client.cancel(held)
    return elapsed


def step_copy_cost(dtype, chunk: int, repeats: int) -> tuple[float, float]:
    """Seconds of one k-step of ``chunk``-square blocks as the tasks run it (pure: the partial
    block copied, ``tasks.step``) and of the same step in place, one thread, interleaved,
    medians of ``repeats``: what keeping tasks pure costs."""
    rng = np.random.default_rng(3)
    partial, a, b = (rng.standard_normal((chunk, chunk)).astype(dtype) for _ in range(3))
    pure, in_place = [], []
    with smallgemm.num_threads(1):
        for _ in range(repeats + 1):  # the first of each: warm-up
            start = time.perf_counter()
            sgd.tasks.step(partial, a, b)
            pure.append(time.perf_counter() - start)
            start = time.perf_counter()
            smallgemm.gemm(1.0, a, b, beta=1.0, c=partial, overwrite_c=True)
            in_place.append(time.perf_counter() - start)
    return statistics.median(pure[1:]), statistics.median(in_place[1:])


def cluster(workers: int) -> distributed.LocalCluster:
    return distributed.LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--dtypes", default="float32,float64")
    args = parser.parse_args()
    rerun_clean()
    bench.compile_first()  # the workers, with default settings, load each entry from the cache
    dtypes = [np.dtype(name) for name in args.dtypes.split(",")]
    rows = []
    with cluster(2) as two, distributed.Client(two) as client:
        pools = client.run(
            lambda: sorted(
                f"{pool['internal_api']} {pool['num_threads']}" for pool in threadpoolctl.threadpool_info()
            )
        )
        threads = client.run(sgd.task_threads)
        print(
            f"workers: 2 x 1 thread; smallgemm threads per task {sorted(set(threads.values()))}; "
            f"thread pools per worker (threadpoolctl) {sorted({', '.join(v) for v in pools.values()})}",
            flush=True,
        )
        for dtype in dtypes:
            for name, a_shape, b_shape, a_chunks, b_chunks in products(args.scale):
                a, b = client.persist(operands(dtype, a_shape, b_shape, a_chunks, b_chunks))
                distributed.wait([a, b])
                ours, theirs = sgd.matmul(a, b), da.matmul(a, b)
                seconds(client, ours), seconds(client, theirs)  # warm-up: compiles, caches, allocations
                timed = [(seconds(client, ours), seconds(client, theirs)) for _ in range(args.repeats)]
                t_ours, t_theirs = (statistics.median(t) for t in zip(*timed))
                flops = 2 * a_shape[0] * a_shape[1] * b_shape[1]
                rows.append(
                    [
                        name,
                        dtype,
                        t_ours,
                        flops / t_ours / 1e9,
                        t_theirs,
                        flops / t_theirs / 1e9,
                        t_theirs / t_ours,
                        ours.compute(),
                    ]
                )
                print(f"{name} {dtype}: {t_ours:.3f} s against {t_theirs:.3f} s", flush=True)
                client.cancel([a, b])
    with cluster(1) as one, distributed.Client(one):
        for row, (_name, a_shape, b_shape, a_chunks, b_chunks) in zip(
            rows, [p for _ in dtypes for p in products(args.scale)]
        ):
            a, b = operands(row[1], a_shape, b_shape, a_chunks, b_chunks)
            row[-1] = "yes" if np.array_equal(sgd.matmul(a, b).compute(), row[-1]) else "NO"
    print(
        "\n| k-step of one block (one thread) | dtype | pure (block copied) s | in place s | copy's share |"
    )
    print("|---|---|---|---|---|")
    chunk = 2048 // args.scale
    for dtype in dtypes:
        pure, in_place = step_copy_cost(dtype, chunk, max(5, args.repeats))
        print(
            f"| {chunk}x{chunk} @ {chunk}x{chunk} | {dtype} | {pure:.4f} | {in_place:.4f} | "
            f"{100 * (pure - in_place) / pure:.1f} % |"
        )
    print(
        "\n| product | dtype | smallgemm.dask s | GFLOP/s | dask.array.matmul s | GFLOP/s | ratio | "
        "same bits on 1 and 2 workers |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, dtype, t_ours, g_ours, t_theirs, g_theirs, ratio, same in rows:
        print(
            f"| {name} | {dtype} | {t_ours:.3f} | {g_ours:.1f} | {t_theirs:.3f} | {g_theirs:.1f} | {ratio:.2f} | "
            f"{same} |"
        )


if __name__ == "__main__":
    main()
