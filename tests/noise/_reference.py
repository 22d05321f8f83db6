"""Float64 reference laws for the noise tests (closed forms, no sampling).

Each truncated CDF is written as a ratio of masses computed without
differencing two CDF values, so it stays accurate far in a tail.
``test_reference_matches_mpmath`` checks these against mpmath at 50 digits.
"""

import numpy as np


def _log_laplace_mass(lower, upper):
    """log P(lower <= X <= upper) + log 2 for a unit Laplace X, elementwise, lower <= upper."""
    lower, upper = np.broadcast_arrays(np.asarray(lower, float), np.asarray(upper, float))
    width = upper - lower
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_width_factor = np.log(-np.expm1(-width))  # log(1 - e^{-width}); -inf at width 0
        right = -lower + log_width_factor  # window in [0, inf)
        left = upper + log_width_factor  # window in (-inf, 0]
        straddle = np.log(-np.expm1(lower) - np.expm1(-upper))
    return np.where(lower >= 0, right, np.where(upper <= 0, left, straddle))


def truncated_laplace_cdf(x, lower, upper, scale=1.0):
    """CDF of Laplace(0, scale) conditioned on [lower, upper]."""
    a, b = lower / scale, upper / scale
    z = np.clip(np.asarray(x, float) / scale, a, b)
    with np.errstate(invalid="ignore"):
        cdf = np.exp(_log_laplace_mass(a, z) - _log_laplace_mass(a, b))
    return np.where(z <= a, 0.0, np.where(z >= b, 1.0, cdf))


def truncated_exponential_cdf(x, upper, scale=1.0):
    """CDF of Exp(mean=scale) conditioned on [0, upper]."""
    z = np.clip(np.asarray(x, float) / scale, 0.0, upper / scale)
    return np.expm1(-z) / np.expm1(-upper / scale)


def discrete_laplace_log_pmf(z, scale):
    """Unnormalized log P(Z = z) for the discrete Laplace."""
    return -np.abs(np.asarray(z, float)) / scale


def discrete_gaussian_log_pmf(z, sigma):
    """Unnormalized log P(Z = z) for the discrete Gaussian."""
    return -np.asarray(z, float) ** 2 / (2 * sigma**2)


def mpmath_truncated_laplace_cdf(x, lower, upper, dps=50):
    """The same CDF with mpmath, by direct integration of the density (slow, a few points)."""
    import mpmath

    with mpmath.workdps(dps):
        def mass(lo, hi):
            return mpmath.quad(lambda y: mpmath.exp(-abs(y)), [lo, 0, hi] if lo < 0 < hi else [lo, hi])

        lo = mpmath.mpf(lower)
        x = min(max(mpmath.mpf(x), lo), mpmath.mpf(upper))
        return float(mass(lo, x) / mass(lo, mpmath.mpf(upper))) if x > lo else 0.0


def mpmath_truncated_exponential_cdf(x, upper, dps=50):
    import mpmath

    with mpmath.workdps(dps):
        x = min(max(mpmath.mpf(x), 0), mpmath.mpf(upper))
        return float(mpmath.expm1(-x) / mpmath.expm1(-mpmath.mpf(upper)))


def chi_square_bins(samples, log_pmf, *, margin=200, min_expected=20.0):
    """Observed and expected counts for a chi-square test of an integer law.

    Values whose expected count is at least ``min_expected`` get their own
    bin; everything below and above is pooled into two tail bins. The pmf is
    normalized over the sample range widened by ``margin`` on each side,
    which must leave negligible mass outside (checked).
    """
    samples = np.asarray(samples)
    n = samples.size
    support = np.arange(samples.min() - margin, samples.max() + margin + 1)
    log_p = log_pmf(support)
    p = np.exp(log_p - np.logaddexp.reduce(log_p))
    if p[0] > 1e-12 or p[-1] > 1e-12:
        raise ValueError("the support window is too narrow for this law; pass a larger margin.")
    central = support[p * n >= min_expected]
    low, high = central.min(), central.max()
    inside = (support >= low) & (support <= high)
    observed = np.concatenate([[np.sum(samples < low)],
                               np.bincount(samples[(samples >= low) & (samples <= high)] - low,
                                           minlength=high - low + 1),
                               [np.sum(samples > high)]])
    expected = np.concatenate([[p[support < low].sum()], p[inside], [p[support > high].sum()]])
    return observed, expected * (n / expected.sum())
