"""Train an MLP on scikit-learn's 8x8 handwritten digits, with smallgemm and with NumPy.

    python -m smallgemm.nn.examples.digits [--epochs 20] [--optimizer muon] [--threads N]

The same seeded training runs twice, once with each matmul backend (the
optimizer's learning rate decays linearly to 0 over the epochs); each
epoch draws a progress bar and ends with the loss, the test accuracy and the
epoch's time.  The digits ship with scikit-learn (no download); it is the
optional ``nn`` extra: ``pip install 'smallgemm[nn]'``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import smallgemm
from smallgemm import nn

SEED = 0
HIDDEN = (128, 128)
TEST_FRACTION = 0.2


def load_data(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Train and test splits ``(x_train, y_train, x_test, y_test)``, pixels scaled to [0, 1], float32."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise SystemExit(
            "this example needs scikit-learn for its digits data set: pip install 'smallgemm[nn]' "
            "(or pip install scikit-learn)"
        ) from None
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target
    order = rng.permutation(len(y))
    n_test = int(len(y) * TEST_FRACTION)
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def make_optimizer(name: str, params: list[nn.Parameter]):
    if name == "muon":
        return nn.Muon(params, lr=0.02, adam_lr=3e-3)
    if name == "adam":
        return nn.Adam(params, lr=1e-3)
    return nn.SGD(params, lr=0.05, momentum=0.9)


def train(args: argparse.Namespace, backend: str) -> tuple[list[float], float]:
    """Train from ``SEED`` with ``backend``'s products; return the epoch times and the test accuracy."""
    rng = np.random.default_rng(SEED)
    x_train, y_train, x_test, y_test = load_data(rng)
    model = nn.mlp([x_train.shape[1], *HIDDEN, 10], rng)
    optimizer = make_optimizer(args.optimizer, model.parameters())
    loss_fn = nn.SoftmaxCrossEntropy()
    n_batches = -(-len(y_train) // args.batch_size)
    base_lr = optimizer.lr
    times = []
    with nn.use_backend(backend):
        for epoch in range(1, args.epochs + 1):
            optimizer.lr = base_lr * (1 - (epoch - 1) / args.epochs)  # linear decay: settles the weights
            bar = nn.ProgressBar(n_batches, prefix=f"{backend:>9} epoch {epoch:2d}/{args.epochs}")
            losses = []
            start = time.perf_counter()
            for i, batch in enumerate(nn.minibatches(len(y_train), args.batch_size, rng), 1):
                losses.append(nn.train_step(model, loss_fn, optimizer, x_train[batch], y_train[batch]))
                bar.update(i, f"loss {losses[-1]:.4g}")
            times.append(time.perf_counter() - start)
            test_accuracy = nn.accuracy(model, x_test, y_test)
            bar.close(
                f"loss {np.mean(losses):.4g}  test {100 * test_accuracy:.2f} %  {1e3 * times[-1]:.1f} ms"
            )
    return times, test_accuracy


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--optimizer", choices=("muon", "adam", "sgd"), default="muon")
    parser.add_argument("--threads", type=int, default=smallgemm.get_num_threads())
    args = parser.parse_args(argv)

    from threadpoolctl import threadpool_limits

    results = {}
    with smallgemm.num_threads(args.threads), threadpool_limits(args.threads, user_api="blas"):
        for backend in nn.BACKENDS:
            results[backend] = train(args, backend)
    print(
        f"\nMLP 64-{'-'.join(map(str, HIDDEN))}-10, {args.optimizer}, batch {args.batch_size}, "
        f"{args.threads} thread(s); median time per epoch (the first includes compilation):"
    )
    for backend, (times, test_accuracy) in results.items():
        print(
            f"  {backend:>9}: {1e3 * statistics.median(times):7.2f} ms per epoch, test accuracy {100 * test_accuracy:.2f} %"
        )
    ratio = statistics.median(results["numpy"][0]) / statistics.median(results["smallgemm"][0])
    print(f"  ratio numpy / smallgemm: {ratio:.2f}")


if __name__ == "__main__":
    main()
