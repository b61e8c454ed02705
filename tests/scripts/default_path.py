"""Products of every strategy row, each run a few times, and where each ran.

    python default_path.py ROUNDS [LABEL]  ->  one JSON object on stdout

Run by tests/test_default_path.py in fresh processes, with default settings but for the
thread count or kernel that a test names in the environment.  For each product and dtype
(those whose label holds LABEL) it reports the rows ``explain`` names and those the table
chose (the small ways in choose none), the compiled entries ``explain`` says the product
runs (``Explanation.entries``) and those it called, how many of its
ROUNDS calls ran on the first-use driver (``info()["first_use"]["runs"]``), and whether
its result matches NumPy's.
"""

import json
import sys

import numpy as np

import smallgemm


def _rng(seed):
    return np.random.default_rng(seed)


def _pair(m, k, n, dtype, seed, b_transposed=False):
    rng = _rng(seed)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = (
        rng.standard_normal((n, k)).astype(dtype).T
        if b_transposed
        else rng.standard_normal((k, n)).astype(dtype)
    )
    return a, b


def _stack(batch, m, k, n, dtype, seed):
    rng = _rng(seed)
    return rng.standard_normal((batch, m, k)).astype(dtype), rng.standard_normal((batch, k, n)).astype(dtype)


def products(dtype):
    """(label, a, b, call): ``call(a, b)`` computes the product as a user would."""
    rng = _rng(7)
    w = rng.standard_normal((2048, 512)).astype(dtype)
    chain_c = rng.standard_normal((300, 300)).astype(dtype)
    packed_b = rng.standard_normal((300, 2048)).astype(dtype)
    packed = smallgemm.pack(packed_b)
    return [
        ("empty", np.empty((0, 5), dtype), np.empty((5, 3), dtype), smallgemm.matmul),
        ("scale only", np.empty((3, 0), dtype), np.empty((0, 4), dtype), smallgemm.matmul),
        (
            "continued chain 300^3",
            *_pair(300, 300, 300, dtype, 1),
            lambda a, b: smallgemm.gemm(1.0, a, b, beta=1.0, c=chain_c),
        ),
        (
            "gemm beta 0.5, k past KC",
            *_pair(64, 3000, 64, dtype, 2),
            lambda a, b: smallgemm.gemm(2.0, a, b, beta=0.5, c=np.ones((64, 64), dtype)),
        ),
        ("turned few rows [8,150] @ W.T", *_pair(8, 150, 260, dtype, 3, b_transposed=True), smallgemm.matmul),
        ("turned few rows [4,150] @ W.T", *_pair(4, 150, 260, dtype, 3, b_transposed=True), smallgemm.matmul),
        ("row dots W[2048,512] @ x", w, rng.standard_normal(512).astype(dtype), smallgemm.matmul),
        ("row dots [1,512] @ W.T", rng.standard_normal((1, 512)).astype(dtype), w.T, smallgemm.matmul),
        (
            "transposing stream [5,150] @ W.T",
            *_pair(5, 150, 260, dtype, 4, b_transposed=True),
            smallgemm.matmul,
        ),
        ("direct tiles 16^3", *_pair(16, 16, 16, dtype, 5), smallgemm.matmul),
        ("direct tiles 37x23x45", *_pair(37, 23, 45, dtype, 5), smallgemm.matmul),
        ("few rows [8,512] @ [512,2048]", *_pair(8, 512, 2048, dtype, 6), smallgemm.matmul),
        ("few rows [1,512] @ [512,2048]", *_pair(1, 512, 2048, dtype, 6), smallgemm.matmul),
        ("blocked 300^3", *_pair(300, 300, 300, dtype, 8), smallgemm.matmul),
        ("blocked 1024^3", *_pair(1024, 1024, 1024, dtype, 9), smallgemm.matmul),
        (
            "folded [64,128,512] @ [512,512]",
            _rng(10).standard_normal((64, 128, 512)).astype(dtype),
            _rng(11).standard_normal((512, 512)).astype(dtype),
            smallgemm.matmul,
        ),
        ("prepacked few rows", _rng(12).standard_normal((5, 300)).astype(dtype), packed, smallgemm.matmul),
        ("prepacked", _rng(13).standard_normal((200, 300)).astype(dtype), packed, smallgemm.matmul),
        # Not small; a 3-D stack of one takes matmul's 2-D way in, a 4-D one the stack table's row.
        (
            "lone product stack",
            *(x[np.newaxis] for x in _stack(1, 300, 300, 300, dtype, 14)),
            smallgemm.matmul,
        ),
        ("stack serial", *_stack(5, 20, 30, 25, dtype, 15), smallgemm.matmul),
        ("stack 1000x16x16", *_stack(1000, 16, 16, 16, dtype, 16), smallgemm.matmul),
        ("stack tasks", *_stack(8, 256, 256, 256, dtype, 17), smallgemm.matmul),
        ("stack each product on all workers", *_stack(3, 4, 4096, 4096, dtype, 18), smallgemm.matmul),
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


def main(rounds: int, only: str) -> None:
    from smallgemm.plan import dispatch, entries, strategies

    chosen = []  # the rows the table chose (the first call of a placement; later ones replay it)
    choose = strategies.choose
    strategies.choose = lambda table, p: chosen.append(choose(table, p).name) or choose(table, p)
    ran = []  # the compiled entries called
    for name, entry in entries.ALL.items():
        entry.get = _recording(entry.get, name, ran)
    kernel = dispatch.current()
    report = []
    for dtype in (np.float32, np.float64):
        for label, a, b, call in products(np.dtype(dtype)):
            if only not in label:
                continue
            found = smallgemm.explain(a, b)
            before = smallgemm.info()["first_use"]["runs"]
            del chosen[:], ran[:]
            for _ in range(rounds):
                got = call(a, b)
            runs = smallgemm.info()["first_use"]["runs"] - before
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
