"""One training step of a dense layer: x [4096, 512], W [512, 2048], gradient g [4096, 2048].

The backward products read W and x transposed, as autograd passes them.
"""

import pytest


@pytest.fixture
def layer(operand):
    return operand(4096, 512), operand(512, 2048), operand(4096, 2048)


def test_forward(product, layer):
    x, w, _ = layer
    product("training", "forward x @ W", x, w)


def test_backward_input(product, layer):
    _, w, g = layer
    product("training", "backward g @ W.T", g, w.T)


def test_backward_weight(product, layer):
    x, _, g = layer
    product("training", "backward x.T @ g", x.T, g)
