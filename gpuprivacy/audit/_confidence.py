"""Exact binomial confidence bounds (Clopper & Pearson 1934), on the host in float64.

The bounds are Beta quantiles,

.. math:: p_{\\text{lower}} = B^{-1}(\\alpha;\\, k, n - k + 1), \\qquad
          p_{\\text{upper}} = B^{-1}(1 - \\alpha;\\, k + 1, n - k) = 1 - B^{-1}(\\alpha;\\, n - k, k + 1),

so both come from one problem: the ``y`` with ``I_y(j, n - j + 1) = P[Bin(n, y) >= j] = alpha``
(``j = k`` for the lower bound, ``y = p``; ``j = n - k`` for the upper one, ``y = 1 - p``).
They are computed off the device, in NumPy float64:

* ``I_y`` by the continued fraction of DLMF 8.17.22 (modified Lentz), on
  whichever side of the mean it converges fast (DLMF 8.17.4), with its
  prefactor from the Beta density written as a binomial probability and
  evaluated by Loader's saddle-point formula (no ``lgamma`` cancellation, so
  full precision at n = 10^9);
* the quantile by Halley's method (Newton's where Halley's step is not safe)
  in ``u = log y``, from the Wilson bound. ``U = log Y`` for
  ``Y ~ Beta(j, n - j + 1)`` has a log-concave density (its log is
  ``j u + (n - j) log(1 - e^u)`` plus a constant), so its distribution
  function is log-concave (Prekopa): ``log I_{e^u} - log alpha`` is concave
  and increasing in ``u``, with one root, which Newton's method reaches from
  any start (from below, monotonically). Three evaluations of ``I`` usually
  suffice. Both ``y`` and ``1 - y = -expm1(u)`` keep full relative precision,
  so tiny upper bounds (``k = 0`` at large n) are exact too. Where ``y`` or
  ``1 - y`` is close to 1 and the fraction would lose digits, the tail (or its
  complement) is summed term by term instead: it then has at most 128 terms.

Results are then moved outward by 1e-6 relative to the nearer of 0 and 1,
far more than the float error (about 1e-10 relative, in ``y`` and in
``1 - y``), so the intervals can only be wider than the exact ones, never
narrower. Repeated ``(k, n)`` pairs are solved once.

References:
  Clopper & Pearson, "The use of confidence or fiducial limits illustrated in the case of the binomial",
  Biometrika 26(4), 1934. Loader, "Fast and accurate computation of binomial probabilities", 2000
  (the ``stirlerr``/``bd0`` form of R's ``dbinom_raw``). DLMF 8.17.4, 8.17.22.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

_SAFETY = 1e-6
_NEWTON_STEPS = 200
_NEWTON_TOLERANCE = 1e-10  # the root finder stops at steps below this, absolute in u = log y and relative to |u|
_FRACTION_TERMS = 100_000
_FRACTION_TOLERANCE = 1e-15
_TINY = 1e-300
_SUM_TERMS = 128  # tails (or complements) of at most this many terms are summed (see _log_tail_and_slope)
_LOG_2PI = math.log(2 * math.pi)
# Loader's Stirling remainders stirlerr(n) = lgamma(n + 1) - (n + 1/2) log n + n - log sqrt(2 pi), n = 0..15.
_STIRLERR_SMALL = np.array([0.0] + [math.lgamma(n + 1.0) - (n + 0.5) * math.log(n) + n - 0.5 * _LOG_2PI
                                    for n in range(1, 16)])


def _stirlerr(n):
    """Loader's ``stirlerr`` for integer-valued float arrays ``n >= 0`` (tabulated to 15, then its series)."""
    big = np.maximum(n, 16.0)
    nn = big * big
    series = (1 / 12 - (1 / 360 - (1 / 1260 - (1 / 1680 - (1 / 1188) / nn) / nn) / nn) / nn) / big
    return np.where(n > 15, series, _STIRLERR_SMALL[np.minimum(n, 15).astype(np.int64)])


def _bd0(x, mean):
    """Loader's deviance term ``x log(x / mean) + mean - x``, without cancellation when ``x ~ mean``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        plain = x * np.log(x / mean) + mean - x
        v = (x - mean) / (x + mean)
        close = np.abs(x - mean) < 0.1 * (x + mean)
        s = (x - mean) * v
        term = 2 * x * v
        v2 = v * v
        for j in range(1, 10):  # |v| < 0.1: each term shrinks 100-fold
            term = term * v2
            s = s + term / (2 * j + 1)
    return np.where(close, s, plain)


def _log_binomial_pmf(x, n, p, q, log_p, log_q):
    """``log P[Bin(n, p) = x]`` for integer-valued float arrays, ``q = 1 - p`` given separately (Loader 2000)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        inner = (_stirlerr(n) - _stirlerr(x) - _stirlerr(n - x) - _bd0(x, n * p) - _bd0(n - x, n * q)
                 - 0.5 * (_LOG_2PI + np.log(x) + np.log1p(-x / n)))
    return np.where(x == 0, n * log_q, np.where(x == n, n * log_p, inner))


def _continued_fraction(a, b, x, guarded=False):
    """The continued fraction of ``I_x(a, b)`` (DLMF 8.17.22, modified Lentz), for ``x < (a + 1) / (a + b + 2)``.

    Lentz's guard against a vanishing denominator is applied only on a second pass, to the entries whose
    unguarded value came out non-finite (none did in our tests; the guard costs a third of the time).
    """
    out = np.empty_like(x)
    active = np.arange(x.size)
    a_all, b_all, x_all = a, b, x
    apb = a + b
    d = 1.0 - apb * x / (a + 1.0)
    if guarded:
        d = np.where(np.abs(d) < _TINY, _TINY, d)
    d = 1.0 / d
    c = np.ones_like(x)
    value = d.copy()
    for m in range(1, _FRACTION_TERMS):
        a_2m = a + 2.0 * m
        for numerator in ((b - m) * x * m / ((a_2m - 1.0) * a_2m),
                          -((a + m) * (apb + m) * x) / (a_2m * (a_2m + 1.0))):
            d = numerator * d + 1.0
            c = numerator / c + 1.0
            if guarded:
                d = np.where(np.abs(d) < _TINY, _TINY, d)
                c = np.where(np.abs(c) < _TINY, _TINY, c)
            d = 1.0 / d
            delta = c * d
            value *= delta
        done = ~(np.abs(delta - 1.0) >= _FRACTION_TOLERANCE)  # NaN counts as done, and is redone guarded
        if done.any():
            out[active[done]] = value[done]
            keep = ~done
            active, a, b, apb, x, c, d, value = (active[keep], a[keep], b[keep], apb[keep], x[keep], c[keep], d[keep],
                                                 value[keep])
            if not active.size:
                break
    else:  # pragma: no cover
        raise RuntimeError("the continued fraction of the incomplete beta function did not converge.")
    if not guarded:
        bad = ~np.isfinite(out)
        if bad.any():  # pragma: no cover  (a denominator hit zero)
            out[bad] = _continued_fraction(a_all[bad], b_all[bad], x_all[bad], guarded=True)
    return out


def _log_sum(first, n, y, ym, log_y, log_ym, count, upward):
    """``log`` of ``count`` binomial terms from ``first`` up (``upward``) or down, all positive (no cancellation)."""
    log_first = _log_binomial_pmf(first, n, y, ym, log_y, log_ym)
    total, term = np.ones_like(y), np.ones_like(y)
    ratio = y / ym if upward else ym / y
    for t in range(int(np.max(count, initial=1)) - 1):
        if upward:  # P[X = i + 1] / P[X = i] = (n - i) / (i + 1) * y / (1 - y)
            factor = (n - first - t) / (first + t + 1.0)
        else:  # P[X = i - 1] / P[X = i] = i / (n - i + 1) * (1 - y) / y
            factor = (first - t) / (n - first + t + 1.0)
        term = term * np.where(t + 1 < count, factor, 0.0) * ratio
        total = total + term
        if np.all(term <= 1e-17 * total):
            break
    return log_first + np.log(total)


def _log_tail_and_slope(j, n, u):
    """``(log I_y(j, n - j + 1), log(y f(y)))`` at ``y = e^u``, f the Beta(j, n - j + 1) density."""
    y, ym = np.exp(u), -np.expm1(u)
    log_y, log_ym = u, np.where(y < 0.5, np.log1p(-y), np.log(ym))  # log(1 - y) to full precision
    a, b = j, n - j + 1.0
    # f(y) = n P[Bin(n - 1, y) = j - 1]; the fraction's prefactor y^a (1 - y)^b / B(a, b) = y (1 - y) f(y).
    log_density = np.log(n) + _log_binomial_pmf(j - 1.0, n - 1.0, y, ym, log_y, log_ym)
    log_front = log_density + log_y + log_ym
    # The fraction in y (or 1 - y) loses about n / b (or n / a) ulps when y (or 1 - y) is near 1, which needs
    # b (or a) small: there the tail, or its complement, is a short sum of binomial terms instead.
    fast_side = y < (a + 1.0) / (a + b + 2.0)  # DLMF 8.17.23: the fraction in y converges quickly
    upper_sum = b <= _SUM_TERMS  # I = P[X >= j]: n - j + 1 terms
    lower_sum = ~upper_sum & ~fast_side & (a <= _SUM_TERMS)  # 1 - I = P[X <= j - 1]: j terms, I not small
    direct = ~upper_sum & ~lower_sum & fast_side
    mirrored = ~upper_sum & ~lower_sum & ~fast_side
    log_tail = np.empty_like(u)
    if upper_sum.any():
        i = upper_sum
        log_tail[i] = _log_sum(j[i], n[i], y[i], ym[i], log_y[i], log_ym[i], b[i], upward=True)
    if lower_sum.any():
        i = lower_sum
        log_tail[i] = np.log1p(-np.minimum(1.0, np.exp(
            _log_sum(j[i] - 1.0, n[i], y[i], ym[i], log_y[i], log_ym[i], a[i], upward=False))))
    if direct.any():
        i = direct
        log_tail[i] = np.log(_continued_fraction(a[i], b[i], y[i])) + log_front[i] - np.log(a[i])
    if mirrored.any():
        i = mirrored
        # DLMF 8.17.4: I_y(a, b) = 1 - I_{1 - y}(b, a); here the complement is the small one.
        complement = _continued_fraction(b[i], a[i], ym[i]) * np.exp(log_front[i] - np.log(b[i]))
        log_tail[i] = np.log1p(-np.minimum(complement, 1.0))
    return log_tail, log_density + log_y


def _beta_tail_quantile(j, n, alpha):
    """``log y`` with ``P[Bin(n, y) >= j] = alpha`` (``1 <= j <= n``), from below but for rounding."""
    j, n = np.asarray(j, np.float64), np.asarray(n, np.float64)
    log_alpha = math.log(alpha)
    # Start at the Wilson bound (Wilson 1927), close to the root except in the Poisson corner, where log I is
    # nearly linear in u and one step gets there.
    z = statistics.NormalDist().inv_cdf(1.0 - alpha)
    centre = (j + 0.5 * z * z) / (n + z * z)
    spread = abs(z) * np.sqrt(j * (n - j) / n + 0.25 * z * z) / (n + z * z)
    u = np.log(np.clip(centre - math.copysign(1.0, z) * spread, _TINY, 1.0 - 1e-16))
    out = np.empty_like(u)
    active = np.arange(u.size)
    for _ in range(_NEWTON_STEPS):
        jj, nn = j[active], n[active]
        log_tail, log_slope = _log_tail_and_slope(jj, nn, u)
        gap = log_tail - log_alpha
        slope = np.exp(log_slope - log_tail)  # h'(u) for h(u) = log I_{e^u} - log alpha
        # Halley's step, with h'' = h' (a - (b - 1) y / (1 - y)) - h'^2 from the Beta density's log-derivative;
        # Newton's where Halley's denominator is not safely positive.
        y = np.exp(u)
        curvature = slope * (jj - (nn - jj) * y / -np.expm1(u)) - slope * slope
        denominator = 2.0 * slope * slope - gap * curvature
        halley = np.isfinite(denominator) & (denominator > slope * slope)
        step = np.where(halley, 2.0 * gap * slope / np.where(halley, denominator, 1.0), gap / slope)
        # Converged iterates are within about one step of the root: stop once the step is below 1e-10 in u and
        # relative to |u| (so 1e-10 relative in y and in 1 - y ~ |u|).
        done = np.abs(step) <= _NEWTON_TOLERANCE * np.minimum(np.abs(u), 1.0)
        if done.any():
            out[active[done]] = u[done] - step[done]
            active, u, step = active[~done], u[~done], step[~done]
            if not active.size:
                return out
        u = np.clip(u - step, math.log(_TINY), -1e-300)
    raise RuntimeError("Clopper-Pearson: the root finder did not converge.")  # pragma: no cover


def clopper_pearson(successes, trials, alpha):
    """One-sided Clopper-Pearson bounds, each holding with probability >= 1 - alpha.

    Computed on the host in float64 (see the module docstring); never narrower
    than the exact bounds.

    Args:
      successes: int array k (0 <= k <= n).
      trials: int n (scalar or array broadcastable with k), n >= 1.
      alpha: the one-sided error level of EACH bound, in (0, 1).

    Returns:
      ``(lower, upper)`` float64 arrays: ``P[p < lower] <= alpha`` and
      ``P[p > upper] <= alpha``.

    Examples:
      >>> lower, upper = clopper_pearson([0, 5, 10], 10, 0.025)
      >>> [round(float(v), 4) for v in lower], [round(float(v), 4) for v in upper]
      ([0.0, 0.1871, 0.6915], [0.3085, 0.8129, 1.0])
    """
    k = np.asarray(successes, dtype=np.float64)
    n = np.broadcast_to(np.asarray(trials, dtype=np.float64), k.shape)
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise ValueError("clopper_pearson needs 0 <= successes <= trials and trials >= 1.")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}.")
    # lower(k) = y*(j = k); upper(k) = 1 - y*(j = n - k): one root per distinct (j, n), found once.
    j = np.concatenate([k.ravel(), (n - k).ravel()])
    nn = np.concatenate([n.ravel(), n.ravel()])
    solvable = j >= 1
    pairs, inverse = np.unique(np.stack([j[solvable], nn[solvable]], axis=1), axis=0, return_inverse=True)
    log_root = np.zeros(j.shape)
    if pairs.size:
        log_root[solvable] = _beta_tail_quantile(pairs[:, 0], pairs[:, 1], alpha)[inverse.ravel()]
    log_lower, log_complement = log_root[:k.size].reshape(k.shape), log_root[k.size:].reshape(k.shape)
    # Outward by _SAFETY relative to the nearer of 0 and 1: both y and 1 - y are known to ~1e-10 relative.
    lower_root, lower_gap = np.exp(log_lower), -np.expm1(log_lower)
    upper_gap, upper_root = np.exp(log_complement), -np.expm1(log_complement)
    lower = np.where(k == 0, 0.0, np.maximum(0.0, lower_root - _SAFETY * np.minimum(lower_root, lower_gap)))
    upper = np.where(k == n, 1.0, np.minimum(1.0, upper_root + _SAFETY * np.minimum(upper_root, upper_gap)))
    return lower, upper
