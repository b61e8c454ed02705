"""Layers: ``Linear`` (a matrix product plus a bias) and ``ReLU``.

A layer keeps what its backward pass needs from the forward pass; ``backward``
takes the gradient of the loss with respect to the layer's output, adds the
gradients of its parameters into their ``grad`` buffers and returns the
gradient with respect to its input.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import smallgemm

from . import backend
from .parameter import Parameter


class Linear:
    """``y = x @ W + b`` with ``W`` of shape ``(fan_in, fan_out)``.

    The three products of a training step all read the same arrays:
    forward ``x @ W``, backward ``g @ W.T`` and ``x.T @ g``.  The transposes
    are swaps of strides inside ``gemm`` (``trans_a``/``trans_b``), never
    copies, and ``x.T @ g`` is added straight into the weight's gradient
    buffer (``beta = 1``), with no temporary.
    """

    def __init__(self, fan_in: int, fan_out: int, rng: np.random.Generator, dtype=np.float32) -> None:
        # He initialisation: keeps the variance of ReLU activations from layer to layer.
        weight = rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)
        self.weight = Parameter(weight.astype(dtype), "weight")
        self.bias = Parameter(np.zeros(fan_out, dtype=dtype), "bias")
        self._x: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        self._x = x
        y = backend.gemm(1.0, x, self.weight.value)
        y += self.bias.value
        return y

    def backward(self, grad_y: np.ndarray) -> np.ndarray:
        backend.gemm(1.0, self._x, grad_y, beta=1.0, c=self.weight.grad, trans_a=True)  # grad_W += x.T @ g
        self.bias.grad += grad_y.sum(axis=0)
        return backend.gemm(1.0, grad_y, self.weight.value, trans_b=True)  # g @ W.T

    def parameters(self) -> list[Parameter]:
        return [self.weight, self.bias]

    def inference(self) -> Callable[[np.ndarray], np.ndarray]:
        """``forward`` without what ``backward`` needs, for the weights as they are now: with
        the smallgemm backend ``W`` is packed once (``smallgemm.pack``), so every call reads
        the panels the kernel uses in place.  The bits are those of ``forward``."""
        bias = self.bias.value.copy()
        if backend.get_backend() == "smallgemm":
            weight, product = smallgemm.pack(self.weight.value), smallgemm.matmul
        else:
            weight, product = self.weight.value.copy(), np.matmul

        def linear(x: np.ndarray) -> np.ndarray:
            y = product(x, weight)
            y += bias
            return y

        return linear


class ReLU:
    """``max(x, 0)``, elementwise; its gradient passes where ``x > 0``."""

    def __init__(self) -> None:
        self._active: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        self._active = x > 0
        return np.maximum(x, 0)

    def backward(self, grad_y: np.ndarray) -> np.ndarray:
        return grad_y * self._active

    def parameters(self) -> list[Parameter]:
        return []

    def inference(self) -> Callable[[np.ndarray], np.ndarray]:
        """``forward`` without keeping the mask ``backward`` needs."""
        return lambda x: np.maximum(x, 0)
