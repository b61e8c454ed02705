"""A threadpoolctl controller, so that ``threadpool_info()`` lists smallgemm and
``threadpool_limits(n)`` limits it as it limits OpenBLAS.

threadpoolctl finds controllers by matching the file names of loaded shared
libraries.  smallgemm has no shared library of its own (its code is compiled by
Numba in memory), so the controller is anchored on Numba's ``_helperlib``,
which is loaded whenever smallgemm is imported.  The controller never calls
into that library: it reads and writes smallgemm's own setting.
"""

from __future__ import annotations

from threadpoolctl import LibController, register

from ..version import __version__
from . import threading_layer, threads


class SmallgemmController(LibController):
    """threadpoolctl controller for smallgemm's thread setting."""

    user_api = "smallgemm"
    internal_api = "smallgemm"
    filename_prefixes = ("_helperlib",)

    def get_num_threads(self) -> int:
        return threads.get_num_threads()

    def set_num_threads(self, num_threads: int) -> None:
        threads.set_num_threads(num_threads)

    def get_version(self) -> str:
        return __version__

    def set_additional_attributes(self) -> None:
        self.threading_layer = threading_layer.describe()


register(SmallgemmController)
