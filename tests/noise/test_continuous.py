"""Goodness of fit of the unit-scale continuous samplers (STYLE rule 23).

Each sampler is tested with scipy's KS test against its exact law at the
stated failure rate, and the same samples against a deliberately wrong law
(scale 1.1) must be rejected: the power check that makes the first test able
to fail.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gpuprivacy import noise
from tests.conftest import TEST_FAILURE_RATE

NUM_SAMPLES = 100_000

CONTINUOUS_LAWS = [
    ("laplace", noise.laplace, stats.laplace),
    ("gaussian", noise.gaussian, stats.norm),
    ("gumbel", noise.gumbel, stats.gumbel_r),
    ("exponential", noise.exponential, stats.expon),
]


@pytest.mark.parametrize("name,sampler,law", CONTINUOUS_LAWS, ids=[case[0] for case in CONTINUOUS_LAWS])
def test_ks_against_exact_law_and_power(name, sampler, law, key):
    samples = np.asarray(sampler(key, (NUM_SAMPLES,)))
    assert stats.kstest(samples, law().cdf).pvalue > TEST_FAILURE_RATE
    assert stats.kstest(samples, law(scale=1.1).cdf).pvalue < TEST_FAILURE_RATE
    # Same key, same output (the other samplers are covered by test_invariants).
    np.testing.assert_array_equal(samples, np.asarray(sampler(key, (NUM_SAMPLES,))))


@pytest.mark.parametrize("sampler,law", [(noise.exponential, stats.expon), (noise.laplace, stats.laplace)],
                         ids=["exponential", "laplace"])
def test_float32_ks(sampler, law, key):
    samples = sampler(key, (NUM_SAMPLES,), jnp.float32)
    assert samples.dtype == jnp.float32
    samples = np.asarray(samples, np.float64)
    assert stats.kstest(samples, law().cdf).pvalue > TEST_FAILURE_RATE
    assert stats.kstest(samples, law(scale=1.1).cdf).pvalue < TEST_FAILURE_RATE


def test_exponential_is_positive_and_finite(key):
    samples = np.asarray(noise.exponential(key, (NUM_SAMPLES,)))
    assert np.all(samples > 0) and np.all(np.isfinite(samples))


def test_exponential_tail_frequencies(key):
    # The tail beyond 36.7 (= -log 2**-53) is where a plain float uniform runs
    # out of resolution; check the tail counts at moderate depth are right.
    samples = np.asarray(noise.exponential(key, (NUM_SAMPLES,)))
    for depth in (5.0, 8.0):
        expected = NUM_SAMPLES * np.exp(-depth)
        assert stats.poisson(expected).sf(np.sum(samples > depth) - 1) > TEST_FAILURE_RATE / 2
        assert stats.poisson(expected).cdf(np.sum(samples > depth)) > TEST_FAILURE_RATE / 2


@pytest.mark.parametrize("sampler", [noise.laplace, noise.gaussian, noise.gumbel, noise.exponential])
def test_bad_shape_and_dtype(sampler, key):
    with pytest.raises(TypeError, match="shape"):
        sampler(key, (-1,))
    with pytest.raises(TypeError, match="shape"):
        sampler(key, (2.5,))
    with pytest.raises(TypeError, match="dtype"):
        sampler(key, (2,), jnp.int32)
    with pytest.raises(TypeError, match="key"):
        sampler(np.zeros(2), (2,))


def test_int_shape_is_accepted(key):
    assert noise.laplace(key, 3).shape == (3,)
    np.testing.assert_array_equal(np.asarray(noise.laplace(key, 3)), np.asarray(noise.laplace(key, (3,))))


def test_laplace_sign_is_symmetric(key):
    samples = np.asarray(noise.laplace(key, (NUM_SAMPLES,)))
    positive = int(np.sum(samples > 0))
    assert stats.binomtest(positive, NUM_SAMPLES, 0.5).pvalue > TEST_FAILURE_RATE


def test_keys_give_independent_streams(key):
    first = np.asarray(noise.gaussian(jax.random.fold_in(key, 0), (NUM_SAMPLES,)))
    second = np.asarray(noise.gaussian(jax.random.fold_in(key, 1), (NUM_SAMPLES,)))
    assert stats.pearsonr(first, second).pvalue > TEST_FAILURE_RATE
