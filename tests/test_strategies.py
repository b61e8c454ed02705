"""The strategy table: ``explain`` names the row each product takes, every row is reached,
and the compiled small ways in compute exactly the products the table places on its small
rows."""

import dataclasses

import numpy as np
import pytest
from conftest import forced_kernel
from reference import chain_reference

import smallgemm
from smallgemm.drivers.unpacked import SMALL_DONE
from smallgemm.kernels import KERNELS, BySize, KernelConfig, kernel_by_name, shared
from smallgemm.plan import blocking, dispatch, in_force, strategies
from smallgemm.plan.runners import run_small, run_small_stack
from smallgemm.simd import DotPairs, RowFetch, StreamSettings, TileShapeType

UNPACKED_ROWS = {"turned few rows", "row dots", "transposing stream", "direct tiles"}
# The rows that compute on the direct tiles as given, on one thread or more.
DIRECT_TILE_ROWS = {"small product", "direct tiles"}
# The rows of the products that the compiled small ways in compute without a table lookup.
SMALL_ROWS = {"small product", "small stack"}


def empty(*shape, dtype=np.float32):
    return np.empty(shape, dtype)


def transposed(rows, cols, dtype=np.float32):
    """A (rows, cols) view of a (cols, rows) array: W.T."""
    return np.empty((cols, rows), dtype).T


# (kernel, expected row, a, b, threads, expected stack row)
CASES = [
    ("avx512", "empty", empty(0, 5), empty(5, 3), 1, ""),
    ("avx512", "scale only", empty(3, 0), empty(0, 4), 1, ""),
    ("avx512", "small product", empty(37, 23), empty(23, 45), 1, ""),
    ("avx2", "small product", empty(300, 200), empty(200), 2, ""),
    ("portable", "small product", empty(1, 200), transposed(200, 300), 1, ""),
    ("avx2", "turned few rows", empty(8, 150), transposed(150, 260), 1, ""),
    ("portable", "turned few rows", empty(4, 150), transposed(150, 260), 2, ""),
    ("avx512", "row dots", empty(2048, 512), empty(512), 1, ""),
    ("avx2", "row dots", empty(1, 512), transposed(512, 2048), 1, ""),
    ("avx512", "transposing stream", empty(5, 150), transposed(150, 260), 1, ""),
    ("avx512", "direct tiles", empty(8, 512), empty(512, 4096), 1, ""),
    ("avx2", "direct tiles", empty(4, 512), empty(512, 4096), 2, ""),
    ("avx512", "blocked", empty(300, 300), empty(300, 300), 1, ""),
    ("portable", "blocked", empty(300, 300, dtype=np.float64), empty(300, 300, dtype=np.float64), 2, ""),
    (
        "avx512",
        "small product",
        empty(1, 20, 30),
        empty(1, 30, 25),
        1,
        "",
    ),  # a stack of one: the lone product
    ("avx512", "small product", empty(5, 20, 30), empty(5, 30, 25), 2, "small stack"),
    ("avx512", "direct tiles", empty(3, 200, 200), empty(3, 200, 200), 1, "stack serial"),
    ("avx2", "blocked", empty(8, 256, 256), empty(8, 256, 256), 2, "stack tasks"),
    (
        "avx512",
        "direct tiles",
        empty(3, 4, 4096),
        empty(3, 4096, 4096),
        2,
        "stack, each product on all workers",
    ),
]


@pytest.mark.parametrize(
    "kernel_name, row, a, b, threads, stack", CASES, ids=[f"{c[1]}-{c[0]}-{c[5] or 'one'}" for c in CASES]
)
def test_explain_names_the_row_each_product_takes(kernel_name, row, a, b, threads, stack):
    with forced_kernel(kernel_name):
        found = smallgemm.explain(a, b, threads=threads)
    assert found.strategy == row
    assert found.stack.split(":")[0] == stack
    assert found.kernel == kernel_name
    assert f"strategy     {row}" in str(found)


def test_every_kernel_sets_every_configuration_value():
    """No field has a default that one kernel's measurement would hand to another."""
    for field in dataclasses.fields(KernelConfig):
        assert field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING, (
            field.name
        )


def test_every_kernel_gives_its_loops_settings_and_no_two_settings_share_compiled_code():
    """The settings that the compiled loops read per kernel travel in its tiles: every tile that
    runs the few-rows stream carries a kernel's ``StreamSettings``, and none of those records has
    a default.  Tiles that differ only in a setting are distinct Numba types, so no compiled
    loop serves two kernels' settings."""
    for record in (StreamSettings, RowFetch, DotPairs):
        assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(record)), record
    for kernel in KERNELS:
        assert kernel.few.stream is not None, kernel.name
        assert (kernel.narrow.stream is not None) == (kernel.narrow.stream_from > 0), kernel.name
        assert kernel.shape.short_rows < kernel.mr(), kernel.name
        for tile in (kernel.few, kernel.narrow):  # a kept strip fits the stream's panel
            assert tile.stream is None or 0 < tile.stream.strip_bytes <= shared.STREAM_STRIP_MAX_BYTES
    streams = {kernel.few.stream for kernel in KERNELS}
    assert len({TileShapeType(dataclasses.replace(KERNELS[0].few, stream=s)).name for s in streams}) == len(
        streams
    )
    bare = KERNELS[0].shape.geometry()
    assert TileShapeType(bare).name != TileShapeType(dataclasses.replace(bare, short_rows=2)).name


@pytest.mark.parametrize("kernel_name", ["avx512", "avx2", "portable"])
def test_few_rows_take_the_unpacked_drivers_up_to_the_kernels_own_limits(kernel_name):
    """Few rows times a B too large to skip packing otherwise run unpacked up to the kernel's
    ``few_rows_max`` (B's rows contiguous) and ``transposed_few_rows_max`` (``x @ W.T``), and
    are packed from one row more."""
    k, n = 512, 2048
    config = kernel_by_name(kernel_name).config
    with forced_kernel(kernel_name):
        for limit, b in (
            (config.few_rows_max, empty(k, n)),
            (config.transposed_few_rows_max, transposed(k, n)),
        ):
            assert smallgemm.explain(empty(limit, k), b, threads=1).strategy in UNPACKED_ROWS - {"row dots"}
            assert smallgemm.explain(empty(limit + 1, k), b, threads=1).strategy == "blocked"


@pytest.mark.parametrize("kernel_name", ["avx512", "avx2", "portable"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_few_rows_tile_is_taken_up_to_the_kernels_own_rows(kernel_name, dtype):
    """An unpacked product of few rows (B from the few tile's ``min_b_bytes``, n past the main tile) takes the
    few-rows tile, or the narrow tile's stream, up to the kernel's ``few.up_to`` rows and the
    main tile from one row more; no kernel takes it for more rows than one sweep of the
    stream holds."""
    kernel = kernel_by_name(kernel_name)
    assert 0 < kernel.few.up_to <= shared.STREAM_ROWS and kernel.config.few_rows_max <= shared.STREAM_ROWS
    n = 256
    k = max(64, -(-kernel.few.min_b_bytes // (n * np.dtype(dtype).itemsize)))  # B from the few tile's bytes
    b = empty(k, n, dtype=dtype)
    with forced_kernel(kernel_name):
        few = smallgemm.explain(empty(kernel.few.up_to, k, dtype=dtype), b, threads=1)
        main = smallgemm.explain(empty(kernel.few.up_to + 1, k, dtype=dtype), b, threads=1)
    assert few.strategy == main.strategy and few.strategy in DIRECT_TILE_ROWS
    assert few.tile in ("few-rows", "narrow, all rows in one stream") and main.tile == "main"


@pytest.mark.parametrize("m", [2, 5])
def test_explain_names_the_prepacked_rows(m):
    rng = np.random.default_rng(0)
    packed = smallgemm.pack(rng.standard_normal((130, 170)).astype(np.float32))
    with forced_kernel("avx512"):
        found = smallgemm.explain(empty(m if m < 14 else 60, 130), packed)
    assert found.strategy == "prepacked few rows"
    with forced_kernel("avx512"):
        assert smallgemm.explain(empty(60, 130), packed).strategy == "prepacked"


def test_every_row_of_every_table_is_reached():
    chains = {row for *_, row in CHAINS}
    reached = {c[1] for c in CASES} | {"prepacked", "prepacked few rows"} | chains
    stacks = {c[5] for c in CASES if c[5]} | {"lone product"}
    assert reached == {s.name for s in strategies.PRODUCT + strategies.PREPACKED}
    assert stacks == {s.name for s in strategies.STACK}


# gemm's continued chains (alpha == beta == 1): (m, n, k, B's order, expected row).
CHAINS = [
    (4, 700, 300, "C", "small product"),
    (300, 1, 200, "C", "small product"),
    (64, 64, 64, "C", "small product"),
    (1, 2048, 200, "C", "continued chain, direct tiles"),
    (2, 1024, 300, "C", "continued chain, direct tiles"),
    (150, 120, 100, "C", "continued chain"),
    (40, 64, 64, "F", "continued chain"),
]


def test_gemm_with_alpha_and_beta_one_takes_a_continued_chain_row(monkeypatch):
    """A continued chain takes a row whose tiles start each chain from C: a small product's
    (the direct tiles, as the compiled small way in computes it), the direct tiles up to
    ``unpacked_max_volume`` with B's rows contiguous (few rows and W @ x too, whose own rows
    would start from zero), the blocked loops past it or for a B without contiguous rows;
    each with the chain's bits.  With beta 0.5, no continued-chain row."""
    rng = np.random.default_rng(3)
    chosen = []
    real = strategies.choose
    monkeypatch.setattr(
        strategies, "choose", lambda table, p: chosen.append(real(table, p).name) or real(table, p)
    )
    for m, n, k, order, row in CHAINS:
        a, b = rng.standard_normal((m, k)), np.asarray(rng.standard_normal((k, n)), order=order)
        c = rng.standard_normal((m, n))
        expected = chain_reference(1.0, a, b, 1.0, c)
        del chosen[:]
        strategies.compute(1.0, a, b, 1.0, c)
        assert chosen == [row], (m, n, k, order, chosen)
        np.testing.assert_array_equal(c, expected)
        del chosen[:]
        smallgemm.gemm(1.0, a, b, beta=0.5, c=c)
        assert not any(name.startswith("continued chain") for name in chosen)


def test_products_take_the_row_explain_names(monkeypatch):
    """matmul runs the row ``explain`` names (on real operands, recorded at ``choose``)."""
    rng = np.random.default_rng(1)
    chosen = []
    real = strategies.choose
    monkeypatch.setattr(
        strategies, "choose", lambda table, p: chosen.append(real(table, p).name) or real(table, p)
    )
    for kernel_name, row, a, b, threads, _stack in CASES:
        a, b = rng.standard_normal(a.shape).astype(a.dtype), rng.standard_normal(b.shape).astype(b.dtype)
        with forced_kernel(kernel_name), smallgemm.num_threads(threads):
            del chosen[:]
            explained = smallgemm.explain(a, b)
            want = explained.stack.split(":")[0] or explained.strategy  # a stack runs its STACK row
            del chosen[:]
            got = smallgemm.matmul(a, b)
        np.testing.assert_allclose(got, np.matmul(a.astype(np.float64), b), rtol=1e-3, atol=1e-3)
        # The compiled small ways in compute small products and stacks of them without the table:
        # then nothing is recorded.  An empty product and k == 0 take the table's rows.
        assert want in chosen or (not chosen and want in SMALL_ROWS), (row, want, chosen)


SMALL_WAY_IN_SHAPES = [
    (1, 1, 8),
    (1, 40, 30),
    (3, 3, 3),
    (16, 16, 16),
    (8, 2, 64),
    (40, 3, 40),
    (64, 64, 64),
    (33, 17, 20),
    (120, 100, 120),
    (1, 300, 200),
    (300, 1, 200),
    (1, 2048, 512),
    (2048, 1, 512),
    (64, 4, 256),
    (1000, 4, 64),
    (100, 8, 200),
]


@pytest.mark.parametrize("kernel_name", ["avx512", "avx2", "portable"])
def test_the_small_way_in_computes_exactly_the_products_of_the_small_product_row(kernel_name):
    """The compiled small way in computes a product (SMALL_DONE) where, and only where, the
    table places it on its "small product" row; in every layout of A and B."""
    rng = np.random.default_rng(2)
    layouts = {
        "C": lambda r, c: rng.standard_normal((r, c)).astype(np.float32),
        "T": lambda r, c: rng.standard_normal((c, r)).astype(np.float32).T,
    }
    with forced_kernel(kernel_name):
        smallgemm.matmul(
            np.ones((2, 2), np.float32), np.ones((2, 2), np.float32)
        )  # the small entry is in use
        for m, n, k in SMALL_WAY_IN_SHAPES:
            for la in "CT":
                for lb in "CT":
                    a, b = layouts[la](m, k), layouts[lb](k, n)
                    c = np.empty((m, n), np.float32)
                    done = run_small(a, b, c, np.dtype(np.float32)) == SMALL_DONE
                    row = smallgemm.explain(a, b, threads=1).strategy
                    assert done == (row == "small product"), (m, n, k, la, lb, row)


@pytest.mark.parametrize("kernel_name", ["avx512", "avx2", "portable"])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_small_stack_way_in_computes_exactly_the_stacks_of_the_small_stack_row(kernel_name, threads):
    """The compiled small way in for stacks computes a stack where, and only where, the
    table places it on its "small stack" row (a stack of one is the lone product's)."""
    rng = np.random.default_rng(5)
    with forced_kernel(kernel_name), smallgemm.num_threads(threads):
        smallgemm.matmul(np.ones((2, 2, 2), np.float32), np.ones((2, 2, 2), np.float32))  # in use
        for count in (2, 10, 1000):
            for m, n, k in SMALL_WAY_IN_SHAPES[:9]:
                a = rng.standard_normal((count, m, k)).astype(np.float32)
                b = rng.standard_normal((count, k, n)).astype(np.float32)
                c = np.empty((count, m, n), np.float32)
                done = run_small_stack(a, b, c, np.dtype(np.float32)) == SMALL_DONE
                row = smallgemm.explain(a, b).stack.split(":")[0]
                assert done == (row == "small stack"), (count, m, n, k, row)


def test_a_configuration_override_keeps_explicit_block_sizes_and_ends_with_its_block():
    """``in_force.override_config`` changes the configuration in force (a KC there reaches the
    default block sizes) and restores it on exit; block sizes set explicitly stay."""
    kernel, dtype = dispatch.current(), np.dtype(np.float32)
    default = in_force.block_sizes(kernel, dtype)
    with in_force.override_config(kc=BySize(128, 128)):
        assert in_force.config_of(kernel).kc == BySize(128, 128)
        assert in_force.block_sizes(kernel, dtype).kc == 128
    assert in_force.config_of(kernel) is kernel.config
    assert in_force.block_sizes(kernel, dtype) == default
    explicit = blocking.BlockSizes(mc=kernel.mr(), nc=kernel.nr(dtype), kc=64)
    in_force.set_block_sizes(kernel, dtype, explicit)
    try:
        with in_force.override_config(few_rows_max=0):
            assert in_force.config_of(kernel).few_rows_max == 0
            assert in_force.block_sizes(kernel, dtype) == explicit
        assert in_force.block_sizes(kernel, dtype) == explicit
    finally:
        in_force.set_block_sizes(kernel, dtype, None)
    assert in_force.block_sizes(kernel, dtype) == default


def _state(p):
    return (
        id(p.a),
        id(p.b),
        id(p.c),
        p.m,
        p.n,
        p.k,
        p.swapped,
        p.turned,
        p.offsets and tuple(map(id, p.offsets)),
    )


@pytest.mark.parametrize("kernel_name", ["avx512", "avx2", "portable"])
def test_the_pre_pass_orients_and_the_fit_rules_change_nothing(kernel_name):
    """``choose`` orients a problem once, by its table's pre-pass (``Problem.orientation``);
    every row's fit rule then only reads it, whichever rows come before it."""
    with forced_kernel(kernel_name):
        problems = []
        for _kernel, _row, a, b, threads, _stack in CASES:
            if a.ndim == 2:
                b2 = b.reshape(-1, 1) if b.ndim == 1 else b
                for alpha, beta in ((1.0, 0.0), (1.0, 1.0), (0.0, 2.0)):
                    c = empty(a.shape[0], b2.shape[1], dtype=a.dtype)
                    problems.append((strategies.PRODUCT, strategies.Problem(alpha, a, b2, beta, c, threads)))
                c_columns = empty(b2.shape[1], a.shape[0], dtype=a.dtype).T  # a C to swap
                problems.append((strategies.PRODUCT, strategies.Problem(1.0, a, b2, 0.0, c_columns, threads)))
            else:
                c = empty(a.shape[0], a.shape[1], b.shape[2], dtype=a.dtype)
                offsets = tuple(
                    np.arange(len(x), dtype=np.int64) * (x.strides[0] // x.itemsize) for x in (a, b, c)
                )
                problems.append(
                    (strategies.STACK, strategies.Problem(1.0, a[0], b[0], 0.0, c[0], threads, offsets))
                )
        packed = smallgemm.pack(np.ones((130, 170), np.float32))
        for m in (2, 60):
            problems.append(
                (strategies.PREPACKED, strategies.Problem(1.0, empty(m, 130), packed, 0.0, empty(m, 170), 1))
            )
        turned = swapped = 0
        for table, p in problems:
            strategies.choose(table, p)
            assert p.oriented
            turned, swapped = turned + p.turned, swapped + p.swapped
            before = _state(p)
            for row in table:
                row.fits(p)
                assert _state(p) == before, (row.name, p.m, p.n, p.k)
        assert swapped and (turned or kernel_name == "avx512")  # both pre-pass turns were taken


# (name, kernels, operands, threads, whether the builtin alone computes it): planned products.
ALL_KERNELS = ("avx512", "avx2", "portable")
PLACED = [
    ("row dots", ALL_KERNELS, lambda r: (r(300, 200), r(200, 1)), 1, True),
    ("direct tiles, swapped", ALL_KERNELS, lambda r: (np.asfortranarray(r(300, 256)), r(256, 1)), 1, True),
    ("transposing stream", ALL_KERNELS, lambda r: (r(5, 150), r(260, 150).T), 1, True),
    ("turned few rows: W copied", ("avx2",), lambda r: (r(8, 150), r(260, 150).T), 1, False),
    ("blocked", ALL_KERNELS, lambda r: (r(300, 300), r(300, 300)), 1, False),
    ("row dots on two threads", ALL_KERNELS, lambda r: (r(4096, 4096), r(4096, 1)), 2, False),
]


@pytest.mark.parametrize(
    "kernel_name, operands, threads, on_builtin",
    [(kernel, *case[2:]) for case in PLACED for kernel in case[1]],
    ids=[f"{case[0]}-{kernel}" for case in PLACED for kernel in case[1]],
)
def test_a_product_placed_on_the_builtin_alone_runs_it_with_the_rows_bits(
    kernel_name, operands, threads, on_builtin
):
    """``strategies.compute`` remembers a product that an unpacked row's serial runner computes on
    the builtin alone (no threads, no copy, its entry loaded): the next products of that key
    skip the Problem and the runner, and give the bits the row gave, with alpha and beta."""
    from reference import chain_reference

    rng = np.random.default_rng(11)
    a, b = operands(lambda *shape: rng.standard_normal(shape).astype(np.float32))
    with forced_kernel(kernel_name), smallgemm.num_threads(threads):
        strategies._placed.clear()
        for alpha, beta in ((1.0, 0.0), (0.5, 2.0)):
            c0 = rng.standard_normal((a.shape[0], b.shape[1])).astype(np.float32)
            for _ in range(2):  # placed, then computed as placed: the same bits
                c = c0.copy()
                strategies.compute(alpha, a, b, beta, c)
                assert np.array_equal(c, chain_reference(alpha, a, b, beta, c0))
        assert [placed.on_builtin for placed in strategies._placed.values()] == [on_builtin]
