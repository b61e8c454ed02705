"""``Parameter``: a trainable array and the gradient accumulated into it."""

from __future__ import annotations

import numpy as np


class Parameter:
    """A trainable array ``value`` and its gradient buffer ``grad`` (same shape and dtype).

    Backward passes add into ``grad`` (several batches or uses may accumulate);
    the optimizers read it and update ``value`` in place; ``zero_grad`` clears it.
    """

    def __init__(self, value: np.ndarray, name: str = "") -> None:
        self.value = value
        self.grad = np.zeros_like(value)
        self.name = name

    def zero_grad(self) -> None:
        self.grad[...] = 0

    def __repr__(self) -> str:
        return f"Parameter({self.name!r}, shape={self.value.shape}, dtype={self.value.dtype})"
