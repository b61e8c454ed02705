"""The pieces of a training loop: shuffled minibatches, one step, accuracy."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .losses import SoftmaxCrossEntropy
from .model import Sequential


def minibatches(n: int, batch_size: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Indices of ``n`` samples in an order drawn from ``rng``, ``batch_size`` at a time.

    The seeded ``Generator`` is the only source of randomness: a fixed seed
    gives the same batches, whatever the number of threads.
    """
    order = rng.permutation(n)
    for start in range(0, n, batch_size):
        yield order[start : start + batch_size]


def train_step(
    model: Sequential, loss_fn: SoftmaxCrossEntropy, optimizer, x: np.ndarray, y: np.ndarray
) -> float:
    """One forward, backward and optimizer step on the batch ``(x, y)``; returns its loss."""
    model.zero_grad()
    loss = loss_fn.forward(model.forward(x), y)
    model.backward(loss_fn.backward())
    optimizer.step()
    return loss


def accuracy(model: Sequential, x: np.ndarray, y: np.ndarray) -> float:
    """The fraction of samples whose highest-scoring class is their label."""
    return float(np.mean(model.forward(x).argmax(axis=1) == y))
