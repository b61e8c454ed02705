"""smallgemm.tune: the seed-002 discipline — inputs, validation, candidates, search, record."""

import dataclasses
import json

import numpy as np
import pytest

from smallgemm.kernels import KERNELS, kernel_by_name
from smallgemm.machine import settings
from smallgemm.machine.cpu import CacheLevel
from smallgemm.plan import blocking, dispatch, in_force, strategies
from smallgemm.tune import (
    Candidate,
    Config,
    Environment,
    Tuning,
    apply_config,
    boundary_shapes,
    enumerate_candidates,
    execute_candidate,
    invalid_reason,
    reference_gemm,
    reorder_tolerance,
    reproducible_batch,
    reproducible_matrix,
    save_config,
    search,
    validate_gemm,
    workspace_bytes,
)
from smallgemm.tune import record as record_module

# Fixed caches, so that the enumeration does not depend on the host.
CACHES = (
    CacheLevel(1, 32 * 1024, 8, 64, "test"),
    CacheLevel(2, 1024 * 1024, 16, 64, "test"),
    CacheLevel(3, 8 * 1024 * 1024, 16, 64, "test"),
)
HOST = dispatch.detect()


@pytest.fixture(autouse=True)
def reset_block_sizes():
    """Block sizes and the configuration in force as they were before each test."""
    configuration = in_force.swap_tuned_configuration(None)  # read it, and put it back at once
    in_force.swap_tuned_configuration(configuration)
    yield
    for kernel in KERNELS:
        for dtype in (np.float32, np.float64):
            in_force.set_block_sizes(kernel, np.dtype(dtype), None)
    in_force.swap_tuned_configuration(configuration)


def small_candidate(dtype="float64", **changes) -> Candidate:
    """Block sizes of two tiles and KC=16: boundary shapes stay tiny."""
    mr, nr = HOST.mr(), HOST.nr(dtype)
    return dataclasses.replace(Candidate(HOST.name, dtype, 2 * mr, 2 * nr, 16), **changes)


# --- reproducible inputs -------------------------------------------------------------------------


def lcg_values(seed, count):
    """The seed's generator in plain Python integers (independent of the Numba one)."""
    x = seed ^ 0x9E3779B97F4A7C15
    out = []
    for _ in range(count):
        out.append(((x >> 32) % 2001) / 1000 - 1)
        x = (6364136223846793005 * x + 1442695040888963407) % 2**64
    return out


def test_reproducible_matrix_follows_the_seed_lcg_in_row_major_order():
    m = reproducible_matrix(7, 3, 5)
    assert m.ravel().tolist() == lcg_values(7, 15)
    assert np.all(np.abs(m) <= 1)


def test_reproducible_matrix_layout_never_changes_the_values():
    row = reproducible_matrix(42, 6, 9, "row")
    col = reproducible_matrix(42, 6, 9, "column")
    assert row.flags.c_contiguous and col.flags.f_contiguous and not col.flags.c_contiguous
    assert np.array_equal(row, col)


def test_reproducible_matrix_is_a_pure_function_of_its_arguments():
    assert np.array_equal(reproducible_matrix(3, 4, 5), reproducible_matrix(3, 4, 5))
    assert not np.array_equal(reproducible_matrix(3, 4, 5), reproducible_matrix(4, 4, 5))
    stack = reproducible_batch(3, 2, 4, 5)
    assert np.array_equal(stack[1], reproducible_matrix(4, 4, 5))
    with pytest.raises(ValueError, match="layout"):
        reproducible_matrix(3, 4, 5, "diagonal")


def test_reference_gemm_is_the_float64_product():
    a, b = reproducible_matrix(1, 5, 7), reproducible_matrix(2, 7, 3, "column")
    assert np.allclose(reference_gemm(a, b), a @ b, rtol=0, atol=1e-14)


# --- validation ----------------------------------------------------------------------------------


def test_validate_gemm_rejects_truncated_and_wrong_results():
    expected = reproducible_matrix(5, 4, 4)
    assert validate_gemm(expected.copy(), expected, 0.0) == 0
    assert validate_gemm(expected.ravel()[:-3], expected, 0.0) == 3
    assert validate_gemm(np.zeros(0), expected, 1e9) == 16
    wrong = expected.copy()
    wrong[2, 1] += 1e-3
    assert validate_gemm(wrong, expected, 1e-4) == 1
    wrong[0, 0] = np.nan
    assert validate_gemm(wrong, expected, 1e9) == 1


def test_reorder_tolerance_is_about_2k2u():
    k = 64
    assert reorder_tolerance(k, np.float64) == pytest.approx(2 * k * k * 2.0**-53, rel=1e-3)
    assert reorder_tolerance(k, np.float64) == pytest.approx(9.1e-13, rel=0.01)


# --- candidates ----------------------------------------------------------------------------------


def test_enumeration_order_and_count_are_stable():
    first = enumerate_candidates("portable", "float32", (1, 2), caches=CACHES, vendor="")
    assert first == enumerate_candidates("portable", "float32", (1, 2), caches=CACHES, vendor="")
    assert len(first) == 2 * 15
    kernel, dtype = kernel_by_name("portable"), np.dtype(np.float32)
    assert first[0].sizes == blocking.analytic(kernel, dtype, CACHES)
    assert blocking.default(kernel, dtype, CACHES, "") in (
        first[0].sizes,
        first[1].sizes,
    )  # equal to analytic here
    assert [c.threads for c in first] == [1] * 15 + [2] * 15
    assert len(set(first)) == len(first)


def test_every_enumerated_candidate_is_within_the_workspace_limit():
    everything = enumerate_candidates("portable", "float64", caches=CACHES, workspace_limit=1 << 40)
    limit = sorted(workspace_bytes(c) for c in everything)[len(everything) // 2]
    within = enumerate_candidates("portable", "float64", caches=CACHES, workspace_limit=limit)
    assert 0 < len(within) < len(everything)
    assert all(workspace_bytes(c) <= limit for c in within)
    over = [c for c in everything if c not in within]
    assert all(workspace_bytes(c) > limit and invalid_reason(c, limit) for c in over)


def test_workspace_bytes_is_computed_from_the_parameters():
    c = small_candidate("float32", threads=3)
    mr, nr = HOST.mr(), HOST.nr(np.float32)
    assert workspace_bytes(c) == 4 * (3 * (c.mc * c.kc + mr * nr) + c.kc * c.nc)


def test_execute_candidate_returns_none_for_invalid_candidates_and_shapes():
    a, b = reproducible_matrix(1, 40, 30), reproducible_matrix(2, 30, 20)
    c = small_candidate()
    assert execute_candidate(dataclasses.replace(c, mc=c.mc + 1), a, b) is None  # MR does not divide MC
    assert execute_candidate(dataclasses.replace(c, kc=0), a, b) is None
    assert execute_candidate(dataclasses.replace(c, kernel="sve"), a, b) is None
    assert execute_candidate(c, a, b, workspace_limit=workspace_bytes(c) - 1) is None
    assert execute_candidate(c, a, a) is None  # inner dimensions differ
    assert execute_candidate(c, a.astype(np.float32), b.astype(np.float32)) is None  # not its dtype
    assert execute_candidate(c, a.ravel(), b) is None


def test_execute_candidate_uses_and_restores_the_block_sizes():
    c = small_candidate()
    kernel, dtype = kernel_by_name(c.kernel), np.dtype(c.dtype)
    before = in_force.block_sizes(kernel, dtype)
    seen = []

    def spy(alpha, a, b, beta, out):
        seen.append(in_force.block_sizes(dispatch.current(), out.dtype))
        strategies.compute(alpha, a, b, beta, out)

    a, b = reproducible_matrix(1, 41, 37), reproducible_matrix(2, 37, 35, "column")
    got = execute_candidate(c, a, b, run=spy)
    assert seen == [c.sizes]
    assert in_force.block_sizes(kernel, dtype) == before
    assert validate_gemm(got, reference_gemm(a, b), reorder_tolerance(37, np.float64)) == 0


def test_boundary_shapes_straddle_every_tile_and_block_size():
    c = small_candidate()
    shapes = boundary_shapes(c)
    ms, ns, ks = ({s[i] for s in shapes} for i in range(3))
    for s, values in ((HOST.mr(), ms), (c.mc, ms), (HOST.nr(c.dtype), ns), (c.nc, ns), (c.kc, ks)):
        assert {s - 1, s, s + 1} <= values


# --- the search ----------------------------------------------------------------------------------


def skip_last_k_block(alpha, a, b, beta, c):
    """A broken product: drops the last KC block of the common dimension."""
    kc = in_force.block_sizes(dispatch.current(), c.dtype).kc
    keep = (a.shape[1] - 1) // kc * kc
    strategies.compute(alpha, a[:, :keep], b[:keep], beta, c)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_broken_candidate_is_caught_before_it_is_timed(dtype):
    timed_shape = (50, 60, 70)
    calls = []

    def broken(alpha, a, b, beta, c):
        calls.append((a.shape[0], b.shape[1], a.shape[1]))
        skip_last_k_block(alpha, a, b, beta, c)

    candidate = small_candidate(dtype)
    result = search(
        HOST.name, dtype, [timed_shape], budget=0.05, candidates=[candidate], run=broken, out=None
    )
    assert [r.candidate for r in result.rejected] == [candidate]
    assert result.rejected[0].mismatches > 0
    assert result.measurements == [] and result.best() is None
    assert timed_shape not in calls


def test_a_correct_candidate_is_validated_then_timed():
    candidate = small_candidate("float32")
    result = search(HOST.name, "float32", [(50, 60, 70)], budget=0.05, candidates=[candidate], out=None)
    assert result.rejected == []
    assert [m.candidate for m in result.measurements] == [candidate]
    assert result.best().gflops > 0


# --- the record ----------------------------------------------------------------------------------


def make_config(environment=None, **changes) -> Config:
    kernel = HOST
    mr, nr = kernel.mr(), kernel.nr(np.float64)
    tuning = Tuning(
        kernel.name,
        "float64",
        4 * mr,
        8 * nr,
        96,
        101.25,
        1,
        "compute",
        "reused",
        (2 * mr, 4 * nr, 64, 0.1 + 0.2),
        ((4 * mr, 8 * nr, 96, 101.25), (2 * mr, 4 * nr, 64, 0.1 + 0.2)),
        ((1024, 1024, 1024), (17, 33, 65)),
        (1, 2),
        60.0,
        2**64 - 1,
        64 << 20,
        19,
        0,
    )
    return Config(environment or Environment.current(), (dataclasses.replace(tuning, **changes),))


def all_values(data):
    if isinstance(data, dict):
        for v in data.values():
            yield from all_values(v)
    elif isinstance(data, list):
        for v in data:
            yield from all_values(v)
    else:
        yield data


def test_config_json_round_trips_exactly():
    config = make_config()
    text = config.to_json()
    back = Config.from_json(text)
    assert back == config
    assert back.to_json() == text
    data = json.loads(text)
    assert data["schema_version"] == "mmkts_1"
    assert not any(isinstance(v, int) for v in all_values(data))  # integers are strings (bools neither)
    assert data["tunings"][0]["search"]["seed"] == str(2**64 - 1)
    env = data["environment"]
    for key in ("cpu_model", "features", "caches", "cores", "numba", "llvmlite", "numpy"):
        assert env[key]


def test_apply_config_sets_the_recorded_block_sizes(tmp_path):
    config = make_config()
    path = tmp_path / "config.json"
    save_config(config, path)
    assert apply_config(path) == config
    assert in_force.block_sizes(HOST, np.dtype(np.float64)) == config.tunings[0].sizes


def test_a_config_from_another_environment_is_refused_with_a_warning(tmp_path):
    here = Environment.current()
    before = in_force.block_sizes(HOST, np.dtype(np.float64))
    for other in (
        dataclasses.replace(here, cpu_model="Some Other CPU"),
        dataclasses.replace(here, features=here.features[:-1]),
    ):
        path = tmp_path / "other.json"
        save_config(make_config(other), path)
        with pytest.warns(RuntimeWarning, match="ignoring smallgemm configuration"):
            assert apply_config(path) is None
        assert in_force.block_sizes(HOST, np.dtype(np.float64)) == before


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: "{not json", "not valid JSON"),
        (lambda d: {**d, "schema_version": "mmkts_0"}, "schema_version"),
        (lambda d: {k: v for k, v in d.items() if k != "tunings"}, "missing field 'tunings'"),
        (lambda d: d["tunings"][0].update(kc=96) or d, "integer written as a string"),
        (lambda d: d["tunings"][0].update(mc="7") or d, "multiple of MR"),
        (lambda d: d["tunings"][0].update(kernel="sve") or d, "unknown kernel"),
    ],
)
def test_a_corrupt_or_wrong_version_config_is_a_clear_error(tmp_path, mutate, message):
    data = mutate(json.loads(make_config().to_json()))
    path = tmp_path / "bad.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    with pytest.raises(ValueError, match=message) as error:
        apply_config(path)
    assert str(path) in str(error.value)


def test_config_location_explicit_env_then_user_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(settings, "CONFIG_PATH", None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert apply_config() is None  # no file at the default location: not an error
    save_config(make_config(), tmp_path / "cache" / "smallgemm" / "config.json")
    assert apply_config() is not None
    monkeypatch.setattr(settings, "CONFIG_PATH", str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="no such file"):
        apply_config()


def test_matmul_loads_the_config_before_its_first_product(tmp_path, monkeypatch):
    config = make_config()
    save_config(config, tmp_path / "config.json")
    monkeypatch.setattr(settings, "CONFIG_PATH", str(tmp_path / "config.json"))
    in_force.reload_configuration()
    assert in_force.block_sizes(HOST, np.dtype(np.float64)) == config.tunings[0].sizes


def test_info_names_the_tuned_configuration_in_force(tmp_path, monkeypatch):
    """info() and its text name the configuration file applied, its schema and what it tunes;
    without one, the default block sizes."""
    from smallgemm.api.info import format_info, info

    config = make_config()
    save_config(config, tmp_path / "config.json")
    monkeypatch.setattr(settings, "CONFIG_PATH", str(tmp_path / "config.json"))
    in_force.reload_configuration()
    tuned = info()["configuration"]
    assert tuned == {
        "path": str(tmp_path / "config.json"),
        "schema": "mmkts_1",
        "tunings": [f"{t.kernel} {t.dtype}" for t in config.tunings],
    }
    assert f"configuration  {tmp_path / 'config.json'} (schema mmkts_1" in format_info(info())
    monkeypatch.setattr(settings, "CONFIG_PATH", None)
    in_force.reload_configuration()
    monkeypatch.setattr(record_module, "default_config_path", lambda: tmp_path / "none.json")
    assert info()["configuration"] is None
    assert "configuration  none (default block sizes)" in format_info(info())


def test_a_corrupt_config_fails_every_product_clearly(tmp_path, monkeypatch):
    path = tmp_path / "config.json"
    path.write_text('{"schema_version": "mmkts_1", "environment": {}')
    monkeypatch.setattr(settings, "CONFIG_PATH", str(path))
    in_force.reload_configuration()
    a = np.ones((3, 3))
    for _ in range(2):
        with pytest.raises(ValueError, match="not valid JSON"):
            strategies.compute(1.0, a, a, 0.0, np.empty((3, 3)))


@pytest.mark.parametrize("name", ["avx512", "avx2", "portable"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_default_block_sizes_take_the_vendors_measured_correction(name, dtype):
    """Where a kernel records a vendor's correction (AVX-512 on Intel, where it was measured),
    the A block takes about its share of the L2 (whole MR panels, rounded up) and NC its cap;
    elsewhere the model's MC for the used KC and NC up to the configuration's nc_max.  KC never
    changes (it alone changes bits)."""
    kernel, dt = kernel_by_name(name), np.dtype(dtype)
    model = blocking.default(kernel, dt, CACHES, vendor="")
    assert model.mc == blocking.analytic_mc(kernel.mr(), kernel.nr(dt), model.kc, dt.itemsize, CACHES[1])
    assert model.nc <= kernel.config.nc_max
    assert ("GenuineIntel" in kernel.config.vendor_corrections) == (name == "avx512")
    for vendor in ("GenuineIntel", "AuthenticAMD"):
        correction = kernel.config.vendor_corrections.get(vendor)
        capped = blocking.default(kernel, dt, CACHES, vendor=vendor)
        if correction is None:
            assert capped == model
            continue
        assert capped.kc == model.kc and capped.mc % kernel.mr() == 0 and capped.mc <= model.mc
        block, panel = capped.mc * capped.kc * dt.itemsize, kernel.mr() * capped.kc * dt.itemsize
        assert capped.mc == model.mc or block - panel < correction.l2_share_for_a * CACHES[1].size <= block
        assert capped.nc <= correction.nc_max and capped.nc % kernel.nr(dt) == 0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_shared_a_block_holds_at_most_its_share_of_the_l2(dtype):
    """The rows the threads share as one packed A block: shared_a_l2s of the L2, whole rows."""
    dt = np.dtype(dtype)
    config = kernel_by_name("avx512").config
    for kc in (256, 1000, 1024):
        rows = blocking.shared_block_rows(config, blocking.BlockSizes(mc=14, nc=32, kc=kc), dt, CACHES)
        limit = config.shared_a_l2s * CACHES[1].size
        assert rows * kc * dt.itemsize <= limit < (rows + 1) * kc * dt.itemsize
