"""smallgemm.dask: products of Dask arrays on the threaded scheduler and on a distributed
cluster of two worker processes, bit for bit those of smallgemm on the whole arrays."""

from __future__ import annotations

import concurrent.futures
import random
import subprocess
import sys
import time

import dask
import dask.array as da
import numpy as np
import pytest
from dask_support import (
    chunked,
    normal,
    one_thread,  # noqa: F401  (an autouse fixture: the references on one thread)
)
from reference import chain_reference

import smallgemm
import smallgemm.dask as sgd

pytestmark = pytest.mark.xdist_group("dask")  # one xdist worker: the Dask modules share one cluster

DTYPES = [np.float32, np.float64]


@pytest.fixture(params=["threads", "distributed"])
def scheduler(request):
    """What ``compute`` runs on: the local threaded scheduler (two threads), or the cluster."""
    if request.param == "threads":
        return {"scheduler": "threads", "num_workers": 2}
    return {"scheduler": request.getfixturevalue("client")}


def _graph_names(x: da.Array) -> set[str]:
    return {dask.utils.key_split(key) for key in dict(x.__dask_graph__())}


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_is_the_one_machine_product(scheduler, dtype):
    """Uneven chunks along m, n and k (a chunk of one column, and chunks across smallgemm's
    KC = 1024 blocks): the bits of smallgemm.matmul and of the scalar chain."""
    rng = np.random.default_rng(1)
    a, b = normal(rng, (70, 2500), dtype), normal(rng, (2500, 45), dtype)
    k_chunks = (1000, 1, 1299, 200)
    x, y = chunked(a, ((30, 40), k_chunks)), chunked(b, (k_chunks, (20, 25)))
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
    a, b, c = (
        normal(rng, (50, 900), np.float32),
        normal(rng, (900, 40), np.float32),
        normal(rng, (50, 40), np.float32),
    )
    product = sgd.gemm(2.5, chunked(a, (20, 150)), chunked(b, (150, 15)), beta=-0.5, c=c)
    expected = smallgemm.gemm(2.5, a, b, beta=-0.5, c=c)
    for seed in range(3):
        with _ShuffledPool(seed) as pool:
            assert np.array_equal(product.compute(scheduler="threads", pool=pool), expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_transposed_operands(scheduler, dtype):
    """a.T and b.T (transposed blocks, read in place) in matmul, and gemm's trans_a, trans_b."""
    rng = np.random.default_rng(2)
    at, bt = normal(rng, (300, 50), dtype), normal(rng, (40, 300), dtype)  # a = at.T, b = bt.T
    x, y = chunked(at, ((120, 180), (25, 25))), chunked(bt, ((15, 25), (100, 200)))
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
    a, b = normal(rng, (60, 1300), dtype), normal(rng, (1300, 35), dtype)
    c = np.full((60, 35), np.nan, dtype) if beta == 0 else normal(rng, (60, 35), dtype)
    before = c.copy()
    x, y = chunked(a, (25, (700, 600))), chunked(b, ((700, 600), (10, 25)))
    product = sgd.gemm(alpha, x, y, beta=beta, c=chunked(c, (30, 20)))
    result = product.compute(**scheduler)
    assert np.array_equal(result, smallgemm.gemm(alpha, a, b, beta=beta, c=c))
    assert np.array_equal(result, chain_reference(alpha, a, b, beta, c))
    assert not np.isnan(result).any()
    assert np.array_equal(c, before, equal_nan=True)


def test_gemm_promotes_to_float64_and_numpy_c():
    """float32 operands with a float64 c give float64, smallgemm.gemm's bits; c may be a NumPy array."""
    rng = np.random.default_rng(4)
    a, b, c = (
        normal(rng, (30, 50), np.float32),
        normal(rng, (50, 20), np.float32),
        normal(rng, (30, 20), np.float64),
    )
    product = sgd.gemm(2.5, chunked(a, 10), chunked(b, 25), beta=-0.5, c=c)
    assert product.dtype == np.float64
    assert np.array_equal(product.compute(scheduler="threads"), smallgemm.gemm(2.5, a, b, beta=-0.5, c=c))


@pytest.mark.parametrize("dtype", DTYPES)
def test_stacks_and_vectors(scheduler, dtype):
    """Batch dimensions broadcast (a size-1 batch dimension, a missing one), chunked along
    batch, m and k; 1-D operands as numpy.matmul treats them."""
    rng = np.random.default_rng(5)
    a, b = normal(rng, (3, 1, 20, 37), dtype), normal(rng, (4, 37, 15), dtype)
    x, y = chunked(a, (2, 1, 12, (17, 20))), chunked(b, (3, (17, 20), 15))
    product = sgd.matmul(x, y)
    assert product.shape == (3, 4, 20, 15)
    assert np.array_equal(product.compute(**scheduler), smallgemm.matmul(a, b))
    v, w = normal(rng, 37, dtype), normal(rng, 20, dtype)
    cases = [(v, b[0]), (a[0, 0], v), (v, v), (w, a), (b, normal(rng, 15, dtype))]
    for left, right in cases:
        got = sgd.matmul(chunked(left, 11), chunked(right, 11)).compute(**scheduler)
        assert got.shape == np.matmul(left, right).shape
        assert np.array_equal(got, smallgemm.matmul(left, right))


def test_other_dtypes_go_to_dask_matmul(scheduler):
    rng = np.random.default_rng(6)
    a, b = rng.integers(-50, 50, (30, 40)), rng.integers(-50, 50, (40, 20))
    product = sgd.matmul(chunked(a, 15), chunked(b, 15))
    assert product.dtype == np.int64
    assert not any(name.startswith("smallgemm") for name in _graph_names(product))
    assert np.array_equal(product.compute(**scheduler), a @ b)
    mixed = sgd.matmul(chunked(a.astype(np.int32), 15), chunked(b.astype(np.float32), 15))
    assert mixed.dtype == np.float64 and not any(name.startswith("smallgemm") for name in _graph_names(mixed))


def test_mismatched_chunks_are_rechunked():
    """Along k the smaller operand takes the larger one's chunks; so along a shared batch dimension."""
    rng = np.random.default_rng(7)
    a, b = normal(rng, (2, 40, 130), np.float64), normal(rng, (2, 130, 30), np.float64)
    x, y = chunked(a, (1, 20, (40, 90))), chunked(b, (2, (100, 30), 15))  # y has fewer elements
    aligned_x, aligned_y = sgd.graph.matching(x, y)
    assert aligned_x is x and aligned_y.chunks == ((1, 1), (40, 90), (15, 15))
    product = sgd.matmul(x, y)
    assert product.chunks == ((1, 1), (20, 20), (15, 15))
    assert np.array_equal(product.compute(scheduler="threads"), smallgemm.matmul(a, b))
    wide = chunked(normal(rng, (130, 300), np.float64), ((100, 30), 100))  # now x is the smaller
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
    a, b = normal(rng, (90, 300), np.float32), normal(rng, (300, 70), np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    x = da.from_array(np.load(tmp_path / "a.npy", mmap_mode="r"), chunks=(40, 128))
    y = da.from_array(np.load(tmp_path / "b.npy", mmap_mode="r"), chunks=(128, 32))
    out = np.lib.format.open_memmap(tmp_path / "c.npy", mode="w+", dtype=np.float32, shape=(90, 70))
    da.store(sgd.matmul(x, y), out, scheduler="threads")
    out.flush()
    assert np.array_equal(np.load(tmp_path / "c.npy"), smallgemm.matmul(a, b))


@pytest.mark.parametrize("order", ["C", "F"])
def test_npy_file_blocks_are_the_arrays_blocks(tmp_path, order):
    """NpyFile reads a block of slices with plain file reads (rows one by one where they are
    far apart, spans of rows where they are close): every block, of any dimensions, is the
    array's; other indices (steps, integers) go through a memory map."""
    rng = np.random.default_rng(18)
    for shape in [(7,), (40, 300), (300, 8), (4, 5, 6), (3, 1, 4, 5), (2, 3, 0)]:
        x = np.asarray(rng.standard_normal(shape), order=order)
        np.save(tmp_path / "x.npy", x)
        file = sgd.NpyFile(tmp_path / "x.npy")
        for _ in range(40):
            index = []
            for n in shape:
                start = int(rng.integers(0, n + 1))
                index.append(slice(start, int(rng.integers(start, n + 1))))
            index = tuple(index[: int(rng.integers(0, len(shape) + 1))])
            block = file[index]
            assert block.shape == x[index].shape and np.array_equal(block, x[index]), (shape, index)
        assert np.array_equal(file[::2], x[::2])
        if x.size:
            assert file[(0,) * x.ndim] == x[(0,) * x.ndim]


def test_import_smallgemm_does_not_import_dask():
    script = "import sys, smallgemm; print('dask' in sys.modules, 'smallgemm.dask' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.split() == ["False", "False"], done.stderr
