"""Runs last (by name): the suite must really have run every kernel, in both dtypes.

Each kernel is a distinct compiled specialisation of each driver's entry point
(its TileShape and dtype are part of the signature), so the dispatchers'
signatures show which kernels ran, on which driver, in this process.
"""

import pytest
from numba import types

from smallgemm.driver import gemm_entry
from smallgemm.unpacked import unpacked_entry
from smallgemm.kernels import KERNELS


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_kernel_was_exercised(kernel, request):
    if not any(item.fspath.basename == "test_engine.py" for item in request.session.items):
        pytest.skip("the engine tests were not selected in this run, so no kernel was expected to run")
    for entry in (gemm_entry, unpacked_entry):
        ran = {(sig[0].shape, next(str(t) for t in sig if isinstance(t, types.Float))) for sig in entry.signatures}
        for dtype in ("float32", "float64"):
            assert (kernel.shape, dtype) in ran, f"kernel {kernel.name} never ran {entry.__name__} with {dtype}"
