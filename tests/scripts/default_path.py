"""Products of every strategy row, each run a few times, and where each ran.

    python default_path.py ROUNDS [LABEL]  ->  one JSON object on stdout

Run by tests/test_default_path.py in fresh processes, with default settings but for the
thread count or kernel that a test names in the environment.  For each product and dtype
(those whose label holds LABEL) it reports the rows ``explain`` names and those the table
chose (the small ways in choose none), the compiled entries ``explain`` says the product
runs (``Explanation.entries``) and those it called, how many of its
ROUNDS calls ran on the first-use driver (``warmup.first_use_runs()``, the count
``info()["first_use"]["runs"]`` reports), and whether
its result matches NumPy's.
"""

import json
import sys

import numpy as np

import smallgemm


def _random(seed, shape, dtype):
    """Uniform values in [-1, 1), drawn in ``dtype`` itself (no float64 draw to convert)."""
    return np.random.default_rng(seed).random(shape, dtype=dtype) * 2 - 1


def _pair(m, k, n, dtype, seed, b_transposed=False):
    a = _random(seed, (m, k), dtype)
    b = _random(seed + 100, (n, k), dtype).T if b_transposed else _random(seed + 100, (k, n), dtype)
    return a, b


def _stack(batch, m, k, n, dtype, seed):
    return _random(seed, (batch, m, k), dtype), _random(seed + 100, (batch, k, n), dtype)


def _gemm(alpha, beta, c):
    """``gemm`` into ``c`` (the same ``c`` on every round: a chain continued)."""
    return lambda a, b: smallgemm.gemm(alpha, a, b, beta=beta, c=c)


def products(dtype):
    """(label, make): ``make()`` returns (a, b, call), and ``call(a, b)`` computes the product as
    a user would.  The operands are made only for the products a run asks for (its LABEL)."""
    mm = smallgemm.matmul
    w = lambda: _random(7, (2048, 512), dtype)  # noqa: E731
    packed = lambda: smallgemm.pack(_random(22, (300, 2048), dtype))  # noqa: E731
    return [
        ("empty", lambda: (np.empty((0, 5), dtype), np.empty((5, 3), dtype), mm)),
        ("scale only", lambda: (np.empty((3, 0), dtype), np.empty((0, 4), dtype), mm)),
        (
            "continued chain 300^3",
            lambda: (*_pair(300, 300, 300, dtype, 1), _gemm(1.0, 1.0, _random(19, (300, 300), dtype))),
        ),
        (
            "continued chain 64^3",
            lambda: (*_pair(64, 64, 64, dtype, 23), _gemm(1.0, 1.0, _random(24, (64, 64), dtype))),
        ),
        (
            "continued chain [1,256] @ [256,2048]",
            lambda: (*_pair(1, 256, 2048, dtype, 25), _gemm(1.0, 1.0, _random(26, (1, 2048), dtype))),
        ),
        (
            "gemm beta 0.5, k past KC",
            lambda: (*_pair(64, 3000, 64, dtype, 2), _gemm(2.0, 0.5, np.ones((64, 64), dtype))),
        ),
        ("turned few rows [8,150] @ W.T", lambda: (*_pair(8, 150, 260, dtype, 3, b_transposed=True), mm)),
        ("turned few rows [4,150] @ W.T", lambda: (*_pair(4, 150, 260, dtype, 3, b_transposed=True), mm)),
        ("row dots W[2048,512] @ x", lambda: (w(), _random(20, 512, dtype), mm)),
        ("row dots [1,512] @ W.T", lambda: (_random(21, (1, 512), dtype), w().T, mm)),
        ("transposing stream [5,150] @ W.T", lambda: (*_pair(5, 150, 260, dtype, 4, b_transposed=True), mm)),
        ("small product 16^3", lambda: (*_pair(16, 16, 16, dtype, 5), mm)),
        ("small product 37x23x45", lambda: (*_pair(37, 23, 45, dtype, 5), mm)),
        ("few rows [8,512] @ [512,2048]", lambda: (*_pair(8, 512, 2048, dtype, 6), mm)),
        ("few rows [1,512] @ [512,2048]", lambda: (*_pair(1, 512, 2048, dtype, 6), mm)),
        ("blocked 300^3", lambda: (*_pair(300, 300, 300, dtype, 8), mm)),
        ("blocked 1024^3", lambda: (*_pair(1024, 1024, 1024, dtype, 9), mm)),
        (
            "folded [64,128,512] @ [512,512]",
            lambda: (_random(10, (64, 128, 512), dtype), _random(11, (512, 512), dtype), mm),
        ),
        ("prepacked few rows", lambda: (_random(12, (5, 300), dtype), packed(), mm)),
        ("prepacked", lambda: (_random(13, (200, 300), dtype), packed(), mm)),
        # Not small; a 3-D stack of one takes matmul's 2-D way in, a 4-D one the stack table's row.
        (
            "lone product stack",
            lambda: (*(x[np.newaxis] for x in _stack(1, 300, 300, 300, dtype, 14)), mm),
        ),
        ("small stack 5x20x30x25", lambda: (*_stack(5, 20, 30, 25, dtype, 15), mm)),
        ("stack 3x200^3", lambda: (*_stack(3, 200, 200, 200, dtype, 27), mm)),
        ("stack 1000x16x16", lambda: (*_stack(1000, 16, 16, 16, dtype, 16), mm)),
        ("stack tasks", lambda: (*_stack(8, 256, 256, 256, dtype, 17), mm)),
        ("stack each product on all workers", lambda: (*_stack(3, 4, 4096, 4096, dtype, 18), mm)),
    ]


def _reference(a, b):
    if isinstance(b, smallgemm.PackedMatrix):
        b = b.unpacked()
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


def _recording(get, name, ran):
    """``Entry.get`` whose native entry points append ``name`` to ``ran`` when called."""

    def recorded_get(kernel, dtype):
        native = get(kernel, dtype)

        def call(*args):
            ran.append(name)
            return native(*args)

        return call

    return recorded_get


def _recording_builtins(builtin, ran):
    """``fastcall.builtin`` whose builtins append the entry that gave the routine's address
    (SMALL_STACK for the stack's, else UNPACKED) to ``ran`` when called."""

    def recorded_builtin(address, argtypes, answers, context, name):
        native = builtin(address, argtypes, answers, context, name)
        entry = "SMALL_STACK" if name.startswith("small_stack") else "UNPACKED"

        def call(*args):
            ran.append(entry)
            return native(*args)

        return call

    return recorded_builtin


def main(rounds: int, only: str) -> None:
    from smallgemm.plan import dispatch, entries, strategies, warmup
    from smallgemm.simd import fastcall

    chosen = []  # the rows the table chose (the first call of a placement; later ones replay it)
    choose = strategies.choose
    strategies.choose = lambda table, p: chosen.append(choose(table, p).name) or choose(table, p)
    ran = []  # the compiled entries called
    for name, entry in entries.ALL.items():
        entry.get = _recording(entry.get, name, ran)
    fastcall.builtin = _recording_builtins(fastcall.builtin, ran)
    kernel = dispatch.current()
    report = []
    for dtype in (np.float32, np.float64):
        for label, make in products(np.dtype(dtype)):
            if only not in label:
                continue
            a, b, call = make()
            found = smallgemm.explain(a, b)
            before = warmup.first_use_runs()
            del chosen[:], ran[:]
            for _ in range(rounds):
                got = call(a, b)
            runs = warmup.first_use_runs() - before
            close = label.startswith(("continued", "gemm")) or np.allclose(
                got, _reference(a, b), rtol=1e-3, atol=1e-3 * max(1, a.shape[-1]) ** 0.5
            )
            report.append(
                {
                    "label": label,
                    "dtype": np.dtype(dtype).name,
                    "row": found.strategy,
                    "stack": found.stack.split(":")[0],
                    "chosen": sorted(set(chosen)),
                    "threads": found.threads,
                    "entries": list(found.entries),
                    "ran": sorted(set(ran)),
                    "first_use_runs": runs,
                    "close": bool(close),
                }
            )
    print(json.dumps({"kernel": kernel.name, "products": report}))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "")
