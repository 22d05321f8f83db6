"""Discrete Laplace and discrete Gaussian: exact pmf by chi-square, power, symmetry, bad input."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gpuprivacy import noise
from tests.conftest import TEST_FAILURE_RATE
from tests.noise import _reference as reference

NUM_SAMPLES = 100_000

# Integer, dyadic and non-dyadic (1/3 is read as the float64 it rounds to) scales.
LAPLACE_SCALES = [0.5, 1.0 / 3.0, 3.0, 7.25, 1000.0 / 7.0]
GAUSSIAN_SIGMAS = [0.3, 1.0, 3.7, 40.5]


def _chi_square_pvalue(samples, log_pmf, margin):
    observed, expected = reference.chi_square_bins(samples, log_pmf, margin=margin)
    return stats.chisquare(observed, expected).pvalue


@pytest.fixture(scope="module")
def laplace_samples():
    key = jax.random.key(20261123)
    return {scale: np.asarray(noise.discrete_laplace(jax.random.fold_in(key, index), scale, (NUM_SAMPLES,)))
            for index, scale in enumerate(LAPLACE_SCALES)}


@pytest.fixture(scope="module")
def gaussian_samples():
    key = jax.random.key(20261124)
    return {sigma: np.asarray(noise.discrete_gaussian(jax.random.fold_in(key, index), sigma, (NUM_SAMPLES,)))
            for index, sigma in enumerate(GAUSSIAN_SIGMAS)}


@pytest.mark.parametrize("scale", LAPLACE_SCALES, ids=str)
def test_discrete_laplace_chi_square_and_power(scale, laplace_samples):
    samples = laplace_samples[scale]
    margin = int(40 * scale) + 50
    exact = _chi_square_pvalue(samples, lambda z: reference.discrete_laplace_log_pmf(z, scale), margin)
    assert exact > TEST_FAILURE_RATE
    wrong = _chi_square_pvalue(samples, lambda z: reference.discrete_laplace_log_pmf(z, 1.1 * scale), margin)
    assert wrong < TEST_FAILURE_RATE


@pytest.mark.parametrize("sigma", GAUSSIAN_SIGMAS, ids=str)
def test_discrete_gaussian_chi_square_and_power(sigma, gaussian_samples):
    samples = gaussian_samples[sigma]
    margin = int(20 * sigma) + 50
    exact = _chi_square_pvalue(samples, lambda z: reference.discrete_gaussian_log_pmf(z, sigma), margin)
    assert exact > TEST_FAILURE_RATE
    wrong = _chi_square_pvalue(samples, lambda z: reference.discrete_gaussian_log_pmf(z, 1.1 * sigma), margin)
    assert wrong < TEST_FAILURE_RATE


def _check_symmetric_integer_law(samples, variance):
    assert samples.dtype == np.int64
    positive, negative = int(np.sum(samples > 0)), int(np.sum(samples < 0))
    assert stats.binomtest(positive, positive + negative, 0.5).pvalue > TEST_FAILURE_RATE
    # |mean| within 5.3 standard errors: a two-sided normal test at about 1e-7.
    assert abs(samples.mean()) < 5.3 * math.sqrt(variance / samples.size)


@pytest.mark.parametrize("scale", LAPLACE_SCALES, ids=str)
def test_discrete_laplace_symmetric_mean_zero(scale, laplace_samples):
    q = math.exp(-1 / scale)
    _check_symmetric_integer_law(laplace_samples[scale], 2 * q / (1 - q) ** 2)


@pytest.mark.parametrize("sigma", GAUSSIAN_SIGMAS, ids=str)
def test_discrete_gaussian_symmetric_mean_zero(sigma, gaussian_samples):
    _check_symmetric_integer_law(gaussian_samples[sigma], sigma**2)  # variance <= sigma^2 (CKS Cor. 9)


def test_discrete_laplace_exact_pmf_at_zero_for_tiny_scale(key):
    # scale 0.1: P(X != 0) = 2q/(1+q) with q = e^{-10}, about 9.1e-5.
    samples = np.asarray(noise.discrete_laplace(key, 0.1, (NUM_SAMPLES,)))
    q = math.exp(-10)
    nonzero = int(np.sum(samples != 0))
    assert stats.binomtest(nonzero, NUM_SAMPLES, 2 * q / (1 + q)).pvalue > TEST_FAILURE_RATE


def test_discrete_laplace_large_scale(key):
    # A scale near the int64 limit must not overflow: compare quantiles of |X| / scale.
    scale = 2.0**40
    samples = np.asarray(noise.discrete_laplace(key, scale, (NUM_SAMPLES,)))
    assert samples.dtype == np.int64
    assert stats.kstest(samples / scale, stats.laplace.cdf).pvalue > TEST_FAILURE_RATE
    assert stats.kstest(samples / scale, stats.laplace(scale=1.1).cdf).pvalue < TEST_FAILURE_RATE


def test_vmap_over_validated_scales(key):
    # Shape (2, 3) shares the eager compile with the invariant tests.
    scales = [0.5, 3.0, 1000.0 / 7.0]
    batched = np.asarray(jax.vmap(lambda scale: noise.discrete_laplace(key, scale, (2, 3)))(jnp.array(scales)))
    for row, scale in zip(batched, scales):
        np.testing.assert_array_equal(row, np.asarray(noise.discrete_laplace(key, scale, (2, 3))))


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, -math.inf, math.nan, 2.0**53, 5e-324])
def test_bad_scale_and_sigma(bad, key):
    with pytest.raises(ValueError, match="scale"):
        noise.discrete_laplace(key, bad, (2,))
    with pytest.raises(ValueError, match="sigma"):
        noise.discrete_gaussian(key, bad, (2,))


@pytest.mark.parametrize("bad", ["1.0", None, [1.0, 2.0], True])
def test_scale_and_sigma_must_be_real_scalars(bad, key):
    with pytest.raises(TypeError, match="scale"):
        noise.discrete_laplace(key, bad, (2,))
    with pytest.raises(TypeError, match="sigma"):
        noise.discrete_gaussian(key, bad, (2,))


def test_empty_shape(key):
    assert noise.discrete_laplace(key, 1.0, (3, 0)).shape == (3, 0)


@pytest.mark.parametrize("parameter", [1e-300, 2.0**-1022])
def test_tiny_scale_and_sigma_give_zeros(parameter, key):
    # The exact laws put mass 1 - O(e^{-1/parameter}) on 0; the samplers must
    # terminate and return 0 (sigma**2 underflows here: no NaN may appear).
    np.testing.assert_array_equal(np.asarray(noise.discrete_laplace(key, parameter, (2, 3))), 0)
    np.testing.assert_array_equal(np.asarray(noise.discrete_gaussian(key, parameter, (2, 3))), 0)
