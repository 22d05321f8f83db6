"""Exact densities, CDFs and utility of PLM and INV (Durfee 2025, Def 3.1, Algorithm 1, Thm 2).

Closed forms per segment of :mod:`._piecewise_laplace` (the same segments and log-masses
as the sampler): :func:`log_density`, :func:`cdf`, :func:`absolute_error_cdf`,
:func:`error_moments` and :func:`piece_log_weights`.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._compat import renamed_keywords
from gpuprivacy._checks import check_epsilon
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Array
from gpuprivacy.mechanisms._instance_optimal._local_bounds_type import LocalBounds, _check_smoothness
from gpuprivacy.mechanisms._instance_optimal._piecewise_laplace import (
    MECHANISMS,
    _log_masses,
    _log_neg_expm1,
    _segments,
    _Segments,
)


_SERIES_CUTOFF = 1e-3


# ----------------------------------------------------------------------------------------------------------------
# Densities, CDFs and exact utility (Durfee 2025, Def 3.1, Thm 2)


def _unnormalised_log_density(y, seg: _Segments, a, mechanism):
    offset = seg.sign * (y - seg.start)
    total = seg.count * seg.length
    inside = (offset > 0) & (offset <= total) & (seg.length > 0)
    # The flat centre is [f0 - smoothness, f0 + smoothness] computed exactly as the pieces' ends (no rounding gap).
    in_flat = (y >= seg.center - seg.smoothness) & (y <= seg.center + seg.smoothness) & (seg.length > 0)
    inside = jnp.where(seg.flat, in_flat, inside)
    safe_len = jnp.where(seg.length > 0, seg.length, 1.0)
    units = offset / safe_len
    if mechanism == "piecewise_laplace":
        value = -a * (seg.level + units)
        value = jnp.where(seg.flat, -a, value)
    else:
        value = -a * (seg.level + jnp.maximum(jnp.ceil(units), 1.0) - 1.0)
        value = jnp.where(seg.flat, 0.0, value)
    best = jnp.max(jnp.where(inside, value, -jnp.inf))
    at_center = (y == seg.center)
    center_value = -a if mechanism == "piecewise_laplace" else 0.0
    return jnp.where(at_center, jnp.maximum(best, center_value), best)


@functools.partial(jax.jit, static_argnames=("mechanism",))
def _log_density(y, bounds, epsilon, smoothness, mechanism):
    a = 0.5 * epsilon
    seg = _segments(bounds, smoothness)
    log_z = jax.scipy.special.logsumexp(_log_masses(seg, a, mechanism))
    unnorm = jax.vmap(lambda v: _unnormalised_log_density(v, seg, a, mechanism))(y)
    if mechanism == "piecewise_laplace":
        return unnorm + jnp.log(a) - _log_neg_expm1(a) - log_z
    return unnorm - log_z


def _segment_fraction_below(units, count, a, mechanism):
    """P(offset <= units * D) within a segment, for units in [0, count]."""
    if mechanism == "piecewise_laplace":
        return jnp.where(jnp.isinf(count), -jnp.expm1(-a * units),
                         jnp.expm1(-a * units) / jnp.expm1(-a * count))
    whole = jnp.floor(units)
    whole = jnp.minimum(whole, jnp.where(jnp.isinf(count), whole, count))
    frac = units - whole
    p_whole = jnp.where(jnp.isinf(count), -jnp.expm1(-a * whole), jnp.expm1(-a * whole) / jnp.expm1(-a * count))
    p_piece = jnp.where(jnp.isinf(count), jnp.exp(-a * whole) * -jnp.expm1(-a),
                        jnp.exp(-a * whole) * jnp.expm1(-a) / jnp.expm1(-a * count))
    return jnp.where(count == 1.0, units, p_whole + p_piece * frac)


def _cdf_one(y, seg, probs, a, mechanism):
    safe_len = jnp.where(seg.length > 0, seg.length, 1.0)
    raw = seg.sign * (y - seg.start) / safe_len
    units = jnp.clip(raw, 0.0, seg.count)
    frac = _segment_fraction_below(units, seg.count, a, mechanism)
    frac = jnp.where(seg.flat, jnp.clip(raw, 0.0, 1.0), frac)
    frac = jnp.where(seg.length > 0, frac, 0.0)
    # Upward segments contribute the mass below y; downward ones the mass at offsets >= sign*(start - y).
    below = jnp.where(seg.sign > 0, frac, 1.0 - frac)
    below = jnp.where(seg.sign > 0, below, jnp.where(y >= seg.start, 1.0, below))
    return jnp.sum(probs * below)


@functools.partial(jax.jit, static_argnames=("mechanism",))
def _cdf(y, bounds, epsilon, smoothness, mechanism):
    a = 0.5 * epsilon
    seg = _segments(bounds, smoothness)
    logits = _log_masses(seg, a, mechanism)
    probs = jnp.exp(logits - jax.scipy.special.logsumexp(logits))
    return jax.vmap(lambda v: _cdf_one(v, seg, probs, a, mechanism))(y)


def _g(t):
    small = t < _SERIES_CUTOFF
    ts = jnp.where(small, 1.0, t)
    direct = 1.0 / ts - 1.0 / jnp.expm1(ts)
    series = 0.5 - t / 12.0 + t**3 / 720.0
    return jnp.where(small, series, direct)


def _h(t):
    small = t < _SERIES_CUTOFF
    ts = jnp.where(small, 1.0, t)
    direct = (2.0 / ts**2 - jnp.exp(-ts) * (1.0 + 2.0 / ts + 2.0 / ts**2)) / -jnp.expm1(-ts)
    series = 1.0 / 3.0 - t / 12.0 + t**2 / 360.0 + t**3 / 720.0
    return jnp.where(small, series, direct)


def _offset_moments(seg, a, mechanism):
    """E[offset] and E[offset^2] inside each segment (truncated-geometric blocks)."""
    m = seg.count
    D = seg.length
    inf_m = jnp.isinf(m)
    m_fin = jnp.where(inf_m, 1.0, m)
    tail_weight = jnp.where(inf_m, 0.0, jnp.exp(-a * m_fin))  # e^{-m a}
    if mechanism == "piecewise_laplace":
        # t = offset / D: truncated Exp(a) on [0, m]; E_trunc[t^k] = (E[t^k] - e^{-ma} E[(t+m)^k]) / (1 - e^{-ma}).
        e1, e2 = 1.0 / a, 2.0 / a**2
        denom = jnp.where(inf_m, 1.0, -jnp.expm1(-a * m_fin))
        t1 = (e1 - tail_weight * (e1 + m_fin)) / denom
        t2 = (e2 - tail_weight * (e2 + 2 * m_fin * e1 + m_fin**2)) / denom
        t1 = jnp.where(m == 1.0, _g(a), t1)
        t2 = jnp.where(m == 1.0, _h(a), t2)
    else:
        # t = j + V, j truncated geometric on {0..m-1} with ratio p = e^{-a}, V ~ U[0,1).
        p = jnp.exp(-a)
        mu1 = p / -jnp.expm1(-a)
        mu2 = p * (1 + p) / jnp.expm1(-a) ** 2
        denom = jnp.where(inf_m, 1.0, -jnp.expm1(-a * m_fin))
        j1 = (mu1 - tail_weight * (mu1 + m_fin)) / denom
        j2 = (mu2 - tail_weight * (mu2 + 2 * m_fin * mu1 + m_fin**2)) / denom
        j1 = jnp.where(m == 1.0, 0.0, j1)
        j2 = jnp.where(m == 1.0, 0.0, j2)
        t1 = j1 + 0.5
        t2 = j2 + j1 + 1.0 / 3.0
    # Flat centre: uniform on [f0 - smoothness, f0 + smoothness] measured from its left end.
    t1 = jnp.where(seg.flat, 0.5, t1)
    t2 = jnp.where(seg.flat, 1.0 / 3.0, t2)
    return D * t1, D * D * t2


@functools.partial(jax.jit, static_argnames=("mechanism",))
def _moments(bounds, epsilon, smoothness, mechanism):
    a = 0.5 * epsilon
    seg = _segments(bounds, smoothness)
    logits = _log_masses(seg, a, mechanism)
    probs = jnp.exp(logits - jax.scipy.special.logsumexp(logits))
    o1, o2 = _offset_moments(seg, a, mechanism)
    E = jnp.abs(seg.start - seg.center)
    abs1 = E + o1
    sq = E**2 + 2 * E * o1 + o2
    # Flat centre: |err| is uniform on [0, smoothness]: E = smoothness/2, E^2 = smoothness^2/3.
    half = 0.5 * seg.length
    abs1 = jnp.where(seg.flat, 0.5 * half, abs1)
    sq = jnp.where(seg.flat, half**2 / 3.0, sq)
    live = (seg.length > 0) & (seg.count > 0) & (probs > 0)
    return jnp.sum(jnp.where(live, probs * abs1, 0.0)), jnp.sum(jnp.where(live, probs * sq, 0.0))


def _check_mechanism(mechanism):
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}.")
    return mechanism


def _prepare(bounds, epsilon, smoothness, mechanism):
    require_x64("piecewise_laplace distribution functions")
    if not isinstance(bounds, LocalBounds):
        raise TypeError(f"bounds must be a LocalBounds, got {type(bounds).__name__}.")
    return (jnp.asarray(check_epsilon(epsilon), jnp.float64), jnp.asarray(_check_smoothness(smoothness), jnp.float64),
            _check_mechanism(mechanism))


@renamed_keywords(rho="smoothness")
def log_density(y: Any, bounds: LocalBounds, *, epsilon: float, smoothness: float = 0.0,
                mechanism: str = "piecewise_laplace") -> Array:
    """Exact log-density of PLM (M.1) or INV (M.2) at the points ``y`` (Durfee 2025, Def 3.1, Def 4.1).

    .. math::
        \\log \\pi_{\\text{plm}}(y) = \\log a - \\log(1 - e^{-a}) - \\log W + a\\,q_{\\text{plm}}(y; x),
        \\qquad \\log \\pi_{\\text{inv}}(y) = -a\\,\\ell(y; x) - \\log W.

    Args:
      y: ``float64[k]`` evaluation points (1-D).
      bounds: local bounds of one dataset.
      epsilon: privacy parameter.
      smoothness: smoothing width.
      mechanism: "piecewise_laplace" or "inverse_sensitivity".

    Returns:
      ``float64[k]`` log-densities (``-inf`` outside the support).

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.make_local_bounds([0.0, 1.0], [0.0, -1.0])
      >>> float(io.log_density([0.5], b, epsilon=2.0)[0]) < 0
      True
    """
    epsilon, smoothness, mechanism = _prepare(bounds, epsilon, smoothness, mechanism)
    y = jnp.atleast_1d(jnp.asarray(y, jnp.float64))
    return _log_density(y, bounds, epsilon, smoothness, mechanism)


@renamed_keywords(rho="smoothness")
def cdf(y: Any, bounds: LocalBounds, *, epsilon: float, smoothness: float = 0.0,
        mechanism: str = "piecewise_laplace") -> Array:
    """Exact CDF :math:`P(M(x) \\le y)` of PLM or INV (closed form per segment; Durfee 2025, Algorithm 1, Thm 2).

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.make_local_bounds([0.0, 1.0], [0.0, -1.0])
      >>> [round(float(v), 12) for v in io.cdf([-1.0, 0.0, 1.0], b, epsilon=1.0)]
      [0.0, 0.5, 1.0]
    """
    epsilon, smoothness, mechanism = _prepare(bounds, epsilon, smoothness, mechanism)
    y = jnp.atleast_1d(jnp.asarray(y, jnp.float64))
    return _cdf(y, bounds, epsilon, smoothness, mechanism)


@renamed_keywords(rho="smoothness")
def absolute_error_cdf(alpha: Any, bounds: LocalBounds, *, epsilon: float, smoothness: float = 0.0,
                       mechanism: str = "piecewise_laplace") -> Array:
    """:math:`P(|M(x) - f(x)| \\le \\alpha)` exactly: the quantity of Thm 2 (Durfee 2025).

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.make_local_bounds([0.0, 1.0], [0.0, -1.0])
      >>> float(io.absolute_error_cdf([1.0], b, epsilon=1.0)[0])
      1.0
    """
    epsilon, smoothness, mechanism = _prepare(bounds, epsilon, smoothness, mechanism)
    alpha = jnp.atleast_1d(jnp.asarray(alpha, jnp.float64))
    f0 = bounds.upper[0]
    return _cdf(f0 + alpha, bounds, epsilon, smoothness, mechanism) - _cdf(f0 - alpha, bounds, epsilon, smoothness, mechanism)


@renamed_keywords(rho="smoothness")
def error_moments(bounds: LocalBounds, *, epsilon: float, smoothness: float = 0.0,
                  mechanism: str = "piecewise_laplace") -> tuple[Array, Array]:
    """Exact :math:`E|M(x) - f(x)|` and :math:`E(M(x) - f(x))^2` (the quantities compared in Durfee 2025, Thm 2). Batched over datasets.

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.make_local_bounds([0.0], [0.0], upper_step=1.0, lower_step=1.0)  # worst case: Lap(2/eps)
      >>> [round(float(v), 10) for v in io.error_moments(b, epsilon=1.0)]
      [2.0, 8.0]
    """
    epsilon, smoothness, mechanism = _prepare(bounds, epsilon, smoothness, mechanism)
    fn = functools.partial(_moments, mechanism=mechanism)
    for _ in range(np.ndim(bounds.upper) - 1):
        fn = jax.vmap(fn, in_axes=(0, None, None))
    return fn(bounds, epsilon, smoothness)


@renamed_keywords(rho="smoothness")
def piece_log_weights(bounds: LocalBounds, *, epsilon: float, smoothness: float = 0.0,
                      mechanism: str = "piecewise_laplace") -> Array:
    """Normalised log-probabilities of the segments chosen in Step 1 of Alg 1.

    Order: ``+1..+K``, ``-1..-K``, upper tail block, upper partial piece,
    lower tail block, lower partial piece, smoothness-centre.

    Examples:
      >>> import numpy as np
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.make_local_bounds([0.0, 1.0], [0.0, -3.0])
      >>> np.round(np.exp(np.asarray(io.piece_log_weights(b, epsilon=1.0)))[:2], 3)
      array([0.25, 0.75])
    """
    epsilon, smoothness, mechanism = _prepare(bounds, epsilon, smoothness, mechanism)

    def one(b, e, r):
        logits = _log_masses(_segments(b, r), 0.5 * e, mechanism)
        return logits - jax.scipy.special.logsumexp(logits)

    fn = one
    for _ in range(np.ndim(bounds.upper) - 1):
        fn = jax.vmap(fn, in_axes=(0, None, None))
    return jax.jit(fn)(bounds, epsilon, smoothness)
