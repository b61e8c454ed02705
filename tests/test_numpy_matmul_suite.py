"""NumPy's own ``TestMatmul`` (with its ``MatmulCommon`` tests) run against ``smallgemm.matmul``.

The class calls ``self.matmul``, which is smallgemm's here; several of its tests call
``np.matmul`` by name, so while they run, NumPy's test module sees an ``np`` whose ``matmul``
is smallgemm's (and everything else NumPy's).
"""

import types

import numpy as np
import pytest
from numpy._core.tests import test_multiarray as numpy_tests

import smallgemm

_NUMPY_WITH_SMALLGEMM = types.ModuleType("numpy")
_NUMPY_WITH_SMALLGEMM.__dict__.update(vars(np))
_NUMPY_WITH_SMALLGEMM.__getattr__ = lambda name: getattr(np, name)  # NumPy's lazily loaded names
_NUMPY_WITH_SMALLGEMM.matmul = smallgemm.matmul


@pytest.fixture(autouse=True)
def _numpy_tests_call_smallgemm(monkeypatch):
    monkeypatch.setattr(numpy_tests, "np", _NUMPY_WITH_SMALLGEMM)


class TestSmallgemmMatmul(numpy_tests.TestMatmul):
    matmul = staticmethod(smallgemm.matmul)


def test_np_matmul_in_numpys_tests_is_smallgemms(monkeypatch):
    """The swap itself: a NumPy test that calls ``np.matmul`` by name calls smallgemm."""
    calls = []

    def counted(*args, **kwargs):
        calls.append(args)
        return smallgemm.matmul(*args, **kwargs)

    monkeypatch.setattr(_NUMPY_WITH_SMALLGEMM, "matmul", counted)
    numpy_tests.TestMatmul().test_matmul_bool()
    assert len(calls) == 3
