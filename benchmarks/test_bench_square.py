"""Square products of seed 000 (M = N, K = 1024) and the 1024³ cube."""

import pytest

SIZES = (128, 256, 512, 1024, 2048, 4096)


@pytest.mark.parametrize("size", SIZES)
def test_square(product, operand, size):
    product("square", f"{size}x{size}x1024", operand(size, 1024), operand(1024, size))


def test_cube(product, operand):
    product("cube", "1024x1024x1024", operand(1024, 1024), operand(1024, 1024))
