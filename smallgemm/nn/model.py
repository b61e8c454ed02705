"""``Sequential``: layers applied one after the other, and ``mlp`` to build one."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np

from .layers import Linear, ReLU
from .parameter import Parameter


class Sequential:
    """Applies its layers in order; ``backward`` runs their backward passes in reverse."""

    def __init__(self, *layers) -> None:
        self.layers = list(layers)

    def forward(self, x: np.ndarray) -> np.ndarray:
        for layer in self.layers:
            x = layer.forward(x)
        return x

    def backward(self, grad: np.ndarray) -> np.ndarray:
        for layer in reversed(self.layers):
            grad = layer.backward(grad)
        return grad

    def parameters(self) -> list[Parameter]:
        return [p for layer in self.layers for p in layer.parameters()]

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.zero_grad()

    def inference(self) -> Callable[[np.ndarray], np.ndarray]:
        """The forward pass for prediction, with the weights as they are now: each ``Linear``'s
        weights packed once for the kernel in force (``Linear.inference``), nothing kept for a
        backward pass.  It gives ``forward``'s bits; weights changed later (more training)
        need a new one.  ``x`` is a batch ``(rows, fan_in)`` or one sample ``(fan_in,)``: one
        sample at a time is where the packed weights pay most (docs/performance.md)."""
        steps = [layer.inference() for layer in self.layers]

        def predict(x: np.ndarray) -> np.ndarray:
            for step in steps:
                x = step(x)
            return x

        return predict


def mlp(sizes: Sequence[int], rng: np.random.Generator, dtype=np.float32) -> Sequential:
    """A multilayer perceptron ``Linear, ReLU, ..., Linear`` through the layer ``sizes``."""
    layers: list = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        layers += [Linear(fan_in, fan_out, rng, dtype), ReLU()]
    return Sequential(*layers[:-1])  # no ReLU after the output layer
