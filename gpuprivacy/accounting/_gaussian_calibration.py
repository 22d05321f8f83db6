"""Noise calibration for the Gaussian mechanism, computed off-device in high precision.

Every function returns a float64 that is safe for the guarantee: sigmas are
rounded *up* and deltas are rounded *up*.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import mpmath

from gpuprivacy._checks import check_delta, check_epsilon, check_positive
from gpuprivacy._rounding import float_up, step_up_until
from gpuprivacy.accounting._guarantees import zcdp_delta_cks

# Extra decimal digits beyond -log10(delta). Both terms of the Balle-Wang
# difference Phi(a) - e^eps Phi(b) lie in [0, 1] (the difference is >= 0),
# so working with d digits gives an absolute error of about 10^-d, which is
# 10^-30 relative to delta with this many guard digits.
_GUARD_DIGITS = 30


def _dps(delta: float) -> int:
    return _GUARD_DIGITS + math.ceil(-math.log10(delta))


def gaussian_sigma_classic(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The classic Gaussian-mechanism noise level (Dwork & Roth 2014, Thm A.1).

    .. math:: \\sigma = \\frac{\\Delta_2 \\sqrt{2 \\ln(1.25/\\delta)}}{\\varepsilon},
              \\qquad 0 < \\varepsilon < 1.

    Computed in interval arithmetic and rounded up to a float64.

    Args:
      epsilon: privacy parameter, ``0 < epsilon < 1``.
      delta: privacy parameter in (0, 1).
      sensitivity: the L2 sensitivity :math:`\\Delta_2 > 0`.

    Returns:
      sigma, a float64 upper bound on the formula.

    Raises:
      ValueError: if ``epsilon >= 1`` (the theorem does not apply) or any
        parameter is out of range.

    References:
      Dwork & Roth, `The Algorithmic Foundations of Differential Privacy
      <https://www.cis.upenn.edu/~aaroth/Papers/privacybook.pdf>`_, 2014, Thm A.1.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    sensitivity = check_positive("sensitivity", sensitivity)
    if epsilon >= 1.0:
        raise ValueError(f"The classic Gaussian calibration holds only for epsilon < 1 (Dwork & Roth 2014, "
                         f"Thm A.1), got epsilon={epsilon!r}. Use calibration='analytic' "
                         "(gaussian_sigma_analytic), which is valid for every epsilon > 0 and never larger.")
    iv = mpmath.iv
    saved_prec = iv.prec
    iv.dps = 40
    try:
        sigma = (iv.mpf(sensitivity) * iv.sqrt(2 * iv.log(iv.mpf("1.25") / iv.mpf(delta)))) / iv.mpf(epsilon)
        with mpmath.workdps(40):
            return float_up(mpmath.mpf(sigma.b))
    finally:
        iv.prec = saved_prec


def _balle_wang_delta(sigma, epsilon, sensitivity):
    # Balle & Wang (ICML 2018, arXiv 1805.06530v2), Thm 8: the Gaussian
    # mechanism with noise N(0, sigma^2 I) on an L2-sensitivity-Delta query is
    # (eps, delta)-DP iff delta >= Phi(Delta/(2 sigma) - eps sigma/Delta)
    #                              - e^eps Phi(-Delta/(2 sigma) - eps sigma/Delta).
    s, e, d = mpmath.mpf(sigma), mpmath.mpf(epsilon), mpmath.mpf(sensitivity)
    shift = e * s / d
    half = d / (2 * s)
    return mpmath.ncdf(half - shift) - mpmath.exp(e) * mpmath.ncdf(-half - shift)


def gaussian_delta_analytic(sigma: float, *, epsilon: float, sensitivity: float = 1.0) -> float:
    """The exact (smallest) delta of the Gaussian mechanism at a given epsilon.

    .. math:: \\delta(\\sigma) = \\Phi\\Big(\\frac{\\Delta}{2\\sigma} - \\frac{\\varepsilon\\sigma}{\\Delta}\\Big)
              - e^{\\varepsilon}\\,\\Phi\\Big(-\\frac{\\Delta}{2\\sigma} - \\frac{\\varepsilon\\sigma}{\\Delta}\\Big)

    Evaluated with mpmath at enough digits that cancellation is harmless,
    then rounded up.

    Args:
      sigma: standard deviation of the noise, > 0.
      epsilon: > 0.
      sensitivity: the L2 sensitivity :math:`\\Delta > 0`.

    Returns:
      delta in [0, 1], rounded up to a float64.

    References:
      Balle & Wang, `Improving the Gaussian Mechanism for Differential Privacy
      <https://arxiv.org/abs/1805.06530>`_, ICML 2018, Thm 8.
    """
    sigma = check_positive("sigma", sigma)
    epsilon = check_epsilon(epsilon)
    sensitivity = check_positive("sensitivity", sensitivity)
    dps = 50
    while True:
        with mpmath.workdps(dps):
            value = _balle_wang_delta(sigma, epsilon, sensitivity)
            # Terms lie in [0, 1], so the absolute error is about 10^-dps. Add a
            # generous bound on it, and add digits until it is negligible.
            error = mpmath.mpf(10) ** (5 - dps)
            if value > mpmath.mpf(10) ** (_GUARD_DIGITS - dps) or dps >= 1600:
                return min(1.0, float_up(max(value, mpmath.mpf(0)) + error))
        dps *= 2


def gaussian_sigma_analytic(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The smallest Gaussian noise level that gives (epsilon, delta)-DP (Balle & Wang 2018, Alg. 1).

    Finds the smallest float64 sigma with

    .. math:: \\Phi\\Big(\\frac{\\Delta}{2\\sigma} - \\frac{\\varepsilon\\sigma}{\\Delta}\\Big)
              - e^{\\varepsilon}\\,\\Phi\\Big(-\\frac{\\Delta}{2\\sigma} - \\frac{\\varepsilon\\sigma}{\\Delta}\\Big)
              \\le \\delta,

    the exact (necessary and sufficient) condition of Balle & Wang's Thm 8.
    The left side decreases in sigma, so a bisection over float64 values,
    each evaluated in mpmath with ``30 - log10(delta)`` decimal digits,
    ends at adjacent floats; the upper one is returned. It satisfies the
    condition (so the guarantee holds) and is at most one ulp above the
    real-valued optimum. Valid for every epsilon > 0, and never larger than
    :func:`gaussian_sigma_classic`.

    Args:
      epsilon: > 0.
      delta: in (0, 1).
      sensitivity: the L2 sensitivity :math:`\\Delta > 0`.

    Returns:
      sigma as a float64.

    Examples:
      >>> from gpuprivacy import mechanisms
      >>> round(mechanisms.gaussian_sigma_analytic(1.0, 1e-5), 6)
      3.730632

    References:
      Balle & Wang, `Improving the Gaussian Mechanism for Differential Privacy
      <https://arxiv.org/abs/1805.06530>`_, ICML 2018, Thm 8 and Alg. 1.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    sensitivity = check_positive("sensitivity", sensitivity)
    return _gaussian_sigma_analytic(epsilon, delta, sensitivity)


# The largest noise level calibrated here: beyond it a release is noise at every float64 scale, and
# sums and doublings in the search would overflow.
_SIGMA_LIMIT = 1e300


# Past this epsilon mpmath's complementary error function overflows on the calibration's arguments
# (epsilon sigma / Delta with sigma ~ Delta / epsilon); below it the search takes at most about a second.
_ANALYTIC_EPSILON_LIMIT = 1e100


@functools.lru_cache(maxsize=1024)
def _gaussian_sigma_analytic(epsilon: float, delta: float, sensitivity: float) -> float:
    if epsilon > _ANALYTIC_EPSILON_LIMIT:
        raise ValueError(f"the analytic Gaussian calibration takes epsilon <= {_ANALYTIC_EPSILON_LIMIT:.0e}, got "
                         f"epsilon = {epsilon!r}: at such budgets the noise is already about "
                         f"{sensitivity / _ANALYTIC_EPSILON_LIMIT:.1e} x sensitivity; pass a smaller epsilon.")
    with mpmath.workdps(_dps(delta)):
        target = mpmath.mpf(delta)

        def ok(sigma: float) -> bool:
            return _balle_wang_delta(sigma, epsilon, sensitivity) <= target

        # Two upper bounds on the analytic sigma: the classic one, and Delta / (delta sqrt(2 pi)), which
        # already holds at epsilon = 0 (there delta(sigma) = 2 Phi(Delta / 2 sigma) - 1 <= Delta / (sigma
        # sqrt(2 pi))) and so at every epsilon > 0, where delta(sigma) is smaller. With the smaller one as
        # the start, ok(guess) holds and the search is bounded: at most ~1100 halvings of lo and ~64
        # bisection steps, whatever epsilon (a tiny epsilon used to overflow the classic start and hang).
        classic = mpmath.mpf(sensitivity) * mpmath.sqrt(2 * mpmath.log(mpmath.mpf("1.25") / target)) / epsilon
        small_epsilon = mpmath.mpf(sensitivity) / (target * mpmath.sqrt(2 * mpmath.pi)) * (1 + mpmath.mpf(10) ** -9)
        guess_exact = min(classic, small_epsilon)
        if guess_exact > _SIGMA_LIMIT:
            raise ValueError(f"the Gaussian noise for epsilon = {epsilon!r}, delta = {delta!r}, sensitivity = "
                             f"{sensitivity!r} would need sigma of about {mpmath.nstr(guess_exact, 3)}, beyond "
                             f"{_SIGMA_LIMIT:.0e}: use a smaller sensitivity, or a larger delta or epsilon.")
        guess = float(guess_exact)
        lo = hi = guess
        while not ok(hi):
            lo, hi = hi, hi * 2
        while ok(lo):
            lo, hi = lo / 2, lo
        # Invariant: not ok(lo) and ok(hi).
        while True:
            mid = lo + (hi - lo) / 2
            if not lo < mid < hi:
                return hi
            if ok(mid):
                hi = mid
            else:
                lo = mid


def gaussian_sigma_zcdp(rho: float, sensitivity: float = 1.0) -> float:
    """The Gaussian noise level for rho-zCDP (Bun & Steinke 2016, Prop. 1.6).

    .. math:: \\sigma = \\frac{\\Delta_2}{\\sqrt{2\\rho}}

    Rounded up with an exact rational check, so that
    :math:`\\Delta^2 / (2\\sigma^2) \\le \\rho` holds exactly.

    References:
      Bun & Steinke, `Concentrated Differential Privacy: Simplifications,
      Extensions, and Lower Bounds <https://arxiv.org/abs/1605.02065>`_, 2016, Prop. 1.6.
    """
    rho = check_positive("rho", rho)
    sensitivity = check_positive("sensitivity", sensitivity)
    # sqrt(2) and sqrt(rho) apart: 2 * rho overflows for rho > 9e307 (then sigma was 0 and the exact
    # step-up searched a million ulps from 0 for a minute).
    sigma = sensitivity / math.sqrt(2.0) / math.sqrt(rho)
    if not 0.0 < sigma < math.inf:
        raise ValueError(f"the zCDP Gaussian noise level Delta / sqrt(2 rho) = {sensitivity!r} / sqrt(2 * {rho!r}) "
                         "is not a positive finite float64: use a rho and sensitivity of less extreme size.")
    exact_rho, exact_sensitivity = Fraction(rho), Fraction(sensitivity)
    return step_up_until(sigma, lambda s: exact_sensitivity**2 <= 2 * exact_rho * Fraction(s) ** 2)


def gaussian_sigma_discrete(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """A noise level for the *discrete* Gaussian giving (epsilon, delta)-DP, through zCDP.

    The discrete Gaussian :math:`\\mathcal{N}_{\\mathbb{Z}}(0, \\sigma^2)` on an
    integer-valued query of sensitivity :math:`\\Delta` is
    :math:`\\Delta^2/(2\\sigma^2)`-zCDP (Canonne, Kamath & Steinke 2020, Sec. 2).
    This takes the largest :math:`\\rho` whose CKS conversion (Cor. 13,
    :func:`gpuprivacy.accounting.zcdp_delta_cks`) gives
    :math:`\\delta` at :math:`\\varepsilon`, then
    :math:`\\sigma = \\Delta/\\sqrt{2\\rho}` rounded up. It is slightly larger
    than :func:`gaussian_sigma_analytic`, whose exact condition is proved for
    the continuous Gaussian only. Used by ``gaussian_mechanism(secure=True)``.

    References:
      Canonne, Kamath & Steinke, `The Discrete Gaussian for Differential Privacy
      <https://arxiv.org/abs/2004.00010>`_, NeurIPS 2020, Sec. 2 and Cor. 13.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    sensitivity = check_positive("sensitivity", sensitivity)
    return gaussian_sigma_zcdp(_largest_rho_cks(epsilon, delta), sensitivity)


@functools.lru_cache(maxsize=1024)
def _largest_rho_cks(epsilon: float, delta: float) -> float:
    """A rho (within 1e-12 relative of the largest) with zcdp_delta_cks(rho, epsilon) <= delta."""

    def ok(rho: float) -> bool:
        return zcdp_delta_cks(rho, epsilon) <= delta

    # Inverting Bun & Steinke (Prop. 1.3), eps = rho + 2 sqrt(rho log(1/delta)), gives a valid start,
    # since CKS is never worse.
    log_inverse_delta = math.log(1 / delta)
    lo = (math.sqrt(log_inverse_delta + epsilon) - math.sqrt(log_inverse_delta)) ** 2
    while not ok(lo):
        lo /= 2
    hi = 2 * lo
    while ok(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-12 * lo:
        mid = lo + (hi - lo) / 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo
