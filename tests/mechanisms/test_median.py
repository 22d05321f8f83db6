"""The private-median sampler, routes, batching, validation and baselines (spec 003 Sec. 2.6.4-2.6.6, 5.4, 5.5)."""


import jax
import numpy as np
import pytest
from scipy import stats

from gpuprivacy import PureDP
from gpuprivacy.mechanisms import median

TEST_FAILURE_RATE = 1e-6
PARAMS = dict(epsilon=1.0, min_density=0.5, radius=1.0, median_bound=3.0, constant=2.0)
N = 41
# Evenly spread records 0.7 apart (> 6 delta = 0.59): about 11 Pareto rows survive (spec 2.6.3).
SPREAD_PARAMS = dict(PARAMS, median_bound=10.0)


def spread(n=N, spacing=0.7):
    return (np.arange(n) - n // 2) * spacing


def bimodal(n=N, gap=2.0, seed=0):
    rng = np.random.default_rng(seed)
    return np.r_[rng.uniform(-gap - 0.3, -gap, n // 2), rng.uniform(gap, gap + 0.3, n - n // 2)]


# --- spec 5.5 item 3: sampler against the exact CDF, with a power check ------------------------------------

@pytest.mark.parametrize("kind", ["multi-row", "certified"])
def test_sampler_matches_the_exact_cdf(kind):
    if kind == "multi-row":
        x, params = spread(), SPREAD_PARAMS
        hulls = median.typical_hulls(x, **params)
        assert not hulls.certified and hulls.keep.sum() > 1          # a genuinely piecewise density
    else:
        x = np.random.default_rng(1).uniform(-1, 1, 400)
        params = dict(PARAMS, median_bound=10.0, constant=6.0)
        assert median.typical_hulls(x, **params).certified
    # max_rows = full_rows (12 here): the smallest table that never overflows, and a kernel shared with other tests.
    rows = median.median_parameters(len(x), **params).full_rows
    samples = median.private_median_trials(jax.random.key(3), np.tile(x, (10_000, 1)), **params,
                                           max_rows=rows).values
    # One piece table per data set, many draws: all distinct, all inside [-B, B].
    support = median.median_parameters(len(x), **params).support
    assert np.all(np.abs(samples) <= support) and np.unique(samples).size == samples.size
    cdf = lambda w: median.private_median_cdf(x, w, **params)  # noqa: E731
    assert stats.kstest(samples, cdf).pvalue > TEST_FAILURE_RATE
    # Power: the same test rejects a slightly wrong distribution (shifted by 30% of the Laplace scale).
    scale = median.median_parameters(len(x), **params).scale
    assert stats.kstest(samples, lambda w: cdf(np.asarray(w) - 0.3 * scale)).pvalue < TEST_FAILURE_RATE


# --- routes: fast path, capped, overflow; batching and determinism --------------------------------------

def test_routes_give_identical_releases():
    x = spread()
    key = jax.random.key(5)
    capped = median.private_median(key, x, **SPREAD_PARAMS)
    overflow = median.private_median(key, x, **SPREAD_PARAMS, max_rows=1)
    assert int(capped.info.nonprivate_route) == 1 and int(overflow.info.nonprivate_route) == 2
    assert int(capped.info.nonprivate_num_rows) == int(overflow.info.nonprivate_num_rows) > 1
    assert float(capped.value) == float(overflow.value)
    certified = median.private_median(key, np.random.default_rng(1).uniform(-1, 1, 400),
                                      **dict(PARAMS, median_bound=10.0, constant=6.0))
    assert int(certified.info.nonprivate_route) == 0 and int(certified.info.nonprivate_num_rows) == 1


def test_the_traced_kernel_builds_the_overflow_pass_only_when_rows_can_overflow(monkeypatch):
    # The traced kernel holds every route; the overflow pass (a second envelope, with room for every row) is
    # built only when the cap is below the number of rows that can survive. At the defaults the cap is that
    # number (median_config caps max_rows at full_rows) and the pass would be dead code, compiled for nothing.
    from gpuprivacy.mechanisms._median import _private_median as kernels
    from gpuprivacy.mechanisms._median._config import median_config

    built = []
    full_rows = kernels._full_rows
    monkeypatch.setattr(kernels, "_full_rows", lambda s, cfg, size: built.append(size) or full_rows(s, cfg, size))
    x = jax.numpy.asarray(spread())
    for max_rows, sizes in ((64, "cap only"), (1, "cap and overflow")):
        cfg = median_config(N, **SPREAD_PARAMS, max_rows=max_rows)
        kernel_cfg = kernels._kernel_config(cfg, max_rows=cfg.max_rows)
        built.clear()
        jax.make_jaxpr(lambda x: kernels._route_tables(kernels.snap(x, kernel_cfg), kernel_cfg, True,
                                                       jax.numpy.float64(1.0)))(x)
        want = [cfg.max_rows] if sizes == "cap only" else [cfg.max_rows, cfg.full_rows]
        assert (cfg.max_rows == cfg.full_rows) == (sizes == "cap only") and built == want, (max_rows, built)


def test_jit_vmap_and_trials_equal_the_unbatched_release():
    rng = np.random.default_rng(6)
    data = np.stack([spread(), rng.uniform(-1, 1, N), bimodal(gap=0.5, seed=2), rng.normal(0, 1, N)])
    key = jax.random.key(7)
    keys = jax.random.split(key, len(data))
    loop = np.array([float(median.private_median(k, x, **SPREAD_PARAMS).value) for k, x in zip(keys, data)])
    # Traced data need clip=True (refused otherwise; a no-op here: the domain is unbounded and the data finite).
    vmapped = np.asarray(jax.vmap(lambda k, x: median.private_median(k, x, **SPREAD_PARAMS, clip=True).value)(keys,
                                                                                                            data))
    with pytest.raises(TypeError, match="clip=True"):
        jax.vmap(lambda k, x: median.private_median(k, x, **SPREAD_PARAMS).value)(keys, data)
    np.testing.assert_array_equal(vmapped, loop)
    # max_rows = 1 sends every multi-row trial to the overflow route; the releases do not change.
    trials = median.private_median_trials(key, data, **SPREAD_PARAMS, max_rows=1)
    np.testing.assert_array_equal(trials.values, loop)
    assert trials.overflow_rate == 0.25 and trials.fast_path_rate == 0.5
    assert median.private_median(keys[0], data[0], **SPREAD_PARAMS).value == loop[0]


def test_an_epsilon_grid_builds_each_kernel_once_per_data_size():
    """Epsilon is an argument of the private median's compiled kernels, not part of their static configuration.

    After one epsilon has run every route (certified, capped, overflow; eager, batched and traced), other
    epsilons on data of the same size build no program at all, and each release is still the one of the
    density at its own epsilon (its scale, and a value that changes with epsilon for the same key).
    """
    rng = np.random.default_rng(11)
    data = np.stack([spread(), rng.uniform(-1, 1, N), bimodal(gap=0.5, seed=2), rng.normal(0, 1, N)])
    key = jax.random.key(12)

    def every_route(epsilon):
        params = dict(SPREAD_PARAMS, epsilon=epsilon)
        eager = [median.private_median(key, x, **params) for x in data[:3]]
        overflow = median.private_median(key, data[0], **params, max_rows=1)
        batched = median.private_median_trials(key, data, **params, max_rows=1)
        traced = jax.jit(jax.vmap(lambda k, x: median.private_median(k, x, **params, clip=True).value))(
            jax.random.split(key, len(data)), data)
        assert {int(r.info.nonprivate_route) for r in eager + [overflow]} == {0, 1, 2}
        return [float(r.value) for r in eager + [overflow]] + list(batched.values) + list(np.asarray(traced)), \
            float(eager[0].info.scale)

    first, scale_first = every_route(1.0)
    built = []  # the jitted function of every XLA program built from here on (compiled, or read from the cache)

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            built.append(kwargs.get("fun_name"))

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        # The traced route builds one program per call of the user's jit (the closure is new), which carries
        # epsilon as a constant; the library's own kernels are built no more.
        others = [every_route(epsilon) for epsilon in (0.5, 2.0)]
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    library_kernels = [name for name in built if "<lambda>" not in str(name)]
    assert library_kernels == [], library_kernels
    for values, scale in others:
        assert scale != scale_first and np.all(np.asarray(values) != np.asarray(first))


def test_records_outside_the_range_are_legal_and_clipping_is_exact():
    x = np.random.default_rng(8).standard_cauchy(N) * 10
    assert np.abs(x).max() > 20
    params = dict(PARAMS, median_bound=1.0)
    cfg = median.median_parameters(N, **params)
    clipped = np.clip(x, -cfg.clip_bound * cfg.unit, cfg.clip_bound * cfg.unit)
    key = jax.random.key(9)
    assert float(median.private_median(key, x, **params).value) == float(median.private_median(key, clipped,
                                                                                                **params).value)


# --- validation (issue: bad input gives clear errors) -------------------------------------------------------

@pytest.mark.parametrize("change, match", [
    (dict(min_density=0.0), "min_density"), (dict(min_density=-1.0), "min_density"),
    (dict(radius=0.0), "radius"), (dict(min_density=0.5, radius=1.5), "<= 1/2"),
    (dict(median_bound=0.0), "median_bound"), (dict(constant=0.0), "constant"),
    (dict(epsilon=0.0), "epsilon"), (dict(epsilon=float("nan")), "epsilon"),
    (dict(grid_resolution=3), "power of two"), (dict(median_index="middle"), "median_index"),
    (dict(constant=0.1), "too small"),
])
def test_bad_parameters_raise_clear_errors(change, match):
    with pytest.raises((ValueError, TypeError), match=match):
        median.private_median(jax.random.key(0), bimodal(), **dict(PARAMS, **change))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_data_raise(bad):
    x = bimodal()
    x[3] = bad
    with pytest.raises(ValueError, match="finite|NaN|inf"):
        median.private_median(jax.random.key(0), x, **PARAMS)
    with pytest.raises(ValueError):
        median.private_median_trials(jax.random.key(0), x[None, :], **PARAMS)


def test_shape_and_key_errors():
    with pytest.raises(ValueError, match="vector"):
        median.private_median(jax.random.key(0), bimodal()[None, :], **PARAMS)
    with pytest.raises((ValueError, TypeError), match="key"):
        median.private_median(jax.random.split(jax.random.key(0), 2), bimodal(), **PARAMS)


def test_no_window_constraints_warns():
    with pytest.warns(median.MedianParameterWarning, match="K = floor"):
        out = median.private_median(jax.random.key(0), np.linspace(-1, 1, 11), **dict(PARAMS, constant=6.0))
    assert int(out.info.num_windows) == 0 and np.isfinite(float(out.value))


def test_guarantees():
    assert median.private_median_guarantee(**PARAMS) == PureDP(epsilon=1.0)
    assert median.exponential_mechanism_median_guarantee(epsilon=0.5, lower=-4.0, upper=4.0) == PureDP(epsilon=0.5)


# --- baselines ------------------------------------------------------------------------------------------

def exponential_median_cdf(x, lower, upper, epsilon):
    edges = np.r_[lower, np.sort(np.clip(x, lower, upper)), upper]
    width = np.diff(edges)
    weight = width * np.exp(-epsilon / 2 * np.abs(np.arange(len(x) + 1) - len(x) / 2))
    weight = weight / weight.sum()

    def cdf(w):
        w = np.asarray(w)[..., None]
        fraction = np.clip((w - edges[:-1]) / np.where(width > 0, width, 1.0), 0, 1)
        return np.sum(weight * fraction, axis=-1)
    return cdf


def test_exponential_mechanism_median_matches_its_exact_cdf():
    x = bimodal()
    params = dict(epsilon=1.0, lower=-4.0, upper=4.0)
    run = jax.jit(jax.vmap(lambda k: median.exponential_mechanism_median(k, x, **params).value))
    samples = np.asarray(run(jax.random.split(jax.random.key(10), 20_000)))
    cdf = exponential_median_cdf(x, -4.0, 4.0, 1.0)
    assert stats.kstest(samples, cdf).pvalue > TEST_FAILURE_RATE
    assert stats.kstest(samples, lambda w: cdf(np.asarray(w) - 0.1)).pvalue < TEST_FAILURE_RATE
    with pytest.raises(ValueError, match="lower must be < upper"):
        median.exponential_mechanism_median(jax.random.key(0), x, epsilon=1.0, lower=1.0, upper=1.0)


def test_nonprivate_median_conventions():
    assert median.nonprivate_median([3.0, 1.0, 2.0, 4.0]) == 2.0       # l = ceil(n/2)
    assert median.nonprivate_median([5.0, 1.0, 2.0]) == 2.0


@pytest.mark.parametrize("name", ["private_median", "private_median_trials", "exponential_mechanism_median"])
def test_docstrings_have_examples_and_references(name):
    # tests/test_doctests.py runs the examples.
    assert ">>>" in getattr(median, name).__doc__
    if name != "private_median_trials":
        assert "References:" in getattr(median, name).__doc__ and ".. math::" in getattr(median, name).__doc__


def test_cli_estimator(tmp_path, capsys):
    from gpuprivacy.cli import main

    path = tmp_path / "d.csv"
    path.write_text("v\n" + "\n".join(map(str, np.random.default_rng(12).uniform(-1, 1, 400))), encoding="utf-8")
    common = ["estimate", "--data", str(path), "--column", "v", "--statistic", "median", "--mechanism",
              "private-median", "--epsilon", "1", "--json", "--seed", "3"]
    assert main(common + ["--min-density", "0.5", "--radius", "1", "--median-bound", "10"]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert out["guarantee"] == {"type": "PureDP", "epsilon": 1.0} and abs(out["value"]) < 1.0
    try:
        code = main(common)
    except SystemExit as exit_:
        code = exit_.code
    assert code != 0 and "--min-density" in capsys.readouterr().err


def test_traced_calls_with_too_many_rows_point_to_the_batched_driver():
    # Under vmap the overflow route must live inside the kernel; beyond 2048 rows that is refused
    # up front (a parameter-only error, never a data-dependent one).
    data = np.zeros((2, 10_000))
    with pytest.raises(ValueError, match="private_median_trials"):
        jax.vmap(lambda k, x: median.private_median(k, x, **dict(PARAMS, median_bound=10.0, constant=1.0),
                                                    clip=True).value)(
            jax.random.split(jax.random.key(0), 2), data)
