"""Exact per-dataset error quantities of built-in mechanisms, for the study engine's ``exact`` metrics.

``EXACT_ERRORS[name](data, params) -> {quantity: scalar}`` (jnp, traceable, one dataset ``[n]``), where
``params`` are the mechanism's keyword arguments as the engine passes them (some may be tracers;
omitted ones take the mechanism's own defaults). The quantities are functions of the dataset alone,
computed in closed form over the mechanism's randomness, not sampled:

* ``expected_abs_error``: :math:`E|M(x) - f(x)|`;
* ``median_abs_error``: the median of :math:`|M(x) - f(x)|`, :math:`\\inf\\{a : P(|M(x) - f(x)| \\le a)
  \\ge 1/2\\}`.

Here :math:`f(x)` is the statistic of the data as the mechanism sees it: clipped into
``[lower, upper]`` when ``clip=True`` (and always under ``jit``/``vmap``, where the mechanisms clip
instead of raising), through the very checks the mechanism runs.

Per mechanism:

* piecewise Laplace (PLM) and inverse sensitivity (INV) for the median, a quantile and the clipped
  mean: ``expected_abs_error`` from :func:`~gpuprivacy.mechanisms.instance_optimal.error_moments` on
  the exact local bounds (the quantity Durfee 2025, Thm 2 compares); for the PLM median also
  ``median_abs_error``, by bisection on the exact
  :func:`~gpuprivacy.mechanisms.instance_optimal.absolute_error_cdf`;
* smooth-sensitivity median (Nissim, Raskhodnikova & Smith 2007, Lemmas 2.6, 2.9): the release is
  :math:`\\mathrm{med}(x) + (S^*_\\beta(x)/\\alpha) Z` unclipped, with :math:`(\\alpha, \\beta)` from the
  mechanism's own calibration. Laplace :math:`Z`: ``expected_abs_error`` :math:`= S^*/\\alpha`
  (:math:`2S^*/\\varepsilon`) and ``median_abs_error`` :math:`= \\ln 2\\, S^*/\\alpha`. Cauchy
  :math:`Z` has no mean: only ``median_abs_error`` :math:`= S^*/\\alpha` (:math:`6S^*/\\varepsilon`);
* Laplace median (global sensitivity :math:`\\mathrm{GS} = u - \\ell`, Dwork et al. 2006): its release
  :math:`\\mathrm{clip}(m + bZ, \\ell, u)`, :math:`b = \\mathrm{GS}/\\varepsilon`, is clipped into the
  domain, so with :math:`E[\\min(b|Z|, d)] = b(1 - e^{-d/b})` on each side,

  .. math::
      E|M(x) - m| = b - \\tfrac{b}{2}\\big(e^{-(u - m)/b} + e^{-(m - \\ell)/b}\\big), \\qquad
      \\mathrm{median}\\,|M(x) - m| = \\min(b \\ln 2,\\ u - m,\\ m - \\ell),

  which is :math:`\\mathrm{GS}/\\varepsilon` (and :math:`b\\ln 2`) only without the clipping.
"""

from __future__ import annotations

import inspect
import math
from typing import Callable

import jax
import jax.numpy as jnp

from gpuprivacy.mechanisms import instance_optimal as io
from gpuprivacy._sort import sort
from gpuprivacy.mechanisms.instance_optimal import check_dataset, median_rank, smooth_parameters

# Bisection steps for the median |error|: the bracket starts at the domain's width and halves each
# step, so 60 steps leave it below 2^-60 of the width, under float64 resolution for any domain.
_BISECTION_STEPS = 60


def _keywords(release: Callable, params: dict) -> dict:
    """``params`` with the release's own keyword defaults filled in (a caller may leave them out)."""
    out = {name: p.default for name, p in inspect.signature(release).parameters.items()
           if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not inspect.Parameter.empty}
    out.update(params)
    return out


def median_abs_error(bounds: io.LocalBounds, epsilon, mechanism: str = "piecewise_laplace") -> jax.Array:
    """The median of :math:`|M(x) - f(x)|` for PLM or INV on one dataset's bounds, traceably.

    Bisection on the exact error CDF (Durfee 2025, Thm 2) with a fixed number of steps in
    ``lax.fori_loop``, so it runs under ``jit``/``vmap``. Keeps ``CDF(lo) < 1/2 <= CDF(hi)``: the
    release has no atom at :math:`f(x)` (``CDF(0) = 0``) and never leaves the range of ``f``.
    """
    f0 = bounds.upper[0]
    hi = jnp.maximum(bounds.upper_limit - f0, f0 - bounds.lower_limit)

    def step(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        below = io.absolute_error_cdf(mid[None], bounds, epsilon=epsilon, mechanism=mechanism)[0] < 0.5
        return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

    lo, hi = jax.lax.fori_loop(0, _BISECTION_STEPS, step, (jnp.zeros_like(hi), hi))
    return 0.5 * (lo + hi)


def _instance_optimal_exact(release: Callable, bounds_fn: Callable, mechanism: str, *, with_median: bool = False):
    """Exact errors of PLM or INV on a statistic whose local bounds ``bounds_fn(data, params)`` gives."""
    def exact(data, params):
        params = _keywords(release, params)
        bounds = bounds_fn(data, params)
        expected, _ = io.error_moments(bounds, epsilon=params["epsilon"], mechanism=mechanism)
        out = {"expected_abs_error": expected}
        if with_median:
            out["median_abs_error"] = median_abs_error(bounds, params["epsilon"], mechanism)
        return out
    exact.__name__ = f"exact_{release.__name__}"
    return exact


def _median_bounds(data, p):
    return io.median_bounds(data, lower=p["lower"], upper=p["upper"], clip=p["clip"])


def _quantile_bounds(data, p):
    return io.quantile_bounds(data, lower=p["lower"], upper=p["upper"], quantile=p["quantile"], clip=p["clip"])


def _clipped_mean_bounds(data, p):
    return io.clipped_mean_bounds(data, lower=p["lower"], upper=p["upper"], clip=p["clip"])


def smooth_sensitivity_median_exact(data, params) -> dict:
    """Exact errors of :func:`~gpuprivacy.mechanisms.instance_optimal.smooth_sensitivity_median` (NRS07).

    The noise scale :math:`S^*_\\beta(x)/\\alpha` with the mechanism's own ``(alpha, beta)``
    calibration and its own smooth-sensitivity routine (same ``clip`` and ``max_distance``).
    """
    p = _keywords(io.smooth_sensitivity_median, params)
    alpha, beta = smooth_parameters(p["epsilon"], p["noise"], p["delta"])
    smooth = io.median_smooth_sensitivity(data, beta=beta, lower=p["lower"], upper=p["upper"], clip=p["clip"],
                                          max_distance=p["max_distance"])
    scale = smooth / alpha
    if p["noise"] == "laplace":
        # |Lap(scale)| is exponential with mean scale and median scale ln 2.
        return {"expected_abs_error": scale, "median_abs_error": scale * math.log(2.0)}
    # |Cauchy(scale)| has no mean; its median is scale (P(|Z| <= 1) = 2 arctan(1)/pi = 1/2).
    return {"median_abs_error": scale}


def laplace_median_exact(data, params) -> dict:
    """Exact errors of :func:`~gpuprivacy.mechanisms.instance_optimal.laplace_median` (module docstring).

    The release is clipped into the domain, so the closed forms include the clipping.
    """
    p = _keywords(io.laplace_median, params)
    lower, upper, epsilon = p["lower"], p["upper"], p["epsilon"]
    x = check_dataset(data, lower, upper, p["clip"])
    med = sort(x, axis=-1)[median_rank(x.shape[0]) - 1]
    b = (upper - lower) / epsilon
    to_upper, to_lower = upper - med, med - lower
    expected = b - 0.5 * b * (jnp.exp(-to_upper / b) + jnp.exp(-to_lower / b))
    median = jnp.minimum(b * math.log(2.0), jnp.minimum(to_upper, to_lower))
    return {"expected_abs_error": expected, "median_abs_error": median}


EXACT_ERRORS: dict[str, Callable] = {
    "piecewise-laplace-median": _instance_optimal_exact(
        io.piecewise_laplace_median, _median_bounds, "piecewise_laplace", with_median=True),
    "inverse-sensitivity-median": _instance_optimal_exact(
        io.inverse_sensitivity_median, _median_bounds, "inverse_sensitivity"),
    "piecewise-laplace-quantile": _instance_optimal_exact(
        io.piecewise_laplace_quantile, _quantile_bounds, "piecewise_laplace"),
    "inverse-sensitivity-quantile": _instance_optimal_exact(
        io.inverse_sensitivity_quantile, _quantile_bounds, "inverse_sensitivity"),
    "piecewise-laplace-clipped-mean": _instance_optimal_exact(
        io.piecewise_laplace_clipped_mean, _clipped_mean_bounds, "piecewise_laplace"),
    "inverse-sensitivity-clipped-mean": _instance_optimal_exact(
        io.inverse_sensitivity_clipped_mean, _clipped_mean_bounds, "inverse_sensitivity"),
    "smooth-sensitivity-median": smooth_sensitivity_median_exact,
    "laplace-median": laplace_median_exact,
}
