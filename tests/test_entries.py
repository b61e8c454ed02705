"""The entry points' declarations (``entry.Entry``): each argument by name and kind, the
names the jitted function's parameters in order.  Nothing here compiles an entry."""

import inspect

import numpy as np
import pytest
from numba import njit

from smallgemm.kernels import KERNELS
from smallgemm.plan import entries
from smallgemm.plan.entry import KINDS, Entry, entry_types

DECLARED = {name: value for name, value in vars(entries).items() if isinstance(value, Entry)}


def test_every_entry_names_its_function_parameters_in_order():
    assert len(DECLARED) >= 14
    for name, entry in DECLARED.items():
        parameters = list(inspect.signature(entry.dispatcher.py_func).parameters)
        assert list(entry.roles) == parameters, name
        assert entry.kinds == tuple(entry.roles.values()), name
        assert set(entry.kinds) <= KINDS, name


def test_every_kind_has_a_numba_type():
    for kernel in KERNELS:
        for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
            assert len(entry_types(tuple(sorted(KINDS)), kernel, dtype)) == len(KINDS)


def _swapped(roles: dict, i: int, j: int) -> dict:
    items = list(roles.items())
    items[i], items[j] = items[j], items[i]
    return dict(items)


@pytest.mark.parametrize("change", ["swapped", "missing", "extra", "renamed"])
def test_a_declaration_that_drifts_from_its_function_is_refused(change):
    roles = dict(entries.BLOCKED.roles)
    if change == "swapped":  # the kinds still line up (alpha and beta are both scalars): only the names tell
        roles = _swapped(roles, 1, 2)
    elif change == "missing":
        del roles["ws"]
    elif change == "extra":
        roles["workers"] = "int"
    else:
        roles = {("alpha_" if arg == "alpha" else arg): kind for arg, kind in roles.items()}
    with pytest.raises(TypeError, match="gemm_entry"):
        Entry(entries.BLOCKED.dispatcher, **roles)
    Entry(entries.BLOCKED.dispatcher, **entries.BLOCKED.roles)  # the declaration itself passes


def test_an_unknown_kind_or_a_keyword_only_parameter_is_refused():
    with pytest.raises(TypeError, match="unknown kinds"):
        Entry(entries.PACK.dispatcher, **{**entries.PACK.roles, "nc": "integer"})

    @njit
    def keyword_only(a, *, n):
        return a + n

    with pytest.raises(TypeError, match="positionally"):
        Entry(keyword_only, a="int", n="int")
