"""Unpacked products on the main tile: the smaller tiles on C's edges, and the mid-size
products that skip packing on one thread.  Against the reference, and bitwise against
the blocked driver (every tile gives an element the same FMA chain)."""

import numpy as np
import pytest
from conftest import blocked_product, random_matrix
from reference import assert_close

import smallgemm
from smallgemm.kernels import KERNELS, kernel_by_name
from smallgemm.plan import in_force, rules


def edge_shapes(kernel, dtype):
    """(m, n): past the few-rows sizes (the main tile's products), with row edges the
    few-rows tile takes (one row, one short of its rows, all of them), one it may not,
    none; a column edge the narrow tile takes, one wider than it, none."""
    mr, nr = kernel.mr(), kernel.nr(dtype)
    narrow, few = kernel.narrow.cols(dtype.itemsize), kernel.few.rows
    base = mr * (kernel.few.up_to // mr + 1)
    rows = sorted({base, base + 1, base + few - 1, base + few, base + min(mr - 1, 2 * few + 1)})
    cols = sorted({2 * nr, nr + 1, nr + narrow, 2 * nr + min(nr - 1, narrow + 1)})
    return [(m, n) for m in rows for n in cols]


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_edge_tiles_against_the_reference_and_the_blocked_bits(kernel, dtype, layout):
    rng = np.random.default_rng(11)
    for m, n in edge_shapes(kernel, dtype):
        for k in (3, 40):
            if layout == "strided":
                a = random_matrix(rng, (2 * m, 3 * k), dtype)[::2, ::3]
            else:
                a = random_matrix(rng, (m, k), dtype, order=layout)
            b = random_matrix(rng, (k, n), dtype)
            got = smallgemm.matmul(a, b)
            assert_close(got, 1.0, a, b)
            np.testing.assert_array_equal(got, blocked_product(a, b), err_msg=f"{m}x{n}x{k}")


def test_edge_tiles_write_nothing_outside_c(kernel, dtype):
    rng = np.random.default_rng(12)
    for m, n in edge_shapes(kernel, dtype):
        a, b = random_matrix(rng, (m, 9), dtype), random_matrix(rng, (9, n), dtype)
        frame = np.full((m + 2, n + 3), np.nan, dtype)
        smallgemm.gemm(1.0, a, b, beta=0.0, c=frame[1 : m + 1, 1 : n + 1], overwrite_c=True)
        assert_close(frame[1 : m + 1, 1 : n + 1], 1.0, a, b)
        inside = np.zeros(frame.shape, bool)
        inside[1 : m + 1, 1 : n + 1] = True
        assert np.isnan(frame[~inside]).all(), f"{m}x{n}: written outside C"


def _decides(m, n, k, dtype, one_thread, a_row_pad=0, kc=None):
    """Whether the avx512 kernel's state would skip packing (on one thread, or several)."""
    a = np.zeros((m, k + a_row_pad), dtype)[:, :k]
    b = np.zeros((k, n), dtype)
    kernel = kernel_by_name("avx512")
    kc = kc or in_force.block_sizes(kernel, dtype).kc
    config = in_force.config_of(kernel)
    volume = config.one_thread_unpacked_volume.of(dtype.itemsize) if one_thread else 0
    return rules.use_unpacked(config, m, n, k, a, b, 0, kc, volume)


def test_mid_size_products_skip_packing_only_with_their_kernels(dtype):
    """Mid-size products skip packing on one thread with the kernels measured to gain
    from it (the AVX-512 tiles), never with the others."""
    for kernel in KERNELS:
        config = kernel.config
        volume = config.one_thread_unpacked_volume.of(dtype.itemsize)
        if kernel.name == "avx512":
            assert volume > config.unpacked_max_volume.of(dtype.itemsize)
        else:
            assert volume == 0


def test_mid_size_products_skip_packing_only_on_one_thread_within_one_kc_block(dtype):
    config = kernel_by_name("avx512").config
    side = round(config.unpacked_max_volume.of(dtype.itemsize) ** (1 / 3)) + 30
    assert _decides(side, side, side, dtype, one_thread=True)
    assert not _decides(side, side, side, dtype, one_thread=False)
    assert not _decides(side, side, side, dtype, one_thread=True, kc=side - 1)
    limit = config.one_thread_unpacked_volume.of(dtype.itemsize)
    big = round(limit ** (1 / 3)) + 1
    assert not _decides(big, big, big, dtype, one_thread=True)
    # A's rows 4 KiB apart would share L1 sets: packed.
    pad = rules.ALIASED_ROW_BYTES // dtype.itemsize - side
    assert not _decides(side, side, side, dtype, one_thread=True, a_row_pad=pad)
    assert _decides(side, side, side, dtype, one_thread=True, a_row_pad=pad + 1)


def test_mid_size_products_on_one_thread_give_the_blocked_bits(kernel, dtype):
    rng = np.random.default_rng(13)
    side = round(kernel.config.unpacked_max_volume.of(dtype.itemsize) ** (1 / 3))
    m, n, k = side + 17, side + 9, side + 5  # past the small products, with edges
    a, b = random_matrix(rng, (m, k), dtype), random_matrix(rng, (k, n), dtype)
    with smallgemm.num_threads(1):
        got = smallgemm.matmul(a, b)
        assert_close(got, 1.0, a, b)
        np.testing.assert_array_equal(got, blocked_product(a, b))
    with smallgemm.num_threads(2):
        np.testing.assert_array_equal(smallgemm.matmul(a, b), got)
