"""The parallel driver: bitwise-identical results for any thread count, every task run
exactly once, correct results under concurrent calls, whatever the threading layer."""

import subprocess
import sys
import threading

import numpy as np
import pytest
from conftest import random_matrix
from reference import assert_close

import smallgemm
from smallgemm.kernels import BySize
from smallgemm.plan import blocking, dispatch, in_force, prepared, rules, runners, workspace

THREAD_COUNTS = [1, 2, 3, 4, 8]  # 8 > the 2 cores of the project's machine


@pytest.fixture
def always_parallel(limits):
    """Let even small products take the parallel driver."""
    none = BySize(0, 0)
    limits(
        parallel_min_volume=none,
        parallel_min_stack_volume=none,
        unpacked_max_volume=none,
        one_thread_unpacked_volume=none,
    )


def products_by_thread_count(a, b, beta=0.0, c=None):
    results = []
    for n in THREAD_COUNTS:
        with smallgemm.num_threads(n):
            results.append(smallgemm.gemm(0.75, a, b, beta=beta, c=c))
    return results


@pytest.mark.parametrize("shape", [(1, 1, 1), (37, 45, 23), (97, 130, 61), (15, 300, 7)], ids=str)
def test_bitwise_identical_for_any_thread_count(kernel, dtype, tiny_blocks, always_parallel, shape):
    rng = np.random.default_rng(0)
    m, n, k = shape
    a = random_matrix(rng, (m, k), dtype)
    b = random_matrix(rng, (k, n), dtype, "F")
    c = random_matrix(rng, (m, n), dtype)
    results = products_by_thread_count(a, b, beta=-0.5, c=c)
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    assert_close(results[0], 0.75, a, b, -0.5, c)


@pytest.mark.parametrize("shape", [(1001, 2, 70), (600, 1, 33), (300, 2, 1100)], ids=str)
def test_tall_products_on_a_narrow_b_split_by_rows(kernel, dtype, always_parallel, shape):
    """A B slice of fewer panels than the tasks wanted is cut into row blocks (``task_split``),
    not shared as one A block: the same bits on any thread count, against the reference."""
    from smallgemm.drivers.parallel import task_split
    from smallgemm.kernels.shared import TASKS_PER_WORKER

    rng = np.random.default_rng(7)
    m, panels, k = shape  # B a panel or two wide, the last one an edge
    n = max(1, panels * kernel.nr(dtype) - 3)
    sizes = in_force.block_sizes(kernel, dtype).for_depth(k, kernel.mr())
    row_blocks, groups, _ = task_split(m, n, sizes.mc, kernel.mr(), kernel.nr(dtype), 2)
    assert panels < TASKS_PER_WORKER * 2 and groups == 1 and row_blocks >= TASKS_PER_WORKER * 2
    a = random_matrix(rng, (m, k), dtype)
    b = random_matrix(rng, (k, n), dtype)
    c = random_matrix(rng, (m, n), dtype)
    results = products_by_thread_count(a, b, beta=-0.5, c=c)
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    assert_close(results[0], 0.75, a, b, -0.5, c)


def test_bitwise_identical_with_default_blocks(kernel, dtype, always_parallel):
    rng = np.random.default_rng(1)
    sizes = in_force.block_sizes(kernel, dtype)
    m, n, k = sizes.mc * 2 + 5, kernel.nr(dtype) * 5 + 3, sizes.kc + 9
    a = random_matrix(rng, (m, k), dtype)
    b = random_matrix(rng, (k, n), dtype)
    results = products_by_thread_count(a, b)
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    assert_close(results[0], 0.75, a, b)


def test_prepared_state_remembers_block_sizes_by_depth(kernel, dtype):
    """``sizes_for_depth`` gives ``BlockSizes.for_depth``, and forgets rather than grows
    past DEPTHS_REMEMBERED depths."""
    prep = prepared.prepared(kernel, dtype)
    for k in range(1, 3 * rules.DEPTHS_REMEMBERED):
        assert prep.sizes_for_depth(k) == prep.sizes.for_depth(k, kernel.mr())
        assert len(prep.depth_sizes) <= rules.DEPTHS_REMEMBERED
    assert prep.sizes_for_depth(prep.sizes.kc + 5) == prep.sizes


@pytest.mark.parametrize("k", [1, 16, 17, 31])
def test_shallow_products_take_taller_row_blocks_and_keep_their_bits(kernel, dtype, always_parallel, k):
    """Below KC the row blocks grow (``BlockSizes.for_depth``) within the A buffers' size; no
    sum changes: the same bits on any thread count, prepacked, and row by row."""
    mr, nr = kernel.mr(), kernel.nr(dtype)
    sizes = blocking.BlockSizes(mc=2 * mr, nc=2 * nr, kc=64)
    shallow = sizes.for_depth(k, mr)
    assert shallow.kc >= k and shallow.mc > sizes.mc and shallow.mc % mr == 0
    assert shallow.mc * shallow.kc <= sizes.mc * sizes.kc
    assert sizes.for_depth(sizes.kc, mr) == sizes == sizes.for_depth(sizes.kc + 1, mr)
    rng = np.random.default_rng(k)
    m, n = 2 * shallow.mc + 3, 3 * nr + 1
    a = random_matrix(rng, (m, k), dtype)
    b = random_matrix(rng, (k, n), dtype, "F")
    in_force.set_block_sizes(kernel, dtype, sizes)
    try:
        results = products_by_thread_count(a, b)
        packed = smallgemm.pack(b)
        for workers in (1, 2):
            with smallgemm.num_threads(workers):
                results.append(smallgemm.gemm(0.75, a, packed))
        rows = [smallgemm.gemm(0.75, a[i : i + 1], b)[0] for i in (0, shallow.mc, m - 1)]
    finally:
        in_force.set_block_sizes(kernel, dtype, None)
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    for row, i in zip(rows, (0, shallow.mc, m - 1)):
        np.testing.assert_array_equal(row, results[0][i])
    assert_close(results[0], 0.75, a, b)


def stack_operands(rng, kernel, dtype, tiny_blocks, case, count):
    """(a, b) stacks whose products take the path ``case`` names."""
    nr = kernel.nr(dtype)
    kc = tiny_blocks.kc
    if case == "resident":  # tiny products, B in registers
        return random_matrix(rng, (count, 16, kc - 1), dtype), random_matrix(rng, (count, kc - 1, 16), dtype)
    if case == "few_rows":  # unpacked, several KC blocks
        return random_matrix(rng, (count, 4, 2 * kc + 1), dtype), random_matrix(
            rng, (count, 2 * kc + 1, 3 * nr + 1), dtype
        )
    if case == "few_rows_transposed_b":
        b = random_matrix(rng, (count, 3 * nr + 1, 2 * kc + 1), dtype).transpose(0, 2, 1)
        return random_matrix(rng, (count, 4, 2 * kc + 1), dtype), b
    m, n, k = 2 * tiny_blocks.mc + 35, 2 * tiny_blocks.nc + 3, 2 * kc + 1  # blocked: MC, NC and KC edges
    a = random_matrix(rng, (count, m, k), dtype)
    if case == "blocked_shared_b":  # a broadcast B: every product reads the same matrix
        return a, random_matrix(rng, (1, k, n), dtype)
    return a, random_matrix(rng, (count, k, n), dtype)


@pytest.mark.parametrize("count", [1, 2, 3, 7, 40])
@pytest.mark.parametrize(
    "case", ["resident", "few_rows", "few_rows_transposed_b", "blocked", "blocked_shared_b"]
)
def test_stacks_on_threads_give_the_bits_of_lone_products(
    kernel, dtype, tiny_blocks, always_parallel, monkeypatch, case, count
):
    """A stack's products shared out between workers, or each on all of them, come out
    bitwise as lone products on one thread, whatever the thread count."""
    ran = set()
    for name in ("run_batch_tasks", "run_batch_each_parallel"):
        original = getattr(runners, name)
        monkeypatch.setattr(
            runners, name, lambda *args, _name=name, _run=original: (ran.add(_name), _run(*args))
        )
    a, b = stack_operands(np.random.default_rng(count), kernel, dtype, tiny_blocks, case, count)
    results = []
    for workers in THREAD_COUNTS:
        with smallgemm.num_threads(workers):
            results.append(smallgemm.matmul(a, b))
    with smallgemm.num_threads(1):
        lone = [smallgemm.matmul(a[t], b[t % b.shape[0]]) for t in range(count)]
    for r in results:
        for t in range(count):
            np.testing.assert_array_equal(r[t], lone[t])
    assert_close(results[0], 1.0, a, b)
    # A stack of one is a lone product; products too few to share out evenly each use
    # all the workers (2, 3 or 7 on some of 2, 3, 4, 8 workers); the others are shared out.
    if count == 1:
        assert not ran
    else:
        assert ran == ({"run_batch_tasks", "run_batch_each_parallel"} if count < 8 else {"run_batch_tasks"})


def run_logged(kernel, dtype, m, n, k, workers, seed):
    """A parallel product with the task logs on: (a, b, c, first log, second log)."""
    rng = np.random.default_rng(seed)
    a = random_matrix(rng, (m, k), dtype)
    b = random_matrix(rng, (k, n), dtype)
    c = np.empty((m, n), dtype)
    first_log, second_log = np.zeros(1000, np.int64), np.zeros(1000, np.int64)
    prep = prepared.prepared(kernel, dtype)
    runners.run_parallel(prep, kernel, dtype, 1.0, 0.0, a, b, c, workers, first_log, second_log)
    assert_close(c, 1.0, a, b)
    return a, b, c, first_log, second_log


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
def test_every_task_runs_exactly_once(dtype, tiny_blocks, workers):
    kernel = dispatch.current()
    sizes = tiny_blocks
    # More rows than 8 workers' A buffers hold: MC-row blocks, never one shared block.
    m, n, k = 9 * sizes.mc + 3, 3 * sizes.nc + 7, 3 * sizes.kc + 2  # 4 JC slices, 4 PC slices
    _, _, _, log_b, log_rows = run_logged(kernel, dtype, m, n, k, workers, seed=2)
    pc_blocks = -(-k // sizes.kc)
    nr, mr = kernel.nr(dtype), kernel.mr()
    slices = [min(sizes.nc, n - jc) for jc in range(0, n, sizes.nc)]
    # Each JC slice packs its panels once per PC block, a few per task: task q ran
    # once per (slice with more than q tasks, PC block).
    expected_b = np.zeros(1000, np.int64)
    expected_rows = np.zeros(1000, np.int64)
    from smallgemm.drivers.parallel import pack_task_panels, task_split

    for cols in slices:
        panels = -(-cols // nr)
        expected_b[: -(-panels // pack_task_panels(panels, workers))] += pc_blocks
        row_blocks, groups, _ = task_split(m, cols, sizes.mc, mr, nr, workers)
        expected_rows[: row_blocks * groups] += pc_blocks
    np.testing.assert_array_equal(log_b, expected_b)
    np.testing.assert_array_equal(log_rows, expected_rows)


@pytest.fixture
def one_row_block_sizes(kernel, dtype):
    """Small blocks whose B buffer holds a panel for each of up to 8 workers."""
    sizes = blocking.BlockSizes(mc=3 * kernel.mr(), nc=8 * kernel.nr(dtype), kc=5)
    in_force.set_block_sizes(kernel, dtype, sizes)
    yield sizes
    in_force.set_block_sizes(kernel, dtype, None)


@pytest.mark.parametrize("workers, blocks", [(1, 1), (2, 1), (2, 2), (3, 1), (3, 3), (8, 2)])
def test_one_row_block_tasks_run_exactly_once(kernel, dtype, one_row_block_sizes, workers, blocks):
    """Up to MC rows, and up to what the workers' A buffers hold together (the
    L2 limit is far with these tiny KC blocks), A is one shared block: all
    columns are one slice; per KC block the A panels are packed once (one task
    each), then each group of B panels is one task."""
    from smallgemm.drivers.parallel import one_row_group
    from smallgemm.kernels.shared import TASKS_PER_WORKER

    sizes = one_row_block_sizes
    nr, mr = kernel.nr(dtype), kernel.mr()
    m, n, k = (
        blocks * sizes.mc - 1,
        3 * sizes.nc + 7,
        3 * sizes.kc + 2,
    )  # 3 NC widths and an edge panel, 4 PC slices
    a, b, c, log_a, log_panels = run_logged(kernel, dtype, m, n, k, workers, seed=3)
    pc_blocks = -(-k // sizes.kc)
    expected_a = np.zeros(1000, np.int64)
    expected_a[: -(-m // mr)] = pc_blocks
    panels = -(-n // nr)
    group = one_row_group(panels, sizes.nc, nr, workers)
    assert group * nr * workers <= sizes.nc and (
        group == 1 or -(-panels // group) >= TASKS_PER_WORKER * workers
    )
    expected_panels = np.zeros(1000, np.int64)
    expected_panels[: -(-panels // group)] = pc_blocks
    np.testing.assert_array_equal(log_a, expected_a)
    np.testing.assert_array_equal(log_panels, expected_panels)
    with smallgemm.num_threads(1):
        np.testing.assert_array_equal(smallgemm.matmul(a, b), c)


def test_task_split_keeps_workers_busy():
    from smallgemm.drivers.parallel import task_split
    from smallgemm.kernels.shared import TASKS_PER_WORKER

    for m, cols, workers in [
        (512, 2048, 2),
        (4096, 4096, 2),
        (2048, 512, 2),
        (100, 64, 8),
        (1, 4096, 4),
        (14, 32, 3),
        (3000, 100, 3),
        (1024, 64, 2),
        (4096, 64, 3),
        (768, 256, 2),
        (400, 400, 2),
    ]:
        row_blocks, groups, per_group = task_split(m, cols, 196, 14, 32, workers)
        row_panels, panels = -(-m // 14), -(-cols // 32)
        # Blocks of whole panels, as even as possible, none above MC = 196 rows.
        sizes = [(q + 1) * row_panels // row_blocks - q * row_panels // row_blocks for q in range(row_blocks)]
        assert sum(sizes) == row_panels and max(sizes) - min(sizes) <= 1 and max(sizes) * 14 <= 196
        assert row_blocks % workers == 0 or row_blocks == row_panels
        assert (groups - 1) * per_group < panels <= groups * per_group
        assert row_blocks * groups >= min(TASKS_PER_WORKER * workers, row_blocks * panels)
        if (panels < TASKS_PER_WORKER * workers or cols <= m) and TASKS_PER_WORKER * workers <= row_panels:
            # a narrow B, or one no wider than A is tall: rows split, never its columns
            assert groups == 1 and row_blocks >= TASKS_PER_WORKER * workers


def test_row_tasks_cover_each_block_and_group_once_group_by_group():
    from smallgemm.drivers.blocked import task_block_group

    for row_blocks, groups in [(1, 1), (4, 2), (3, 5), (6, 1), (1, 7)]:
        pairs = [task_block_group(t, row_blocks) for t in range(row_blocks * groups)]
        assert sorted(pairs) == [(q, g) for q in range(row_blocks) for g in range(groups)]
        assert [g for _, g in pairs] == sorted(g for _, g in pairs)  # a group's blocks in a row


@pytest.mark.parametrize(
    "m, cols, mc, mr, nr", [(512, 2048, 192, 6, 16), (512, 2048, 196, 14, 32), (640, 1024, 192, 6, 16)]
)
def test_each_worker_reads_the_b_panels_it_packed(m, cols, mc, mr, nr):
    """Two workers on x.T @ g-like slices: each one's own range of row-block tasks
    reads exactly the B panels its own range of pack tasks packed."""
    from smallgemm.drivers.blocked import task_block_group
    from smallgemm.drivers.parallel import pack_task_panels, task_split

    workers = 2
    row_blocks, groups, per_group = task_split(m, cols, mc, mr, nr, workers)
    panels = -(-cols // nr)
    per_task = pack_task_panels(panels, workers)
    pack_tasks, row_tasks = -(-panels // per_task), row_blocks * groups
    assert groups == workers
    for w in range(workers):
        packed = {
            q
            for t in range(w * pack_tasks // workers, (w + 1) * pack_tasks // workers)
            for q in range(t * per_task, min((t + 1) * per_task, panels))
        }
        groups_read = {
            task_block_group(t, row_blocks)[1]
            for t in range(w * row_tasks // workers, (w + 1) * row_tasks // workers)
        }
        read = {q for g in groups_read for q in range(g * per_group, min((g + 1) * per_group, panels))}
        assert read == packed


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
def test_claim_hands_out_each_task_once_own_range_first(workers):
    """Workers claiming in an arbitrary interleaving: each task once, and each
    worker takes from its own contiguous range, in order, before any other."""
    from smallgemm.drivers.parallel import COUNTER_STRIDE, claim, reset_counters

    rng = np.random.default_rng(workers)
    for total in (0, 1, workers - 1, workers, 7, 50):
        counter = np.full(workers * COUNTER_STRIDE, 99, np.int64)
        reset_counters(counter, workers)
        turns, taken = [0] * workers, [[] for _ in range(workers)]
        active = list(range(workers))
        while active:
            w = active[rng.integers(len(active))]
            task, turns[w] = claim(counter, total, workers, w, turns[w])
            if task < 0:
                active.remove(w)
            else:
                taken[w].append(task)
        assert sorted(t for tasks in taken for t in tasks) == list(range(total))
        for w, tasks in enumerate(taken):
            own = list(range(w * total // workers, (w + 1) * total // workers))
            head = [t for t in tasks if t in own]
            assert head == tasks[: len(head)] and head == sorted(head)


def test_concurrent_calls_from_python_threads(always_parallel):
    rng = np.random.default_rng(3)
    problems = []
    for i in range(8):
        dtype = np.float32 if i % 2 else np.float64
        m, n, k = 30 + 7 * i, 50 + 5 * i, 40 + 3 * i
        stack = (i % 4 + 1,) if i >= 4 else ()  # stacks of 1-4 products: shared out or each on all workers
        problems.append(
            (random_matrix(rng, (*stack, m, k), dtype), random_matrix(rng, (*stack, k, n), dtype))
        )
    expected = [smallgemm.matmul(a, b) for a, b in problems]
    failures = []

    def worker(index):
        a, b = problems[index]
        try:
            for _ in range(25):
                got = smallgemm.matmul(a, b)
                if not np.array_equal(got, expected[index]):
                    failures.append(index)
        except Exception as exc:  # reported below: a thread's exception must fail the test
            failures.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a call deadlocked"
    assert not failures, failures
    for (a, b), want in zip(problems, expected):
        assert_close(want, 1.0, a, b)


CONCURRENT_SCRIPT = """
import threading, numpy as np, numba, smallgemm
from smallgemm.plan import in_force
from smallgemm.kernels import BySize
in_force.override_config(parallel_min_volume=BySize(0, 0), parallel_min_stack_volume=BySize(0, 0)).__enter__()
rng = np.random.default_rng(0)
a = rng.standard_normal((3, 150, 90)); b = rng.standard_normal((3, 90, 120))
a4, b4 = np.concatenate([a, a[:1]]), np.concatenate([b, b[:1]])
want, want4 = a @ b, a4 @ b4
bad = []
def work():
    for _ in range(20):
        # One product; stacks of 3 and 4 (on 2 workers: each product on both, products shared out).
        for x, y, z in ((a[0], b[0], want[0]), (a, b, want), (a4, b4, want4)):
            if not np.allclose(smallgemm.matmul(x, y), z):
                bad.append(1)
threads = [threading.Thread(target=work) for _ in range(8)]
[t.start() for t in threads]; [t.join() for t in threads]
print(numba.threading_layer(), len(bad))
"""


@pytest.mark.parametrize("layer", ["tbb", "workqueue", "omp"])
def test_threading_layers_under_concurrency(layer):
    """Every layer Numba has on Linux is available here (TBB is a dependency): none is skipped."""
    import os

    env = {**os.environ, "NUMBA_THREADING_LAYER": layer}
    done = subprocess.run(
        [sys.executable, "-c", CONCURRENT_SCRIPT],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [layer, "0"]


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_process_pool_workers_default_to_one_thread(tmp_path, method):
    """Also when the main module imports smallgemm, which a spawned worker does before it
    knows it is one; a forked worker of a parent that set nothing defaults to 1 too."""
    import os

    code = (
        "import multiprocessing as mp\n"
        "import smallgemm\n"
        "def f(_):\n"
        "    return smallgemm.get_num_threads()\n"
        "if __name__ == '__main__':\n"
        f"    with mp.get_context('{method}').Pool(2) as pool:\n"
        "        print(pool.map(f, range(2)))\n"
    )
    script = tmp_path / "pool.py"  # spawned workers import the main module from its file
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "SMALLGEMM_NUM_THREADS"}
    done = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1, 1]"


def test_stack_workspace_holds_a_b_slice_per_worker_beside_the_shared_one(dtype):
    """Stacks on threads get one B slice per worker; their buffers and those of other parallel
    products of the same dtype are kept side by side (neither evicts the other)."""
    kernel = dispatch.current()
    sizes = in_force.block_sizes(kernel, dtype)
    mr, nr = kernel.mr(), kernel.nr(dtype)
    shared = workspace.get(dtype, sizes, mr, nr, 3)
    private = workspace.get(dtype, sizes, mr, nr, 3, private_b=True)
    assert shared.bbuf.size == sizes.kc * sizes.nc and private.bbuf.size == 3 * sizes.kc * sizes.nc
    assert private.abuf.size == shared.abuf.size == 3 * sizes.mc * sizes.kc
    assert workspace.get(dtype, sizes, mr, nr, 3) is shared
    assert workspace.get(dtype, sizes, mr, nr, 3, private_b=True) is private
    # Another worker count replaces the buffers of the same kind only.
    assert workspace.get(dtype, sizes, mr, nr, 2, private_b=True).bbuf.size == 2 * sizes.kc * sizes.nc
    assert workspace.get(dtype, sizes, mr, nr, 3) is shared
