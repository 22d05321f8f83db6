"""Noise calibration for the Gaussian selection bounds: the smallest sigma meeting a target epsilon."""

from __future__ import annotations

import math

import numpy as np

from gpuprivacy._checks import check_epsilon, check_int, check_positive
from gpuprivacy.accounting._gaussian_calibration import gaussian_sigma_analytic
from gpuprivacy.accounting._gaussian_selection import gaussian_at_epsilon, gaussian_rnm_epsilon
from gpuprivacy.accounting._rdp import _l2_sensitivity, zhu_wang_at_epsilon

__all__ = ["CALIBRATION_BOUNDS", "calibrate_sigma"]

#: The bounds calibrate_sigma knows, with their parameters (keyword arguments).
CALIBRATION_BOUNDS = {
    "gaussian-rnm": ("d", "sensitivity", "lower", "upper", "[method]"),
    "gaussian-at": ("t", "threshold", "sensitivity", "lower", "upper", "[query_ratio]", "[method]"),
    "rnm-analytic": ("d", "sensitivity", "delta"),
    "zhu-wang": ("threshold", "sensitivity", "delta", "[query_ratio]", "[conversion]", "[max_queries]"),
}

# Multi-section search: each round evaluates _SECTIONS sigmas (one vmapped call of the small, 16-row
# quadrature kernel) and keeps the bracket between the last failing and the first passing one.
_SECTIONS = 7
_RELATIVE_TOLERANCE = 1e-10
_MAX_BRACKET_STEPS = 200


def _bound_function(bound: str, params: dict):
    """A vectorised map sigma (np.ndarray) -> epsilon upper bounds, and the sigma it returns."""
    def take(*names, optional=None):
        optional = optional or {}
        unknown = set(params) - set(names) - set(optional)
        missing = [n for n in names if n not in params]
        if unknown or missing:
            raise ValueError(f"calibrate_sigma({bound!r}) takes parameters {list(names) + list(optional)}; "
                             f"missing {missing}, unknown {sorted(unknown)}.")
        return [params[n] for n in names] + [params.get(n, default) for n, default in optional.items()]

    if bound == "gaussian-rnm":
        d, sensitivity, lower, upper, method = take("d", "sensitivity", "lower", "upper",
                                                    optional={"method": "quadrature"})
        return lambda sigma: np.atleast_1d(gaussian_rnm_epsilon(sigma, d, sensitivity, lower, upper, method=method))
    if bound == "gaussian-at":
        t, threshold, sensitivity, lower, upper, ratio, method = take(
            "t", "threshold", "sensitivity", "lower", "upper", optional={"query_ratio": math.sqrt(3.0),
                                                                         "method": "quadrature"})
        ratio = check_positive("query_ratio", ratio)
        return lambda sigma: np.atleast_1d(gaussian_at_epsilon(t, sigma, ratio * sigma, threshold, sensitivity, lower,
                                                               upper, method=method))
    if bound == "zhu-wang":
        threshold, sensitivity, delta, ratio, conversion, max_queries = take(
            "threshold", "sensitivity", "delta",
            optional={"query_ratio": math.sqrt(3.0), "conversion": "markov", "max_queries": None})
        ratio = check_positive("query_ratio", ratio)
        return lambda sigma: np.array([zhu_wang_at_epsilon(s, ratio * s, threshold, sensitivity, delta,
                                                           conversion=conversion, max_queries=max_queries)
                                       for s in np.atleast_1d(sigma)])
    raise ValueError(f"bound must be one of {sorted(CALIBRATION_BOUNDS)}, got {bound!r}.")


def calibrate_sigma(bound: str, target_epsilon: float, **params) -> float:
    """The smallest noise standard deviation whose epsilon bound is <= target_epsilon.

    Bounds (and their keyword parameters):

    * ``"gaussian-rnm"``: :func:`gaussian_rnm_epsilon` (d, sensitivity, lower, upper, method).
    * ``"gaussian-at"``: :func:`gaussian_at_epsilon` at stopping time t (t, threshold,
      sensitivity, lower, upper, method), with ``sigma_query = query_ratio * sigma`` (default
      sqrt(3), the paper's choice); returns ``sigma_threshold``.
    * ``"rnm-analytic"``: :func:`gaussian_rnm_epsilon_postprocessing` with the analytic Gaussian
      (d, sensitivity, delta); solved exactly by
      :func:`gpuprivacy.mechanisms.gaussian_sigma_analytic` with l2 sensitivity Delta sqrt(d).
    * ``"zhu-wang"``: :func:`zhu_wang_at_epsilon` (threshold, sensitivity, delta, conversion,
      max_queries), with ``sigma_query = query_ratio * sigma``; returns ``sigma_threshold``.

    For the first, second and fourth, a multi-section search in log sigma (7 sigmas per round,
    one vmapped call for the quadrature bounds) keeps a bracket [sigma_fail, sigma_pass] and stops
    at relative width 1e-10. It assumes the bound decreases in sigma (observed numerically,
 not proved): if it does not, the result still satisfies the target, since
    it is re-evaluated at the returned sigma, but it may not be the smallest such sigma.

    Args:
      bound: one of ``"gaussian-rnm"``, ``"gaussian-at"``, ``"rnm-analytic"``, ``"zhu-wang"``.
      target_epsilon: > 0.
      **params: the bound's parameters (see above).

    Returns:
      sigma as a float, with bound(sigma) <= target_epsilon verified at that point.

    Raises:
      ValueError: on unknown bounds or parameters, or if no sigma up to 1e12 (or none down to
        1e-12) brackets the target.

    Examples:
      >>> from gpuprivacy import accounting
      >>> sigma = accounting.calibrate_sigma("gaussian-rnm", 0.1, d=10, sensitivity=1e-3, lower=0.0, upper=1.0)
      >>> accounting.gaussian_rnm_epsilon(sigma, 10, 1e-3, 0.0, 1.0) <= 0.1
      True
    """
    target = check_epsilon(target_epsilon, "target_epsilon")
    if bound == "rnm-analytic":
        return _calibrate_rnm_analytic(target, params)
    fn = _bound_function(bound, params)
    lo, hi = _bracket(fn, target)
    while hi - lo > _RELATIVE_TOLERANCE * hi:
        sigmas = np.exp(np.linspace(math.log(lo), math.log(hi), _SECTIONS + 2)[1:-1])
        passing = fn(sigmas) <= target
        first = int(np.argmax(passing)) if passing.any() else len(sigmas)
        new_lo = sigmas[first - 1] if first > 0 else lo
        new_hi = sigmas[first] if first < len(sigmas) else hi
        if new_lo == lo and new_hi == hi:
            break
        lo, hi = new_lo, new_hi
    value = float(fn(np.array([hi]))[0])
    if not value <= target:  # pragma: no cover - the bracket invariant guarantees this
        raise ValueError(f"calibrate_sigma({bound!r}): bound {value!r} at sigma={hi!r} exceeds {target!r}.")
    return float(hi)


def _bracket(fn, target: float) -> tuple[float, float]:
    """sigmas lo < hi with fn(lo) > target >= fn(hi), by factor-of-4 steps from sigma = 1."""
    lo = hi = 1.0
    for _ in range(_MAX_BRACKET_STEPS):
        if fn(np.array([hi]))[0] <= target:
            break
        lo, hi = hi, hi * 4.0
        if hi > 1e12:
            raise ValueError(f"no sigma up to 1e12 gives epsilon <= {target!r}; the target is unreachable for "
                             "these parameters.")
    if lo == hi:
        for _ in range(_MAX_BRACKET_STEPS):
            lo = lo / 4.0
            if fn(np.array([lo]))[0] > target:
                break
            hi = lo
            if lo < 1e-12:
                raise ValueError(f"every sigma down to 1e-12 gives epsilon <= {target!r}; nothing to calibrate.")
    return lo, hi


def _calibrate_rnm_analytic(target: float, params: dict) -> float:

    expected = {"d", "sensitivity", "delta"}
    if set(params) != expected:
        raise ValueError(f"calibrate_sigma('rnm-analytic') takes parameters {sorted(expected)}, got {sorted(params)}.")
    d = check_int("d", params["d"], minimum=1)
    sensitivity = check_positive("sensitivity", params["sensitivity"])
    return gaussian_sigma_analytic(target, params["delta"], _l2_sensitivity(sensitivity, d))
