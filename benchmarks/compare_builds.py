"""Two builds of smallgemm on the same products, in alternating fresh processes; print Markdown.

    python benchmarks/compare_builds.py OTHER_TREE [--threads 1] [--rounds 3]

OTHER_TREE is a checkout of another commit (``git worktree add /tmp/base main``), imported
through ``PYTHONPATH``; this tree is the installed one.  Each process runs in its own tree's
folder (``python -c`` and ``-m`` put the current folder first on ``sys.path``, ahead of
``PYTHONPATH``) and reports where its ``smallgemm`` came from, which must be that tree.  Both caches are filled first
(``python -m smallgemm compile`` in each).  Then ROUNDS times, one process of each build
times every product (the best of 15 runs of a loop of about 50 ms), and the table gives
each product's best time per build and their ratio: a refactoring's cost, measured where
run-to-run noise between two interleaved libraries (``targets.py``) would hide a few percent.
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys

CHILD = """
import sys, timeit
import numpy as np
import smallgemm
smallgemm.set_num_threads(int(sys.argv[1]))
print(smallgemm.__file__)
rng = np.random.default_rng(0)
w = rng.standard_normal((512, 2048)).astype(np.float32)
w_t = np.ascontiguousarray(w.T)
packed_t = smallgemm.pack(w_t, trans=True)
cases = {}
for m in (1, 4, 8, 16):
    x = rng.standard_normal((m, 512)).astype(np.float32)
    cases[f"[{m},512] @ [512,2048]"] = lambda x=x: smallgemm.matmul(x, w)
    cases[f"[{m},512] @ W.T"] = lambda x=x: smallgemm.matmul(x, w_t.T)
    cases[f"[{m},512] @ pack(W, trans=True)"] = lambda x=x: smallgemm.matmul(x, packed_t)
v = rng.standard_normal(512).astype(np.float32)
cases["W @ x, W [2048,512]"] = lambda: smallgemm.matmul(w_t, v)
s = rng.standard_normal((16, 16)).astype(np.float32)
cases["16x16"] = lambda: smallgemm.matmul(s, s)
d = rng.standard_normal((16, 16))
cases["16x16 float64"] = lambda: smallgemm.matmul(d, d)
for m, k, n in ((32, 32, 32), (64, 64, 64), (30, 64, 100)):
    x, y = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    cases[f"{m}x{k}x{n}"] = lambda x=x, y=y: smallgemm.matmul(x, y)
a3, b3 = rng.standard_normal((1000, 16, 16)).astype(np.float32), rng.standard_normal((1000, 16, 16)).astype(np.float32)
cases["stack 1000x16x16"] = lambda: smallgemm.matmul(a3, b3)
for count, size in ((1000, 8), (200, 40)):
    x = rng.standard_normal((count, size, size)).astype(np.float32)
    cases[f"stack {count}x{size}x{size}"] = lambda x=x: smallgemm.matmul(x, x)
a, b = rng.standard_normal((1024, 1024)).astype(np.float32), rng.standard_normal((1024, 1024)).astype(np.float32)
cases["1024^3"] = lambda: smallgemm.matmul(a, b)
best = {}
for name, call in cases.items():
    call()
    number = max(1, int(0.05 / max(timeit.timeit(call, number=1), 1e-7)))
    best[name] = min(timeit.repeat(call, number=number, repeat=15)) / number
print(repr(best))
"""


# This tree: the folder holding benchmarks/.
THIS_TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _in_tree(tree: str) -> dict:
    """subprocess.run's arguments for a process that imports smallgemm from ``tree``."""
    return {"cwd": tree, "env": dict(os.environ, PYTHONPATH=tree)}


def _run(tree: str, threads: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(threads)],
        capture_output=True,
        text=True,
        check=True,
        **_in_tree(tree),
    )
    imported, *_, times = done.stdout.strip().splitlines()
    if not imported.startswith(os.path.join(tree, "smallgemm")):
        raise RuntimeError(f"a process for {tree} imported {imported}")
    return ast.literal_eval(times)


def _duration(seconds: float) -> str:
    return f"{seconds * 1e6:.2f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("other", help="a checkout of the other build (its folder holding smallgemm/)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    other = os.path.abspath(args.other)
    for tree in (THIS_TREE, other):
        subprocess.run(
            [sys.executable, "-m", "smallgemm", "compile", "--quiet"], check=True, **_in_tree(tree)
        )
    ours, theirs = [], []
    for _ in range(args.rounds):
        theirs.append(_run(other, args.threads))
        ours.append(_run(THIS_TREE, args.threads))
    print(f"{args.threads} thread(s), best of {args.rounds} processes x 15 runs each\n")
    print(f"| product (float32) | {other} | this tree | this / other |\n|---|---|---|---|")
    for name in ours[0]:
        a, b = min(r[name] for r in theirs), min(r[name] for r in ours)
        print(f"| {name} | {_duration(a)} | {_duration(b)} | {b / a:.3f} |")


if __name__ == "__main__":
    main()
