"""Tuning block sizes by the discipline of seed 002 (docs/tuning.md).

Reference and reproducible inputs (``inputs``), validation against the error
bound (``validate``), candidates with their workspace (``candidates``), the
validate-then-time search (``search``) and the configuration file that makes
its result drive ``matmul`` (``record``).
"""

from .candidates import (
    ALLOCATIONS,
    DEFAULT_WORKSPACE_LIMIT,
    SCOPES,
    Candidate,
    enumerate_candidates,
    execute_candidate,
    invalid_reason,
    workspace_bytes,
)
from .inputs import reference_gemm, reproducible_batch, reproducible_matrix
from .record import (
    SCHEMA_VERSION,
    Config,
    Environment,
    Tuning,
    apply_config,
    default_config_path,
    load_config,
    save_config,
    tuning_from_search,
)
from .search import Rejection, SearchResult, boundary_shapes, format_table, search, validate_candidate
from .validate import gamma, reorder_tolerance, validate_gemm

__all__ = [
    "ALLOCATIONS",
    "DEFAULT_WORKSPACE_LIMIT",
    "SCHEMA_VERSION",
    "SCOPES",
    "Candidate",
    "Config",
    "Environment",
    "Rejection",
    "SearchResult",
    "Tuning",
    "apply_config",
    "boundary_shapes",
    "default_config_path",
    "enumerate_candidates",
    "execute_candidate",
    "format_table",
    "gamma",
    "invalid_reason",
    "load_config",
    "reference_gemm",
    "reorder_tolerance",
    "reproducible_batch",
    "reproducible_matrix",
    "save_config",
    "search",
    "tuning_from_search",
    "validate_candidate",
    "validate_gemm",
    "workspace_bytes",
]
