"""Optimizers: ``SGD`` (with momentum), ``Adam`` and ``Muon``.

Each takes a list of :class:`Parameter` and, on ``step()``, updates their
values in place from the gradients accumulated in their ``grad`` buffers.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from . import backend
from .parameter import Parameter


class SGD:
    """Stochastic gradient descent with (heavy-ball) momentum.

    ``v = momentum * v + grad``; ``value -= lr * v``.
    """

    def __init__(self, params: Iterable[Parameter], lr: float, momentum: float = 0.0) -> None:
        self.params = list(params)
        self.lr = lr
        self.momentum = momentum
        self._velocity = [np.zeros_like(p.value) for p in self.params]

    def step(self) -> None:
        for p, v in zip(self.params, self._velocity):
            v *= self.momentum
            v += p.grad
            p.value -= self.lr * v


class Adam:
    """Adam (Kingma & Ba): steps scaled by running estimates of the gradient's moments."""

    def __init__(
        self,
        params: Iterable[Parameter],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.params = list(params)
        self.lr = lr
        self.beta1, self.beta2 = betas
        self.eps = eps
        self._steps = 0
        self._mean = [np.zeros_like(p.value) for p in self.params]
        self._square = [np.zeros_like(p.value) for p in self.params]

    def step(self) -> None:
        self._steps += 1
        correction1 = 1.0 - self.beta1**self._steps  # the moments start at 0: unbias them
        correction2 = 1.0 - self.beta2**self._steps
        for p, m, v in zip(self.params, self._mean, self._square):
            m *= self.beta1
            m += (1.0 - self.beta1) * p.grad
            v *= self.beta2
            v += (1.0 - self.beta2) * np.square(p.grad)
            p.value -= (self.lr / correction1) * m / (np.sqrt(v / correction2) + self.eps)


# Quintic Newton–Schulz coefficients of Muon (Keller Jordan): they push every
# singular value into roughly [0.7, 1.2] within 5 steps.
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def newton_schulz(g: np.ndarray, steps: int = 5) -> np.ndarray:
    """An approximate orthogonalisation of ``g``: ``U V.T`` for its SVD ``U S V.T``.

    Iterates ``X <- a X + (b A + c A A) X`` with ``A = X X.T``, on the wide
    orientation of ``g`` (the transpose of a tall one, a view), so that the
    products are small square ``A`` s; each is one ``gemm`` into a buffer.
    """
    a, b, c = NS_COEFFICIENTS
    tall = g.shape[0] > g.shape[1]
    x = g.T if tall else g
    x = x / (np.sqrt(np.sum(np.square(x))) + 1e-7)  # Frobenius norm 1: every singular value <= 1
    gram = np.empty((x.shape[0], x.shape[0]), dtype=x.dtype)
    poly = np.empty_like(gram)
    x_next = np.empty_like(x)
    for _ in range(steps):
        backend.gemm(1.0, x, x, c=gram, trans_b=True)  # A = X X.T
        poly[...] = gram
        backend.gemm(c, gram, gram, beta=b, c=poly)  # b A + c A A
        x_next[...] = x
        backend.gemm(1.0, poly, x, beta=a, c=x_next)  # a X + (b A + c A A) X
        x, x_next = x_next, x
    return x.T if tall else x


class Muon:
    """Muon: momentum SGD whose update of each weight matrix is orthogonalised.

    For every 2-D parameter: ``buf = momentum * buf + grad``; the update
    (Nesterov: ``grad + momentum * buf``) goes through :func:`newton_schulz`
    and is applied as ``value -= lr * sqrt(max(1, fan_out / fan_in)) * O``
    (weights are ``(fan_in, fan_out)``, as in ``Linear``).  Parameters of
    other shapes (biases) are left to an :class:`Adam` with ``adam_lr``.
    """

    def __init__(
        self,
        params: Iterable[Parameter],
        lr: float = 0.02,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_steps: int = 5,
        adam_lr: float = 1e-3,
    ) -> None:
        params = list(params)
        self.matrices = [p for p in params if p.value.ndim == 2]
        self.fallback = Adam([p for p in params if p.value.ndim != 2], lr=adam_lr)
        self.lr = lr
        self.momentum = momentum
        self.nesterov = nesterov
        self.ns_steps = ns_steps
        self._buffers = [np.zeros_like(p.value) for p in self.matrices]

    def step(self) -> None:
        for p, buf in zip(self.matrices, self._buffers):
            buf *= self.momentum
            buf += p.grad
            update = p.grad + self.momentum * buf if self.nesterov else buf
            fan_in, fan_out = p.value.shape
            p.value -= (self.lr * max(1.0, fan_out / fan_in) ** 0.5) * newton_schulz(update, self.ns_steps)
        self.fallback.step()
