"""Process-wide settings: environment variables, read once at import, in one place.

SMALLGEMM_KERNEL       avx512 | avx2 | portable   force a microkernel
SMALLGEMM_NUM_THREADS  positive integer           threads used by one call
SMALLGEMM_CONFIG       path                       tuned configuration to load
SMALLGEMM_EXACT        1 (default) | 0            0: lane-wise row dots and split-K where faster
SMALLGEMM_FIRST_USE    background (default) | compile
                                                  compile: entries compile in the calling process,
                                                  never first on the first-use driver
"""

from __future__ import annotations

import os


def _env_kernel() -> str | None:
    value = os.environ.get("SMALLGEMM_KERNEL", "").strip().lower()
    return value or None


def _env_threads() -> int | None:
    value = os.environ.get("SMALLGEMM_NUM_THREADS", "").strip()
    if not value:
        return None
    try:
        threads = int(value)
    except ValueError:
        raise ValueError(f"SMALLGEMM_NUM_THREADS must be a positive integer, got {value!r}") from None
    if threads < 1:
        raise ValueError(f"SMALLGEMM_NUM_THREADS must be a positive integer, got {value!r}")
    return threads


def _env_exact() -> bool:
    """``SMALLGEMM_EXACT`` (0 or 1, default 1); ``SMALLGEMM_BATCH_INVARIANT``, its former name,
    where it alone is set."""
    for name in ("SMALLGEMM_EXACT", "SMALLGEMM_BATCH_INVARIANT"):
        value = os.environ.get(name, "").strip()
        if value not in ("", "0", "1"):
            raise ValueError(f"{name} must be 0 or 1, got {value!r}")
        if value:
            return value == "1"
    return True


FIRST_USE_MODES = ("background", "compile")


def _env_first_use() -> str:
    value = os.environ.get("SMALLGEMM_FIRST_USE", "").strip() or FIRST_USE_MODES[0]
    if value not in FIRST_USE_MODES:
        raise ValueError(f"SMALLGEMM_FIRST_USE must be 'background' or 'compile', not {value!r}")
    return value


KERNEL: str | None = _env_kernel()
NUM_THREADS: int | None = _env_threads()
CONFIG_PATH: str | None = os.environ.get("SMALLGEMM_CONFIG") or None
EXACT: bool = _env_exact()
FIRST_USE: str = _env_first_use()
