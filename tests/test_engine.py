"""The blocked engine against the float64 reference: edges, layouts, strides,
alpha/beta, NaN/Inf, inputs untouched and nothing written outside C.

Every test here runs on all three kernels (``kernel`` fixture) and both dtypes.
"""

import itertools

import numpy as np
import pytest
from conftest import forced_kernel, random_matrix
from reference import assert_close

import smallgemm
from smallgemm.drivers.blocked import gemm_entry
from smallgemm.drivers.unpacked import SMALL_DONE, SMALL_REFUSED, unpacked_call, unpacked_entry
from smallgemm.kernels import KERNELS, BySize
from smallgemm.plan import entries, in_force, prepared


def edge_sizes(*sizes):
    """0, 1 and s-1, s, s+1 around each size."""
    out = {0, 1}
    for s in sizes:
        out.update({s - 1, s, s + 1})
    return sorted(x for x in out if x >= 0)


def test_edges_around_tiles_and_blocks(kernel, dtype, tiny_blocks):
    rng = np.random.default_rng(1)
    mr, nr = kernel.mr(), kernel.nr(dtype)
    ms = edge_sizes(mr, tiny_blocks.mc)
    ns = edge_sizes(nr, tiny_blocks.nc)
    ks = edge_sizes(tiny_blocks.kc, 2 * tiny_blocks.kc)
    for m, n, k in itertools.product(ms, ns, ks):
        a = random_matrix(rng, (m, k), dtype)
        b = random_matrix(rng, (k, n), dtype)
        c = smallgemm.gemm(1.0, a, b)
        assert c.shape == (m, n) and c.dtype == dtype
        assert_close(c, 1.0, a, b)


def test_forced_kernel_runs_its_own_compiled_loops(kernel, dtype, limits):
    """``use_kernel`` really selects the kernel: after a blocked and an unpacked product, the
    blocked driver's entry point, the unpacked one and the unpacked routine hold a
    specialisation for its tile and this dtype (the tile's TileShape is part of each
    signature), so the other tests of this kernel ran its code."""
    rng = np.random.default_rng(7)
    a, b = random_matrix(rng, (9, 11), dtype), random_matrix(rng, (11, 40), dtype)
    assert_close(smallgemm.matmul(a, b), 1.0, a, b)  # small: the unpacked path
    limits(unpacked_max_volume=BySize(0, 0), one_thread_unpacked_volume=BySize(0, 0), few_rows_max=0)
    assert_close(smallgemm.matmul(a, b), 1.0, a, b)  # now the blocked driver
    signatures = {
        "gemm_entry": gemm_entry.signatures,
        "unpacked_entry": unpacked_entry.signatures,
        "unpacked_call": list(unpacked_call.linked.compiled),
    }
    for name, held in signatures.items():
        ran = {(sig[0].shape, next(str(t.dtype) for t in sig if hasattr(t, "dtype"))) for sig in held}
        assert (kernel.shape, dtype.name) in ran, f"kernel {kernel.name} never ran {name} with {dtype}"


def test_default_block_sizes_large_k(kernel, dtype):
    """Several KC blocks, several MC blocks and an NC edge with the real block sizes."""
    rng = np.random.default_rng(2)
    sizes = smallgemm.plan.in_force.block_sizes(kernel, dtype)
    m, n, k = sizes.mc + 3, kernel.nr(dtype) * 3 + 1, 2 * sizes.kc + 7
    a = random_matrix(rng, (m, k), dtype)
    b = random_matrix(rng, (k, n), dtype)
    assert_close(smallgemm.gemm(1.0, a, b), 1.0, a, b)


@pytest.mark.parametrize("orders", list(itertools.product("CF", repeat=3)), ids="".join)
def test_all_layouts(kernel, dtype, tiny_blocks, orders):
    rng = np.random.default_rng(3)
    m, n, k = 2 * kernel.mr() + 3, 2 * kernel.nr(dtype) + 5, 13
    a = random_matrix(rng, (m, k), dtype, orders[0])
    b = random_matrix(rng, (k, n), dtype, orders[1])
    c0 = random_matrix(rng, (m, n), dtype, orders[2])
    c = c0.copy(order="K")
    out = smallgemm.gemm(0.5, a, b, beta=-2.0, c=c, overwrite_c=True)
    assert out is c
    assert_close(out, 0.5, a, b, -2.0, c0)


def strided_views(rng, shape, dtype):
    """Views of one logical matrix with negative, non-unit and transposed strides."""
    rows, cols = shape
    big = random_matrix(rng, (3 * rows + 2, 2 * cols + 3), dtype)
    yield "step", big[1 : 1 + 3 * rows : 3, 2 : 2 + 2 * cols : 2]
    yield "negative", big[3 * rows : 3 * rows - 3 * rows : -3, ::-1][:rows, :cols] if rows else big[:0, :cols]
    yield "transposed", np.ascontiguousarray(random_matrix(rng, shape, dtype).T).T
    yield "negative_transposed", random_matrix(rng, (cols, rows), dtype)[::-1, ::-1].T


def test_strided_operands(kernel, dtype, tiny_blocks):
    rng = np.random.default_rng(4)
    m, n, k = kernel.mr() + 2, kernel.nr(dtype) + 3, 11
    for (na, a), (nb, b) in itertools.product(
        list(strided_views(rng, (m, k), dtype)), list(strided_views(rng, (k, n), dtype))
    ):
        assert a.shape == (m, k) and b.shape == (k, n), (na, nb)
        assert_close(smallgemm.gemm(1.0, a, b), 1.0, a, b)


def test_strided_output_and_nothing_written_outside(kernel, dtype, tiny_blocks):
    rng = np.random.default_rng(5)
    m, n, k = kernel.mr() + 1, kernel.nr(dtype) + 1, 12
    a = random_matrix(rng, (m, k), dtype)
    b = random_matrix(rng, (k, n), dtype)
    for view in (np.s_[1 : 1 + 2 * m : 2, 3 : 3 + 2 * n : 2], np.s_[2 * m : 0 : -2, 2 * n : 0 : -2]):
        for transposed in (False, True):
            canvas = np.full((2 * m + 3, 2 * n + 5), np.nan, dtype=dtype)
            if transposed:
                canvas = np.full((2 * n + 5, 2 * m + 3), np.nan, dtype=dtype).T
            c = canvas[view]
            assert c.shape == (m, n)
            before = canvas.copy()
            smallgemm.gemm(1.0, a, b, c=c, overwrite_c=True)
            assert_close(c, 1.0, a, b)
            outside = np.ones(canvas.shape, bool)
            outside[view] = False
            np.testing.assert_array_equal(canvas[outside], before[outside])


@pytest.mark.parametrize(
    "alpha,beta", [(1.0, 0.0), (2.5, 0.0), (1.0, 1.0), (-0.75, 0.5), (0.0, 2.0), (0.0, 0.0)]
)
def test_alpha_beta(kernel, dtype, tiny_blocks, alpha, beta):
    rng = np.random.default_rng(6)
    m, n, k = kernel.mr() + 5, kernel.nr(dtype) + 7, 17
    a = random_matrix(rng, (m, k), dtype)
    b = random_matrix(rng, (k, n), dtype)
    c0 = random_matrix(rng, (m, n), dtype)
    out = smallgemm.gemm(alpha, a, b, beta=beta, c=c0)
    assert_close(out, alpha, a, b, beta, c0)


def test_beta_zero_never_reads_c(kernel, dtype, tiny_blocks):
    rng = np.random.default_rng(7)
    m, n, k = kernel.mr() + 2, kernel.nr(dtype) + 2, 9
    a = random_matrix(rng, (m, k), dtype)
    b = random_matrix(rng, (k, n), dtype)
    c = np.full((m, n), np.nan, dtype=dtype)
    out = smallgemm.gemm(1.0, a, b, beta=0.0, c=c, overwrite_c=True)
    assert np.isfinite(out).all()
    assert_close(out, 1.0, a, b)
    c = np.full((m, n), np.nan, dtype=dtype)
    assert (smallgemm.gemm(0.0, a, b, beta=0.0, c=c, overwrite_c=True) == 0).all()


def test_nan_and_inf_propagate(kernel, dtype, tiny_blocks):
    rng = np.random.default_rng(8)
    m, n, k = kernel.mr() + 3, kernel.nr(dtype) + 3, 14
    a = random_matrix(rng, (m, k), dtype)
    b = random_matrix(rng, (k, n), dtype)
    a[2, 7] = np.nan
    b[11, 4] = np.inf
    b[3, 1] = -np.inf
    got = smallgemm.gemm(1.0, a, b)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))


def test_inputs_never_modified(kernel, dtype, tiny_blocks):
    rng = np.random.default_rng(9)
    m, n, k = kernel.mr() + 1, kernel.nr(dtype) + 1, 12
    a = random_matrix(rng, (m, k), dtype)
    b = random_matrix(rng, (k, n), dtype, "F")
    c = random_matrix(rng, (m, n), dtype)
    copies = [x.copy() for x in (a, b, c)]
    smallgemm.gemm(1.5, a, b, beta=0.5, c=c)  # overwrite_c=False: c is an input
    smallgemm.gemm(1.5, a, b, trans_a=False, trans_b=False)
    for x, x0 in zip((a, b, c), copies):
        np.testing.assert_array_equal(x, x0)


def test_identity_is_exact(kernel, dtype, tiny_blocks):
    """Integer data: A.I = A and I.B = B exactly (matrixmultiply's kernel test)."""
    rng = np.random.default_rng(10)
    m, n = 2 * kernel.mr() + 1, 2 * kernel.nr(dtype) + 1
    a = rng.integers(-50, 50, (m, n)).astype(dtype)
    np.testing.assert_array_equal(smallgemm.gemm(1.0, a, np.eye(n, dtype=dtype)), a)
    np.testing.assert_array_equal(smallgemm.gemm(1.0, np.eye(m, dtype=dtype), a), a)


def test_every_change_of_kernel_or_batch_invariance_reaches_the_next_call(dtype):
    """The prepared state a call takes (``prepared.current_prepared``, which does not ask for the
    kernel while nothing changed) follows every change: kernel forced and restored, batch
    invariance given up and back, through the functions and the context managers."""
    a = np.ones((16, 16), dtype)
    names = [kernel.name for kernel in KERNELS]
    for name in names + names[::-1]:
        with forced_kernel(name):
            assert prepared.current_prepared(dtype).kernel.name == name
            np.testing.assert_array_equal(smallgemm.matmul(a, a), np.full((16, 16), 16, dtype))
            before = smallgemm.get_exact()
            for invariant in (not before, before):  # given up (or back), then restored
                outside = smallgemm.get_exact()
                with smallgemm.exact(invariant):
                    assert prepared.current_prepared(dtype).lane_sums is not invariant
                assert prepared.current_prepared(dtype).lane_sums is not outside
                smallgemm.set_exact(invariant)
                assert prepared.current_prepared(dtype).lane_sums is not invariant
            assert smallgemm.get_exact() is before
    assert prepared.current_prepared(dtype).kernel is smallgemm.plan.dispatch.current()


def test_a_prepared_state_fetches_each_entry_on_first_use(kernel, dtype):
    """A thread's prepared state compiles (or loads) an entry only when a call first needs it:
    a fresh installation's first product compiles what it runs, not every entry."""
    prep = prepared.Prepared(kernel, dtype, in_force.version)
    names = ("blocked", "unpacked", "small", "batched", "small_stack")
    first = (prepared.FirstUse, prepared.FirstSmall)
    assert all(isinstance(getattr(prep, name), first) for name in names)
    rng = np.random.default_rng(5)
    a, b = random_matrix(rng, (5, 7), dtype), random_matrix(rng, (7, 3), dtype)
    c = np.full((5, 3), np.nan, dtype)
    assert prep.unpacked(a, b, c, 1.0, 0.0) == SMALL_DONE
    assert_close(c, 1.0, a, b)
    assert type(prep.unpacked) is type(len)  # the routine's builtin, in the slot
    assert [isinstance(getattr(prep, name), first) for name in names] == [True, False, True, True, True]


def test_the_small_way_in_compiles_nothing_before_a_product_needs_the_unpacked_entry(kernel, dtype):
    """Until some product has needed the unpacked entry, the small-matrix slot sends every
    product to the general path (SMALL_REFUSED) instead of compiling the entry to decide;
    the small-stack slot waits for either the batch entry or the unpacked one."""
    prep = prepared.Prepared(kernel, dtype, in_force.version)
    fresh = entries.Entry(entries.UNPACKED.dispatcher, **entries.UNPACKED.roles)  # nothing fetched yet
    small = prepared.FirstSmall(
        prepared.FirstCall(prep, "small", fresh, prep.small.first.bound), (fresh,), SMALL_REFUSED
    )
    prep.small = small
    a = np.ones((16, 16), dtype)
    c = np.full((16, 16), np.nan, dtype)
    assert prep.small(a, a, c, 1.0, 0.0) == SMALL_REFUSED and prep.small is small and np.isnan(c).all()
    assert not fresh.ready(kernel, dtype)
    fresh.get(kernel, dtype)
    assert prep.small(a, a, c, 1.0, 0.0) == SMALL_DONE and prep.small is not small
    np.testing.assert_array_equal(c, np.full((16, 16), 16, dtype))
    a3, c3 = np.ones((2, 16, 16), dtype), np.full((2, 16, 16), np.nan, dtype)
    stack_bound = prep.small_stack.first.bound
    for ready in ("batched", "unpacked"):
        waited = {
            name: entries.Entry(entry.dispatcher, **entry.roles)
            for name, entry in (("batched", entries.BATCHED), ("unpacked", entries.UNPACKED))
        }
        stack = prepared.FirstSmall(
            prepared.FirstCall(prep, "small_stack", entries.SMALL_STACK, stack_bound),
            tuple(waited.values()),
            SMALL_REFUSED,
        )
        prep.small_stack = stack
        assert prep.small_stack(a3, a3, c3, False) == SMALL_REFUSED and np.isnan(c3).all()
        waited[ready].get(kernel, dtype)
        assert prep.small_stack(a3, a3, c3, False) == SMALL_DONE and prep.small_stack is not stack, ready
        np.testing.assert_array_equal(c3, np.full((2, 16, 16), 16, dtype))
        c3[...] = np.nan
