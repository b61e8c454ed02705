"""The bits of a fixed set of products, one set for every kernel: a refactoring must not change one.

Products are exact (each element one FMA chain in increasing k), so every kernel gives
the same bits.  Each case is computed on one thread and on three (the bits must agree),
with the kernel forced and its block sizes pinned small (``pinned_blocks``: KC = 64, so
that chains cross KC blocks), and its SHA-256 compared with the one stored per dtype in
``data/bit_hashes.json``.  The cases reach every strategy: empty and
scale-only products, row dots, few rows (streamed, turned over, transposing),
direct tiles, blocked, prepacked, stacks, and gemm with alpha, beta and transposes.

    python tests/test_bit_hashes.py > tests/data/bit_hashes.json   (only on purpose)
"""

import hashlib
import json
import os

import numpy as np
import pytest
from conftest import KERNEL_NAMES, forced_kernel, pinned_blocks

import smallgemm

HASHES = os.path.join(os.path.dirname(__file__), "data", "bit_hashes.json")


def operands(dtype):
    """Named operands from one seeded generator, in a fixed order."""
    rng = np.random.default_rng(20261205)

    def rand(*shape):
        return rng.standard_normal(shape).astype(dtype)

    return {
        "w": rand(260, 150),
        "x8": rand(8, 150),
        "x5": rand(5, 150),
        "x4": rand(4, 150),
        "v150": rand(150),
        "v260": rand(260),
        "few_a": rand(4, 300),
        "few_b": rand(300, 1000),
        "a37": rand(37, 23),
        "b45": rand(23, 45),
        "s16": rand(16, 16),
        "t16": rand(16, 16),
        "a": rand(150, 130),
        "b": rand(130, 170),
        "c": rand(150, 170),
        "stack_a": rand(5, 20, 30),
        "stack_b": rand(5, 30, 25),
        "tall": rand(4, 40, 130),
        "tiny_a": rand(50, 8, 8),
        "tiny_b": rand(50, 8, 8),
        "grad_x": rand(200, 130),
        "grad_g": rand(200, 10),
    }


def cases(o):
    """(name, thunk) for every case; each thunk returns a new result."""
    a, b, c, w = o["a"], o["b"], o["c"], o["w"]
    packed = smallgemm.pack(b)
    packed_t = smallgemm.pack(w, trans=True)
    return [
        ("empty", lambda: smallgemm.matmul(a[:0], b)),
        ("k zero, beta", lambda: smallgemm.gemm(0.5, a[:, :0], b[:0], beta=2.0, c=c)),
        ("alpha zero", lambda: smallgemm.gemm(0.0, a, b, beta=-0.5, c=c)),
        ("W @ x", lambda: smallgemm.matmul(w, o["v150"])),
        ("x @ W", lambda: smallgemm.matmul(o["v260"], w)),
        ("W[:, ::2] @ x", lambda: smallgemm.matmul(w[:, ::2], o["v150"][:75])),
        ("x8 @ W.T", lambda: smallgemm.matmul(o["x8"], w.T)),
        ("x5 @ W.T", lambda: smallgemm.matmul(o["x5"], w.T)),
        ("x4 @ W.T", lambda: smallgemm.matmul(o["x4"], w.T)),
        ("few rows", lambda: smallgemm.matmul(o["few_a"], o["few_b"])),
        ("direct tiles", lambda: smallgemm.matmul(o["a37"], o["b45"])),
        ("16x16", lambda: smallgemm.matmul(o["s16"], o["t16"])),
        ("blocked", lambda: smallgemm.matmul(a, b)),
        ("blocked, Fortran order", lambda: smallgemm.matmul(np.asfortranarray(a), np.asfortranarray(b))),
        ("blocked, views", lambda: smallgemm.matmul(a[::-1, ::2], b[:65, ::-1])),
        ("gemm alpha beta", lambda: smallgemm.gemm(0.75, a, b, beta=-0.5, c=c)),
        ("gemm trans_a", lambda: smallgemm.gemm(1.5, np.ascontiguousarray(a.T), b, trans_a=True)),
        (
            "gemm trans_b",
            lambda: smallgemm.gemm(1.0, a, np.ascontiguousarray(b.T), beta=1.0, c=c, trans_b=True),
        ),
        ("x.T @ g", lambda: smallgemm.matmul(o["grad_x"].T, o["grad_g"])),
        ("prepacked", lambda: smallgemm.matmul(a[:60], packed)),
        ("prepacked few rows", lambda: smallgemm.matmul(a[:3], packed)),
        ("prepacked W.T", lambda: smallgemm.matmul(o["x5"], packed_t)),
        ("stack", lambda: smallgemm.matmul(o["stack_a"], o["stack_b"])),
        ("stack times one", lambda: smallgemm.matmul(o["tall"], b)),
        ("stack of tiny", lambda: smallgemm.matmul(o["tiny_a"], o["tiny_b"])),
    ]


def digest(x: np.ndarray) -> str:
    x = np.asarray(x)
    head = f"{x.dtype.str}{x.shape}".encode()
    return hashlib.sha256(head + np.ascontiguousarray(x).tobytes()).hexdigest()[:16]


def hashes_on(kernel_name: str, dtype) -> dict[str, str]:
    """Each case's hash on ``kernel_name``; asserts one and three threads agree."""
    out = {}
    with forced_kernel(kernel_name) as kernel, pinned_blocks(kernel):
        todo = cases(operands(dtype))
        for name, thunk in todo:
            with smallgemm.num_threads(1):
                one = thunk()
            with smallgemm.num_threads(3):
                three = thunk()
            np.testing.assert_array_equal(one, three, err_msg=f"{name}: 1 and 3 threads differ")
            out[name] = digest(one)
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kernel_name", KERNEL_NAMES)
def test_bits_are_those_stored(kernel_name, dtype):
    with open(HASHES) as f:
        stored = json.load(f)[dtype]
    got = hashes_on(kernel_name, np.dtype(dtype))
    changed = [name for name in stored if got.get(name) != stored[name]]
    assert not changed, f"{kernel_name} {dtype}: the bits changed for {changed}"
    assert got.keys() == stored.keys()


if __name__ == "__main__":
    table = {}
    for dt in ("float32", "float64"):
        on_each = [hashes_on(k, np.dtype(dt)) for k in KERNEL_NAMES]
        assert all(h == on_each[0] for h in on_each), f"{dt}: the kernels disagree"
        table[dt] = on_each[0]
    print(json.dumps(table, indent=1))
