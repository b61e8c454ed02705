"""What the host CPU is: model, SIMD features, cache geometry, core count.

Read once and cached.  Cache sizes come from Linux sysfs; elsewhere (or when
sysfs is unreadable) a conservative default is used and ``CacheLevel.source``
says so.
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path

import numba
from llvmlite import binding as llvm

_SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass(frozen=True)
class CacheLevel:
    """One data (or unified) cache level of one core."""

    level: int
    size: int  # bytes
    ways: int
    line: int  # bytes
    source: str  # "sysfs" or "default"

    @property
    def sets(self) -> int:
        return max(1, self.size // (self.ways * self.line))


# Typical of a current x86-64 core; used only when sysfs says nothing.
_DEFAULT_CACHES = (
    CacheLevel(1, 32 * 1024, 8, 64, "default"),
    CacheLevel(2, 1024 * 1024, 16, 64, "default"),
    CacheLevel(3, 8 * 1024 * 1024, 16, 64, "default"),
)


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    for suffix, scale in (("K", 1024), ("M", 1024**2), ("G", 1024**3)):
        if text.endswith(suffix):
            return int(text[:-1]) * scale
    return int(text)


def _read_sysfs_caches(root: Path) -> dict[int, CacheLevel]:
    found: dict[int, CacheLevel] = {}
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            if kind not in ("Data", "Unified"):
                continue
            level = int((index / "level").read_text())
            found[level] = CacheLevel(
                level=level,
                size=_parse_size((index / "size").read_text()),
                ways=int((index / "ways_of_associativity").read_text()),
                line=int((index / "coherency_line_size").read_text()),
                source="sysfs",
            )
        except (OSError, ValueError):
            continue
    return found


@functools.cache
def caches(root: Path = _SYSFS_CACHE) -> tuple[CacheLevel, CacheLevel, CacheLevel]:
    """(L1d, L2, L3) of one core; missing or unreadable levels take the defaults."""
    found = _read_sysfs_caches(root) if root.is_dir() else {}
    return tuple(found.get(d.level, d) for d in _DEFAULT_CACHES)  # type: ignore[return-value]


@functools.cache
def features() -> frozenset[str]:
    """SIMD features of the host as LLVM names them (``avx512f``, ``fma``, ``neon``...)."""
    raw = llvm.get_host_cpu_features()
    return frozenset(name for name, enabled in raw.items() if enabled)


def _cpuinfo_field(name: str) -> str:
    """The first ``name: value`` of /proc/cpuinfo (``model name``, ``vendor_id``), or ""."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(name):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


@functools.cache
def model_name() -> str:
    return _cpuinfo_field("model name") or platform.processor() or platform.machine()


@functools.cache
def vendor() -> str:
    """The CPU vendor as /proc/cpuinfo names it (``GenuineIntel``, ``AuthenticAMD``), or ""."""
    return _cpuinfo_field("vendor_id")


def core_count() -> int:
    """Cores this process may run on (affinity-aware where the OS says)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def llvm_cpu_name() -> str:
    return llvm.get_host_cpu_name()


def describe() -> dict:
    """A JSON-ready description of the host, used by info() and tuning records."""
    simd = sorted(f for f in features() if f.startswith(("avx", "fma", "sse", "neon", "sve")))
    return {
        "model": model_name(),
        "vendor": vendor(),
        "llvm_cpu": llvm_cpu_name(),
        "machine": platform.machine(),
        "features": simd,
        "caches": [asdict(c) for c in caches()],
        "cores": core_count(),
        "numba_threads": numba.config.NUMBA_NUM_THREADS,
    }
