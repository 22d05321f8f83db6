"""Truncated exponential and Laplace: exact law, power, range and bad input."""

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
INF = math.inf

# Windows of every kind: straddling 0, far in either tail, tiny, one-sided
# infinite, and the whole line.
LAPLACE_WINDOWS = [
    (-1.0, 2.0),
    (-0.5, 0.5),
    (30.0, 31.0),
    (-1000.0, -999.0),
    (2.0, INF),
    (-INF, -3.0),
    (-INF, INF),
    (-1e-9, 1e-9),
    (0.0, 1e-12),
    (5.0, 5.0 + 1e-6),
]
EXPONENTIAL_UPPERS = [1e-12, 0.5, 3.0, 1e6, INF]


def _wrong_cdf(lower, upper):
    """A deliberately wrong law: the window moved by a tenth of its width (0.1 if
    infinite), or for the whole line, where moving the window changes nothing,
    scale 1.1."""
    if lower == -INF and upper == INF:
        return lambda x: reference.truncated_laplace_cdf(x, lower, upper, scale=1.1)
    width = upper - lower
    shift = 0.1 * width if math.isfinite(width) else 0.1
    return lambda x: reference.truncated_laplace_cdf(x, lower + shift, upper + shift)


@pytest.mark.parametrize("lower,upper", LAPLACE_WINDOWS, ids=str)
def test_truncated_laplace_ks_and_power(lower, upper, key):
    samples = np.asarray(noise.truncated_laplace(key, lower, upper, (NUM_SAMPLES,)))
    exact = stats.kstest(samples, lambda x: reference.truncated_laplace_cdf(x, lower, upper))
    assert exact.pvalue > TEST_FAILURE_RATE
    assert stats.kstest(samples, _wrong_cdf(lower, upper)).pvalue < TEST_FAILURE_RATE


@pytest.mark.parametrize("lower,upper", [(-1.0, 2.0), (30.0, 31.0), (-INF, INF)], ids=str)
def test_truncated_laplace_wrong_scale_is_rejected(lower, upper, key):
    samples = np.asarray(noise.truncated_laplace(key, lower, upper, (NUM_SAMPLES,)))
    wrong = stats.kstest(samples, lambda x: reference.truncated_laplace_cdf(x, lower, upper, scale=1.1))
    assert wrong.pvalue < TEST_FAILURE_RATE


@pytest.mark.parametrize("upper", EXPONENTIAL_UPPERS, ids=str)
def test_truncated_exponential_ks_and_power(upper, key):
    samples = np.asarray(noise.truncated_exponential(key, upper, (NUM_SAMPLES,)))
    assert stats.kstest(samples, lambda x: reference.truncated_exponential_cdf(x, upper)).pvalue \
        > TEST_FAILURE_RATE
    if upper < 1:  # the law is nearly uniform: a 10% wider window is the wrong law
        wrong = lambda x: reference.truncated_exponential_cdf(x, 1.1 * upper)
    else:
        wrong = lambda x: reference.truncated_exponential_cdf(x, upper, scale=1.1)
    assert stats.kstest(samples, wrong).pvalue < TEST_FAILURE_RATE


def test_tiny_upper_keeps_relative_precision(key):
    # For upper = 1e-12 the samples are V * upper to float accuracy: dividing by
    # upper must give a uniform on [0, 1] with no coarse quantisation.
    samples = np.asarray(noise.truncated_exponential(key, 1e-12, (NUM_SAMPLES,))) / 1e-12
    assert stats.kstest(samples, stats.uniform.cdf).pvalue > TEST_FAILURE_RATE
    assert np.unique(samples).size == NUM_SAMPLES


def test_infinite_upper_is_the_exponential(key):
    samples = np.asarray(noise.truncated_exponential(key, INF, (NUM_SAMPLES,)))
    assert stats.kstest(samples, stats.expon.cdf).pvalue > TEST_FAILURE_RATE


EXTREME_WINDOWS = LAPLACE_WINDOWS + [
    (700.0, 701.0),
    (1e6, 1e6 + 1e-3),
    (-1e300, -1e299),
    (-1e-300, 1e-300),
    (1e-300, 2e-300),
    (-INF, -1e6),
    (1e6, INF),
    (-1.0, 1e308),
]


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32], ids=["float64", "float32"])
def test_samples_stay_in_window_and_are_never_nan(dtype, key):
    for index, (lower, upper) in enumerate(EXTREME_WINDOWS):
        with np.errstate(over="ignore"):
            collapses = not np.float32(lower) < np.float32(upper)
        if dtype == jnp.float32 and collapses:
            continue  # covered by test_float32_window_too_narrow
        samples = noise.truncated_laplace(jax.random.fold_in(key, index), lower, upper, (NUM_SAMPLES,), dtype)
        assert samples.dtype == dtype
        samples = np.asarray(samples, np.float64)  # compare with the requested float64 window
        assert not np.any(np.isnan(samples)), (lower, upper)
        assert np.all((samples >= lower) & (samples <= upper)), (lower, upper, samples.min(), samples.max())
    for index, upper in enumerate(EXPONENTIAL_UPPERS + [1e-300, 1e300]):
        if dtype == jnp.float32 and upper < float(np.finfo(np.float32).tiny):
            continue  # rounds to 0 in float32: covered by test_float32_window_too_narrow
        samples = noise.truncated_exponential(jax.random.fold_in(key, index), upper, (NUM_SAMPLES,), dtype)
        samples = np.asarray(samples, np.float64)
        assert not np.any(np.isnan(samples)), upper
        assert np.all((samples >= 0) & (samples <= upper)), upper


def test_float32_bounds_round_inward(key):
    # 0.1 is not a float32; the float32 window must lie inside [0.1, 0.2].
    samples = np.asarray(noise.truncated_laplace(key, 0.1, 0.2, (NUM_SAMPLES,), jnp.float32), np.float64)
    assert samples.min() >= 0.1 and samples.max() <= 0.2


def test_float32_window_too_narrow(key):
    with pytest.raises(ValueError, match="float32"):
        noise.truncated_laplace(key, 1.0, 1.0 + 1e-12, (2,), jnp.float32)
    with pytest.raises(ValueError, match="float32"):
        noise.truncated_exponential(key, 1e-50, (2,), jnp.float32)


@pytest.mark.parametrize("upper", [0.0, -1.0, -INF, math.nan])
def test_truncated_exponential_bad_upper(upper, key):
    with pytest.raises(ValueError, match="upper"):
        noise.truncated_exponential(key, upper, (2,))


@pytest.mark.parametrize("lower,upper", [(1.0, 1.0), (2.0, 1.0), (INF, INF), (-INF, -INF), (math.nan, 1.0),
                                         (0.0, math.nan)])
def test_truncated_laplace_bad_window(lower, upper, key):
    with pytest.raises(ValueError, match="lower|upper"):
        noise.truncated_laplace(key, lower, upper, (2,))


@pytest.mark.parametrize("bad", ["1.0", None, [0.0, 1.0], True])
def test_truncated_bounds_must_be_real_scalars(bad, key):
    with pytest.raises(TypeError, match="upper"):
        noise.truncated_exponential(key, bad, (2,))
    with pytest.raises(TypeError, match="lower"):
        noise.truncated_laplace(key, bad, 1.0, (2,))


def test_vmap_over_validated_windows(key):
    lowers, uppers = [-1.0, 30.0], [2.0, 31.0]
    batched = jax.vmap(lambda lower, upper: noise.truncated_laplace(key, lower, upper, (2, 3)))(
        jnp.array(lowers), jnp.array(uppers))
    for row, lower, upper in zip(np.asarray(batched), lowers, uppers):
        np.testing.assert_array_equal(row, np.asarray(noise.truncated_laplace(key, lower, upper, (2, 3))))


def test_reference_matches_mpmath():
    for lower, upper in [(-1.0, 2.0), (30.0, 31.0), (-1000.0, -999.0), (-1e-9, 1e-9), (2.0, 50.0)]:
        for fraction in (0.1, 0.5, 0.9):
            x = lower + fraction * (upper - lower)
            np.testing.assert_allclose(reference.truncated_laplace_cdf(x, lower, upper),
                                       reference.mpmath_truncated_laplace_cdf(x, lower, upper), rtol=1e-9)
    for upper in (1e-12, 0.5, 1e6):
        for x in (0.3 * min(upper, 10), 0.9 * min(upper, 10)):
            np.testing.assert_allclose(reference.truncated_exponential_cdf(x, upper),
                                       reference.mpmath_truncated_exponential_cdf(x, upper), rtol=1e-12)
