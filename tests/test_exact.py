"""Exact products: every element is one FMA chain in increasing k (``reference.chain_reference``),
so every kernel, block size, thread count, batch and strategy gives the same bits."""

import warnings

import numpy as np
import pytest
from conftest import configured, random_matrix
from reference import chain_reference

import smallgemm
from smallgemm.drivers import unpacked
from smallgemm.kernels import BySize
from smallgemm.plan import blocking, in_force


def _products(rng, dtype, depth):
    """(name, a, b) reaching every row of the strategy table, each with k = ``depth``
    (several KC blocks when KC is pinned small), with edge rows and columns."""
    k = depth
    w = random_matrix(rng, (300, k), dtype)
    return [
        ("small", random_matrix(rng, (13, k), dtype), random_matrix(rng, (k, 17), dtype)),
        ("few rows", random_matrix(rng, (4, k), dtype), random_matrix(rng, (k, 700), dtype)),
        ("x @ W.T", random_matrix(rng, (5, k), dtype), w.T),
        ("x8 @ W.T (turned over on avx2)", random_matrix(rng, (8, k), dtype), w.T),
        ("x4 @ W.T (turned over on portable)", random_matrix(rng, (4, k), dtype), w.T),
        ("W @ x", w, random_matrix(rng, (k, 1), dtype)),
        ("one row", random_matrix(rng, (1, k), dtype), random_matrix(rng, (k, 333), dtype)),
        ("narrow", random_matrix(rng, (301, k), dtype), random_matrix(rng, (k, 3), dtype)),
        ("x.T @ g", random_matrix(rng, (k, 200), dtype).T, random_matrix(rng, (k, 9), dtype)),
        ("blocked", random_matrix(rng, (230, k), dtype), random_matrix(rng, (k, 190), dtype)),
        (
            "column-major",
            np.asfortranarray(random_matrix(rng, (150, k), dtype)),
            np.asfortranarray(random_matrix(rng, (k, 170), dtype)),
        ),
        ("strided", random_matrix(rng, (90, 2 * k), dtype)[:, ::-2], random_matrix(rng, (k, 110), dtype)),
    ]


def _check(got, expected, name):
    np.testing.assert_array_equal(got, expected, err_msg=name)


@pytest.mark.parametrize("kc", [64, None], ids=["KC 64", "default KC"])
def test_every_strategy_equals_the_chain_reference(kernel, dtype, kc):
    """matmul, gemm (alpha, beta) and a stack of each product on every kernel, 1 and 3
    threads, under a pinned KC of 64 and under the kernel's own: bitwise the chain."""
    rng = np.random.default_rng(7)
    if kc is not None:
        in_force.set_block_sizes(
            kernel, dtype, blocking.BlockSizes(mc=4 * kernel.mr(), nc=4 * kernel.nr(dtype), kc=kc)
        )
    try:
        depth = 3 * 64 + 17 if kc else in_force.block_sizes(kernel, dtype).kc + 37
        for name, a, b in _products(rng, dtype, depth):
            expected = chain_reference(1.0, a, b)
            c0 = random_matrix(rng, expected.shape, dtype)
            scaled = chain_reference(0.75, a, b, -1.5, c0)
            for threads in (1, 3):
                with smallgemm.num_threads(threads):
                    _check(smallgemm.matmul(a, b), expected, f"{name}, {threads} threads")
                    _check(
                        smallgemm.gemm(0.75, a, b, beta=-1.5, c=c0), scaled, f"{name} gemm, {threads} threads"
                    )
                    stacked = smallgemm.matmul(np.stack([a, a[::-1]]), np.stack([b, b]))
                    _check(stacked[0], expected, f"{name} in a stack, {threads} threads")
    finally:
        in_force.set_block_sizes(kernel, dtype, None)


def test_stacks_of_tiny_products_equal_the_chain_reference(kernel, dtype):
    """Tiny products whose B stays in registers (the resident tile), and a stack of one."""
    rng = np.random.default_rng(11)
    for shape in ((50, 8, 8, 8), (20, 16, 16, 16), (1, 5, 40, 33)):
        t, m, k, n = shape
        a, b = random_matrix(rng, (t, m, k), dtype), random_matrix(rng, (t, k, n), dtype)
        got = smallgemm.matmul(a, b)
        for i in range(t):
            _check(got[i], chain_reference(1.0, a[i], b[i]), f"{shape} product {i}")


def _few_tile_rows(kernel) -> int:
    """The fewest rows (at least 2) the few-rows tile takes: past those the GEMV tile holds
    in register strips (``strips``) and those the narrow tile streams (``stream_from``)."""
    rows, start = kernel.narrow.rows, kernel.narrow.stream_from
    for m in range(max(2, kernel.gemv.strips + 1), kernel.few.up_to + 1):
        if not (start and start <= m and -m % rows <= rows - start):
            return m
    raise AssertionError(f"{kernel.name}: no rows for the few-rows tile")


def _unpacked_route(kernel, a, b):
    """The way ``gemm_unpacked`` takes a lone product of 2-D a and b (exact: one KC block)."""
    size = a.itemsize
    cs_a = a.strides[1] // size
    rs_b, cs_b = (s // size for s in b.strides)
    form = unpacked.unpacked_form(a.shape[0], b.shape[1], cs_a, rs_b, cs_b)
    if form != unpacked.TILES:
        return form
    return unpacked.tile_of(
        kernel.shape, kernel.narrow, kernel.few, kernel.gemv, kernel.resident, a.shape[1], 1 << 30, a, b
    )


def test_stacks_on_every_unpacked_route_equal_the_chain_reference(kernel, dtype):
    """A stack's products on the narrow tile (its loop inlined in the stack loop) and on the
    routes without a tile loop (row dots along A's rows or B's columns, the single-row, the
    transposing and the few-rows streams: a linked call per product), A in order and
    reversed: every product the scalar chain, on one thread and three."""
    rng = np.random.default_rng(12)
    depth = kernel.resident.depth + 5  # past B held in registers
    cases = {  # route: (products, m, k, n, B transposed)
        unpacked.NARROW_TILE: (
            6,
            2 * kernel.narrow.rows + 3,
            depth,
            kernel.narrow.cols(dtype.itemsize),
            False,
        ),
        unpacked.DOTS_OF_A_ROWS: (5, 37, 70, 1, False),
        unpacked.DOTS_OF_B_COLUMNS: (5, 1, 70, 45, True),
        unpacked.GEMV_TILE: (5, 1, 70, 45, False),
        unpacked.TRANSPOSING_STREAM: (5, 3, 70, 45, True),
        # Past the rows the GEMV tile holds in register strips (the kernel's ``strips``).
        unpacked.FEW_TILE: (4, _few_tile_rows(kernel), 70, 5 * kernel.nr(dtype) + 7, False),
    }
    for route, (count, m, k, n, transposed) in cases.items():
        a = random_matrix(rng, (count, m, k), dtype)
        b = random_matrix(rng, (count, n, k), dtype).transpose(0, 2, 1) if transposed else None
        b = random_matrix(rng, (count, k, n), dtype) if b is None else b
        for a_layout in (a, a[:, ::-1]):
            assert _unpacked_route(kernel, a_layout[0], b[0]) == route, (route, a_layout.strides)
            for threads in (1, 3):
                with smallgemm.num_threads(threads):
                    got = smallgemm.matmul(a_layout, b)
                for i in range(count):
                    _check(got[i], chain_reference(1.0, a_layout[i], b[i]), f"route {route} product {i}")


def test_prepacked_products_equal_the_chain_reference(kernel, dtype):
    rng = np.random.default_rng(8)
    in_force.set_block_sizes(
        kernel, dtype, blocking.BlockSizes(mc=4 * kernel.mr(), nc=4 * kernel.nr(dtype), kc=64)
    )
    try:
        b = random_matrix(rng, (201, 150), dtype)
        packed = smallgemm.pack(b)
        for m in (1, 3, 40):
            a = random_matrix(rng, (m, 201), dtype)
            c0 = random_matrix(rng, (m, 150), dtype)
            _check(smallgemm.matmul(a, packed), chain_reference(1.0, a, b), f"{m} rows")
            _check(
                smallgemm.gemm(2.0, a, packed, beta=0.5, c=c0),
                chain_reference(2.0, a, b, 0.5, c0),
                f"{m} rows",
            )
    finally:
        in_force.set_block_sizes(kernel, dtype, None)


def test_a_different_kc_or_configuration_changes_no_bit(dtype):
    """The same products under KC 64, KC 200 and a configuration's KC of 128: one set of bits."""
    rng = np.random.default_rng(9)
    kernel = smallgemm.plan.dispatch.current()
    products = _products(rng, dtype, 400)
    results = []
    for kc in (64, 200, None):
        sizes = blocking.BlockSizes(mc=4 * kernel.mr(), nc=4 * kernel.nr(dtype), kc=kc) if kc else None
        in_force.set_block_sizes(kernel, dtype, sizes)
        try:
            with configured(kc=BySize(128, 128)):
                results.append([smallgemm.matmul(a, b) for _, a, b in products])
        finally:
            in_force.set_block_sizes(kernel, dtype, None)
    for name_index, (name, a, b) in enumerate(products):
        for got in results:
            _check(got[name_index], chain_reference(1.0, a, b), name)


@pytest.mark.parametrize("chunks", [[400], [37, 300, 5, 58], [1, 1, 398]])
def test_gemm_with_alpha_and_beta_one_continues_the_chain(kernel, dtype, chunks):
    """c = a1 @ b1, then gemm(1, a_i, b_i, beta=1, c, overwrite_c=True) for each further
    chunk of k: exactly the whole product [a1 a2 ...] @ [b1; b2; ...], in any chunks."""
    rng = np.random.default_rng(len(chunks))
    k = sum(chunks)
    for m, n in ((4, 300), (130, 70), (1, 50)):
        a, b = random_matrix(rng, (m, k), dtype), random_matrix(rng, (k, n), dtype)
        c = np.zeros((m, n), dtype)
        start = 0
        for size in chunks:
            out = smallgemm.gemm(
                1.0, a[:, start : start + size], b[start : start + size], beta=1.0, c=c, overwrite_c=True
            )
            assert out is c
            start += size
        _check(c, chain_reference(1.0, a, b), f"{m}x{n} in chunks {chunks}")
        c0 = random_matrix(rng, (m, n), dtype)
        _check(
            smallgemm.gemm(1.0, a, b, beta=1.0, c=c0), chain_reference(1.0, a, b, 1.0, c0), f"{m}x{n} from c"
        )
        # In place, as smallgemm.nn accumulates a gradient: A given transposed, an F-ordered C.
        c1 = np.asfortranarray(random_matrix(rng, (m, n), dtype))
        expected = chain_reference(1.0, a, b, 1.0, c1)
        out = smallgemm.gemm(
            1.0, np.ascontiguousarray(a.T), b, beta=1.0, c=c1, trans_a=True, overwrite_c=True
        )
        assert out is c1
        _check(c1, expected, f"{m}x{n} from an F-ordered c, a transposed")


def test_the_exact_switch(dtype):
    """Exact by default; off, row dots sum lane-wise (other bits, still right and the same on
    any thread count); the former name still works, with a warning."""
    rng = np.random.default_rng(10)
    w, x = random_matrix(rng, (300, 1000), dtype), random_matrix(rng, (1000,), dtype)
    assert smallgemm.get_exact()
    assert smallgemm.info()["kernel"]["exact"]
    exact = smallgemm.matmul(w, x)
    _check(exact, chain_reference(1.0, w, x[:, None])[:, 0], "exact")
    with smallgemm.exact(False):
        assert not smallgemm.get_exact() and not smallgemm.info()["kernel"]["exact"]
        assert "not exact" in str(smallgemm.explain(w, x[:, None]))
        results = []
        for threads in (1, 2, 3):
            with smallgemm.num_threads(threads):
                results.append(smallgemm.matmul(w, x))
        assert not np.array_equal(results[0], exact)
        for r in results[1:]:
            _check(r, results[0], "not exact, thread counts")
    assert smallgemm.get_exact()
    with pytest.warns(DeprecationWarning):
        assert smallgemm.get_batch_invariant()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with smallgemm.batch_invariant(False):
            assert not smallgemm.get_exact()
    with pytest.raises(TypeError):
        smallgemm.set_exact(1)
