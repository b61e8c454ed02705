"""First use: the first-use driver's bits, the compile process that fills the cache, the command.

The test process runs with ``SMALLGEMM_FIRST_USE=compile`` (conftest); the tier is
tested here in processes started with ``background`` and an empty cache of their own.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import DTYPES, KERNEL_NAMES, forced_kernel
from reference import chain_reference

import smallgemm
from smallgemm.plan import blocking, dispatch, entries, in_force, packed_layout, runners, warmup

SHAPES = [(1, 1, 1), (1, 7, 33), (5, 1, 3), (4, 300, 257), (9, 17, 600), (33, 65, 31)]


def _first_use(kernel, dtype, alpha, a, b, beta, c, offsets=None, continue_chain=False):
    zero = np.zeros(1, np.int64)
    offsets = offsets or (zero, zero, zero)
    entries.FIRST_USE.get(kernel, np.dtype(dtype))(
        kernel.shape, dtype(alpha), dtype(beta), a, b, c, *offsets, continue_chain
    )


@pytest.mark.parametrize("kernel_name", KERNEL_NAMES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_first_use_driver_gives_the_exact_bits(kernel_name, dtype):
    """Every layout and edge, alpha and beta, the continued chain: the scalar FMA chain's bits."""
    rng = np.random.default_rng(5)
    with forced_kernel(kernel_name) as kernel:
        for m, k, n in SHAPES:
            a = rng.standard_normal((m, k)).astype(dtype)
            b = rng.standard_normal((k, n)).astype(dtype)
            c0 = rng.standard_normal((m, n)).astype(dtype)
            layouts = [(a, b), (np.asfortranarray(a), np.asfortranarray(b)), (a.T.copy().T, b.T.copy().T)]
            wide_a = rng.standard_normal((m, 2 * k)).astype(dtype)
            wide_a[:, ::2] = a
            layouts.append((wide_a[:, ::2], b[::-1][::-1]))
            for x, y in layouts:
                for alpha, beta in [(1.0, 0.0), (2.5, 0.0), (2.5, -0.5)]:
                    c = np.full((m, n), np.nan, dtype) if beta == 0 else c0.copy()
                    _first_use(kernel, dtype, alpha, x, y, beta, c)
                    assert np.array_equal(c, chain_reference(alpha, a, b, beta, c0)), (m, k, n, alpha, beta)
                out = np.empty((n, m), dtype).T  # a column-major C
                out[...] = c0
                _first_use(kernel, dtype, 1.0, x, y, 1.0, out, continue_chain=True)
                assert np.array_equal(out, chain_reference(1.0, a, b, 1.0, c0)), (m, k, n)


@pytest.mark.parametrize("dtype", DTYPES)
def test_first_use_driver_takes_a_stack_by_offsets(dtype):
    """A broadcast stack: each matrix by its element offset from the first."""
    rng = np.random.default_rng(6)
    a = rng.standard_normal((3, 5, 40)).astype(dtype)
    b = rng.standard_normal((40, 7)).astype(dtype)
    c = np.empty((3, 5, 7), dtype)
    item = a.itemsize
    offsets = (
        np.arange(3, dtype=np.int64) * (a.strides[0] // item),
        np.zeros(3, np.int64),
        np.arange(3, dtype=np.int64) * (c.strides[0] // item),
    )
    with forced_kernel(KERNEL_NAMES[-1]) as kernel:
        _first_use(kernel, dtype, 1.0, a[0], b, 0.0, c[0], offsets)
    for t in range(3):
        assert np.array_equal(c[t], chain_reference(1.0, a[t], b))


BACKGROUND = textwrap.dedent("""
    import sys, time
    import numpy as np
    sys.path.insert(0, {tests!r})
    import smallgemm
    from reference import chain_reference
    from smallgemm.plan import dispatch, entries, warmup

    smallgemm.set_num_threads(1)
    kernel, f32 = dispatch.current(), np.dtype(np.float32)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = np.asfortranarray(rng.standard_normal((200, 250)).astype(np.float32))
    assert smallgemm.explain(a, b).strategy == "blocked", smallgemm.explain(a, b)
    start = time.perf_counter()
    first = smallgemm.matmul(a, b)
    print("first product s", round(time.perf_counter() - start, 2))
    assert np.array_equal(first, chain_reference(1.0, a, b))
    assert not entries.BLOCKED.ready(kernel, f32)
    assert warmup.compiles.compiling == {{("BLOCKED", kernel.name, "float32")}}, warmup.compiles.compiling
    assert warmup.compiles.process.wait(timeout=300) == 0
    again = smallgemm.matmul(a, b)
    assert entries.BLOCKED.ready(kernel, f32)  # loaded from the cache the compile process filled
    assert np.array_equal(again, first)
    print("ok")
""")


def test_products_run_first_while_their_entry_compiles_elsewhere(tmp_path):
    """Empty cache, default tier: the first blocked product runs on the first-use driver
    while ``python -m smallgemm compile`` compiles BLOCKED; the next one loads it. Same bits."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "SMALLGEMM_FIRST_USE": "background"}
    script = BACKGROUND.format(tests=os.path.dirname(__file__))
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("ok")


class _FakeProcess:
    def __init__(self, code):
        self.code = code

    def poll(self):
        return self.code


def test_a_failed_or_unsaved_compile_falls_back_to_compiling_here(monkeypatch):
    """A compile process that fails, or that succeeds without filling the cache, lets the
    entry compile in this process rather than wait for it forever."""
    entry, kernel, f32 = entries.SCALE_ADD, dispatch.current(), np.dtype(np.float32)
    monkeypatch.setattr(warmup, "MODE", warmup.BACKGROUND)
    monkeypatch.setattr(warmup, "compiles", warmup.Compiles())
    monkeypatch.setattr(entry, "ready", lambda kernel, dtype: False)
    monkeypatch.setattr(entry, "cached", lambda kernel, dtype: False)
    started = []

    def popen(command, **kwargs):
        started.append(command)
        return _FakeProcess(None)

    monkeypatch.setattr(warmup.subprocess, "Popen", popen)
    assert not warmup.fetchable(entry, kernel, f32)
    assert started[0][-2:] == ["--entry", "SCALE_ADD"] and "--quiet" in started[0]
    assert not warmup.fetchable(entry, kernel, f32)  # still compiling
    assert len(started) == 1
    key = ("SCALE_ADD", kernel.name, "float32")
    for code, outcome in [(3, "failed"), (0, "unsaved")]:
        warmup.compiles = warmup.Compiles()
        warmup.compiles.compiling, warmup.compiles.process = {key}, _FakeProcess(code)
        assert warmup.fetchable(entry, kernel, f32), outcome
        assert key in warmup.compiles.failed and warmup.compiles.process is None, outcome


def test_an_entry_found_in_the_cache_is_loaded_then_and_not_looked_for_again(monkeypatch):
    """Found in the on-disk cache, an entry is loaded by that call: every later call, however
    soon, finds it ready, and the cache is not read again."""
    entry, kernel, f32 = entries.SCALE_ADD, dispatch.current(), np.dtype(np.float32)
    entry.get(kernel, f32)  # compiled into the cache (or loaded from it)
    assert entry.cached(kernel, f32)
    monkeypatch.setattr(warmup, "MODE", warmup.BACKGROUND)
    monkeypatch.setattr(warmup, "compiles", warmup.Compiles())
    monkeypatch.setattr(entry, "loaded", {})  # not loaded in this process
    looks = []
    cached = entry.cached
    monkeypatch.setattr(entry, "cached", lambda kernel, dtype: looks.append(1) or cached(kernel, dtype))
    monkeypatch.setattr(warmup.subprocess, "Popen", lambda *a, **k: pytest.fail("a compile process started"))
    assert not entry.ready(kernel, f32)
    for _ in range(3):
        assert warmup.fetchable(entry, kernel, f32)
        assert entry.ready(kernel, f32)
    assert len(looks) == 1


def test_an_entry_is_cached_once_its_data_file_is_there(monkeypatch, tmp_path):
    """Numba writes a new entry's index before its data file: until the data file is there, the
    entry is not cached (loading it would compile it in this process instead)."""
    entry, kernel, f32 = entries.SCALE_ADD, dispatch.current(), np.dtype(np.float32)
    entry.get(kernel, f32)
    cache_file = entry.dispatcher._cache._cache_file
    monkeypatch.setattr(entry, "loaded", {})
    assert entry.cached(kernel, f32)
    monkeypatch.setattr(
        cache_file, "_cache_path", str(tmp_path)
    )  # the index as before, no data file beside it
    assert not entry.cached(kernel, f32)


def test_a_fork_forgets_the_parents_compile_process():
    """A forked child neither polls nor waits for its parent's compile process."""
    script = textwrap.dedent("""
        import os
        from smallgemm.plan import warmup
        warmup.compiles.compiling = {("BLOCKED", "avx2", "float32")}
        warmup.compiles.queued = [("PARALLEL", "avx2", "float32")]
        pid = os.fork()
        if pid == 0:
            os._exit(0 if not warmup.compiles.compiling and not warmup.compiles.queued else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert warmup.compiles.compiling  # the parent's own state is kept
        print("ok")
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_entries_still_queued_when_a_program_ends_compile_after_it(tmp_path):
    """A program that ends while its compile process runs and more entries wait behind it
    starts, at exit, a compile process for each kernel and dtype still queued: the next run
    finds them cached.  (``Popen`` records the commands here instead of compiling.)"""
    script = textwrap.dedent("""
        import json, sys
        from smallgemm.plan import warmup

        class Running:
            def poll(self):
                return None

        def popen(command, **kwargs):
            with open(sys.argv[1], "a") as log:
                log.write(json.dumps(command[command.index("--kernel"):]) + "\\n")
            return Running()

        warmup.subprocess.Popen = popen
        warmup.compiles.process, warmup.compiles.compiling = Running(), {("UNPACKED", "avx2", "float32")}
        warmup.compiles.queued = [
            ("PARALLEL", "avx2", "float32"), ("SCALE_ADD", "portable", "float64"), ("PACK", "avx2", "float32"),
        ]
    """)
    log = tmp_path / "started.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", script, str(log)], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    started = [json.loads(line) for line in log.read_text().splitlines()]
    assert started == [
        ["--kernel", "avx2", "--dtype", "float32", "--entry", "PARALLEL,PACK"],
        ["--kernel", "portable", "--dtype", "float64", "--entry", "SCALE_ADD"],
    ]


def test_compile_command_fills_the_cache_and_info_says_so(tmp_path):
    """``compile --entry`` shows its progress and fills an empty cache; ``info`` then counts
    those entries compiled; a second run finds them cached; an unknown name is an error."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}

    def smallgemm_cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "smallgemm", *args],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )

    first = smallgemm_cli("compile", "--dtype", "float32", "--entry", "SCALE_ADD,FIRST_USE")
    assert first.returncode == 0, first.stderr
    progress = first.stderr.splitlines()
    assert len(progress) == 2 and progress[0].startswith("[") and " 1/2 " in progress[0], first.stderr
    assert "SCALE_ADD" in progress[0] and "FIRST_USE" in progress[1] and " 2/2 " in progress[1]
    assert "2 entries compiled, 0 already cached" in first.stdout
    assert str(tmp_path) in first.stdout
    info = smallgemm_cli("info", "--no-peak")
    assert info.returncode == 0, info.stderr
    total = len(entries.ALL)
    assert f"compiled       float32: 2 of {total} entries" in info.stdout, info.stdout
    assert f"compiled       float64: 0 of {total} entries" in info.stdout
    second = smallgemm_cli("compile", "--dtype", "float32", "--entry", "SCALE_ADD,FIRST_USE")
    assert "0 entries compiled, 2 already cached" in second.stdout, second.stdout
    unknown = smallgemm_cli("compile", "--entry", "NOPE")
    assert unknown.returncode == 2 and "unknown entries ['NOPE']" in unknown.stderr


@pytest.mark.parametrize("kernel_name", KERNEL_NAMES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_packed_layout_in_numpy_is_the_compiled_one(kernel_name, dtype):
    """``packed_layout.pack_into`` writes every element the compiled packing writes (padding
    included), and ``PackedMatrix.unpacked`` reads B back: several NC slices and KC blocks,
    ragged edges, a transposed B."""
    rng = np.random.default_rng(7)
    with forced_kernel(kernel_name) as kernel:
        nr = kernel.nr(np.dtype(dtype))
        try:
            in_force.set_block_sizes(
                kernel, np.dtype(dtype), blocking.BlockSizes(mc=kernel.mr(), nc=2 * nr, kc=5)
            )
            for k, n in [(1, 1), (5, 2 * nr), (12, 2 * nr + 1), (11, 5 * nr - 3)]:
                b = rng.standard_normal((k, n)).astype(dtype)
                for packed, op in [(smallgemm.pack(b), b), (smallgemm.pack(b.T.copy(), trans=True), b)]:
                    data = np.full_like(packed.data, np.nan)
                    packed_layout.pack_into(op, nr, packed.kc, packed.nc, data)
                    assert np.array_equal(data, packed.data), (k, n)
                    assert np.array_equal(packed.unpacked(), b), (k, n)
        finally:
            in_force.set_block_sizes(kernel, np.dtype(dtype), None)


def test_pack_packs_in_numpy_while_its_entry_compiles(monkeypatch):
    """Before PACK is compiled, ``pack`` writes the layout in NumPy: the same data."""
    b = np.random.default_rng(9).standard_normal((300, 70)).astype(np.float32)
    compiled = smallgemm.pack(b).data
    monkeypatch.setattr(
        warmup, "fetchable", lambda entry, kernel, dtype, start=True: entry is not entries.PACK
    )
    monkeypatch.setattr(entries.PACK, "get", lambda kernel, dtype: pytest.fail("PACK ran"))
    assert np.array_equal(smallgemm.pack(b).data, compiled)


@pytest.mark.parametrize("rows", [2, 40])
def test_a_prepacked_product_runs_first_on_b_read_back(monkeypatch, rows):
    """While the prepacked entries compile elsewhere, a product with a packed B runs on the
    first-use driver, with the bits of the tuned drivers (the chain rule)."""
    kernel, f64 = dispatch.current(), np.dtype(np.float64)
    prepacked = (
        entries.PREPACKED,
        entries.PREPACKED_ROWS,
        entries.PREPACKED_PARALLEL,
        entries.PREPACKED_ROWS_PARALLEL,
    )
    monkeypatch.setattr(warmup, "MODE", warmup.BACKGROUND)
    monkeypatch.setattr(warmup, "compiles", warmup.Compiles())
    monkeypatch.setattr(warmup, "pump", lambda start=True: None)
    warmup.compiles.compiling = {(name, kernel.name, "float64") for name in entries.ALL}
    for entry in prepacked:
        monkeypatch.setattr(entry, "ready", lambda kernel, dtype: False)
        monkeypatch.setattr(entry, "cached", lambda kernel, dtype: False)

    def not_now(*args):
        raise AssertionError("a tuned prepacked driver ran")

    monkeypatch.setattr(runners, "run_prepacked", not_now)
    monkeypatch.setattr(runners, "run_prepacked_parallel", not_now)
    rng = np.random.default_rng(8)
    a = rng.standard_normal((rows, 70))
    b = rng.standard_normal((70, 90))
    c0 = rng.standard_normal((rows, 90))
    packed = smallgemm.pack(b)
    assert np.array_equal(smallgemm.matmul(a, packed), chain_reference(1.0, a, b))
    c = c0.copy()
    smallgemm.gemm(2.0, a, packed, beta=-1.5, c=c, overwrite_c=True)
    assert np.array_equal(c, chain_reference(2.0, a, b, -1.5, c0))
    assert not any(entry.ready(kernel, f64) for entry in prepacked)


def test_the_first_use_mode_is_set_and_checked(monkeypatch):
    """``set_first_use`` switches the tier; a wrong value, set or in the environment, is refused."""
    assert smallgemm.get_first_use() == "compile"  # conftest's environment
    monkeypatch.setattr(warmup, "MODE", warmup.MODE)
    smallgemm.set_first_use("background")
    assert smallgemm.get_first_use() == "background"
    with pytest.raises(
        ValueError, match="set_first_use: mode must be 'background' or 'compile', not 'later'"
    ):
        smallgemm.set_first_use("later")
    assert smallgemm.get_first_use() == "background"
    done = subprocess.run(
        [sys.executable, "-c", "import smallgemm"],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "SMALLGEMM_FIRST_USE": "never"},
        timeout=120,
    )
    assert (
        done.returncode != 0
        and "SMALLGEMM_FIRST_USE must be 'background' or 'compile', not 'never'" in done.stderr
    )


def test_explain_says_whether_the_entries_are_compiled(monkeypatch):
    """``explain`` names the entries a product runs and whether its first call would wait."""
    a = np.ones((300, 200), np.float32)
    b = np.asfortranarray(np.ones((200, 250), np.float32))
    with smallgemm.num_threads(1):
        smallgemm.matmul(a, b)
    assert smallgemm.explain(a, b, threads=1).compiled == "yes: BLOCKED (loaded or in the cache)"
    monkeypatch.setattr(entries.BLOCKED, "cached", lambda kernel, dtype: False)
    assert smallgemm.explain(a, b, threads=1).compiled == (
        "not yet: BLOCKED; a first product compiles them (0.1-13 s each)"
    )
    monkeypatch.setattr(warmup, "MODE", warmup.BACKGROUND)
    assert smallgemm.explain(a, b, threads=1).compiled == (
        "not yet: BLOCKED; a first product runs on the first-use driver (same bits) while they compile in "
        "another process"
    )
    assert "compiled     not yet: BLOCKED;" in str(smallgemm.explain(a, b, threads=1))
    assert smallgemm.explain(a[:0], b, threads=1).compiled == "nothing to compile"
