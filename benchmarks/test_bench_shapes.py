"""Shapes where a square-tuned library can stumble: few rows, many tiny products, transposes."""

import pytest


@pytest.mark.parametrize("layout", ["row-major", "transposed"])
@pytest.mark.parametrize("m", [1, 4, 8, 16])
def test_few_rows(product, operand, m, layout):
    """[m, 512] @ [512, 2048]: B C-contiguous, or the transpose of a C-contiguous [2048, 512]."""
    b = operand(512, 2048) if layout == "row-major" else operand(2048, 512).T
    product("few-rows", f"{m}x512 @ 512x2048 B {layout}", operand(m, 512), b)


def test_batched_small(product, operand):
    product("batched", "1000x16x16 @ 1000x16x16", operand(1000, 16, 16), operand(1000, 16, 16))


def test_batched_medium(product, operand):
    """A stack of attention-sized products: shared out between the threads, one product per task."""
    product("batched", "8x512x512 @ 8x512x512", operand(8, 512, 512), operand(8, 512, 512))


def test_a_transposed(product, operand):
    product("transposed", "a.T @ b 1024", operand(1024, 1024).T, operand(1024, 1024))


def test_b_transposed(product, operand):
    product("transposed", "a @ b.T 1024", operand(1024, 1024), operand(1024, 1024).T)
