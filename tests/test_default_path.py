"""The default path: with the entries in the cache, no product runs on the first-use driver.

Each check is a fresh process with default settings (``tests/scripts/default_path.py``):
no ``SMALLGEMM_*`` variable but the thread count or kernel a test names.  The cache is
warmed first by the same script in a process that compiles in place
(``SMALLGEMM_FIRST_USE=compile``), as ``python -m smallgemm compile`` would.  Every row of
PRODUCT, PREPACKED and STACK is reached, on one thread and two, for both dtypes; each
product runs three times, and every run must take its tuned entry.
"""

import json
import os
import subprocess
import sys

import pytest

from smallgemm.plan import dispatch, strategies

SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "default_path.py")
ROUNDS = 3
# The row that only some kernels reach (rules.turned_few_rows): avx2 turns 8 rows, portable 4.
TURNED = "turned few rows"

# The compiled small ways in, which compute small products and stacks without the table.
SMALL_WAYS = ({"UNPACKED"}, {"SMALL_STACK"})

# One worker, and session-scoped fixtures: the warm-up and the reports run once, however the
# worker interleaves these tests with other modules'.
pytestmark = pytest.mark.xdist_group("default_path")


def _run(rounds: int, only: str = "", **settings: str) -> dict:
    env = {name: value for name, value in os.environ.items() if not name.startswith("SMALLGEMM_")}
    env.update(settings)
    done = subprocess.run(
        [sys.executable, SCRIPT, str(rounds), only],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _other_kernel() -> str:
    """The kernel, besides the host's, that turns few rows over and runs on every x86-64 host."""
    return "portable" if dispatch.detect().name == "avx2" else "avx2"


@pytest.fixture(scope="session")
def warm_cache():
    """Compile what the products run, on one thread and two, in processes that compile in place."""
    for threads in ("1", "2"):
        _run(1, SMALLGEMM_FIRST_USE="compile", SMALLGEMM_NUM_THREADS=threads)
        _run(
            1,
            TURNED,
            SMALLGEMM_FIRST_USE="compile",
            SMALLGEMM_NUM_THREADS=threads,
            SMALLGEMM_KERNEL=_other_kernel(),
        )


def _check(report: dict) -> None:
    for product in report["products"]:
        where = f"{report['kernel']} {product['dtype']} {product['label']} ({product['row']}, {product['threads']} threads)"
        assert product["first_use_runs"] == 0, (
            f"{where}: {product['first_use_runs']} of {ROUNDS} on the first-use driver"
        )
        assert "FIRST_USE" not in product["ran"], where
        if product["entries"]:  # the entries explain names ran, or the small way in computed it whole
            assert set(product["entries"]) <= set(product["ran"]) or set(product["ran"]) in SMALL_WAYS, (
                f"{where}: ran {product['ran']}"
            )
        assert product["close"], where


@pytest.fixture(scope="session")
def reports(warm_cache) -> dict[str, list[dict]]:
    """Per thread setting (the default, on every core; one thread), the reports of the host's
    kernel and of the other kernel's turned few rows, each from a fresh process."""
    found = {}
    for threads in ("default", "1"):
        settings = {} if threads == "default" else {"SMALLGEMM_NUM_THREADS": threads}
        found[threads] = [
            _run(ROUNDS, **settings),
            _run(ROUNDS, TURNED, SMALLGEMM_KERNEL=_other_kernel(), **settings),
        ]
    return found


@pytest.mark.parametrize("threads", ["default", "1"])
def test_every_product_runs_on_its_tuned_entry_with_a_warm_cache(reports, threads):
    host, turned = reports[threads]
    assert host["kernel"] == dispatch.detect().name and turned["kernel"] == _other_kernel()
    _check(host)
    _check(turned)
    used = {p["threads"] for report in (host, turned) for p in report["products"] if p["entries"]}
    assert used == ({1} if threads == "1" else {1, 2}), used


def test_the_products_reach_every_row_of_every_table(reports):
    products = [p for pair in reports.values() for report in pair for p in report["products"]]
    rows = (
        {p["row"] for p in products}
        | {p["stack"] for p in products}
        | {r for p in products for r in p["chosen"]}
    )
    every_row = {s.name for s in strategies.PRODUCT + strategies.PREPACKED + strategies.STACK}
    assert rows >= every_row, every_row - rows
    for dtype in ("float32", "float64"):
        assert any(p["dtype"] == dtype and p["row"] == TURNED for p in products), dtype
