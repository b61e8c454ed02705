"""Source variants of smallgemm on the same products, one thread, in alternating fresh processes.

    python benchmarks/source_variants.py benchmarks/kernel_settings.json GROUP [GROUP ...]

A tuning value compiled into the drivers (a kernel's tile settings, a constant of
``kernels/shared.py``) cannot be changed at run time.  Each variant of a group is a git
worktree of the group's commit with regular-expression edits (each must match once), under
a temporary folder removed at the end; ``base`` has none.  A variant named in the group's
``commits`` is a worktree of that commit instead (a build before and after a change).  With the group's kernel forced
(``SMALLGEMM_KERNEL``), one thread and ``SMALLGEMM_FIRST_USE=compile``, ROUNDS times one
process of each variant times every product (the median of 9 loops of about 20 ms each,
after 3 calls), and each row gives every variant's range over its processes, in µs.

A group in the JSON file: ``{"kernel": name, "commit": sha, "rounds": 3, "variants":
{label: [[path, pattern, replacement], ...]}, "products": [[label, m, k, n, dtype, options],
...]}``.  Options, comma-separated: ``off16`` (B starts 16 bytes into a cache line),
``fa`` (A F-ordered), ``bt`` (B is W.T, W stored [n, k]), ``pack_t`` (B is ``pack(W,
trans=True)``), ``stack:N`` (N products).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def operands(m: int, k: int, n: int, dtype: str, options: str, rng):
    """A and B of one product, laid out as ``options`` say."""
    import numpy as np

    dt = np.dtype(dtype)
    chosen = options.split(",")
    count = next((int(o[6:]) for o in chosen if o.startswith("stack:")), 0)
    if count:
        return rng.standard_normal((count, m, k)).astype(dt), rng.standard_normal((count, k, n)).astype(dt)
    a = rng.standard_normal((m, k)).astype(dt)
    if "fa" in chosen:
        a = np.asfortranarray(a)
    if "bt" in chosen:
        return a, rng.standard_normal((n, k)).astype(dt).T
    if "pack_t" in chosen:
        import smallgemm

        return a, smallgemm.pack(rng.standard_normal((n, k)).astype(dt), trans=True)
    if "off16" in chosen:
        raw = np.empty(k * n + 64 // dt.itemsize, dt)
        start = (-raw.ctypes.data % 64 + 16) // dt.itemsize
        b = raw[start : start + k * n].reshape(k, n)
        b[...] = rng.standard_normal((k, n))
        return a, b
    return a, rng.standard_normal((k, n)).astype(dt)


def time_products(products: list) -> dict[str, float]:
    """Seconds per call of every product, in this process."""
    import numpy as np

    import smallgemm

    rng = np.random.default_rng(0)
    times = {}
    for label, m, k, n, dtype, options in products:
        a, b = operands(m, k, n, dtype, options, rng)
        for _ in range(3):
            smallgemm.matmul(a, b)
        start = time.perf_counter()
        smallgemm.matmul(a, b)
        calls = max(1, int(0.02 / max(time.perf_counter() - start, 1e-7)))
        loops = []
        for _ in range(9):
            start = time.perf_counter()
            for _ in range(calls):
                smallgemm.matmul(a, b)
            loops.append((time.perf_counter() - start) / calls)
        times[label] = statistics.median(loops)
    return times


def make_tree(folder: str, commit: str, edits: list) -> str:
    """A worktree of ``commit`` in ``folder`` with ``edits`` applied."""
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "-f", "-q", "--detach", folder, commit], check=True)
    for path, pattern, replacement in edits:
        file = os.path.join(folder, path)
        with open(file) as source:
            text, found = re.subn(pattern, replacement, source.read(), flags=re.M)
        if found != 1:
            raise SystemExit(f"{path}: {pattern!r} matched {found} times")
        with open(file, "w") as target:
            target.write(text)
    return folder


def run_group(name: str, group: dict, scratch: str) -> None:
    trees = {
        label: make_tree(
            os.path.join(scratch, f"{name}-{label}"),
            group.get("commits", {}).get(label, group["commit"]),
            edits,
        )
        for label, edits in {"base": [], **group["variants"]}.items()
    }
    env = dict(
        os.environ, SMALLGEMM_KERNEL=group["kernel"], SMALLGEMM_NUM_THREADS="1", SMALLGEMM_FIRST_USE="compile"
    )
    results: dict[str, dict[str, list[float]]] = {label: {} for label in trees}
    child = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(group["products"])]
    for _ in range(group.get("rounds", 3)):
        for label, tree in trees.items():
            run = subprocess.run(
                child, check=False, env=dict(env, PYTHONPATH=tree), capture_output=True, text=True, cwd=tree
            )
            if run.returncode:
                raise SystemExit(run.stderr[-3000:])
            for product, seconds in json.loads(run.stdout.splitlines()[-1]).items():
                results[label].setdefault(product, []).append(seconds)
    print(f"\n{name}: kernel {group['kernel']}, commit {group['commit']}, one thread, µs\n")
    print("| product | " + " | ".join(trees) + " |")
    print("|---|" + "---|" * len(trees))
    for product in (p[0] for p in group["products"]):
        cells = (f"{min(results[t][product]) * 1e6:.1f}–{max(results[t][product]) * 1e6:.1f}" for t in trees)
        print(f"| {product} | " + " | ".join(cells) + " |")
    for tree in trees.values():
        subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tree], check=True)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(time_products(json.loads(sys.argv[2]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("groups_file")
    parser.add_argument("groups", nargs="+")
    args = parser.parse_args()
    with open(args.groups_file) as source:
        groups = json.load(source)
    with tempfile.TemporaryDirectory(prefix="smallgemm-variants-") as scratch:
        for name in args.groups:
            run_group(name, groups[name], scratch)


if __name__ == "__main__":
    main()
