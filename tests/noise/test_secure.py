"""The secure release path: exact grid outputs, exact discrete noise law, validation."""

import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gpuprivacy import noise
from tests.conftest import TEST_FAILURE_RATE
from tests.noise import _reference as reference

NUM_SAMPLES = 100_000
COARSE = 2.0**-2  # a grid coarse enough that the noise law has few, well-filled bins


@pytest.fixture(scope="module")
def values():
    # Values that are not on any grid, over a wide range of magnitudes and signs.
    rng = np.random.default_rng(0)
    return rng.uniform(-100.0, 100.0, NUM_SAMPLES) * rng.choice([1e-3, 1.0, 1e3], NUM_SAMPLES)


def _grid_index(values, granularity):
    return np.round(values / granularity)  # round half to even, as the sampler does


def test_secure_laplace_scale_closed_form():
    assert noise.secure_laplace_scale(1.0, 1.0, 2.0**-20) == 2.0**20 + 1
    assert noise.secure_laplace_scale(0.5, 2.0, 0.25) == (2.0 + 0.25) / (0.5 * 0.25)


@pytest.mark.parametrize("epsilon,sensitivity,granularity", [(0.3, 1.0, 2.0**-20), (1.1, 0.7, 2.0**-10),
                                                             (1e-3, 3.3, 2.0**-30)])
def test_secure_laplace_scale_rounds_up_to_the_nearest_float(epsilon, sensitivity, granularity):
    exact = (Fraction(sensitivity) + Fraction(granularity)) / (Fraction(epsilon) * Fraction(granularity))
    scale = noise.secure_laplace_scale(epsilon, sensitivity, granularity)
    assert Fraction(scale) >= exact
    assert Fraction(math.nextafter(scale, 0.0)) < exact


@pytest.mark.parametrize("granularity", [2.0**-20, COARSE, 1.0, 8.0])
def test_secure_laplace_outputs_lie_exactly_on_the_grid(granularity, values, key):
    out = np.asarray(noise.secure_laplace(key, values, epsilon=1.0, sensitivity=1.0, granularity=granularity))
    assert out.dtype == np.float64 and out.shape == values.shape
    index = out / granularity  # exact: dividing by a power of two
    np.testing.assert_array_equal(index, np.round(index))


def test_secure_gaussian_outputs_lie_exactly_on_the_grid(values, key):
    out = np.asarray(noise.secure_gaussian(key, values, sigma=3.0))
    index = out / 2.0**-20
    np.testing.assert_array_equal(index, np.round(index))


def test_secure_laplace_noise_is_the_documented_discrete_laplace(values, key):
    epsilon, sensitivity = 1.0, 1.0
    scale = noise.secure_laplace_scale(epsilon, sensitivity, COARSE)
    assert scale == 5.0
    out = np.asarray(noise.secure_laplace(key, values, epsilon=epsilon, sensitivity=sensitivity,
                                          granularity=COARSE))
    noise_index = (out / COARSE - _grid_index(values, COARSE)).astype(np.int64)
    observed, expected = reference.chi_square_bins(
        noise_index, lambda z: reference.discrete_laplace_log_pmf(z, scale), margin=300)
    assert stats.chisquare(observed, expected).pvalue > TEST_FAILURE_RATE
    # Power: the naive scale sensitivity / (epsilon * granularity) = 4 (no +granularity) is rejected.
    observed, expected = reference.chi_square_bins(
        noise_index, lambda z: reference.discrete_laplace_log_pmf(z, 4.0), margin=300)
    assert stats.chisquare(observed, expected).pvalue < TEST_FAILURE_RATE


def test_secure_gaussian_noise_is_the_discrete_gaussian(values, key):
    sigma = 1.0  # 4 grid steps
    out = np.asarray(noise.secure_gaussian(key, values, sigma=sigma, granularity=COARSE))
    noise_index = (out / COARSE - _grid_index(values, COARSE)).astype(np.int64)
    for sigma_in_grid_units, should_fit in ((4.0, True), (4.4, False)):
        observed, expected = reference.chi_square_bins(
            noise_index, lambda z, s=sigma_in_grid_units: reference.discrete_gaussian_log_pmf(z, s), margin=300)
        pvalue = stats.chisquare(observed, expected).pvalue
        assert (pvalue > TEST_FAILURE_RATE) if should_fit else (pvalue < TEST_FAILURE_RATE)


def test_rounding_is_to_the_nearest_grid_point(key):
    # epsilon = 1e7 gives scale 5e-7: the noise is nonzero with probability about 2 e^{-2e6}, i.e. never.
    values = np.array([[0.1, 0.124, 0.126], [-0.374, -0.376, 0.125]])  # 0.125 is a tie: to even, 0
    out = np.asarray(noise.secure_laplace(key, values, epsilon=1e7, sensitivity=1.0, granularity=COARSE))
    np.testing.assert_array_equal(out, [[0.0, 0.0, 0.25], [-0.25, -0.5, 0.0]])


def test_secure_release_of_a_scalar(key):
    out = noise.secure_laplace(key, 0.3, epsilon=1.0, sensitivity=1.0)
    assert out.shape == () and out.dtype == jnp.float64


def test_vmap_over_values_equals_loop(key):
    # Under vmap the value is traced: the unchecked, total kernel path.
    rows = jnp.array([[[0.3, -2.0, 7.5], [1e3, 0.0, -0.126]], [[5.0, 6.0, 7.0], [-1.0, -2.0, -3.0]]])
    batched = jax.vmap(lambda row: noise.secure_laplace(key, row, epsilon=1.0, sensitivity=1.0,
                                                        granularity=COARSE))(rows)
    for row, out in zip(np.asarray(rows), np.asarray(batched)):
        np.testing.assert_array_equal(out, np.asarray(noise.secure_laplace(key, row, epsilon=1.0, sensitivity=1.0,
                                                                           granularity=COARSE)))


@pytest.mark.parametrize("granularity", [0.3, 3.0, 0.0, -0.25, math.inf, math.nan, 2.0**-1030, 2.0**980])
def test_bad_granularity(granularity, key):
    with pytest.raises(ValueError, match="granularity"):
        noise.secure_laplace(key, 0.0, epsilon=1.0, sensitivity=1.0, granularity=granularity)
    with pytest.raises(ValueError, match="granularity"):
        noise.secure_gaussian(key, 0.0, sigma=1.0, granularity=granularity)
    with pytest.raises(ValueError, match="granularity"):
        noise.secure_laplace_scale(1.0, 1.0, granularity)


def test_values_too_large_for_the_grid(key):
    limit = 2.0**52 * 2.0**-20
    noise.secure_laplace(key, limit, epsilon=1.0, sensitivity=1.0)  # at the limit: fine
    for value in (2 * limit, [0.0, -2 * limit]):
        with pytest.raises(ValueError, match="2\\*\\*52"):
            noise.secure_laplace(key, value, epsilon=1.0, sensitivity=1.0)
        with pytest.raises(ValueError, match="2\\*\\*52"):
            noise.secure_gaussian(key, value, sigma=1.0)


@pytest.mark.parametrize("value", [math.nan, math.inf, [0.0, -math.inf]])
def test_non_finite_values(value, key):
    with pytest.raises(ValueError, match="NaN or inf"):
        noise.secure_laplace(key, value, epsilon=1.0, sensitivity=1.0)


@pytest.mark.parametrize("epsilon,sensitivity", [(0.0, 1.0), (-1.0, 1.0), (math.inf, 1.0), (1.0, 0.0),
                                                 (1.0, math.nan)])
def test_bad_privacy_parameters(epsilon, sensitivity, key):
    with pytest.raises(ValueError, match="epsilon|sensitivity"):
        noise.secure_laplace(key, 0.0, epsilon=epsilon, sensitivity=sensitivity)


@pytest.mark.parametrize("sigma", [0.0, -1.0, math.nan, 2.0**33])
def test_bad_sigma(sigma, key):
    with pytest.raises(ValueError, match="sigma"):
        noise.secure_gaussian(key, 0.0, sigma=sigma)


def test_noise_scale_too_large(key):
    with pytest.raises(ValueError, match="2\\*\\*52"):
        noise.secure_laplace(key, 0.0, epsilon=1e-30, sensitivity=1.0)


def test_traced_privacy_parameters_are_refused(key):
    with pytest.raises(TypeError, match="concrete"):
        jax.vmap(lambda epsilon: noise.secure_laplace(key, 0.0, epsilon=epsilon, sensitivity=1.0))(
            jnp.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="concrete"):
        jax.jit(lambda sigma: noise.secure_gaussian(key, 0.0, sigma=sigma))(1.0)


def test_non_numeric_value(key):
    with pytest.raises(TypeError, match="value"):
        noise.secure_laplace(key, np.array(["a"]), epsilon=1.0, sensitivity=1.0)
