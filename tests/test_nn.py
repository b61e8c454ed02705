"""smallgemm.nn: gradients against finite differences, no copies of transposes,
reproducible training across thread counts, optimizers against plain references."""

import argparse
import sys
import tracemalloc

import numpy as np
import pytest

import smallgemm
from smallgemm import nn
from smallgemm.nn import backend
from smallgemm.plan import runners


def numeric_grad(f, x, eps=1e-6):
    """Central finite differences of the scalar ``f()`` with respect to each element of ``x`` (in place)."""
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        saved = x[i]
        x[i] = saved + eps
        up = f()
        x[i] = saved - eps
        down = f()
        x[i] = saved
        grad[i] = (up - down) / (2 * eps)
    return grad


def assert_grad(analytic, f, x):
    np.testing.assert_allclose(analytic, numeric_grad(f, x), rtol=1e-6, atol=1e-8)


# ---- gradients, float64 ----------------------------------------------------------------------------


def test_linear_gradients():
    rng = np.random.default_rng(0)
    layer = nn.Linear(4, 3, rng, dtype=np.float64)
    layer.bias.value[:] = rng.standard_normal(3)
    x = rng.standard_normal((5, 4))
    weights = rng.standard_normal((5, 3))  # loss = sum(weights * y): dloss/dy = weights

    def loss():
        return float(np.sum(weights * layer.forward(x)))

    loss()
    grad_x = layer.backward(weights)
    assert_grad(layer.weight.grad, loss, layer.weight.value)
    assert_grad(layer.bias.grad, loss, layer.bias.value)
    assert_grad(grad_x, loss, x)


def test_linear_accumulates_gradients():
    rng = np.random.default_rng(1)
    layer = nn.Linear(4, 3, rng, dtype=np.float64)
    x, g = rng.standard_normal((5, 4)), rng.standard_normal((5, 3))
    layer.forward(x)
    layer.backward(g)
    layer.backward(g)
    np.testing.assert_allclose(layer.weight.grad, 2 * x.T @ g, rtol=1e-12)
    np.testing.assert_allclose(layer.bias.grad, 2 * g.sum(axis=0), rtol=1e-12)


def test_relu_gradient():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 5))
    x[np.abs(x) < 0.1] = 0.5  # away from the kink, where finite differences are exact
    weights = rng.standard_normal((6, 5))
    relu = nn.ReLU()

    def loss():
        return float(np.sum(weights * relu.forward(x)))

    loss()
    assert_grad(relu.backward(weights), loss, x)


def test_softmax_cross_entropy_gradient():
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((7, 4)) * 3
    labels = rng.integers(0, 4, 7)
    loss_fn = nn.SoftmaxCrossEntropy()
    value = loss_fn.forward(logits, labels)
    assert_grad(loss_fn.backward(), lambda: loss_fn.forward(logits, labels), logits)
    # The value itself: mean of -log softmax at the labels.
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    assert value == pytest.approx(-np.mean(np.log(probs[np.arange(7), labels])), rel=1e-12)


def test_softmax_cross_entropy_large_logits_do_not_overflow():
    loss_fn = nn.SoftmaxCrossEntropy()
    assert loss_fn.forward(np.array([[1000.0, 0.0]]), np.array([0])) == pytest.approx(0.0)


def test_sequential_gradients():
    rng = np.random.default_rng(4)
    model = nn.mlp([4, 6, 5, 3], rng, dtype=np.float64)
    x = rng.standard_normal((8, 4))
    labels = rng.integers(0, 3, 8)
    loss_fn = nn.SoftmaxCrossEntropy()

    def loss():
        return loss_fn.forward(model.forward(x), labels)

    loss()
    grad_x = model.backward(loss_fn.backward())
    for p in model.parameters():
        assert_grad(p.grad, loss, p.value)
    assert_grad(grad_x, loss, x)


# ---- no copies of transposed operands ------------------------------------------------------------------


def test_linear_passes_its_own_buffers_and_copies_nothing(monkeypatch):
    rng = np.random.default_rng(5)
    layer = nn.Linear(64, 32, rng)
    x = rng.standard_normal((2048, 64)).astype(np.float32)
    g = rng.standard_normal((2048, 32)).astype(np.float32)
    layer.forward(x)
    layer.backward(g)  # warm: compile, allocate smallgemm's reusable workspace

    calls = []
    real_gemm = smallgemm.gemm

    def recording_gemm(alpha, a, b, beta=0.0, c=None, **flags):
        calls.append((a, b, c, flags))
        return real_gemm(alpha, a, b, beta, c, **flags)

    def no_copy(*args, **kwargs):
        raise AssertionError("np.ascontiguousarray was called")

    monkeypatch.setattr(smallgemm, "gemm", recording_gemm)
    monkeypatch.setattr(np, "ascontiguousarray", no_copy)
    grad_w = layer.weight.grad
    before = grad_w.copy()
    layer.forward(x)
    tracemalloc.start()
    try:
        grad_x = layer.backward(g)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    own = {"x": x, "g": g, "W": layer.weight.value, "grad_W": grad_w}
    assert len(calls) == 3  # x @ W, x.T @ g (accumulated), g @ W.T
    for a, b, _, _ in calls:
        for operand in (a, b):
            assert any(operand is buf or np.shares_memory(operand, buf) for buf in own.values())
    (_, _, _, _fwd), (a, b, c, acc), (a2, b2, _, bwd) = calls
    assert (
        a is x and b is g and c is grad_w and acc == {"trans_a": True, "trans_b": False, "overwrite_c": True}
    )
    assert a2 is g and b2 is layer.weight.value and bwd["trans_b"] and not bwd["trans_a"]
    # The gradient was accumulated in place into the layer's buffer.
    assert layer.weight.grad is grad_w
    np.testing.assert_allclose(grad_w, before + x.T.astype(np.float64) @ g, rtol=1e-4, atol=1e-2)
    # Backward allocates grad_x and nothing the size of a transposed operand (g alone is 256 KiB).
    assert peak < grad_x.nbytes + g.nbytes // 4, (peak, grad_x.nbytes)


# ---- training: loss goes down, bitwise identical for 1 and 2 threads -----------------------------------


def synthetic_data(rng, n=512, features=16, classes=3):
    centers = rng.standard_normal((classes, features)) * 2
    labels = rng.integers(0, classes, n)
    x = (centers[labels] + rng.standard_normal((n, features))).astype(np.float32)
    return x, labels


OPTIMIZERS = {
    "sgd": lambda p: nn.SGD(p, lr=0.05, momentum=0.9),
    "adam": lambda p: nn.Adam(p, lr=3e-3),
    "muon": lambda p: nn.Muon(p, lr=0.02),
}


def train(threads, optimizer, epochs=3, seed=0):
    """Losses and final weights of a seeded run; batch 128 and width 256 make products big
    enough (``rules.parallel_min_volume``) for smallgemm to split them between threads."""
    rng = np.random.default_rng(seed)
    x, y = synthetic_data(rng)
    model = nn.mlp([16, 256, 256, 3], rng)
    opt = OPTIMIZERS[optimizer](model.parameters())
    loss_fn = nn.SoftmaxCrossEntropy()
    losses = []
    with smallgemm.num_threads(threads):
        for _ in range(epochs):
            for batch in nn.minibatches(len(y), 128, rng):
                losses.append(nn.train_step(model, loss_fn, opt, x[batch], y[batch]))
    return np.array(losses), [p.value for p in model.parameters()]


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_training_reduces_loss_and_is_reproducible_across_threads(optimizer, monkeypatch):
    parallel_runs = []
    for name in ("run_parallel", "run_unpacked_parallel"):
        real = getattr(runners, name)
        monkeypatch.setattr(runners, name, lambda *args, real=real: parallel_runs.append(1) or real(*args))
    losses1, weights1 = train(1, optimizer)
    assert not parallel_runs
    losses2, weights2 = train(2, optimizer)
    assert parallel_runs  # the 2-thread run really split products between threads
    assert losses1[-4:].mean() < 0.5 * losses1[:4].mean()
    assert np.array_equal(losses1, losses2)
    assert all(np.array_equal(w1, w2) for w1, w2 in zip(weights1, weights2))


def test_numpy_backend_trains_the_same_model():
    with nn.use_backend("numpy"):
        assert nn.get_backend() == "numpy"
        losses_np, _ = train(1, "sgd", epochs=1)
    assert nn.get_backend() == "smallgemm"
    losses_sg, _ = train(1, "sgd", epochs=1)
    np.testing.assert_allclose(losses_np, losses_sg, rtol=1e-4)


@pytest.mark.parametrize("name", backend.BACKENDS)
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (2.0, 0.0), (1.0, 1.0), (-0.5, 3.0)])
def test_backend_gemm_with_and_without_c(name, alpha, beta):
    rng = np.random.default_rng(6)
    a, b, c = rng.standard_normal((5, 4)), rng.standard_normal((3, 5)), rng.standard_normal((4, 3))
    want = alpha * a.T @ b.T + beta * c
    with nn.use_backend(name):
        got = backend.gemm(alpha, a, b, beta=beta, c=c, trans_a=True, trans_b=True)
        fresh = backend.gemm(alpha, a, b, trans_a=True, trans_b=True)
    assert got is c
    np.testing.assert_allclose(c, want, rtol=1e-12)
    np.testing.assert_allclose(fresh, alpha * a.T @ b.T, rtol=1e-12)


@pytest.mark.parametrize("name", backend.BACKENDS)
def test_inference_gives_the_forward_passs_bits_for_the_weights_it_was_made_with(name):
    """``Sequential.inference``: one sample (1-D or one row), a few and a batch, float32 and
    float64, the bits of ``forward``; with smallgemm each ``Linear`` runs on packed weights
    (no other product); weights changed afterwards leave it as it was."""
    for dtype in (np.float32, np.float64):
        rng = np.random.default_rng(8)
        model = nn.mlp([70, 300, 40, 10], rng, dtype)
        with nn.use_backend(name):
            predict = model.inference()
            for x in (rng.standard_normal(70), rng.standard_normal((1, 70)), rng.standard_normal((5, 70))):
                x = x.astype(dtype)
                got = predict(x)
                assert got.dtype == dtype and got.shape == (*x.shape[:-1], 10)
                np.testing.assert_array_equal(got, model.forward(np.atleast_2d(x)).reshape(got.shape))
            batch = rng.standard_normal((64, 70)).astype(dtype)
            before = predict(batch)
            np.testing.assert_array_equal(before, model.forward(batch))
            for p in model.parameters():
                p.value += 1
            np.testing.assert_array_equal(predict(batch), before)
            assert not np.array_equal(model.forward(batch), before)


def test_inference_multiplies_packed_weights(monkeypatch):
    """With the smallgemm backend, every ``Linear`` of an inference multiplies its packed weights."""
    operands = []
    real = smallgemm.matmul
    monkeypatch.setattr(smallgemm, "matmul", lambda x, w, **kw: operands.append(w) or real(x, w, **kw))
    model = nn.mlp([20, 30, 5], np.random.default_rng(1))
    predict = model.inference()
    predict(np.ones(20, np.float32))
    assert len(operands) == 2 and all(isinstance(w, smallgemm.PackedMatrix) for w in operands)


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="unknown backend"):
        nn.set_backend("torch")


# ---- optimizers against plain float64 references ---------------------------------------------------------


def make_params(rng, shapes):
    return [nn.Parameter(rng.standard_normal(shape)) for shape in shapes]


def run_steps(optimizer, params, grads):
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad[...] = g
        optimizer.step()
    return [p.value for p in params]


SHAPES = [(6, 4), (4, 7), (4,)]


def grads_for(rng, steps=3):
    return [[rng.standard_normal(s) for s in SHAPES] for _ in range(steps)]


def test_sgd_momentum_matches_reference():
    rng = np.random.default_rng(7)
    params = make_params(rng, SHAPES)
    values = [p.value.copy() for p in params]
    grads = grads_for(rng)
    run_steps(nn.SGD(params, lr=0.1, momentum=0.9), params, grads)
    velocity = [np.zeros(s) for s in SHAPES]
    for step_grads in grads:
        for i, g in enumerate(step_grads):
            velocity[i] = 0.9 * velocity[i] + g
            values[i] = values[i] - 0.1 * velocity[i]
    for p, want in zip(params, values):
        np.testing.assert_allclose(p.value, want, rtol=1e-13, atol=1e-15)


def adam_reference(values, grads, lr, b1=0.9, b2=0.999, eps=1e-8):
    m = [np.zeros_like(v) for v in values]
    s = [np.zeros_like(v) for v in values]
    for t, step_grads in enumerate(grads, 1):
        for i, g in enumerate(step_grads):
            m[i] = b1 * m[i] + (1 - b1) * g
            s[i] = b2 * s[i] + (1 - b2) * g * g
            values[i] = values[i] - lr * (m[i] / (1 - b1**t)) / (np.sqrt(s[i] / (1 - b2**t)) + eps)
    return values


def test_adam_matches_reference():
    rng = np.random.default_rng(8)
    params = make_params(rng, SHAPES)
    grads = grads_for(rng)
    want = adam_reference([p.value.copy() for p in params], grads, lr=0.01)
    run_steps(nn.Adam(params, lr=0.01), params, grads)
    for p, w in zip(params, want):
        np.testing.assert_allclose(p.value, w, rtol=1e-13, atol=1e-15)


def newton_schulz_reference(g, steps=5):
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g / (np.linalg.norm(g) + 1e-7)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


def test_muon_matches_reference():
    rng = np.random.default_rng(9)
    params = make_params(rng, SHAPES)
    values = [p.value.copy() for p in params]
    grads = grads_for(rng)
    run_steps(nn.Muon(params, lr=0.02, momentum=0.95, adam_lr=0.01), params, grads)
    buffers = [np.zeros(s) for s in SHAPES[:2]]
    for step_grads in grads:
        for i, g in enumerate(step_grads[:2]):
            buffers[i] = 0.95 * buffers[i] + g
            fan_in, fan_out = values[i].shape
            scale = max(1.0, fan_out / fan_in) ** 0.5
            values[i] = values[i] - 0.02 * scale * newton_schulz_reference(g + 0.95 * buffers[i])
    values[2:] = adam_reference(values[2:], [g[2:] for g in grads], lr=0.01)  # the bias: Adam
    for p, want in zip(params, values):
        np.testing.assert_allclose(p.value, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", [(32, 8), (8, 32), (16, 16)])
def test_newton_schulz_orthogonalises(shape):
    g = np.random.default_rng(10).standard_normal(shape)
    singular = np.linalg.svd(nn.newton_schulz(g), compute_uv=False)
    assert np.all((singular > 0.6) & (singular < 1.3)), singular


# ---- the digits example ----------------------------------------------------------------------------------


def test_digits_example_reaches_96_percent(capsys):
    pytest.importorskip("sklearn")
    from smallgemm.nn.examples import digits

    args = argparse.Namespace(epochs=20, batch_size=64, optimizer="muon")
    with smallgemm.num_threads(1):  # small products: threads would only add waiting
        _, test_accuracy = digits.train(args, "smallgemm")
    assert test_accuracy >= 0.96
    assert "epoch 20/20" in capsys.readouterr().out


def test_digits_example_explains_missing_scikit_learn(monkeypatch):
    from smallgemm.nn.examples import digits

    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)  # makes the import fail
    with pytest.raises(SystemExit, match="pip install"):
        digits.load_data(np.random.default_rng(0))
