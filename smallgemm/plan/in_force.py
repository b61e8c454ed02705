"""The plan's state in force: each kernel's configuration (or a test's override), the
block sizes of each kernel and dtype (the defaults of ``blocking``, a tuned
configuration, or ``set_block_sizes``), and the counters that tell prepared states
they are stale.  The fit rules themselves are pure functions in ``rules``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace

import numpy as np

from ..kernels import KERNELS, Kernel, KernelConfig
from . import blocking, dispatch

# Configurations overriding a kernel's own, by kernel name (``override_config``).
_config_overrides: dict[str, KernelConfig] = {}


def config_of(kernel: Kernel) -> KernelConfig:
    """The tuning values in force for ``kernel``: its configuration, or an override."""
    return _config_overrides.get(kernel.name, kernel.config)


@contextlib.contextmanager
def override_config(kernels: Iterable[Kernel] = KERNELS, **changes):
    """Inside a with block, ``kernels``' configurations with ``changes`` (``KernelConfig``
    field names), for experiments and tests that force a path.  The prepared states are
    rebuilt on entry and on exit, so no call keeps a value from before."""
    kept = dict(_config_overrides)
    with _config_lock:
        for kernel in kernels:
            _config_overrides[kernel.name] = replace(config_of(kernel), **changes)
        _forget_default_sizes()
        _bump_version()
    try:
        yield
    finally:
        with _config_lock:
            _config_overrides.clear()
            _config_overrides.update(kept)
            _forget_default_sizes()
            _bump_version()


# Block sizes in force, by (kernel name, dtype char).
_block_sizes: dict[tuple[str, str], blocking.BlockSizes] = {}
# The keys of _block_sizes set explicitly (``set_block_sizes``, a tuned configuration):
# the others hold defaults, computed again from a configuration that changed.
_set_explicitly: set[tuple[str, str]] = set()


def _forget_default_sizes() -> None:
    for key in [key for key in _block_sizes if key not in _set_explicitly]:
        del _block_sizes[key]


# A tuned configuration is applied once, before block sizes are first read or
# set (an explicit set_block_sizes then wins over it).  The loader is registered
# by the package (smallgemm.tune.record.apply_configured): the plan does not reach
# up into the tuner.  The loader returns what ``info`` shows of the file applied.
_config_loader: Callable[[], dict | None] | None = None
_config_in_force: dict | None = None
_config_lock = threading.RLock()  # re-entered by the loader's own set_block_sizes
_config_applied = False
_config_loading = False


def set_config_loader(loader: Callable[[], dict | None] | None) -> None:
    """Register the function that applies a tuned configuration before first use."""
    global _config_loader, _config_applied, _config_in_force
    with _config_lock:
        _config_loader = loader
        _config_applied = False
        _config_in_force = None


def tuned_configuration() -> dict | None:
    """The tuned configuration in force (its path and schema, as the loader described it), or None."""
    _apply_config_once()
    return _config_in_force


def reload_configuration() -> None:
    """Apply the configured file again before the next product (after the file, or where it is
    looked for, changed)."""
    global _config_applied
    with _config_lock:
        _config_applied = False


def swap_tuned_configuration(description: dict | None) -> dict | None:
    """Make ``description`` what ``tuned_configuration`` reports and return what it reported
    (block sizes are not touched): how a test that applies configurations puts this back."""
    global _config_in_force
    with _config_lock:
        previous, _config_in_force = _config_in_force, description
    return previous


def _apply_config_once() -> None:
    global _config_applied, _config_loading, _config_in_force
    if _config_applied:
        return
    with _config_lock:  # other threads wait until the configuration is in force
        if _config_applied or _config_loading or _config_loader is None:
            return
        _config_loading = True
        try:
            _config_in_force = _config_loader()  # a corrupt file raises here, and again on the next call
            _config_applied = True
        finally:
            _config_loading = False


def block_sizes(kernel: Kernel, dtype: np.dtype) -> blocking.BlockSizes:
    """Block sizes in force for this kernel and dtype (a numpy dtype object)."""
    _apply_config_once()
    key = (kernel.name, dtype.char)
    sizes = _block_sizes.get(key)
    if sizes is None:
        sizes = _block_sizes[key] = blocking.default(kernel, dtype, config=config_of(kernel))
    return sizes


# Read by the prepared states, written here only.  ``version``: bumped whenever block
# sizes change (prepared states are rebuilt).  ``generation``: bumped by every change
# a call's prepared state depends on: block sizes (with ``version``), the kernel in force
# or the exact mode (which leave the states valid: switching back and forth rebuilds
# none); ``current_prepared`` then looks the state up again.
version = 0
generation = 0


def _bump_version() -> None:
    global version, generation
    version += 1
    generation += 1


def _kernel_changed() -> None:
    global generation
    generation += 1


dispatch.on_change(_kernel_changed)


def set_block_sizes(kernel: Kernel, dtype: np.dtype, sizes: blocking.BlockSizes | None) -> None:
    """Override (or, with None, reset) the block sizes of one kernel and dtype."""
    _apply_config_once()
    dtype = np.dtype(dtype)
    key = (kernel.name, dtype.char)
    if sizes is None:
        _block_sizes.pop(key, None)
        _set_explicitly.discard(key)
        _bump_version()
        return
    sizes.check(kernel.mr(), kernel.nr(dtype))
    _block_sizes[key] = sizes
    _set_explicitly.add(key)
    _bump_version()
