"""Fork safety: children made by fork, spawn and forkserver after a threaded product in
their parent compute the parent's bits, on threads wherever the threading layer allows it.

Each case runs ``scripts/fork_children.py`` in a process of its own, under a timeout,
so that a child that dies fails the test and a pool that hangs cannot stall the suite.
"""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "fork_children.py")
FORKED = ("os.fork", "fork ProcessPoolExecutor", "fork Pool")
NOT_FORKED = ("spawn ProcessPoolExecutor", "spawn Pool", "forkserver ProcessPoolExecutor", "forkserver Pool")
# The products of fork_children.SHAPES that run in parallel on two threads.
PARALLEL = [False, True, True]


def children_after_threads(layer: str | None, methods: tuple[str, ...]) -> dict:
    env = {**os.environ, "SMALLGEMM_NUM_THREADS": "2"}
    env.pop("NUMBA_THREADING_LAYER", None)
    if layer is not None:
        env["NUMBA_THREADING_LAYER"] = layer
    done = subprocess.run(
        [sys.executable, SCRIPT, *methods], check=False, capture_output=True, text=True, env=env, timeout=420
    )
    assert done.returncode == 0, done.stderr
    assert "Terminating" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def check(rows, threads: int) -> None:
    """Each product has the parent's bits and used ``threads`` threads, in parallel where it is worth it."""
    assert isinstance(rows, list), rows  # else the child's wait status
    assert [equal for equal, _, _ in rows] == [True] * len(PARALLEL)
    assert [used for _, used, _ in rows] == [threads] * len(PARALLEL)
    assert [ran for _, _, ran in rows] == [p and threads > 1 for p in PARALLEL]


def check_forked(out: dict, threads: int) -> None:
    """Every forked child, and the grandchild of ``os.fork``, as ``check`` wants it."""
    children, grandchild = out["os.fork"]
    check(children, threads)
    check(grandchild, threads)
    for way in FORKED[1:]:
        check(out[way], threads)


# (NUMBA_THREADING_LAYER, start methods run, threads of forked children, threads of the others)
LAYERS = [
    (None, ("fork", "spawn", "forkserver"), 2, 2),  # the default: smallgemm loads TBB
    # GNU OpenMP's pool does not survive fork: forked children (and theirs) compute on one
    # thread instead of dying; spawned children start their own pool.
    ("omp", ("fork", "spawn"), 1, 2),
    ("workqueue", ("fork",), 2, 2),
]


@pytest.mark.parametrize(
    "layer, methods, forked_threads, other_threads", LAYERS, ids=["default", "omp", "workqueue"]
)
def test_children_after_threads_compute_the_parents_bits(layer, methods, forked_threads, other_threads):
    out = children_after_threads(layer, methods)
    assert out["layer"] == (layer or "tbb")
    check_forked(out, forked_threads)
    for way in NOT_FORKED:
        if way.split()[0] in methods:
            check(out[way], other_threads)
        else:
            assert way not in out


def test_info_names_the_layer_in_use():
    code = (
        "import numpy as np, smallgemm\n"
        "smallgemm.set_num_threads(2)\n"
        "a = np.ones((300, 300), np.float32); smallgemm.matmul(a, a)\n"
        "print(smallgemm.info()['threads']['threading_layer'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "tbb"


@pytest.mark.parametrize("chosen", ["omp", "workqueue"])
def test_a_layer_the_user_names_is_kept(chosen):
    code = (
        "import smallgemm; from smallgemm.machine import threading_layer; print(threading_layer.load_tbb())"
    )
    env = {**os.environ, "NUMBA_THREADING_LAYER": chosen}
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"
