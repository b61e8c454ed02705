"""``smallgemm.nn``: a small neural-network library whose products are smallgemm's.

``Linear`` and ``ReLU`` layers, a ``Sequential`` container (``mlp`` builds
one), the softmax cross-entropy loss and the ``SGD``, ``Adam`` and ``Muon``
optimizers, each with its backward pass written out.  The library that
computes the products is a setting (``set_backend``/``use_backend``:
``"smallgemm"`` or ``"numpy"``), so the same code can be timed with both.
With a fixed seed, training is bitwise reproducible for any thread count.
"""

from ..progress import ProgressBar
from .backend import BACKENDS, get_backend, set_backend, use_backend
from .layers import Linear, ReLU
from .losses import SoftmaxCrossEntropy
from .model import Sequential, mlp
from .optim import SGD, Adam, Muon, newton_schulz
from .parameter import Parameter
from .train import accuracy, minibatches, train_step

__all__ = [
    "BACKENDS",
    "SGD",
    "Adam",
    "Linear",
    "Muon",
    "Parameter",
    "ProgressBar",
    "ReLU",
    "Sequential",
    "SoftmaxCrossEntropy",
    "accuracy",
    "get_backend",
    "minibatches",
    "mlp",
    "newton_schulz",
    "set_backend",
    "train_step",
    "use_backend",
]
