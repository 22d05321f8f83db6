"""Approximate-DP baselines for Gaussian selection: RDP, its conversions, analytic Gaussian, Zhu-Wang AT.

These are the bounds that Lebensold, Precup & Balle (AISTATS 2024) compare their pure bounds
against (Lebensold et al. 2024, Sec. 2, App. B):

* report noisy max as post-processing of the Gaussian mechanism on the d-vector of queries,
  with l2 sensitivity :math:`\\Delta\\sqrt{d}`, accounted by RDP (Mironov 2017) and converted to
  (epsilon, delta) by Markov's inequality or by Balle et al. (2020, Thm 21), or by the exact
  analytic Gaussian (Balle & Wang 2018);
* Gaussian above threshold accounted by Zhu & Wang's (2020) RDP bound (Thm 7, gamma = 2), or its
  capped log(k) variant.

RDP curves are minimised over a dense log-spaced grid of orders (1 + 1e-6 .. 1 + 1e8, 10^4
points), then refined next to the best grid point by a zoom: a grid of 33 orders between the best
order's neighbours, again between the neighbours of its best, 12 times (the bracket shrinks 16-fold
each time; one vectorised evaluation per step, where a golden-section search takes one scalar
evaluation per step, 122 of them, for a coarser bracket). Every order
gives a valid bound, so an inexact minimiser only loosens the result; it is never unsafe. All
float64 evaluations add a round-off allowance and are rounded up (gpuprivacy._rounding.round_up).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import mpmath
import numpy as np

from gpuprivacy._checks import check_delta, check_finite_real, check_int, check_positive
from gpuprivacy._rounding import round_up
from gpuprivacy.accounting._gaussian_calibration import _balle_wang_delta, gaussian_delta_analytic

__all__ = [
    "DEFAULT_ORDERS",
    "gaussian_epsilon_analytic",
    "gaussian_rdp",
    "gaussian_rnm_epsilon_postprocessing",
    "rdp_to_dp_epsilon",
    "zhu_wang_at_epsilon",
    "zhu_wang_at_rdp",
]

#: The default RDP orders alpha: 1 + logspace(-6, 8, 10001).
DEFAULT_ORDERS = 1.0 + np.logspace(-6.0, 8.0, 10_001)
_CONVERSIONS = ("markov", "bbghs")
_EPS64 = float(np.finfo(np.float64).eps)
# Round-off allowance in units of eps64 times the sum of the magnitudes of the terms.
_ROUNDOFF_ULPS = 16.0
# The refinement next to the best grid order: 12 steps of 33 orders shrink the bracket of two grid spacings
# 16^12-fold (to 3.6e-15 of it, below float64 resolution in log(alpha - 1) at the optimum).
_ZOOM_POINTS, _ZOOM_STEPS = 33, 12


def gaussian_rdp(alpha, sigma: float, sensitivity: float = 1.0):
    """RDP of the Gaussian mechanism (Mironov 2017, Prop. 7).

    .. math:: \\varepsilon(\\alpha) = \\frac{\\alpha \\Delta_2^2}{2\\sigma^2}

    Args:
      alpha: order(s) > 1 (scalar or array).
      sigma: noise standard deviation, > 0.
      sensitivity: l2 sensitivity :math:`\\Delta_2 > 0`.

    Returns:
      The RDP epsilon at each order (float or np.ndarray), float64.

    References:
      Mironov, `Renyi Differential Privacy <https://arxiv.org/abs/1702.07476>`_, CSF 2017, Prop. 7.
    """
    sigma = check_positive("sigma", sigma)
    sensitivity = check_positive("sensitivity", sensitivity)
    alpha = _check_orders(alpha)
    value = alpha * sensitivity ** 2 / (2.0 * sigma ** 2)
    return float(value) if np.ndim(value) == 0 else value


def _check_orders(alpha) -> np.ndarray:
    array = np.asarray(alpha, dtype=np.float64)
    if not np.all(np.isfinite(array)) or np.any(array <= 1.0):
        bad = array[~(np.isfinite(array) & (array > 1.0))].flat[0]
        raise ValueError(f"alpha (the RDP order) must be finite and > 1, got {bad!r}.")
    return array


def _markov_terms(alpha, rdp, log_inverse_delta):
    # RDP -> (eps, delta) by Markov's inequality (Mironov 2017, Prop. 3):
    # eps = rdp(alpha) + log(1/delta)/(alpha - 1). Also an (eps, delta)-pDP bound.
    return [rdp, log_inverse_delta / (alpha - 1.0)]


def _bbghs_terms(alpha, rdp, log_inverse_delta):
    # Balle, Barthe, Gaboardi, Hsu & Sato (arXiv 1905.09982v2, AISTATS 2020), Thm 21:
    # eps = rdp(alpha) + log((alpha - 1)/alpha) - (log(delta) + log(alpha))/(alpha - 1); autodp's
    # default conversion (Lebensold et al. 2024, Sec. 2, App. B(c)). Clipped at 0 by the caller.
    return [rdp, np.log1p(-1.0 / alpha), (log_inverse_delta - np.log(alpha)) / (alpha - 1.0)]


_TERMS = {"markov": _markov_terms, "bbghs": _bbghs_terms}


def _objective(conversion, rdp_fn, log_inverse_delta, alpha):
    terms = _TERMS[conversion](alpha, rdp_fn(alpha), log_inverse_delta)
    value = sum(terms)
    allowance = _ROUNDOFF_ULPS * _EPS64 * sum(np.abs(t) for t in terms)
    return value, allowance


def rdp_to_dp_epsilon(rdp_fn: Callable[[np.ndarray], np.ndarray], delta: float, *, conversion: str = "markov",
                      orders=None) -> float:
    """Smallest epsilon over RDP orders such that the RDP curve implies (epsilon, delta)-DP.

    ``conversion="markov"``: :math:`\\varepsilon = \\min_\\alpha \\varepsilon(\\alpha) + \\log(1/\\delta)/(\\alpha - 1)`
    (Mironov 2017, Prop. 3; also an (epsilon, delta)-pDP bound, which FSRC needs).
    For the Gaussian mechanism it equals the zCDP conversion
    :math:`r + 2\\sqrt{r \\log(1/\\delta)}` of Bun & Steinke (2016).

    ``conversion="bbghs"``: :math:`\\varepsilon = \\min_\\alpha \\max(0, \\varepsilon(\\alpha)
    + \\log((\\alpha-1)/\\alpha) - (\\log\\delta + \\log\\alpha)/(\\alpha-1))` (Balle et al. 2020,
    Thm 21; autodp's default). An approximate-DP bound, not necessarily pDP.

    Args:
      rdp_fn: vectorised map from an array of orders (> 1) to RDP epsilons.
      delta: target delta in (0, 1).
      conversion: ``"markov"`` or ``"bbghs"``.
      orders: candidate orders (default :data:`DEFAULT_ORDERS`); the best one is refined between its
        grid neighbours (the module docstring).

    Returns:
      epsilon, a float rounded up (with a float64 round-off allowance).

    References:
      Mironov, `Renyi Differential Privacy <https://arxiv.org/abs/1702.07476>`_, CSF 2017, Prop. 3;
      Balle, Barthe, Gaboardi, Hsu & Sato, `Hypothesis Testing Interpretations and Renyi
      Differential Privacy <https://arxiv.org/abs/1905.09982>`_, AISTATS 2020, Thm 21.
    """
    delta = check_delta(delta)
    if conversion not in _CONVERSIONS:
        raise ValueError(f"conversion must be one of {_CONVERSIONS}, got {conversion!r}.")
    orders = DEFAULT_ORDERS if orders is None else np.sort(_check_orders(orders).reshape(-1))
    log_inverse_delta = -math.log(delta)
    values, allowances = _objective(conversion, rdp_fn, log_inverse_delta, orders)
    values = np.where(np.isfinite(values), values, np.inf)
    best = int(np.argmin(values))
    if not np.isfinite(values[best]):
        raise ValueError("the RDP curve is infinite at every order; no (epsilon, delta) bound follows.")
    best_value, best_allowance = float(values[best]), float(allowances[best])
    # Zoom on log(alpha - 1) between the neighbours of the best order: the best of a grid, then a grid between
    # its neighbours, and so on. Any order gives a valid bound, so the minimum over every order evaluated is one.
    lo = math.log(orders[max(best - 1, 0)] - 1.0)
    hi = math.log(orders[min(best + 1, len(orders) - 1)] - 1.0)
    for _ in range(_ZOOM_STEPS):
        steps = np.linspace(lo, hi, _ZOOM_POINTS)
        values, allowances = _objective(conversion, rdp_fn, log_inverse_delta, 1.0 + np.exp(steps))
        values = np.where(np.isfinite(values), values, np.inf)
        at = int(np.argmin(values))
        if values[at] < best_value:
            best_value, best_allowance = float(values[at]), float(allowances[at])
        lo, hi = steps[max(at - 1, 0)], steps[min(at + 1, _ZOOM_POINTS - 1)]
    upper = best_value + best_allowance
    if conversion == "bbghs":
        upper = max(upper, 0.0)
    return round_up(upper)


# ---------------------------------------------------------------------------------------------
# Analytic Gaussian (Balle & Wang 2018), reusing accounting._gaussian_calibration's mpmath kernel.


def gaussian_epsilon_analytic(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest epsilon such that the Gaussian mechanism is (epsilon, delta)-DP (Balle & Wang 2018).

    Inverts the exact condition of Balle & Wang's Thm 8,

    .. math:: \\Phi\\Big(\\frac{\\Delta}{2\\sigma} - \\frac{\\varepsilon\\sigma}{\\Delta}\\Big)
              - e^{\\varepsilon}\\Phi\\Big(-\\frac{\\Delta}{2\\sigma} - \\frac{\\varepsilon\\sigma}{\\Delta}\\Big)
              \\le \\delta,

    by bisection over float64 epsilons, each tested with
    :func:`gpuprivacy.accounting.gaussian_delta_analytic` (mpmath, delta rounded up). The left
    side decreases in epsilon, so the returned epsilon satisfies the condition and is the
    smallest float64 that does (up to the rounding up of delta). Returns 0.0 if the condition holds at epsilon = 0.

    Args:
      sigma: noise standard deviation, > 0.
      delta: in (0, 1).
      sensitivity: l2 sensitivity, > 0.

    Returns:
      epsilon >= 0 as a float.

    References:
      Balle & Wang, `Improving the Gaussian Mechanism for Differential Privacy
      <https://arxiv.org/abs/1805.06530>`_, ICML 2018, Thm 8.
    """
    return _gaussian_epsilon_analytic(check_positive("sigma", sigma), check_delta(delta),
                                      check_positive("sensitivity", sensitivity))


@functools.lru_cache(maxsize=4096)
def _gaussian_epsilon_analytic(sigma: float, delta: float, sensitivity: float) -> float:
    def ok(epsilon: float) -> bool:
        return gaussian_delta_analytic(sigma, epsilon=epsilon, sensitivity=sensitivity) <= delta

    with mpmath.workdps(40):
        # delta(0) = Phi(s) - Phi(-s) = 2 Phi(s) - 1 with s = Delta / (2 sigma).
        if _balle_wang_delta(sigma, 0, sensitivity) <= mpmath.mpf(delta) * (1 - mpmath.mpf(10) ** -30):
            return 0.0
    # Lebensold et al. 2024, Sec. 2, App. B(d): the root lies below 1/(2 s^2) + sqrt(2 log(1/delta))/s, s = sigma/Delta.
    s = sigma / sensitivity
    hi = 1.0 / (2.0 * s * s) + math.sqrt(2.0 * math.log(1.0 / delta)) / s
    while not ok(hi):
        hi *= 2.0
    # Bisection down to adjacent floats (lo may start at 0: ~60 more halvings reach 1e-16 hi, after
    # which lo > 0 and the bracket shrinks by ulps), so hi is the smallest float64 that passes.
    lo = 0.0
    while True:
        mid = lo + (hi - lo) / 2.0
        if mid <= lo or mid >= hi or (lo == 0.0 and hi < 1e-300):
            break
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _l2_sensitivity(sensitivity: float, d: int) -> float:
    """Delta * sqrt(d), rounded up (Lebensold et al. Sec 2: Delta_q <= sqrt(d) Delta)."""
    return round_up(round_up(math.sqrt(d)) * sensitivity)


def gaussian_rnm_epsilon_postprocessing(sigma, d, sensitivity, delta, *, conversion: str = "analytic"):
    """(epsilon, delta) of Gaussian report noisy max as post-processing of the Gaussian mechanism.

    The argmax of :math:`q(D) + N(0, \\sigma^2 I_d)` is post-processing of the Gaussian mechanism
    on the d-vector of queries, whose l2 sensitivity is at most :math:`\\Delta_q = \\Delta\\sqrt{d}`
    (Lebensold et al. 2024, Sec. 2, App. B). This is the baseline the pure bound
    (:func:`gaussian_rnm_epsilon`) is compared against; it needs no bounded range.

    Args:
      sigma: noise standard deviation, > 0 (scalar or array).
      d: number of candidates, integer >= 1 (scalar or array).
      sensitivity: per-query sensitivity :math:`\\Delta > 0`.
      delta: target delta in (0, 1).
      conversion: ``"analytic"`` (Balle & Wang 2018, exact; the paper's Fig. 7),
        ``"markov"`` (RDP + Markov = Bun-Steinke zCDP conversion) or ``"bbghs"``
        (RDP + Balle et al. 2020 Thm 21).

    Returns:
      epsilon rounded up; a float, or an np.ndarray of the broadcast shape of sigma and d.

    Examples:
      >>> from gpuprivacy import accounting
      >>> round(accounting.gaussian_rnm_epsilon_postprocessing(0.1, 16, 1e-3, 1e-5), 4)
      0.1254
      >>> round(accounting.gaussian_rnm_epsilon(0.1, 16, 1e-3, 0.0, 1.0), 4)  # the pure bound is larger here
      0.2041

    References:
      Lebensold, Precup & Balle, arXiv 2402.06137v2, Sec 2 and App. B.1; Balle & Wang, ICML 2018,
      Thm 8; Mironov, CSF 2017; Balle et al., AISTATS 2020, Thm 21.
    """
    if conversion not in ("analytic",) + _CONVERSIONS:
        raise ValueError(f"conversion must be one of {('analytic',) + _CONVERSIONS}, got {conversion!r}.")
    sensitivity = check_positive("sensitivity", sensitivity)
    delta = check_delta(delta)
    scalar = np.ndim(sigma) == 0 and np.ndim(d) == 0
    sigmas, ds = np.broadcast_arrays(np.asarray(sigma, dtype=np.float64), np.asarray(d))
    out = np.empty(sigmas.shape)
    for index in np.ndindex(sigmas.shape):
        s = check_positive("sigma", sigmas[index])
        k = check_int("d", ds[index].item(), minimum=1)
        l2 = _l2_sensitivity(sensitivity, k)
        if conversion == "analytic":
            out[index] = gaussian_epsilon_analytic(s, delta, l2)
        else:
            out[index] = rdp_to_dp_epsilon(functools.partial(_gaussian_rdp_curve, sigma=s, sensitivity=l2), delta,
                                           conversion=conversion)
    return float(out[()]) if scalar else out


def _gaussian_rdp_curve(alpha, *, sigma, sensitivity):
    return alpha * sensitivity ** 2 / (2.0 * sigma ** 2)


# ---------------------------------------------------------------------------------------------
# Zhu & Wang (2020): RDP of Gaussian above threshold.

_SQRT3 = math.sqrt(3.0)


def _check_zhu_wang(sigma_threshold, sigma_query, threshold, sensitivity, max_queries):
    sigma_threshold = check_positive("sigma_threshold", sigma_threshold)
    sigma_query = check_positive("sigma_query", sigma_query)
    threshold = check_finite_real("threshold", threshold)
    sensitivity = check_positive("sensitivity", sensitivity)
    if max_queries is not None:
        max_queries = check_int("max_queries", max_queries, minimum=1)
    theorem7 = sigma_query >= _SQRT3 * sigma_threshold and threshold >= 0.0
    if not theorem7 and max_queries is None:
        reasons = []
        if sigma_query < _SQRT3 * sigma_threshold:
            reasons.append(f"sigma_query={sigma_query!r} < sqrt(3) * sigma_threshold={_SQRT3 * sigma_threshold!r}")
        if threshold < 0.0:
            reasons.append(f"threshold={threshold!r} < 0")
        raise ValueError("Zhu & Wang's Thm 7 needs sigma_query >= sqrt(3) * sigma_threshold and threshold >= 0, but "
                         + " and ".join(reasons) + ". Increase sigma_query / the threshold, or pass max_queries=k to "
                         "use the capped log(k) bound.")
    return sigma_threshold, sigma_query, threshold, sensitivity, max_queries, theorem7


def _zhu_wang_curve(alpha, *, sigma_threshold, sigma_query, threshold, sensitivity, max_queries, theorem7):
    # Zhu & Wang (NeurIPS 2020), as stated in Lebensold et al. (arXiv 2402.06137v2),
    # Thm 7 and implemented in autodp 0.2.3.1 rdp_bank.RDP_gaussian_svt_c1 with gamma = 2
    # (Lebensold et al. 2024, Thms 6-7): alpha Delta^2/sigmaX^2 + 2 alpha Delta^2/sigmaZ^2 + moment / (2 (alpha - 1)).
    base = alpha * sensitivity ** 2 / sigma_threshold ** 2 + 2.0 * alpha * sensitivity ** 2 / sigma_query ** 2
    best = np.full(np.shape(alpha), np.inf)
    if theorem7:
        ratio2 = (threshold / sigma_threshold) ** 2
        # log(1 + 2 sqrt(3) pi (1 + 9 rho^2/sigmaX^2) exp(rho^2/sigmaX^2)), without overflow.
        log_moment = np.logaddexp(0.0, math.log(2.0 * _SQRT3 * math.pi) + math.log1p(9.0 * ratio2) + ratio2)
        best = base + log_moment / (2.0 * (alpha - 1.0))
    if max_queries is not None:
        # Capped variant (the stopping time is at most k): log(k)/(alpha - 1) replaces the moment term.
        best = np.minimum(best, base + math.log(max_queries) / (alpha - 1.0))
    return best


def zhu_wang_at_rdp(alpha, sigma_threshold: float, sigma_query: float, threshold: float, sensitivity: float, *,
                    max_queries: int | None = None):
    """RDP of Gaussian above threshold (one top), Zhu & Wang (2020), gamma = 2.

    .. math:: \\varepsilon(\\alpha) = \\frac{\\alpha\\Delta^2}{\\sigma_X^2} + \\frac{2\\alpha\\Delta^2}{\\sigma_Z^2}
              + \\frac{\\log\\big(1 + 2\\sqrt{3}\\pi(1 + 9\\rho^2/\\sigma_X^2)e^{\\rho^2/\\sigma_X^2}\\big)}{2(\\alpha-1)}

    valid when :math:`\\sigma_Z \\ge \\sqrt{3}\\sigma_X`, :math:`\\rho \\ge 0` and the queries are
    non-negative and :math:`\\Delta`-sensitive (Lebensold et al. Thm 7; the caller is responsible
    for non-negative queries). With ``max_queries=k`` the capped bound
    :math:`\\alpha\\Delta^2/\\sigma_X^2 + 2\\alpha\\Delta^2/\\sigma_Z^2 + \\log(k)/(\\alpha-1)` is also
    available (the minimum of the two is returned; only the capped one when Thm 7's conditions
    fail), as in autodp's ``RDP_gaussian_svt_c1``.

    Args:
      alpha: order(s) > 1.
      sigma_threshold, sigma_query: noise standard deviations :math:`\\sigma_X, \\sigma_Z > 0`.
      threshold: :math:`\\rho`.
      sensitivity: :math:`\\Delta > 0`.
      max_queries: optional cap k on the number of queries.

    Returns:
      RDP epsilon at each order (float or np.ndarray).

    Raises:
      ValueError: if Thm 7's conditions fail and no ``max_queries`` is given.

    References:
      Zhu & Wang, `Improving Sparse Vector Technique with Renyi Differential Privacy
      <https://proceedings.neurips.cc/paper/2020/hash/e9bf14a419d77534105016f5ec122d62-Abstract.html>`_,
      NeurIPS 2020; Lebensold et al., arXiv 2402.06137v2, Thm 6-7.
    """
    checked = _check_zhu_wang(sigma_threshold, sigma_query, threshold, sensitivity, max_queries)
    alpha = _check_orders(alpha)
    names = ("sigma_threshold", "sigma_query", "threshold", "sensitivity", "max_queries", "theorem7")
    value = _zhu_wang_curve(alpha, **dict(zip(names, checked)))
    return float(value) if np.ndim(value) == 0 else value


def zhu_wang_at_epsilon(sigma_threshold: float, sigma_query: float, threshold: float, sensitivity: float,
                        delta: float, *, conversion: str = "markov", max_queries: int | None = None) -> float:
    """Ex-ante (epsilon, delta) of Gaussian above threshold from Zhu & Wang's RDP bound.

    Minimises :func:`zhu_wang_at_rdp` over the orders with :func:`rdp_to_dp_epsilon`.
    ``conversion="markov"`` gives an (epsilon, delta)-pDP bound (needed as eps_max by filtered
    self-reporting composition); ``"bbghs"`` reproduces the paper's Fig. 1
    ex-ante values (0.027534 at sigmaX = 0.3, sigmaZ = sqrt(3) 0.3, rho = 0.75, Delta = 1e-3,
    delta = 1e-5; Lebensold et al. 2024, Fig. 1).

    Args:
      sigma_threshold, sigma_query, threshold, sensitivity, max_queries: as in :func:`zhu_wang_at_rdp`.
      delta: in (0, 1).
      conversion: ``"markov"`` or ``"bbghs"``.

    Returns:
      epsilon as a float, rounded up.

    Examples:
      >>> from gpuprivacy import accounting
      >>> round(accounting.zhu_wang_at_epsilon(0.3, 0.3 * 3 ** 0.5, 0.75, 1e-3, 1e-5, conversion="bbghs"), 6)
      0.027534

    References:
      Zhu & Wang, NeurIPS 2020; Lebensold et al., arXiv 2402.06137v2, Thm 7 and Sec 4.1; Balle et
      al., AISTATS 2020, Thm 21.
    """
    checked = _check_zhu_wang(sigma_threshold, sigma_query, threshold, sensitivity, max_queries)
    names = ("sigma_threshold", "sigma_query", "threshold", "sensitivity", "max_queries", "theorem7")
    curve = functools.partial(_zhu_wang_curve, **dict(zip(names, checked)))
    return rdp_to_dp_epsilon(curve, delta, conversion=conversion)
