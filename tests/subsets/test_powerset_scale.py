"""Regime A at scale: popcounts and removal indices on the device, no 2**n constants in programs, a limit
derived from the device's memory (refused before any oracle call), chunk-size independence of the evaluator."""

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import oracle, subsets
from gpuprivacy.mechanisms import wrappers
from gpuprivacy.mechanisms._wrappers import _baselines, _bounded_range, _common, _sens_o_matic, _subset_extension
from gpuprivacy.oracle import _levels
from gpuprivacy.subsets import _powerset

GiB = 1 << 30


def _old_popcounts(n):
    """The host table the engine used to bake into its programs (int64[2**n])."""
    out = np.zeros(1 << n, dtype=np.int64)
    for bit in range(n):
        out[1 << bit:1 << (bit + 1)] = out[:1 << bit] + 1
    return out


@pytest.mark.parametrize("n", [0, 1, 2, 5, 9, 13])
def test_device_popcounts_equal_the_host_table(n):
    expected = _old_popcounts(n)
    assert np.array_equal(np.asarray(subsets.device_popcounts(n, jnp.int64)), expected)
    assert np.array_equal(np.asarray(jax.jit(subsets.device_popcounts, static_argnums=0)(n)), expected)
    assert np.array_equal(subsets.popcounts(n), expected)  # the public host function is unchanged
    assert np.array_equal(np.asarray(subsets.device_masks(n)), np.arange(1 << n))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 10])
def test_device_removal_index_equals_exact_colex_ranks(n):
    # Exact reference: the global index of the removed set (complement of the KEEP mask) in removals(n, .).
    reference = np.empty(1 << n, dtype=np.int64)
    removed_count = np.empty(1 << n, dtype=np.int64)
    for mask in range(1 << n):
        removed = [i for i in range(n) if not (mask >> i) & 1]
        reference[mask] = subsets.removal_index(n, removed)
        removed_count[mask] = len(removed)
    for depth in sorted({0, 1, 2, n // 2, n - 1, n, n + 3}):
        if depth < 0:
            continue
        expected = np.where(removed_count <= depth, reference, -1)
        index = subsets.bitmask_to_removal_index(n, depth)
        assert isinstance(index, np.ndarray) and index.dtype == np.int64 and not index.flags.writeable
        assert np.array_equal(index, expected), (n, depth)
        masks = jnp.arange(1 << n, dtype=jnp.uint32)
        assert np.array_equal(np.asarray(subsets.removal_index_of_masks(masks, n, min(depth, n))), expected)


def test_to_powerset_matches_the_removal_index_layout():
    n, depth = 9, 4
    rng = np.random.default_rng(3)
    values = rng.normal(size=subsets.query_count(n, depth))
    index = subsets.bitmask_to_removal_index(n, depth)
    expected = np.where(index >= 0, values[np.maximum(index, 0)], -7.0)
    table = np.asarray(oracle.to_powerset(jnp.asarray(values), n, depth, -7.0))
    assert np.array_equal(table, expected)


# ---------------------------------------------------------------------------------------------
# No jitted program of the engine holds a constant of 2**n elements (n = 20: 8 MiB as int64).

N_TEXT = 20
TEXT_LIMIT = 200_000  # characters; the old popcount table alone printed as ~16 MB of hex at n = 20


def _cache_kernel(kernel, values, *args, **static):
    return functools.partial(_common._run_on_cache, kernel, "powerset", N_TEXT, N_TEXT,
                             tuple(sorted(static.items()))), (values, ()) + args


def _programs():
    n = N_TEXT
    f64 = jax.ShapeDtypeStruct((1 << n,), jnp.float64)
    i32 = jax.ShapeDtypeStruct((1 << n,), jnp.int32)
    key = jax.random.key(0)
    depth = jnp.asarray(3, jnp.int64)
    kernel, som_args = _cache_kernel(_sens_o_matic._som_release, i32, key, depth, lam_s=73, grid_size=101,
                                     epsilon=1.0, max_depth=None)
    se, se_args = _cache_kernel(_subset_extension._se_kernel, f64, key, depth, tau=3, eps0=0.3, q=20)
    tahoe, tahoe_args = _cache_kernel(_subset_extension._tahoe_kernel, f64, key, key, tau=3.0, eps0=0.3)
    dm, dm_args = _cache_kernel(_bounded_range._dm_release, f64, key, jnp.float64(3.0), depth, tau=5, epsilon=1.0,
                                rr=10.0)
    levels = jax.ShapeDtypeStruct((subsets.query_count(n, 5),), jnp.float64)
    write, _ = _levels._powerset_kernels(oracle.padded_oracle(oracle.median, 32), n, 32, 1 << 16, 256)
    return {
        "level_reduce": (lambda v: subsets.level_reduce(v, n, "min", None), (f64,)),
        "subset_max": (lambda v: subsets.subset_max(v, n), (f64,)),
        "bit_neighbours_differ": (lambda v: subsets.bit_neighbours_differ(v, n, 1.0), (f64,)),
        "to_powerset": (lambda v: oracle.to_powerset(v, n, 5, 0.0), (levels,)),
        "sens_o_matic sweep": (kernel, som_args),
        "subset_extension sweep": (se, se_args),
        "tahoe sweep": (tahoe, tahoe_args),
        "double_monotonization sweep": (dm, dm_args),
        "small_diameter sweep": (lambda v: _bounded_range._small_diameter_release(key, v, n, 3, 1.0, 1.0), (f64,)),
        "cummings_durfee extension": (lambda v: _baselines.lipschitz_extension(v, n), (f64,)),
        "round_to_grid": (lambda v: _common.round_to_grid(v, jnp.linspace(0.0, 1.0, 101)), (f64,)),
        "evaluate_powerset chunk": (write, (f64, jax.ShapeDtypeStruct((n,), jnp.float64), depth)),
    }


PROGRAMS = _programs()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_no_program_holds_a_power_set_constant(name):
    fn, args = PROGRAMS[name]
    text = jax.jit(fn).lower(*args).as_text()
    assert len(text) < TEXT_LIMIT, f"{name}: {len(text)} characters of StableHLO (a baked-in 2**n table?)"
    # No dense constant of 2**n elements either (a table would print as one long hex literal).
    assert not any(len(chunk) > 1 << 16 for chunk in text.split('"')), name


def test_the_old_host_table_would_have_been_caught():
    table = jnp.asarray(_old_popcounts(N_TEXT))
    text = jax.jit(lambda v: jax.ops.segment_min(v, table, num_segments=N_TEXT + 1)).lower(
        jax.ShapeDtypeStruct((1 << N_TEXT,), jnp.float64)).as_text()
    assert len(text) > TEXT_LIMIT


# ---------------------------------------------------------------------------------------------
# The working set the limit is computed from is what XLA actually allocates.


@pytest.mark.parametrize("name", ["sens_o_matic sweep", "subset_extension sweep", "tahoe sweep",
                                  "double_monotonization sweep", "small_diameter sweep", "cummings_durfee extension",
                                  "subset_max", "round_to_grid", "to_powerset"])
def test_the_wrappers_working_set_is_within_the_counted_bytes(name):
    # Each sweep's compiled buffers (its 2**n input, output and temporaries), per subset, stay within
    # WRAPPER_BYTES_PER_SUBSET; building the cache holds the raw and the sanitised values (16 bytes) on top of
    # nothing else. Measured at n = 20 (the programs above), where block-sized temporaries are negligible.
    fn, args = PROGRAMS[name]
    memory = jax.jit(fn).lower(*args).compile().memory_analysis()
    if memory is None:  # pragma: no cover - a backend without buffer accounting
        pytest.skip("no memory_analysis on this backend")
    used = memory.temp_size_in_bytes + memory.argument_size_in_bytes + memory.output_size_in_bytes
    per_subset = used / (1 << N_TEXT)
    assert per_subset <= subsets.WRAPPER_BYTES_PER_SUBSET, f"{name}: {per_subset:.1f} bytes per subset"


# ---------------------------------------------------------------------------------------------
# The limit comes from the device's memory, and a refusal comes before any oracle call.

def _probe(monkeypatch, nbytes, source="gpu:0 (test card), allocator bytes_limit"):
    monkeypatch.setattr(_powerset, "memory_limit", lambda device=None: (int(nbytes), source))


def _spy():
    calls = []

    @oracle.trusted
    def spy(rows, valid):
        calls.append(1)
        return jnp.where(valid, rows, 0.0).sum()

    return spy, calls


def test_a_power_set_that_does_not_fit_is_refused_before_any_oracle_call(monkeypatch):
    _probe(monkeypatch, GiB)
    budget = int(GiB * subsets.DEVICE_MEMORY_FRACTION)
    per = subsets.WRAPPER_BYTES_PER_SUBSET
    fits = max(n for n in range(33) if per * 2**n <= budget)
    assert subsets.powerset_max_n() == fits
    spy, calls = _spy()
    data = np.arange(28.0)
    key = jax.random.key(0)
    for release in [
        lambda: wrappers.cummings_durfee(key, data, oracle_fn=spy, c=1.0, epsilon=1.0, max_queries=2**29),
        lambda: wrappers.small_diameter_subset_extension(key, data, oracle_fn=spy, r=20.0, c=1.0, epsilon=1.0,
                                                          max_queries=2**29),
        lambda: wrappers.subset_extension(key, data, oracle_fn=spy, c=1.0, epsilon=1.0, delta=1e-6,
                                          max_queries=2**29),
    ]:
        with pytest.raises(ValueError) as info:
            release()
        message = str(info.value)
        assert "n=28" in message
        assert str(per * 2**28) in message  # the bytes needed
        assert str(budget) in message and "test card" in message  # the bytes available, and where
        assert f"largest n that fits is {fits}" in message
    with pytest.raises(ValueError, match=r"evaluate_powerset.*n=28.*largest n that fits is 2[56]"):
        oracle.evaluate_powerset(spy, data, max_queries=None)
    with pytest.raises(ValueError, match="to_powerset"):
        oracle.to_powerset(jnp.zeros(subsets.query_count(28, 1)), 28, 1, 0.0)
    assert not calls


def test_n_30_is_accepted_when_the_device_has_80_gb(monkeypatch):
    _probe(monkeypatch, 80e9)
    assert subsets.powerset_max_n() >= 30  # the wrappers
    assert subsets.powerset_max_n(subsets.EVALUATE_BYTES_PER_SUBSET) >= 32  # the evaluation alone
    need = subsets.check_powerset_fits(30, what="test")
    assert need == subsets.WRAPPER_BYTES_PER_SUBSET * 2**30
    _common.check_powerset_wrapper(30, "test")  # the wrappers' own check passes (nothing is run)
    assert _common.use_powerset(30, 30)


def test_the_real_card_of_an_h100_takes_n_30(monkeypatch):
    # memory_stats()["bytes_limit"] read on an H100 80GB HBM3 with JAX's defaults (75% of the card,
    # XLA_PYTHON_CLIENT_MEM_FRACTION), 2026-11-26.
    _probe(monkeypatch, 63_763_906_560, "gpu:0 (NVIDIA H100 80GB HBM3), allocator bytes_limit")
    assert subsets.powerset_max_n() == 30
    assert subsets.powerset_max_n(subsets.EVALUATE_BYTES_PER_SUBSET) == 32


def test_host_memory_is_the_limit_without_an_allocator(monkeypatch):
    limit, source = subsets.memory_limit(jax.devices("cpu")[0])
    assert source.endswith("host physical memory") and limit > 0
    budget, where = subsets.powerset_budget(jax.devices("cpu")[0])
    assert budget == int(limit * subsets.HOST_MEMORY_FRACTION) and str(limit) in where


def test_the_hard_ceiling_is_32(monkeypatch):
    _probe(monkeypatch, 1 << 60)
    assert subsets.POWERSET_MAX_N == 32 and subsets.powerset_max_n() == 32
    with pytest.raises(ValueError, match="n=33.*POWERSET_MAX_N=32"):
        subsets.check_powerset_fits(33)


def test_popcounts_follows_the_new_limit():
    with pytest.raises(ValueError, match="n must be <= 32"):
        subsets.popcounts(33)


# ---------------------------------------------------------------------------------------------
# evaluate_powerset: the values do not depend on chunk_size, bit for bit.

@pytest.mark.parametrize("name", ["mean", "median", "variance"])
def test_evaluate_powerset_is_bitwise_independent_of_chunk_size(name):
    n = 12
    data = np.random.default_rng(5).normal(size=n) * 1e3
    fn = getattr(oracle, name)
    reference = np.asarray(oracle.evaluate_powerset(fn, data)).view(np.uint64)
    for chunk in (1, 7, 1000, 2**n):
        values = np.asarray(oracle.evaluate_powerset(fn, data, chunk_size=chunk)).view(np.uint64)
        assert np.array_equal(values, reference), (name, chunk)


def test_evaluate_powerset_verifies_determinism_chunk_by_chunk():
    data = np.arange(8.0)
    values = oracle.evaluate_powerset(oracle.sum_, data, chunk_size=7, verify_determinism=True)
    assert values.shape == (256,)
    for mask in itertools.islice(range(256), 0, 256, 17):
        assert float(values[mask]) == sum(float(data[i]) for i in range(8) if (mask >> i) & 1)


def test_default_chunks_are_a_byte_budget():
    assert _levels.powerset_chunk_size(30, "cpu") == 1 << 16
    assert _levels.powerset_chunk_size(30, "gpu") == 1 << 23
    assert _levels.powerset_chunk_size(4, "gpu") == 16
    assert _levels.powerset_micro_batch("cpu") == 256 and _levels.powerset_micro_batch("gpu") == 1 << 15
    assert math.log2(_levels.powerset_chunk_size(20, "cpu")).is_integer()


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.int32, jnp.int64])
@pytest.mark.parametrize("op", ["min", "max"])
def test_level_reductions_agree_across_methods_and_blocks(dtype, op):
    # The accelerators' dense per-size reduction, the CPU's scatter and one segment reduction over everything
    # give the same values (min and max are exact), whatever the block size.
    n = 11
    values = jnp.asarray(np.random.default_rng(7).integers(-1000, 1000, size=1 << n)).astype(dtype)
    sizes = jnp.asarray(_old_popcounts(n))
    segment = jax.ops.segment_min if op == "min" else jax.ops.segment_max
    expected = np.asarray(segment(values, sizes, num_segments=n + 1))
    for method in ("scatter", "dense"):
        for block in (16, 256, 1 << n):
            out = subsets.powerset_level_reduce(lambda masks: values[masks], n, op, block=block, method=method)
            assert out.dtype == values.dtype and np.array_equal(np.asarray(out), expected), (method, block)


def test_subset_max_and_blockwise_maps_match_brute_force():
    n = 8
    values = np.random.default_rng(8).normal(size=1 << n)
    closure = np.asarray(subsets.subset_max(jnp.asarray(values), n))
    expected = [max(values[z] for z in range(1 << n) if z & s == z) for s in range(1 << n)]
    assert np.array_equal(closure, expected)
    for block in (1, 8, 1 << n):
        doubled = subsets.powerset_map(lambda masks: 2 * jnp.asarray(values)[masks], n, block=block)
        assert np.array_equal(np.asarray(doubled), 2 * values)
