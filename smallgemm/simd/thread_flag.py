"""A flag of each thread, set within a ``with`` block: the compile-time switches that
``linked`` (``lazily``) and ``optimised_once`` (``engine_code``) hold while Numba compiles."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class ThreadFlag(threading.local):
    """``value`` is False on every thread until ``held`` sets it there."""

    value = False

    @contextlib.contextmanager
    def held(self, value: bool = True) -> Iterator[None]:
        """Within, on this thread: ``value``; the previous value after."""
        previous = self.value
        self.value = value
        try:
            yield
        finally:
            self.value = previous
