"""Laplace and Gaussian mechanisms: noise laws, scales and the secure path."""

import functools
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gpuprivacy import mechanisms
from gpuprivacy.accounting import ZCDP, ApproxDP, PureDP
from tests._helpers import TEST_FAILURE_RATE

NUM_TRIALS = 100_000
VALUE = np.array([3.0, -1.5])


def samples(mechanism, key, value, **kwargs):
    return np.asarray(mechanisms.run_trials(mechanism, key, NUM_TRIALS, value, **kwargs).value)


def test_laplace_noise_law(key):
    released = samples(mechanisms.laplace_mechanism, key, VALUE, epsilon=0.5, sensitivity=1.5)
    scale = 3.0
    assert released.shape == (NUM_TRIALS, 2) and released.dtype == np.float64
    for j in range(2):
        law = stats.laplace(loc=VALUE[j], scale=scale)
        assert stats.kstest(released[:, j], law.cdf).pvalue > TEST_FAILURE_RATE
        # Power: scale 10% too large is rejected.
        assert stats.kstest(released[:, j], stats.laplace(loc=VALUE[j], scale=1.1 * scale).cdf).pvalue < \
            TEST_FAILURE_RATE
    # Coordinates get independent noise: the sample correlation is N(0, 1/n) under independence.
    correlation = np.corrcoef(released[:, 0], released[:, 1])[0, 1]
    assert abs(correlation) < stats.norm.isf(TEST_FAILURE_RATE / 2) / np.sqrt(NUM_TRIALS)


def test_laplace_scale_is_rounded_up(key):
    release = mechanisms.laplace_mechanism(key, 0.0, epsilon=3.0, sensitivity=0.1)
    scale = float(release.info.scale)
    assert Fraction(scale) >= Fraction(0.1) / Fraction(3.0)
    assert Fraction(np.nextafter(scale, 0.0)) < Fraction(0.1) / Fraction(3.0)
    np.testing.assert_array_equal(np.asarray(release.info.nonprivate_value), 0.0)


@pytest.mark.parametrize("calibration, epsilon", [("analytic", 2.0), ("classic", 0.5)])
def test_gaussian_noise_law(key, calibration, epsilon):
    delta = 1e-6
    released = samples(mechanisms.gaussian_mechanism, key, VALUE, epsilon=epsilon, delta=delta, sensitivity=2.0,
                       calibration=calibration)
    sigma = (mechanisms.gaussian_sigma_analytic if calibration == "analytic" else
             mechanisms.gaussian_sigma_classic)(epsilon, delta, 2.0)
    for j in range(2):
        assert stats.kstest(released[:, j], stats.norm(loc=VALUE[j], scale=sigma).cdf).pvalue > TEST_FAILURE_RATE
        assert stats.kstest(released[:, j], stats.norm(loc=VALUE[j], scale=1.1 * sigma).cdf).pvalue < \
            TEST_FAILURE_RATE


def test_gaussian_zcdp_noise_law(key):
    released = samples(mechanisms.gaussian_mechanism_zcdp, key, VALUE, rho=0.125, sensitivity=1.0)
    # sigma = 1 / sqrt(2 * 0.125) = 2 exactly.
    for j in range(2):
        assert stats.kstest(released[:, j], stats.norm(loc=VALUE[j], scale=2.0).cdf).pvalue > TEST_FAILURE_RATE
        assert stats.kstest(released[:, j], stats.norm(loc=VALUE[j], scale=2.2).cdf).pvalue < TEST_FAILURE_RATE


def test_gaussian_info_reports_calibrated_sigma(key):
    release = mechanisms.gaussian_mechanism(key, 1.0, epsilon=0.5, delta=1e-5, calibration="classic")
    assert float(release.info.sigma) == mechanisms.gaussian_sigma_classic(0.5, 1e-5, 1.0)
    release = mechanisms.gaussian_mechanism(key, 1.0, epsilon=0.5, delta=1e-5)
    assert float(release.info.sigma) == mechanisms.gaussian_sigma_analytic(0.5, 1e-5, 1.0)


def test_classic_calibration_rejects_large_epsilon(key):
    with pytest.raises(ValueError, match="epsilon < 1.*analytic"):
        mechanisms.gaussian_mechanism(key, 1.0, epsilon=1.0, delta=1e-5, calibration="classic")
    with pytest.raises(ValueError, match="epsilon < 1"):
        mechanisms.gaussian_mechanism_guarantee(epsilon=2.0, delta=1e-5, calibration="classic")


def test_gaussian_rejects_traced_epsilon(key):
    with pytest.raises(TypeError, match="concrete epsilon"):
        jax.vmap(lambda e: mechanisms.gaussian_mechanism(key, 0.0, epsilon=e, delta=1e-5))(jnp.array([1.0, 2.0]))


def test_laplace_vmap_over_epsilon(key):
    epsilons = [0.5, 1.0, 3.0]
    batched = jax.vmap(lambda e: mechanisms.laplace_mechanism(key, VALUE, epsilon=e))(jnp.array(epsilons))
    for i, epsilon in enumerate(epsilons):
        single = mechanisms.laplace_mechanism(key, VALUE, epsilon=epsilon)
        np.testing.assert_allclose(np.asarray(batched.value[i]), np.asarray(single.value), rtol=1e-15)


def test_scalar_and_integer_values(key):
    assert mechanisms.laplace_mechanism(key, 3, epsilon=1.0).value.shape == ()
    assert mechanisms.gaussian_mechanism(key, np.int32(3), epsilon=1.0, delta=1e-5).value.dtype == jnp.float64
    assert mechanisms.laplace_mechanism(key, np.zeros((2, 3), np.float32), epsilon=1.0).value.shape == (2, 3)


def test_guarantees(key):
    assert mechanisms.laplace_mechanism_guarantee(epsilon=0.7, sensitivity=3.0) == PureDP(0.7)
    assert mechanisms.gaussian_mechanism_guarantee(epsilon=2.0, delta=1e-6) == ApproxDP(2.0, 1e-6)
    assert mechanisms.gaussian_mechanism_guarantee(epsilon=0.5, delta=1e-6, calibration="classic") == \
        ApproxDP(0.5, 1e-6)
    assert mechanisms.gaussian_mechanism_zcdp_guarantee(rho=0.3) == ZCDP(0.3)


GRANULARITY = 2.0**-10


def on_grid(released):
    return np.array_equal(np.round(released / GRANULARITY) * GRANULARITY, released)


def test_secure_laplace_path(key):
    mechanism = functools.partial(mechanisms.laplace_mechanism, epsilon=1.0, secure=True, granularity=GRANULARITY)
    release = mechanism(key, VALUE)
    assert release.value.dtype == jnp.float64 and release.value.shape == (2,)
    # Snapping two coordinates costs two grid steps of sensitivity: scale (1 + 2 g) / 1.
    scale = float(release.info.scale)
    assert scale == 1.0 + 2 * GRANULARITY
    released = samples(mechanism, key, VALUE)
    assert on_grid(released)
    # The grid is much finer than the scale, so the continuous law is a good reference.
    assert stats.kstest(released[:, 0], stats.laplace(loc=VALUE[0], scale=scale).cdf).pvalue > TEST_FAILURE_RATE
    assert stats.kstest(released[:, 0], stats.laplace(loc=VALUE[0], scale=1.1 * scale).cdf).pvalue < \
        TEST_FAILURE_RATE


def test_secure_gaussian_paths(key):
    mechanism = functools.partial(mechanisms.gaussian_mechanism_zcdp, rho=0.125, secure=True,
                                  granularity=GRANULARITY)
    sigma = float(mechanism(key, VALUE).info.sigma)
    # sigma = (1 + sqrt(2) g) / sqrt(2 rho) = 2 (1 + sqrt(2) g), rounded up.
    assert sigma == pytest.approx(2 * (1 + np.sqrt(2) * GRANULARITY), rel=1e-15)
    assert sigma >= 2 * (1 + np.sqrt(2) * GRANULARITY)
    released = samples(mechanism, key, VALUE)
    assert on_grid(released)
    assert stats.kstest(released[:, 1], stats.norm(loc=VALUE[1], scale=sigma).cdf).pvalue > TEST_FAILURE_RATE
    assert stats.kstest(released[:, 1], stats.norm(loc=VALUE[1], scale=1.1 * sigma).cdf).pvalue < TEST_FAILURE_RATE

    release = mechanisms.gaussian_mechanism(key, VALUE, epsilon=1.0, delta=1e-6, secure=True,
                                            granularity=GRANULARITY)
    assert on_grid(np.asarray(release.value))
    expected = mechanisms.gaussian_sigma_discrete(1.0, 1e-6, 1 + np.sqrt(2) * GRANULARITY)
    assert float(release.info.sigma) == pytest.approx(expected, rel=1e-15)
    assert float(release.info.sigma) > mechanisms.gaussian_sigma_analytic(1.0, 1e-6)


def test_secure_parameter_checks(key):
    with pytest.raises(ValueError, match="granularity must be a power of two"):
        mechanisms.laplace_mechanism(key, VALUE, epsilon=1.0, secure=True, granularity=0.3)
    with pytest.raises(ValueError, match="granularity must be a power of two"):
        mechanisms.laplace_mechanism_guarantee(epsilon=1.0, secure=True, granularity=0.3)
    with pytest.raises(ValueError, match="does not apply with secure=True"):
        mechanisms.gaussian_mechanism(key, VALUE, epsilon=0.5, delta=1e-6, secure=True, calibration="classic")
    with pytest.raises(ValueError, match="does not apply with secure=True"):
        mechanisms.gaussian_mechanism_guarantee(epsilon=0.5, delta=1e-6, secure=True, calibration="classic")
    with pytest.raises(TypeError, match="concrete epsilon"):
        jax.vmap(lambda e: mechanisms.laplace_mechanism(key, VALUE, epsilon=e, secure=True))(jnp.array([1.0]))
    # Without secure=True the granularity is ignored (but must still be positive).
    mechanisms.laplace_mechanism(key, VALUE, epsilon=1.0, granularity=0.3)
