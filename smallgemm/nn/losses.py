"""Loss: softmax cross-entropy of class scores ("logits") against integer labels."""

from __future__ import annotations

import numpy as np


class SoftmaxCrossEntropy:
    """Mean over the batch of ``-log softmax(logits)[label]``.

    Computed through log-softmax with the row maximum subtracted, so large
    logits do not overflow.  Its gradient is ``(softmax(logits) - onehot) / n``.
    """

    def __init__(self) -> None:
        self._probs: np.ndarray | None = None
        self._labels: np.ndarray | None = None

    def forward(self, logits: np.ndarray, labels: np.ndarray) -> float:
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        self._probs = np.exp(log_probs)
        self._labels = labels
        return float(-log_probs[np.arange(len(labels)), labels].mean())

    def backward(self) -> np.ndarray:
        """Gradient of the last ``forward``'s loss with respect to its logits."""
        n = len(self._labels)
        grad = self._probs.copy()
        grad[np.arange(n), self._labels] -= 1
        grad /= n
        return grad
