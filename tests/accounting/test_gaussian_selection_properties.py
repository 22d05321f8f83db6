"""Properties of the Gaussian selection bounds (spec 004 pitfall 7.4), API contracts and bad inputs."""

import math

import numpy as np
import pytest

from gpuprivacy import accounting

SQRT3 = math.sqrt(3.0)


def _strictly_increasing(values, axis=-1):
    return bool(np.all(np.diff(values, axis=axis) > 0))


# ------------------------------------------------------------------------------------------------
# Monotonicity (property tests on random parameters; each sweep is one vmapped call).


def test_rnm_monotone_in_d_sensitivity_range_and_sigma():
    rng = np.random.default_rng(10)
    sigma = np.exp(rng.uniform(np.log(0.05), np.log(1.0), 6))[:, None]
    sensitivity = rng.uniform(1e-3, 0.2, 6)[:, None]
    d = np.array([2, 3, 5, 10, 30, 100, 1000, 10**5])[None, :]
    assert _strictly_increasing(accounting.gaussian_rnm_epsilon(sigma, d, sensitivity, 0.0, 1.0))
    deltas = np.array([1e-4, 1e-3, 1e-2, 0.1, 0.5, 1.0])[None, :]
    assert _strictly_increasing(accounting.gaussian_rnm_epsilon(sigma, 20, deltas, 0.0, 1.0))
    widths = np.array([1.0, 1.5, 2.0, 4.0, 8.0])[None, :]
    assert _strictly_increasing(accounting.gaussian_rnm_epsilon(sigma, 20, sensitivity, -1.0, widths - 1.0))
    sigmas = np.array([0.05, 0.1, 0.2, 0.5, 1.0, 3.0])[None, :]
    assert _strictly_increasing(-accounting.gaussian_rnm_epsilon(sigmas, 20, sensitivity, 0.0, 1.0))


def test_rnm_depends_on_range_only_through_its_width():
    eps = accounting.gaussian_rnm_epsilon(0.2, 50, 0.01, np.array([0.0, -3.0, 10.0]), np.array([1.0, -2.0, 11.0]))
    np.testing.assert_allclose(eps, eps[0], rtol=1e-12)


def test_at_increasing_in_t_and_sensitivity():
    rng = np.random.default_rng(11)
    for _ in range(3):
        sigma_x = float(np.exp(rng.uniform(np.log(0.05), np.log(0.5))))
        rho = float(rng.uniform(0.0, 1.0))
        post, bottom = accounting.gaussian_at_epsilon_table(200, sigma_x, SQRT3 * sigma_x, rho, 1e-3, 0.0, 1.0)
        assert _strictly_increasing(post) and _strictly_increasing(bottom)
    deltas = np.array([1e-4, 1e-3, 1e-2, 0.1, 0.5])
    assert _strictly_increasing(accounting.gaussian_at_epsilon(5, 0.2, 0.3, 0.4, deltas, 0.0, 1.0))


def test_at_shape_in_threshold():
    rho = np.linspace(0.0, 1.0, 21)
    eps = accounting.gaussian_at_epsilon(np.array([1, 2, 3, 5, 10])[:, None], 0.15, 0.15 * SQRT3, rho[None, :], 1e-3,
                                         0.0, 1.0)
    assert _strictly_increasing(eps[0])  # t = 1 depends on rho - a only: increasing
    np.testing.assert_allclose(eps[1], eps[1][::-1], rtol=1e-9)  # t = 2: symmetric about (a + b)/2 ...
    assert np.argmin(eps[1]) == 10  # ... with its minimum there
    assert _strictly_increasing(-eps[2:], axis=1)  # t >= 3: decreasing towards rho = b


def test_at_t1_does_not_depend_on_upper():
    eps = accounting.gaussian_at_epsilon(1, 0.2, 0.3, 0.4, 0.05, 0.0, np.array([1.0, 2.0, 10.0]))
    np.testing.assert_allclose(eps, eps[0], rtol=1e-12)
    assert not np.allclose(accounting.gaussian_at_epsilon(2, 0.2, 0.3, 0.4, 0.05, 0.0, np.array([1.0, 2.0])),
                           eps[0])


# ------------------------------------------------------------------------------------------------
# API contracts: broadcasting, scalars, chunking, tables, cap, evaluator agreement.


def test_scalar_in_float_out_and_broadcast_shapes():
    assert isinstance(accounting.gaussian_rnm_epsilon(0.2, 10, 1e-3, 0.0, 1.0), float)
    assert isinstance(accounting.gaussian_at_epsilon(np.int64(3), np.float64(0.2), 0.3, 0.5, 1e-3, 0, 1), float)
    out = accounting.gaussian_rnm_epsilon(np.array([0.1, 0.2, 0.3])[:, None], np.array([2, 10]), 1e-3, 0.0, 1.0)
    assert out.shape == (3, 2) and out.dtype == np.float64
    assert accounting.gaussian_rnm_epsilon(np.zeros((0,)) + 0.1, 5, 1e-3, 0.0, 1.0).shape == (0,)
    with pytest.raises(ValueError, match="broadcast"):
        accounting.gaussian_rnm_epsilon(np.ones(3), np.array([2, 3]), 1e-3, 0.0, 1.0)


def test_batched_equals_one_at_a_time_across_chunk_sizes():
    rng = np.random.default_rng(12)
    sigma = np.exp(rng.uniform(np.log(0.05), np.log(1.0), 300))
    d = rng.integers(2, 500, 300)
    batch = accounting.gaussian_rnm_epsilon(sigma, d, 1e-3, 0.0, 1.0)  # > 256 rows: chunked kernel
    single = np.array([accounting.gaussian_rnm_epsilon(s, k, 1e-3, 0.0, 1.0) for s, k in zip(sigma[:4], d[:4])])
    small = accounting.gaussian_rnm_epsilon(sigma[:4], d[:4], 1e-3, 0.0, 1.0)  # <= 16 rows: small kernel
    np.testing.assert_array_equal(single, small)
    np.testing.assert_allclose(batch[:4], small, rtol=1e-14, atol=0)


def test_table_matches_pointwise_and_cap_is_the_maximum():
    args = (0.15, 0.15 * SQRT3, 0.3, 1e-3, 0.0, 1.0)
    post, bottom = accounting.gaussian_at_epsilon_table(12, *args)
    assert post.shape == bottom.shape == (12,)
    t = np.arange(1, 13)
    np.testing.assert_allclose(post, accounting.gaussian_at_epsilon(t, *args), rtol=1e-14)
    np.testing.assert_allclose(bottom, accounting.gaussian_at_epsilon_no_top(t, *args), rtol=1e-14)
    for k in (1, 5, 12):
        assert accounting.gaussian_at_epsilon_capped(k, *args) == max(post[:k].max(), bottom[k - 1])
    with pytest.raises(ValueError, match="scalar"):
        accounting.gaussian_at_epsilon_table(5, np.array([0.1, 0.2]), 0.3, 0.5, 1e-3, 0.0, 1.0)


def test_quadrature_and_mpmath_agree_on_random_points():
    rng = np.random.default_rng(13)
    sigma, d = float(np.exp(rng.uniform(np.log(0.03), np.log(1.0)))), int(rng.integers(2, 10**4))
    sensitivity = float(rng.uniform(1e-4, 0.3))
    quadrature = accounting.gaussian_rnm_epsilon(sigma, d, sensitivity, -0.5, 0.5)
    assert quadrature == pytest.approx(accounting.gaussian_rnm_epsilon(sigma, d, sensitivity, -0.5, 0.5,
                                                                       method="mpmath"), rel=1e-9)
    t, sigma_x = int(rng.integers(1, 10**3)), float(np.exp(rng.uniform(np.log(0.03), np.log(1.0))))
    args = (t, sigma_x, sigma_x * float(rng.uniform(0.3, 3.0)), float(rng.uniform(-0.5, 1.5)), sensitivity, 0.0, 1.0)
    quadrature = accounting.gaussian_at_epsilon_no_top(*args)
    assert quadrature == pytest.approx(accounting.gaussian_at_epsilon_no_top(*args, method="mpmath"), rel=1e-9)


def test_insufficient_resolution_raises_instead_of_returning_a_number():
    # t = 1 with sigmaX / sigmaZ = 1000: curvature ~6e5 at the mode, a wide saturated side.
    args = (1, 1.0, 1e-3, 0.5, 0.01, 0.0, 1.0)
    with pytest.raises(ValueError, match="could not resolve.*num_points.*mpmath"):
        accounting.gaussian_at_epsilon(*args)
    closed = 0.011374221372040472  # t = 1 closed form
    assert accounting.gaussian_at_epsilon(*args, method="mpmath") == pytest.approx(closed, rel=1e-9)


# ------------------------------------------------------------------------------------------------
# Bad inputs: a ValueError / TypeError naming the argument and the value.

RNM_OK = dict(sigma=0.2, d=10, sensitivity=1e-3, lower=0.0, upper=1.0)
AT_OK = dict(t=3, sigma_threshold=0.2, sigma_query=0.3, threshold=0.5, sensitivity=1e-3, lower=0.0, upper=1.0)


@pytest.mark.parametrize("change, match", [
    (dict(sigma=0.0), "sigma must be finite and > 0, got 0.0"),
    (dict(sigma=-1.0), "sigma must be finite and > 0, got -1.0"),
    (dict(sigma=float("nan")), "sigma must be finite, got nan"),
    (dict(d=1), "d must be an integer >= 2, got 1.0"),
    (dict(d=2.5), "d must be an integer, got 2.5"),
    (dict(lower=1.0, upper=0.0), "lower must be < upper"),
    (dict(lower=0.0, upper=0.0), "lower must be < upper"),
    (dict(sensitivity=2.0), r"sensitivity must lie in \(0, upper - lower\], got sensitivity=2.0"),
    (dict(sensitivity=0.0), "sensitivity must be finite and > 0, got 0.0"),
    (dict(upper=float("inf")), "upper must be finite, got inf"),
    (dict(sigma=np.array([0.1, -0.1])), "sigma must be finite and > 0, got -0.1"),
])
def test_rnm_bad_inputs(change, match):
    with pytest.raises(ValueError, match=match):
        accounting.gaussian_rnm_epsilon(**{**RNM_OK, **change})


@pytest.mark.parametrize("change, match", [
    (dict(t=0), "t must be an integer >= 1, got 0.0"),
    (dict(t=1.5), "t must be an integer, got 1.5"),
    (dict(sigma_threshold=0.0), "sigma_threshold must be finite and > 0"),
    (dict(sigma_query=-2.0), "sigma_query must be finite and > 0, got -2.0"),
    (dict(threshold=float("inf")), "threshold must be finite, got inf"),
    (dict(lower=2.0), "lower must be < upper"),
    (dict(sensitivity=1.5), "sensitivity must lie in"),
])
def test_at_bad_inputs(change, match):
    for fn in (accounting.gaussian_at_epsilon, accounting.gaussian_at_epsilon_no_top):
        with pytest.raises(ValueError, match=match):
            fn(**{**AT_OK, **change})


def test_bad_options_and_types():
    with pytest.raises(ValueError, match="method must be one of"):
        accounting.gaussian_rnm_epsilon(**RNM_OK, method="simpson")
    with pytest.raises(ValueError, match="num_points must be odd"):
        accounting.gaussian_rnm_epsilon(**RNM_OK, num_points=4096)
    with pytest.raises(TypeError, match="certified must be True or False"):
        accounting.gaussian_rnm_epsilon(**RNM_OK, certified="yes")
    with pytest.raises(TypeError, match="sigma must be a real number"):
        accounting.gaussian_rnm_epsilon(**{**RNM_OK, "sigma": "0.2"})
    with pytest.raises(TypeError, match="d must be a real number"):
        accounting.gaussian_rnm_epsilon(**{**RNM_OK, "d": True})
    with pytest.raises(ValueError, match="k must be >= 1"):
        accounting.gaussian_at_epsilon_capped(0, 0.2, 0.3, 0.5, 1e-3, 0.0, 1.0)
    with pytest.raises(ValueError, match="t_max must be >= 1"):
        accounting.gaussian_at_epsilon_table(0, 0.2, 0.3, 0.5, 1e-3, 0.0, 1.0)


# ------------------------------------------------------------------------------------------------
# Docstring examples of the public API run under the strict test configuration.

DOCUMENTED = ["gaussian_rnm_epsilon", "gaussian_at_epsilon", "calibrate_sigma", "zhu_wang_at_epsilon",
              "gaussian_rnm_epsilon_postprocessing"]


@pytest.mark.parametrize("name", DOCUMENTED)
def test_docstrings_have_examples_and_references(name):
    # tests/test_doctests.py runs the examples.
    fn = getattr(accounting, name)
    assert ">>>" in fn.__doc__ and "References:" in fn.__doc__ or name == "calibrate_sigma"
