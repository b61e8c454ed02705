"""The tuned configuration on disk: schema, environment, save, load and apply.

The file says what was chosen, everything needed to repeat the search, and
where the choice holds (CPU model, SIMD features, caches, versions).  Schema
version "mmkts_1"; every integer is written as a string (as seed 002 does for
its 64-bit values), floats as JSON numbers, so the JSON round-trips exactly.
A file from another CPU or feature set is ignored with a warning; a corrupt or
wrong-version file is a ValueError naming the file and the fault, raised before
any kernel runs.
"""

from __future__ import annotations

import json
import os
import platform
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import llvmlite
import numba
import numpy as np

from ..kernels import kernel_by_name
from ..machine import cpu, settings
from ..plan import blocking, in_force
from ..version import __version__

SCHEMA_VERSION = "mmkts_1"


def default_config_path() -> Path:
    """``$XDG_CACHE_HOME/smallgemm/config.json``, else ``~/.cache/smallgemm/config.json``."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "smallgemm" / "config.json"


class _Reader:
    """Typed access to a parsed JSON object, with errors that name the file and the field."""

    def __init__(self, source: str, data, where: str = ""):
        self.source, self.where = source, where
        if not isinstance(data, dict):
            self.fail(f"expected an object, got {type(data).__name__}")
        self.data = data

    def fail(self, what: str) -> NoReturn:
        at = f" at {self.where}" if self.where else ""
        raise ValueError(f"smallgemm configuration {self.source}: {what}{at}")

    def get(self, key: str):
        if key not in self.data:
            self.fail(f"missing field {key!r}")
        return self.data[key]

    def child(self, key: str) -> _Reader:
        return _Reader(self.source, self.get(key), f"{self.where}.{key}".lstrip("."))

    def text(self, key: str) -> str:
        value = self.get(key)
        if not isinstance(value, str):
            self.fail(f"field {key!r} must be a string, got {value!r}")
        return value

    def integer(self, key: str) -> int:
        return _parse_int(self, key, self.get(key))

    def number(self, key: str) -> float:
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(f"field {key!r} must be a number, got {value!r}")
        return float(value)

    def items(self, key: str) -> list:
        value = self.get(key)
        if not isinstance(value, list):
            self.fail(f"field {key!r} must be a list, got {type(value).__name__}")
        return value


def _parse_int(reader: _Reader, key: str, value) -> int:
    text = value[1:] if isinstance(value, str) and value.startswith("-") else value
    if not isinstance(value, str) or not text.isdigit() or not text.isascii():
        reader.fail(f"field {key!r} must be an integer written as a string, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Environment:
    """Where a tuning was measured; ``matches`` decides whether it applies here."""

    cpu_model: str
    llvm_cpu: str
    features: tuple[str, ...]
    caches: tuple[tuple[int, int, int, int], ...]  # (level, size bytes, ways, line bytes)
    cores: int
    numba: str
    llvmlite: str
    numpy: str
    python: str
    smallgemm: str

    @classmethod
    def current(cls) -> Environment:
        host = cpu.describe()
        return cls(
            cpu_model=host["model"],
            llvm_cpu=host["llvm_cpu"],
            features=tuple(host["features"]),
            caches=tuple((c["level"], c["size"], c["ways"], c["line"]) for c in host["caches"]),
            cores=host["cores"],
            numba=numba.__version__,
            llvmlite=llvmlite.__version__,
            numpy=np.__version__,
            python=platform.python_version(),
            smallgemm=__version__,
        )

    def mismatch(self, other: Environment) -> str | None:
        """What makes a tuning from ``self`` invalid on ``other`` (CPU model or SIMD features)."""
        if self.cpu_model != other.cpu_model:
            return f"it was tuned on {self.cpu_model!r}, this CPU is {other.cpu_model!r}"
        if self.features != other.features:
            diff = sorted(set(self.features) ^ set(other.features))
            return f"its SIMD features differ from this CPU's ({', '.join(diff)})"
        return None

    def to_dict(self) -> dict:
        return {
            "cpu_model": self.cpu_model,
            "llvm_cpu": self.llvm_cpu,
            "features": list(self.features),
            "caches": [
                {"level": str(level), "size": str(s), "ways": str(w), "line": str(n)}
                for level, s, w, n in self.caches
            ],
            "cores": str(self.cores),
            "numba": self.numba,
            "llvmlite": self.llvmlite,
            "numpy": self.numpy,
            "python": self.python,
            "smallgemm": self.smallgemm,
        }

    @classmethod
    def from_reader(cls, r: _Reader) -> Environment:
        features = r.items("features")
        if not all(isinstance(f, str) for f in features):
            r.fail("field 'features' must be a list of strings")
        caches = []
        for i, item in enumerate(r.items("caches")):
            c = _Reader(r.source, item, f"{r.where}.caches[{i}]")
            caches.append((c.integer("level"), c.integer("size"), c.integer("ways"), c.integer("line")))
        return cls(
            r.text("cpu_model"),
            r.text("llvm_cpu"),
            tuple(features),
            tuple(caches),
            r.integer("cores"),
            r.text("numba"),
            r.text("llvmlite"),
            r.text("numpy"),
            r.text("python"),
            r.text("smallgemm"),
        )


@dataclass(frozen=True)
class Tuning:
    """The block sizes chosen for one (kernel, dtype), with the search that chose them.

    ``ranking`` holds (mc, nc, kc, GFLOP/s) of the timed candidates, fastest first;
    ``analytic`` the model's sizes and their GFLOP/s in the same run (0 if untimed).
    """

    kernel: str
    dtype: str
    mc: int
    nc: int
    kc: int
    gflops: float
    threads: int
    scope: str
    allocation: str
    analytic: tuple[int, int, int, float]
    ranking: tuple[tuple[int, int, int, float], ...]
    shapes: tuple[tuple[int, int, int], ...]
    thread_counts: tuple[int, ...]
    budget_seconds: float
    seed: int
    workspace_limit: int
    candidates: int
    rejected: int

    @property
    def sizes(self) -> blocking.BlockSizes:
        return blocking.BlockSizes(mc=self.mc, nc=self.nc, kc=self.kc)

    def to_dict(self) -> dict:
        sizes = lambda mc, nc, kc, g: {"mc": str(mc), "nc": str(nc), "kc": str(kc), "gflops": g}  # noqa: E731
        return {
            "kernel": self.kernel,
            "dtype": self.dtype,
            "mc": str(self.mc),
            "nc": str(self.nc),
            "kc": str(self.kc),
            "gflops": self.gflops,
            "threads": str(self.threads),
            "scope": self.scope,
            "allocation": self.allocation,
            "analytic": sizes(*self.analytic),
            "ranking": [sizes(*r) for r in self.ranking],
            "search": {
                "shapes": [[str(x) for x in s] for s in self.shapes],
                "thread_counts": [str(t) for t in self.thread_counts],
                "budget_seconds": self.budget_seconds,
                "seed": str(self.seed),
                "workspace_limit": str(self.workspace_limit),
                "candidates": str(self.candidates),
                "rejected": str(self.rejected),
            },
        }

    @classmethod
    def from_reader(cls, r: _Reader) -> Tuning:
        def sizes(reader: _Reader) -> tuple[int, int, int, float]:
            return reader.integer("mc"), reader.integer("nc"), reader.integer("kc"), reader.number("gflops")

        s = r.child("search")
        ranking = tuple(
            sizes(_Reader(r.source, x, f"{r.where}.ranking[{i}]")) for i, x in enumerate(r.items("ranking"))
        )
        shapes = []
        for i, shape in enumerate(s.items("shapes")):
            if not isinstance(shape, list) or len(shape) != 3:
                s.fail(f"shapes[{i}] must be a list [m, n, k]")
            shapes.append(tuple(_parse_int(s, f"shapes[{i}]", x) for x in shape))
        threads = tuple(_parse_int(s, "thread_counts", t) for t in s.items("thread_counts"))
        return cls(
            r.text("kernel"),
            r.text("dtype"),
            r.integer("mc"),
            r.integer("nc"),
            r.integer("kc"),
            r.number("gflops"),
            r.integer("threads"),
            r.text("scope"),
            r.text("allocation"),
            sizes(r.child("analytic")),
            ranking,
            tuple(shapes),
            threads,
            s.number("budget_seconds"),
            s.integer("seed"),
            s.integer("workspace_limit"),
            s.integer("candidates"),
            s.integer("rejected"),
        )


@dataclass(frozen=True)
class Config:
    """A configuration file: its environment and one tuning per (kernel, dtype)."""

    environment: Environment
    tunings: tuple[Tuning, ...]

    def to_json(self) -> str:
        data = {
            "schema_version": SCHEMA_VERSION,
            "environment": self.environment.to_dict(),
            "tunings": [t.to_dict() for t in self.tunings],
        }
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str = "<string>") -> Config:
        """Parse and check a configuration; ValueError naming ``source`` and the fault."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"smallgemm configuration {source}: not valid JSON ({error})") from None
        r = _Reader(source, data)
        version = r.get("schema_version")
        if version != SCHEMA_VERSION:
            r.fail(
                f"schema_version is {version!r}, this smallgemm reads {SCHEMA_VERSION!r} "
                f"(re-run python -m smallgemm tune)"
            )
        tunings = tuple(
            Tuning.from_reader(_Reader(source, t, f"tunings[{i}]")) for i, t in enumerate(r.items("tunings"))
        )
        seen = set()
        for i, t in enumerate(tunings):
            if (t.kernel, t.dtype) in seen:
                r.fail(f"two tunings for kernel {t.kernel!r} and dtype {t.dtype!r} (tunings[{i}])")
            seen.add((t.kernel, t.dtype))
            try:
                kernel = kernel_by_name(t.kernel)
                if t.dtype not in ("float32", "float64"):
                    raise ValueError(f"dtype must be float32 or float64, got {t.dtype!r}")
                t.sizes.check(kernel.mr(), kernel.nr(t.dtype))
            except ValueError as error:
                r.fail(f"tunings[{i}]: {error}")
        return cls(Environment.from_reader(r.child("environment")), tunings)

    def with_tuning(self, tuning: Tuning) -> Config:
        """This configuration with ``tuning`` replacing any for the same kernel and dtype."""
        kept = tuple(t for t in self.tunings if (t.kernel, t.dtype) != (tuning.kernel, tuning.dtype))
        return Config(self.environment, (*kept, tuning))


def tuning_from_search(result) -> Tuning:
    """The Tuning a ``search.SearchResult`` chose (its fastest candidate); ValueError if none."""
    best = result.best()
    if best is None:
        raise ValueError(f"the search for {result.kernel} {result.dtype} timed no valid candidate")
    c = best.candidate
    analytic = result.measured(result.analytic)
    a = result.analytic
    return Tuning(
        c.kernel,
        c.dtype,
        c.mc,
        c.nc,
        c.kc,
        best.gflops,
        c.threads,
        c.scope,
        c.allocation,
        (a.mc, a.nc, a.kc, analytic.gflops if analytic else 0.0),
        tuple((m.candidate.mc, m.candidate.nc, m.candidate.kc, m.gflops) for m in result.ranking()),
        tuple(result.shapes),
        tuple(result.thread_counts),
        result.budget,
        result.seed,
        result.workspace_limit,
        len(result.candidates),
        len(result.rejected),
    )


def load_config(path: str | os.PathLike) -> Config:
    """Read and check a configuration file (ValueError if corrupt or of another schema)."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"smallgemm configuration {path}: cannot be read ({error})") from None
    return Config.from_json(text, str(path))


def save_config(config: Config, path: str | os.PathLike) -> None:
    """Write the configuration atomically (a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(config.to_json())
    os.replace(partial, path)


def config_path(path: str | os.PathLike | None = None) -> tuple[Path, bool]:
    """(the file to load, whether it was asked for explicitly): ``path``, SMALLGEMM_CONFIG, the cache."""
    if path is not None:
        return Path(path), True
    if settings.CONFIG_PATH:
        return Path(settings.CONFIG_PATH), True
    return default_config_path(), False


def apply_config(path: str | os.PathLike | None = None) -> Config | None:
    """Load the tuned configuration and set its block sizes; the Config applied, or None.

    The file is ``path``, else SMALLGEMM_CONFIG, else ``default_config_path()``.
    A missing file at the default location means "not tuned" (None); a missing
    file asked for explicitly, a corrupt one or one of another schema version is
    a ValueError.  A file from another CPU model or feature set is ignored with
    a RuntimeWarning.  All tunings are checked before any is applied.
    """
    file, explicit = config_path(path)
    if not file.exists():
        if explicit:
            raise ValueError(f"smallgemm configuration {file}: no such file")
        return None
    config = load_config(file)
    problem = config.environment.mismatch(Environment.current())
    if problem is not None:
        warnings.warn(
            f"ignoring smallgemm configuration {file}: {problem}; "
            f"re-run python -m smallgemm tune on this machine",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    for t in config.tunings:
        in_force.set_block_sizes(kernel_by_name(t.kernel), np.dtype(t.dtype), t.sizes)
    return config


def apply_configured() -> dict | None:
    """``apply_config()`` as the package's loader: the file applied, for ``info`` (its path,
    schema and the kernels and dtypes it tunes), or None when none is."""
    file = config_path()[0]
    config = apply_config()
    if config is None:
        return None
    return {
        "path": str(file),
        "schema": SCHEMA_VERSION,
        "tunings": [f"{t.kernel} {t.dtype}" for t in config.tunings],
    }
