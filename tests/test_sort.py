"""gpuprivacy._sort: ``jnp.sort``/``jnp.argsort`` bit for bit, by NumPy on a CPU and by XLA elsewhere."""

from __future__ import annotations

import doctest
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import _sort

LARGE = 3 * _sort.MIN_HOST_SORT_SIZE  # one row takes the host path on a CPU
SMALL = 10  # one row stays in XLA


def assert_bitwise(actual, expected):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert actual.tobytes() == expected.tobytes()


def float_data(shape, seed=0, dtype=np.float64):
    """Normals with ties, +-0.0, +-inf and NaNs of both signs and several payloads."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    x = np.where(rng.random(shape) < 0.2, np.round(x), x).astype(dtype)  # ties
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan], dtype)
    payload = np.array([0x7FF0000000000001 if dtype == np.float64 else 0x7F800001], np.int64)
    specials = np.concatenate([specials, payload.astype(np.int64 if dtype == np.float64 else np.int32).view(dtype)])
    pick = rng.random(shape) < 0.15
    x[pick] = specials[rng.integers(0, specials.size, int(pick.sum()))]
    return x


def int_data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    x = rng.integers(max(info.min, -50), min(info.max, 50), shape, endpoint=True).astype(dtype)
    if x.size >= 4:
        x.reshape(-1)[:4] = [info.min, info.max, info.min, info.max]
    return x


CASES = [
    pytest.param(lambda shape: float_data(shape, 1), id="float64"),
    pytest.param(lambda shape: float_data(shape, 2, np.float32), id="float32"),
    pytest.param(lambda shape: int_data(shape, np.int64, 3), id="int64"),
    pytest.param(lambda shape: int_data(shape, np.int32, 4), id="int32"),
    pytest.param(lambda shape: int_data(shape, np.uint8, 5), id="uint8"),
    pytest.param(lambda shape: np.random.default_rng(6).random(shape) < 0.5, id="bool"),
]


@pytest.mark.parametrize("make", CASES)
@pytest.mark.parametrize("shape,axis", [((LARGE,), -1), ((SMALL,), 0), ((3, LARGE), 1), ((LARGE, 3), 0),
                                        ((2, 3, 500), -1), ((0,), -1), ((4, 0), 0)])
def test_equals_jnp_sort_bitwise(make, shape, axis):
    x = jnp.asarray(make(shape))
    assert_bitwise(_sort.sort(x, axis), jnp.sort(x, axis=axis))
    assert_bitwise(jax.jit(_sort.sort, static_argnums=1)(x, axis), jnp.sort(x, axis=axis))
    assert_bitwise(_sort.argsort(x, axis), jnp.argsort(x, axis=axis))
    assert_bitwise(jax.jit(_sort.argsort, static_argnums=1)(x, axis), jnp.argsort(x, axis=axis))


def test_signed_zeros_and_nans_keep_their_input_order_and_bits():
    # A row that NumPy's SIMD sort reorders: jnp.sort keeps -0.0/+0.0 and every NaN payload in input order.
    payloads = np.array([0x7FF0000000000001, 0xFFF8000000000000, 0x7FF8000000000002], np.uint64).view(np.float64)
    x = np.tile(np.concatenate([[0.0, -0.0, -0.0, 0.0, 1.0, -1.0, np.inf, -np.inf], payloads]), 200)
    x = np.random.default_rng(7).permutation(x)
    assert_bitwise(_sort.sort(jnp.asarray(x)), jnp.sort(jnp.asarray(x)))
    assert_bitwise(jax.vmap(_sort.sort)(jnp.asarray(x.reshape(8, -1))), jnp.sort(jnp.asarray(x.reshape(8, -1))))


def test_sorted_rows_are_copied_bitwise():
    """Already-sorted rows skip the sort (a linear check): still jnp.sort's output, bits included."""
    rng = np.random.default_rng(5)
    rows = np.sort(rng.standard_normal((4, LARGE)), axis=1)
    middle = int(np.searchsorted(rows[0], 0.0))
    rows[0, middle - 2:middle + 2] = [-0.0, 0.0, -0.0, 0.0]  # nondecreasing with signed zeros in input order
    rows[1] = np.round(rows[1])  # ties
    assert _sort._already_sorted(rows, -1)
    assert_bitwise(_sort.sort(jnp.asarray(rows)), jnp.sort(jnp.asarray(rows)))
    # A NaN, a descent in the last row only, or the first row unsorted: the full sort, still bitwise.
    for spoil in ("nan", "last", "first"):
        bad = rows.copy()
        if spoil == "nan":
            bad[2, 5] = np.nan
        elif spoil == "last":
            bad[3, [7, 8]] = bad[3, [8, 7]] + [0.0, 1e-9]
        else:
            bad[0, [100, 200]] = bad[0, [200, 100]]
        assert not _sort._already_sorted(bad, -1)
        assert_bitwise(_sort.sort(jnp.asarray(bad)), jnp.sort(jnp.asarray(bad)))
    assert_bitwise(_sort.sort(jnp.asarray(rows.T), axis=0), jnp.sort(jnp.asarray(rows.T), axis=0))


@pytest.mark.parametrize("make", CASES)
@pytest.mark.parametrize("row", [SMALL, LARGE])
def test_vmap_and_nested_vmap(make, row):
    x = jnp.asarray(make((3, 4, row)))
    expected = jnp.sort(x, axis=-1)
    assert_bitwise(jax.vmap(_sort.sort)(x[0]), expected[0])
    assert_bitwise(jax.vmap(jax.vmap(_sort.sort))(x), expected)
    assert_bitwise(jax.jit(jax.vmap(jax.vmap(_sort.sort)))(x), expected)
    # a batch axis that is not the leading one, and the sorted axis first
    assert_bitwise(jax.vmap(lambda v: _sort.sort(v, 0), in_axes=2, out_axes=2)(x), jnp.sort(x, axis=0))
    assert_bitwise(jax.vmap(jax.vmap(_sort.argsort), in_axes=1, out_axes=1)(x), jnp.argsort(x, axis=-1))


def test_gradients_equal_jnp_sort():
    x = jnp.asarray(np.round(np.random.default_rng(8).standard_normal(LARGE), 1))  # ties
    weights = jnp.arange(LARGE, dtype=jnp.float64)

    def loss(sort_fn):
        return lambda v: jnp.sum(sort_fn(v) * weights)

    expected = jax.grad(loss(jnp.sort))(x)
    assert_bitwise(jax.grad(loss(_sort.sort))(x), expected)
    assert_bitwise(jax.jit(jax.grad(loss(_sort.sort)))(x), expected)
    batch = jnp.stack([x, -x])
    assert_bitwise(jax.vmap(jax.grad(loss(_sort.sort)))(batch), jax.vmap(jax.grad(loss(jnp.sort)))(batch))
    primal, tangent = jax.jvp(_sort.sort, (x,), (weights,))
    expected_primal, expected_tangent = jax.jvp(jnp.sort, (x,), (weights,))
    assert_bitwise(primal, expected_primal)
    assert_bitwise(tangent, expected_tangent)


@pytest.fixture
def fresh_traces():
    """Tests that patch the module retrace: JAX caches traces of the cached per-axis sorters."""
    jax.clear_caches()
    yield
    jax.clear_caches()


def _has_callback(fn, *args, platforms=None):
    """Whether the lowered program calls the host: the NumPy FFI targets, or any Python callback."""
    traced = jax.jit(lambda *a: fn(*a)).trace(*args)
    lowered = traced.lower() if platforms is None else traced.lower(lowering_platforms=platforms)
    text = lowered.as_text()
    return "callback" in text or "gpuprivacy_numpy_" in text


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the host path is the CPU's")
def test_the_cpu_program_runs_numpy(monkeypatch, fresh_traces):
    calls = []
    numpy_sort = _sort._numpy_sort

    def spy(x, out, *, axis):
        calls.append(np.shape(x))
        return numpy_sort(x, out, axis=axis)

    monkeypatch.setattr(_sort, "_numpy_sort", spy)
    x = jnp.asarray(float_data((LARGE,), 9))
    assert _has_callback(_sort.sort, x)
    assert_bitwise(jax.jit(lambda v: _sort.sort(v))(x), jnp.sort(x))
    assert calls == [(LARGE,)]
    # Under vmap the size rule sees the whole batch, and NumPy runs once on it.
    calls.clear()
    batch = jnp.asarray(float_data((1000, 8), 10))
    nested = jax.jit(jax.vmap(jax.vmap(lambda v: _sort.sort(v))))
    assert_bitwise(nested(batch.reshape(10, 100, 8)), jnp.sort(batch).reshape(10, 100, 8))
    assert calls == [(10, 100, 8)]
    # Small arrays stay in XLA.
    assert not _has_callback(_sort.sort, jnp.zeros(SMALL))


def test_an_accelerator_program_has_no_callback(monkeypatch, fresh_traces):
    x = jnp.asarray(float_data((LARGE,), 11))
    batch = jnp.asarray(float_data((4, LARGE), 12))
    nested = jax.vmap(jax.vmap(_sort.argsort))
    # Lowered for a GPU, the program keeps only the jnp.sort branch, whatever the default backend.
    for platform in ("cuda", "rocm", "tpu"):
        assert not _has_callback(_sort.sort, x, platforms=(platform,))
        assert not _has_callback(jax.vmap(_sort.sort), batch, platforms=(platform,))
        assert not _has_callback(nested, batch[None], platforms=(platform,))
    # The backend decision forced to "accelerator" (no host-sort platform): no callback on any platform.
    monkeypatch.setattr(_sort, "HOST_SORT_PLATFORMS", ())
    assert not _has_callback(_sort.sort, x)
    assert not _has_callback(jax.vmap(_sort.sort), batch)
    assert not _has_callback(nested, batch[None])
    assert not _has_callback(jax.grad(lambda v: _sort.sort(v)[-1]), x)
    assert_bitwise(jax.jit(lambda v: _sort.sort(v))(x), jnp.sort(x))


def test_bad_axis_is_a_value_error():
    with pytest.raises(ValueError, match="out of bounds"):
        _sort.sort(jnp.zeros((3, 4)), axis=2)
    with pytest.raises(ValueError, match="out of bounds"):
        _sort.argsort(jnp.float64(1.0))


def test_docstring_examples():
    assert doctest.testmod(_sort, optionflags=doctest.NORMALIZE_WHITESPACE).failed == 0


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the host path is the CPU's")
def test_a_cpu_program_that_sorts_on_the_host_is_kept_by_the_compilation_cache(tmp_path):
    """A second process reads the program back from the persistent cache instead of compiling it.

    JAX never caches a program holding a Python callback; the host sort is a named FFI target, which it does.
    """
    script = f"""
import json, jax
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_compilation_cache_dir", {str(tmp_path / "xla")!r})
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
from jax._src import monitoring
events = []
monitoring.register_event_listener(lambda name, **kw: events.append(name))
import jax.numpy as jnp
from gpuprivacy._sort import sort, argsort
x = jnp.cos(jnp.arange({LARGE}, dtype=jnp.float64) * 7.3)
x.block_until_ready()
before = events.count("/jax/compilation_cache/cache_hits")
f = jax.jit(lambda v: (sort(v * 2.0), argsort(v))).lower(x).compile()  # this program only
text = f.as_text()
s, i = f(x)
print(json.dumps({{"hits": events.count("/jax/compilation_cache/cache_hits") - before,
                   "host": "gpuprivacy_numpy_sort" in text and "gpuprivacy_numpy_argsort" in text,
                   "sorted": bool((s == jnp.sort(x * 2.0)).all()), "argsorted": bool((i == jnp.argsort(x)).all())}}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}  # the test's own cache, not the run's
    runs = [json.loads(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                      check=True, timeout=300).stdout.splitlines()[-1]) for _ in range(2)]
    assert runs[0]["sorted"] and runs[0]["argsorted"] and runs[1]["sorted"] and runs[1]["argsorted"]
    assert runs[0]["host"] and runs[1]["host"], runs  # both sorts run on the host
    assert runs[0]["hits"] == 0 and runs[1]["hits"] == 1, runs  # the host-sorting program came from the cache


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the host path is the CPU's")
def test_a_failing_host_sort_raises_instead_of_returning(monkeypatch, fresh_traces):
    """A program never returns values the host function did not write: its error reaches the caller."""
    def broken(x, out, *, axis):
        raise MemoryError("no memory for the sort (test)")

    monkeypatch.setattr(_sort, "_numpy_sort", broken)
    x = jnp.asarray(float_data((LARGE,), 13))
    with pytest.raises(Exception, match="no memory for the sort"):
        jax.block_until_ready(jax.jit(lambda v: _sort.sort(v))(x))
