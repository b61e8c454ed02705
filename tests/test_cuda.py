"""smallgemm.cuda: the ladder's kernels, matmul and the streamed schedule.

On a machine without a GPU these run in numba-cuda's simulator (tests/conftest.py
sets NUMBA_ENABLE_CUDASIM), on shapes small enough for it.  The simulator's
``cuda.fma`` rounds the product and the sum apart, so there every kernel must equal
that chain (``unfused_chain``); on a GPU, the scalar fused chain (``chain_reference``,
the bits of smallgemm.matmul in exact mode).  Both are also held to the error bound.
"""

from __future__ import annotations

import gc
import itertools
import os
import re
import subprocess
import sys
import weakref

import numpy as np
import pytest
from numba import cuda
from reference import assert_close, chain_reference

import smallgemm
from smallgemm.cuda import KERNELS, matmul, operands, ptx, schedule, streamed
from smallgemm.cuda import bench as cuda_bench
from smallgemm.cuda.__main__ import main as cuda_main
from smallgemm.cuda.kernels import ladder
from smallgemm.cuda.operands import simulated

DTYPES = [np.dtype(np.float32), np.dtype(np.float64)]


def unfused_chain(a, b, c0=None):
    """Each element's chain in increasing k with the product and the sum rounded apart:
    ``cuda.fma`` as numba-cuda's simulator computes it."""
    dtype = np.result_type(a, b)
    a, b = np.asarray(a, dtype), np.asarray(b, dtype)
    acc = np.zeros((a.shape[0], b.shape[1]), dtype) if c0 is None else np.array(c0, dtype)
    for k in range(a.shape[1]):
        acc = a[:, k : k + 1] * b[k : k + 1, :] + acc
    return acc


def expected(a, b, c0=None):
    """The bits every kernel must give here: the unfused chain in the simulator, else the
    fused one (smallgemm.matmul's exact products)."""
    if simulated():
        return unfused_chain(a, b, c0)
    return chain_reference(1.0, a, b) if c0 is None else chain_reference(1.0, a, b, 1.0, c0)


def check(result, a, b, c0=None):
    result = result.copy_to_host() if hasattr(result, "copy_to_host") else np.asarray(result)
    want = expected(a, b, c0)
    assert result.dtype == want.dtype and result.shape == want.shape
    assert np.array_equal(result, want)
    assert_close(result, 1.0, a, b, 1.0 if c0 is not None else 0.0, c0)


def random(rng, shape, dtype, order="C"):
    data = rng.standard_normal(shape).astype(dtype)
    return np.asfortranarray(data) if order == "F" else data


def edge_shapes(name: str, dtype: np.dtype) -> list[tuple[int, int, int]]:
    """M, N and K below, at and above the kernel's tile and k-step (K past two k-steps)."""
    tiles = KERNELS[name].tiles[dtype]
    t, u, d = tiles.rows, tiles.cols, tiles.depth
    return [(t - 1, u + 1, d), (t, u - 1, 2 * d + 1), (t + 1, u, max(1, d - 1))]


def test_the_ladder_in_order():
    assert list(KERNELS) == ["naive", "shared", "bank_free", "double_buffer", "register"]
    assert all(KERNELS[name].idea for name in KERNELS)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(KERNELS))
def test_edges_below_at_and_above_the_tiles(name, dtype):
    rng = np.random.default_rng(1)
    for m, n, k in edge_shapes(name, dtype):
        a, b = random(rng, (m, k), dtype), random(rng, (k, n), dtype)
        check(matmul(a, b, kernel=name), a, b)


LAYOUTS = ["a_transposed", "b_transposed", "both_transposed", "device_strided"]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(KERNELS))
def test_layouts_and_strides(name, layout, dtype):
    tiles = KERNELS[name].tiles[dtype]
    m, n, k = min(tiles.rows + 3, 40), tiles.cols - 2, tiles.depth + 3
    rng = np.random.default_rng(2)
    a = random(rng, (m, k), dtype, "F" if layout in ("a_transposed", "both_transposed") else "C")
    b = random(rng, (k, n), dtype, "F" if layout in ("b_transposed", "both_transposed") else "C")
    if layout != "device_strided":
        check(matmul(a, b, kernel=name), a, b)
        return
    big_a, big_b = random(rng, (2 * m, 3 * k), dtype), random(rng, (3 * k, 2 * n), dtype, "F")
    a, b = big_a[::2, 1::3], big_b[2::3, ::2]
    result = matmul(cuda.to_device(big_a)[::2, 1::3], cuda.to_device(big_b)[2::3, ::2], kernel=name)
    check(result, a, b)


@pytest.mark.parametrize("name", list(KERNELS))
def test_chain_continued_from_c(name):
    """accumulate=True goes on with each element's chain from C: the streamed schedule's
    k-chunks, and the bits of the whole product."""
    rng = np.random.default_rng(3)
    dtype = np.dtype(np.float32)
    a, b = random(rng, (19, 23), dtype), random(rng, (23, 17), dtype)
    c0 = random(rng, (19, 17), dtype)
    c = cuda.to_device(c0)
    KERNELS[name].launch(cuda.to_device(a), cuda.to_device(b), c, accumulate=True)
    check(c, a, b, c0)
    halves = cuda.device_array((19, 17), dtype)
    KERNELS[name].launch(cuda.to_device(np.ascontiguousarray(a[:, :11])), cuda.to_device(b[:11]), halves)
    KERNELS[name].launch(
        cuda.to_device(np.ascontiguousarray(a[:, 11:])), cuda.to_device(b[11:]), halves, accumulate=True
    )
    check(halves, a, b)


def test_c_taller_than_one_grid_is_launched_in_parts(monkeypatch):
    """A grid has at most 65535 blocks along y: a taller C is computed in row parts."""
    monkeypatch.setattr(ladder, "MAX_GRID_Y", 1)
    rng = np.random.default_rng(10)
    a, b = random(rng, (40, 9), np.float32), random(rng, (9, 7), np.float32)
    for name in ("naive", "double_buffer"):
        check(matmul(a, b, kernel=name), a, b)


def test_every_kernel_gives_the_same_bits():
    rng = np.random.default_rng(4)
    a, b = random(rng, (20, 18), np.float64), random(rng, (18, 21), np.float32)
    results = [matmul(a, b, kernel=name) for name in KERNELS]
    assert all(r.dtype == np.float64 and np.array_equal(r, results[0]) for r in results)
    check(results[0], a, b)


def test_numpy_and_device_operands_and_out():
    rng = np.random.default_rng(5)
    a, b = random(rng, (9, 7), np.float32), random(rng, (7, 6), np.float32)
    a_before, b_before = a.copy(), b.copy()
    host = matmul(a, b, kernel="naive")
    assert isinstance(host, np.ndarray)
    check(host, a, b)
    on_device = matmul(cuda.to_device(a), b, kernel="naive")
    assert getattr(on_device, "__cuda_ndarray__", False)
    assert np.array_equal(on_device.copy_to_host(), host)
    out = cuda.device_array((9, 6), np.float32)
    assert matmul(a, b, out=out, kernel="naive") is out
    assert np.array_equal(out.copy_to_host(), host)
    frame = np.full((11, 8), -7.0, np.float32)  # out is a view: nothing around it is written
    view = frame[1:10, 1:7]
    assert matmul(cuda.to_device(a), cuda.to_device(b), out=view, kernel="naive") is view
    assert np.array_equal(view, host)
    frame[1:10, 1:7] = -7.0
    assert (frame == -7.0).all()
    assert np.array_equal(a, a_before) and np.array_equal(b, b_before)


def test_out_on_the_device_that_overlaps_an_operand():
    rng = np.random.default_rng(6)
    a = random(rng, (8, 8), np.float64)
    expected_bits = matmul(a, a, kernel="naive")
    da = cuda.to_device(a)
    assert matmul(da, da, out=da, kernel="naive") is da
    assert np.array_equal(da.copy_to_host(), expected_bits)


def test_vectors_mixed_dtypes_and_empty_products():
    rng = np.random.default_rng(7)
    v, w = random(rng, (5,), np.float32), random(rng, (5, 3), np.float64)
    row = matmul(v, w, kernel="naive")
    assert row.shape == (3,) and row.dtype == np.float64
    check(row[np.newaxis], v[np.newaxis], w)
    col = matmul(w.T, v, kernel="shared")
    assert col.shape == (3,)
    check(col[:, np.newaxis], w.T, v[:, np.newaxis])
    dot = matmul(v, v, kernel="naive")
    assert dot.shape == ()
    check(np.reshape(dot, (1, 1)), v[np.newaxis], v[:, np.newaxis])
    zeros = matmul(np.ones((3, 0), np.float32), np.ones((0, 4), np.float32))
    assert zeros.shape == (3, 4) and zeros.dtype == np.float32 and not zeros.any()
    assert matmul(np.ones((0, 5)), np.ones((5, 4))).shape == (0, 4)


def test_errors_in_the_cpu_apis_words():
    a, b = np.ones((3, 4)), np.ones((5, 4))
    with pytest.raises(ValueError) as cpu_error:
        smallgemm.matmul(a, b)
    with pytest.raises(ValueError, match=re.escape(str(cpu_error.value))):
        matmul(a, b)
    with pytest.raises(ValueError, match="does not have enough dimensions"):
        matmul(np.float64(1.0), np.ones(3))
    with pytest.raises(TypeError, match="a has dtype int64"):
        matmul(np.ones((2, 2), np.int64), np.ones((2, 2)))
    with pytest.raises(ValueError, match="1-D or 2-D"):
        matmul(np.ones((2, 2, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="unknown kernel 'fast'"):
        matmul(np.ones((2, 2)), np.ones((2, 2)), kernel="fast")
    with pytest.raises(ValueError, match="mismatch in its core dimension 1"):
        matmul(np.ones((2, 3)), np.ones((3, 4)), out=np.empty((2, 5)))
    with pytest.raises(TypeError, match="out has dtype float32; the product's is float64"):
        matmul(np.ones((2, 3)), np.ones((3, 4)), out=np.empty((2, 4), np.float32))
    with pytest.raises(TypeError, match="out must be a numpy array or a device array, got list"):
        matmul(np.ones((2, 3)), np.ones((3, 4)), out=[[0.0] * 4] * 2)
    frozen = np.empty((2, 4))
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        matmul(np.ones((2, 3)), np.ones((3, 4)), out=frozen)
    with pytest.raises(ValueError, match="memory_limit must be positive"):
        matmul(np.ones((2, 3)), np.ones((3, 4)), memory_limit=0)
    with pytest.raises(MemoryError, match="cannot hold one"):
        matmul(np.ones((40, 30)), np.ones((30, 40)), kernel="naive", memory_limit=64)


def test_cuda_array_interface_operands(monkeypatch):
    """An operand with ``__cuda_array_interface__`` (CuPy, PyTorch) is read in place through
    ``cuda.as_cuda_array``, and a CuPy operand's result comes back through ``cupy.asarray``.
    The simulator has no device pointers: there the conversion is stood in for."""
    rng = np.random.default_rng(8)
    a, b = random(rng, (6, 5), np.float32), random(rng, (5, 4), np.float32)
    device_a = cuda.to_device(a)

    class Foreign:
        __module__ = "torch"

        def __init__(self, array):
            self.array = array

        @property
        def __cuda_array_interface__(self):
            return {"version": 3} if simulated() else self.array.__cuda_array_interface__

    if simulated():
        monkeypatch.setattr(operands.cuda, "as_cuda_array", lambda x: x.array, raising=False)
    result = matmul(Foreign(device_a), b, kernel="naive")
    assert getattr(result, "__cuda_ndarray__", False)
    check(result, a, b)


def test_schedule_copies_each_panel_as_the_order_says():
    m, n, k, sizes = 1000, 900, 300, (4, 4, 4)
    panels = schedule.choose(m, n, k, sizes, 1_000_000, 128, 128)
    assert panels.depth == k and panels.rows % 128 == 0 and panels.cols % 128 == 0
    assert schedule.device_bytes(m, n, k, sizes, panels) <= 1_000_000
    steps = list(schedule.order(m, n, k, panels))
    rows, cols = -(-m // panels.rows), -(-n // panels.cols)
    assert len(steps) == rows * cols and rows > 1 and cols > 1
    # Serpentine: consecutive blocks share an A panel or (at a turn) a B panel.
    assert all(s.i == t.i or s.j == t.j for s, t in itertools.pairwise(steps))
    assert {(s.i, s.j) for s in steps} == {(i, j) for i in range(rows) for j in range(cols)}
    chunked = schedule.choose(m, n, k, sizes, 150_000, 128, 128)
    assert chunked.depth < k and schedule.device_bytes(m, n, k, sizes, chunked) <= 150_000
    chunks = [s.chunk for s in schedule.order(m, n, k, chunked) if (s.i, s.j) == (1, 2)]
    assert chunks == list(range(-(-k // chunked.depth)))
    with pytest.raises(MemoryError):
        schedule.choose(m, n, k, sizes, 1000, 128, 128)


def lru_copies(m, n, k, panels) -> tuple[int, int]:
    """The panels of A and of B that two slots each, the least recently used refilled, copy
    in along ``schedule.order``."""
    counts = []
    for operand in ("a", "b"):
        slots, copied = [], 0
        for step in schedule.order(m, n, k, panels):
            key = (step.i, step.chunk) if operand == "a" else (step.chunk, step.j)
            if key in slots:
                slots.remove(key)
            else:
                copied += 1
                slots = slots[-1:]
            slots.append(key)
        counts.append(copied)
    return tuple(counts)


@pytest.mark.parametrize("shape", [(1000, 900, 300), (1000, 200, 300), (300, 900, 1000), (129, 1000, 64)])
@pytest.mark.parametrize("limit", [2_000_000, 1_000_000, 300_000, 150_000, 40_000])
def test_schedule_copies_as_counted(shape, limit):
    m, n, k = shape
    panels = schedule.choose(m, n, k, (4, 4, 4), limit, 64, 64)
    assert schedule.device_bytes(m, n, k, (4, 4, 4), panels) <= limit
    assert schedule.copies(m, n, k, panels) == lru_copies(m, n, k, panels)


@pytest.mark.parametrize(
    "name, limit, cut_k", [("naive", 12_000, False), ("shared", 6_000, True), ("register", 5_000, True)]
)
def test_products_larger_than_the_memory_limit(monkeypatch, name, limit, cut_k):
    """A memory_limit that cuts A and B into several panels (and K into chunks): matmul
    runs the streamed schedule on the panels ``schedule.choose`` gives, with the one-piece
    product's bits, copying each panel as the schedule's traffic model says."""
    rng = np.random.default_rng(9)
    m, n, k = (40, 36, 30) if name != "register" else (20, 20, 30)
    a, b = random(rng, (m, k), np.float32), random(rng, (k, n), np.float32, "F")
    whole = expected(a, b)  # the one-piece product's bits (test_edges_below_at_and_above_the_tiles)
    sizes = (4, 4, 4)
    tiles = KERNELS[name].tiles[a.dtype]
    panels = schedule.choose(m, n, k, sizes, limit, tiles.rows, tiles.cols)
    assert (panels.depth < k) == cut_k
    if not cut_k:
        assert panels.rows < m and panels.cols < n
    runs = []
    run = streamed.run

    def recorded(kernel, *args):
        runs.append((kernel, args[-1], run(kernel, *args)))

    monkeypatch.setattr(streamed, "run", recorded)  # the simulator runs the product once, not twice
    assert np.array_equal(matmul(a, b, kernel=name, memory_limit=limit), whole)
    assert runs == [(KERNELS[name], panels, sum(lru_copies(m, n, k, panels)))]


class LiveDeviceBytes:
    """Counts the bytes of device arrays alive at once: every array ``cuda.device_array`` and
    ``cuda.to_device`` make, from its allocation until it is collected."""

    def __init__(self, monkeypatch):
        self.live = self.peak = 0
        for name in ("device_array", "to_device"):
            monkeypatch.setattr(cuda, name, self.counted(getattr(cuda, name)))

    def counted(self, allocate):
        def wrapper(*args, **kwargs):
            array = allocate(*args, **kwargs)
            size = int(np.prod(array.shape)) * np.dtype(array.dtype).itemsize
            self.live += size
            self.peak = max(self.peak, self.live)
            weakref.finalize(array, self.freed, size)
            return array

        return wrapper

    def freed(self, size):
        self.live -= size


class NoKernel:
    """A kernel that launches nothing: the schedule's allocations without the simulator's
    cost of running the kernels."""

    def launch(self, a, b, c, accumulate=False, stream=0):
        pass


@pytest.mark.parametrize(
    "tile, dtype, shape, share",
    [
        ((16, 16), np.float32, (96, 150, 40), 1 / 2),
        ((16, 16), np.float64, (130, 90, 70), 1 / 2),
        ((16, 16), np.float32, (200, 64, 64), 1 / 2),
        ((16, 16), np.float32, (200, 64, 64), 1 / 3),
        ((16, 16), np.float64, (64, 3000, 40), 1 / 6),
        ((16, 16), np.float32, (300, 900, 1000), 1 / 40),
        ((128, 128), np.float32, (1000, 200, 500), 1 / 10),
        ((128, 128), np.float32, (300, 900, 1000), 1 / 20),
        ((64, 64), np.float64, (64, 3000, 40), 1 / 2),
        ((64, 64), np.float64, (500, 400, 3000), 1 / 50),
    ],
)
def test_the_schedule_allocates_what_its_model_counts(monkeypatch, dtype, shape, share, tile):
    """``streamed.run``'s device arrays alive at once are ``device_bytes`` of its panels, at
    most ``memory_limit``, for panels cut in rows, columns and k (the kernels' tile sizes;
    the kernel itself launches nothing here)."""
    m, n, k = shape
    size = np.dtype(dtype).itemsize
    limit = int((m * k + k * n + m * n) * size * share)
    panels = schedule.choose(m, n, k, (size,) * 3, limit, *tile)
    a = np.broadcast_to(np.ones(1, dtype), (m, k))
    b = np.broadcast_to(np.ones(1, dtype), (k, n))
    gc.collect()
    live = LiveDeviceBytes(monkeypatch)
    streamed.run(NoKernel(), a, b, np.empty((m, n), dtype), panels)
    assert live.peak == schedule.device_bytes(m, n, k, (size,) * 3, panels) <= limit


@pytest.mark.parametrize(
    "name, dtype, shape, share",
    [
        ("shared", np.float32, (64, 40, 10), 0.6),
        ("bank_free", np.float64, (36, 30, 40), 1 / 3),
        ("register", np.float32, (128, 20, 16), 0.8),
        ("register", np.float32, (256, 4, 64), 1 / 2),
        ("register", np.float64, (64, 150, 12), 3 / 4),
        ("naive", np.float64, (30, 20, 120), 1 / 5),
    ],
)
def test_live_device_bytes_stay_within_the_memory_limit(monkeypatch, name, dtype, shape, share):
    """A streamed product, through ``matmul``, keeps the device arrays alive at once within
    ``memory_limit`` (counted as they are made and collected) and has the bits of the
    one-piece product."""
    rng = np.random.default_rng(12)
    m, n, k = shape
    a, b = random(rng, (m, k), dtype), random(rng, (k, n), dtype, "F")
    whole = expected(a, b)  # the one-piece product's bits (test_edges_below_at_and_above_the_tiles)
    size = np.dtype(dtype).itemsize
    limit = int((m * k + k * n + m * n) * size * share)
    gc.collect()
    live = LiveDeviceBytes(monkeypatch)
    result = matmul(a, b, kernel=name, memory_limit=limit)
    assert 0 < live.peak <= limit
    assert np.array_equal(result, whole)


def test_bench_prints_seed_000s_table(capsys):
    assert cuda_main(["bench", "--sizes", "8,9", "--repeats", "2", "--kernels", "naive,shared"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.match(r"bits: 8\^3 float32: every kernel equals", lines[1])
    rows = [line for line in lines if "M N K =" in line]
    assert len(rows) == 4
    pattern = r"\s+(naive|shared)  M N K = +9 +9 +9, Time = ( +\d+\.\d{8}){3} s, AVG Performance = +\d+\.\d{4} Gflops"
    assert re.match(pattern, rows[-1])


def tf32(x):
    """float32 values rounded to TF32's 10 bits of mantissa (to nearest, ties away)."""
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


@pytest.mark.parametrize("size", [64, 256, 1024])
def test_the_bench_tells_tf32_from_fp32(size):
    """The bench's check on cuBLAS's float32 product: an FP32 product (smallgemm's, or
    NumPy's) passes, one of TF32-rounded inputs is caught."""
    rng = np.random.default_rng(size)
    a, b = (rng.standard_normal((size, size)).astype(np.float32) for _ in range(2))
    assert not cuda_bench.tf32_in_use(a, b, smallgemm.matmul(a, b))
    assert not cuda_bench.tf32_in_use(a, b, a @ b)
    assert cuda_bench.tf32_in_use(a, b, (tf32(a).astype(np.float64) @ tf32(b)).astype(np.float32))


def test_every_kernel_compiles_for_a_gpu():
    """The simulator types nothing: numba-cuda's compiler (NVVM, no GPU needed) compiles
    every kernel, dtype and layout to PTX for compute capability 9.0.  Each holds fused
    multiply-adds (register: one per element of a thread's block and k) and uses no local
    memory: its arrays are in registers, nothing spills."""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    run = subprocess.run(
        [sys.executable, "-m", "smallgemm.cuda", "ptx"],
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    expected_lines = sum(len(ptx.layouts(name)) for name in KERNELS) * len(DTYPES)
    assert len(lines) == expected_lines
    for line in lines:
        fields = re.search(r"^\s*(\w+) (float\d\d) .* fma +(\d+) .* local memory (\d+)$", line)
        assert fields, line
        name, dtype, fma, local = fields[1], np.dtype(fields[2]), int(fields[3]), int(fields[4])
        tiles = KERNELS[name].tiles[dtype]
        assert fma >= tiles.thread_rows * tiles.thread_cols and local == 0, line
