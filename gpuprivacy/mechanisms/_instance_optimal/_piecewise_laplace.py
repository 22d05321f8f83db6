"""The piecewise Laplace mechanism (PLM) and its exact sampler (Durfee 2025, Def 3.1, Alg 1).

Both PLM and the inverse sensitivity mechanism (INV, :mod:`._inverse_sensitivity`)
are driven by the same *local bounds* (spec 001 §1.2):

.. math::
    U_l = \\sup\\{f(x') : d(x, x') \\le l\\}, \\qquad L_l = \\inf\\{f(x') : d(x, x') \\le l\\},

given as :class:`LocalBounds` (``upper[0..K]``, ``lower[0..K]`` plus a public
rule for ``l > K``). Internally the output line is cut into *segments*
(spec §2.2, "tail rule"): each regular piece ``+l = (U_{l-1}, U_l]`` and
``-l = [L_l, L_{l-1})`` is a segment of one piece; the tail beyond ``K``
(pieces of length ``step`` until the range ``limit``) is one segment of
``m`` equal pieces (``m`` may be infinite) plus one partial piece; the
rho-smooth variant adds a flat central segment. A segment with start ``s``,
piece length ``D``, ``m`` pieces and first level ``l0`` has PLM density
proportional to :math:`\\exp(-a(l_0 + o/D))` at offset ``o`` (one truncated
exponential across all its pieces, by memorylessness) and INV density
:math:`\\exp(-a(l_0 + \\lceil o/D\\rceil - 1))`, with ``a = epsilon/2``.

Everything is computed in float64 and log space (spec §7 pitfall 4); pieces
are never pruned (pitfall 3): a zero-length piece gets log-weight ``-inf``
and is never selected (pitfall 6).
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_epsilon, check_key, check_nonnegative, is_tracer
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Array, Key
from gpuprivacy.accounting import PureDP
from gpuprivacy.mechanisms._release import Release

MECHANISMS = ("piecewise_laplace", "inverse_sensitivity")
_SERIES_CUTOFF = 1e-3


class LocalBounds(NamedTuple):
    """Local upper and lower bounds of a statistic (Durfee 2025, §3.1; spec 001 §1.2, §2.7).

    ``upper[l]`` and ``lower[l]`` are :math:`U_l = \\bar f(x; l)` and
    :math:`L_l = \\underline f(x; l)` for ``l = 0..K`` (``upper[0] = lower[0]
    = f(x)``). Beyond ``K`` the bounds follow a public rule (spec §2.7 (a)-(c)):

    .. math::
        U_l = \\min(U_K + (l - K)\\,\\text{upper\\_step},\\ \\text{upper\\_limit}), \\quad l > K,

    and symmetrically for ``lower``. ``upper_step = 0`` means the range of
    ``f`` ends at ``upper[K]``. Privacy needs the family to satisfy (V0)-(V2)
    of spec §2.7 for every pair of neighbours; the bound providers of
    :mod:`gpuprivacy.mechanisms.instance_optimal` guarantee this, and
    :func:`check_local_bounds_neighbours` tests it for user-supplied bounds.

    All fields may carry a leading batch axis (one row per dataset); the
    mechanisms are then ``jax.vmap``-ed over it.

    Attributes:
      upper: ``float64[K+1]``, nondecreasing.
      lower: ``float64[K+1]``, nonincreasing, ``lower[0] == upper[0]``.
      upper_step: global sensitivity used beyond ``K`` above (0: range ends).
      lower_step: the same below.
      upper_limit: supremum of the range of ``f`` (may be ``inf``).
      lower_limit: infimum of the range of ``f`` (may be ``-inf``).
    """

    upper: Array
    lower: Array
    upper_step: Array
    lower_step: Array
    upper_limit: Array
    lower_limit: Array


class PiecewiseLaplaceInfo(NamedTuple):
    """Side information of :func:`piecewise_laplace` and :func:`inverse_sensitivity`.

    Attributes:
      epsilon: the privacy parameter (public).
      nonprivate_value: the exact statistic :math:`f(x) = U_0` (NOT private).
      nonprivate_segment: index of the chosen segment (NOT private).
    """

    epsilon: Array
    nonprivate_value: Array
    nonprivate_segment: Array


def make_local_bounds(upper: Any, lower: Any, *, upper_step: float = 0.0, lower_step: float = 0.0,
                      upper_limit: float = math.inf, lower_limit: float = -math.inf) -> LocalBounds:
    """Builds and checks :class:`LocalBounds` from user-supplied (certified) arrays.

    The arrays may have a leading batch axis. Checked: finite values,
    ``upper[..., 0] == lower[..., 0]``, monotone in ``l``, nonnegative steps,
    limits outside ``[lower[K], upper[K]]``. Whether the family is *valid*
    (condition (V2) of spec 001 §2.7) cannot be checked from one dataset;
    see :func:`check_local_bounds_neighbours`.

    Args:
      upper: ``[..., K+1]`` upper bounds :math:`U_0..U_K`.
      lower: ``[..., K+1]`` lower bounds :math:`L_0..L_K`.
      upper_step: public global sensitivity for the upper tail (0: none).
      lower_step: the same for the lower tail.
      upper_limit: supremum of the range (used when ``upper_step > 0``).
      lower_limit: infimum of the range.

    Returns:
      A :class:`LocalBounds` of float64 arrays.

    Raises:
      ValueError: for any violated condition, naming it.

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.make_local_bounds([5.0, 5.2, 10.0], [5.0, 4.5, 0.0])
      >>> b.upper.shape
      (3,)
    """
    require_x64("make_local_bounds")
    upper_np = np.asarray(upper, dtype=np.float64)
    lower_np = np.asarray(lower, dtype=np.float64)
    if upper_np.ndim < 1 or upper_np.shape != lower_np.shape:
        raise ValueError(f"upper and lower must be arrays [..., K+1] of the same shape, got {upper_np.shape} and "
                         f"{lower_np.shape}.")
    if not (np.isfinite(upper_np).all() and np.isfinite(lower_np).all()):
        raise ValueError("upper and lower must be finite; an infinite local bound makes the mechanism undefined "
                         "(spec 001 §7 pitfall 8). Use upper_step/lower_step with a global sensitivity instead.")
    if np.any(upper_np[..., 0] != lower_np[..., 0]):
        raise ValueError("upper[..., 0] must equal lower[..., 0] (both are f(x)); got "
                         f"{upper_np[..., 0]!r} and {lower_np[..., 0]!r}.")
    if np.any(np.diff(upper_np, axis=-1) < 0) or np.any(np.diff(lower_np, axis=-1) > 0):
        raise ValueError("upper must be nondecreasing and lower nonincreasing in l (spec 001 §2.7 (V1)).")
    upper_step = check_nonnegative("upper_step", upper_step)
    lower_step = check_nonnegative("lower_step", lower_step)
    for name, value in (("upper_limit", upper_limit), ("lower_limit", lower_limit)):
        if not isinstance(value, (int, float, np.floating, np.integer)) or math.isnan(float(value)):
            raise ValueError(f"{name} must be a real number or +-inf, got {value!r}.")
    if np.any(upper_np[..., -1] > upper_limit) or np.any(lower_np[..., -1] < lower_limit):
        raise ValueError(f"the range limits [{lower_limit}, {upper_limit}] must contain every local bound.")
    batch = upper_np.shape[:-1]
    full = lambda v: jnp.full(batch, float(v), jnp.float64)
    return LocalBounds(jnp.asarray(upper_np), jnp.asarray(lower_np), full(upper_step), full(lower_step),
                       full(upper_limit), full(lower_limit))


# ----------------------------------------------------------------------------------------------------------------
# Segments (unbatched; vmap over datasets)


class _Segments(NamedTuple):
    start: Array      # [S] start position
    sign: Array      # [S] +1 (goes up) or -1 (goes down)
    length: Array    # [S] piece length D
    count: Array     # [S] number of pieces m (1, a whole number, or inf)
    level: Array     # [S] level l0 of the first piece
    flat: Array      # [S] bool, the rho-central segment
    center: Array    # scalar f0
    rho: Array       # scalar smoothing width


def _tail(end, step, limit, K, sign):
    """The segments beyond level K on one side (spec §2.7 (a)-(c)): m full pieces + one partial piece."""
    has = step > 0
    safe_step = jnp.where(has, step, 1.0)
    room = jnp.maximum(sign * (limit - end), 0.0)
    m = jnp.where(has, jnp.floor(room / safe_step), 0.0)
    finite = jnp.isfinite(m)
    m_fin = jnp.where(finite, m, 0.0)
    partial_start = end + sign * m_fin * safe_step
    partial = jnp.where(has & finite, jnp.clip(room - m_fin * safe_step, 0.0, safe_step), 0.0)
    start = jnp.stack([end, partial_start])
    length = jnp.stack([jnp.where(has, step, 0.0), partial])
    count = jnp.stack([m, jnp.ones_like(m)])
    level = jnp.stack([jnp.asarray(K + 1.0), K + 1.0 + m_fin])
    return start, length, count, level


def _segments(bounds: LocalBounds, rho) -> _Segments:
    upper, lower = bounds.upper, bounds.lower
    K = upper.shape[0] - 1
    f0 = upper[0]
    levels = jnp.arange(1, K + 1, dtype=jnp.float64)
    # rho-smooth variant (spec §2.6): shift both sides outward by rho, flat centre of width 2 rho.
    up = upper + rho
    lo = lower - rho
    ts_u, tl_u, tc_u, tv_u = _tail(up[-1], bounds.upper_step, bounds.upper_limit + rho, K, 1.0)
    ts_l, tl_l, tc_l, tv_l = _tail(lo[-1], bounds.lower_step, bounds.lower_limit - rho, K, -1.0)
    ones = jnp.ones(K, jnp.float64)
    start = jnp.concatenate([up[:-1], lo[:-1], ts_u, ts_l, (f0 - rho)[None]])
    sign = jnp.concatenate([ones, -ones, jnp.ones(2), -jnp.ones(2), jnp.ones(1)])
    length = jnp.concatenate([jnp.diff(up), -jnp.diff(lo), tl_u, tl_l, (2.0 * rho)[None] * jnp.ones(1)])
    count = jnp.concatenate([ones, ones, tc_u, tc_l, jnp.ones(1)])
    level = jnp.concatenate([levels, levels, tv_u, tv_l, jnp.ones(1)])
    flat = jnp.concatenate([jnp.zeros(2 * K + 4, bool), jnp.ones(1, bool)])
    # Guard against rounding: lengths are >= 0.
    length = jnp.maximum(length, 0.0)
    return _Segments(start, sign, length, count, level, flat, f0, jnp.asarray(rho, jnp.float64))


def _log_neg_expm1(x):
    """log(1 - e^{-x}) for x > 0 (x = inf gives 0, x = 0 gives -inf)."""
    return jnp.log(-jnp.expm1(-x))


def _log_masses(seg: _Segments, a, mechanism: str) -> Array:
    """Unnormalised log-masses of the segments.

    Units: a regular piece ``l`` has mass ``e^{-l a} D`` (the paper's Step-1
    weight; for PLM the common factor ``(1-e^{-a})/a`` is dropped, spec §2.2).
    A block of ``m`` pieces sums the geometric series.
    """
    # log(0) = -inf: a zero-length piece is never chosen (spec §7 pitfall 6).
    log_len = jnp.log(seg.length)
    # Only the last 5 segments (tails, partial pieces, centre) can hold more than one piece; the
    # geometric factor is computed for them alone (it is 0 for single pieces).
    tail = seg.count[-5:]
    geometric_tail = jnp.where(tail == 1.0, 0.0, _log_neg_expm1(tail * a) - _log_neg_expm1(a))
    geometric = jnp.concatenate([jnp.zeros(seg.count.shape[0] - 5, jnp.float64), geometric_tail])
    regular = log_len - seg.level * a + geometric
    if mechanism == "piecewise_laplace":
        # Flat centre: mass 2 rho e^{-a}; in the units above multiply by a/(1-e^{-a}) (spec §2.6).
        flat = log_len - a + jnp.log(a) - _log_neg_expm1(a)
    else:
        flat = log_len  # INV: len = 0 on the centre
    return jnp.where(seg.flat, flat, regular)


def _uniform(key, shape=()):
    return jax.random.uniform(key, shape, jnp.float64)


def _sample_kernel(key, bounds: LocalBounds, epsilon, rho, mechanism: str):
    a = 0.5 * epsilon
    seg = _segments(bounds, rho)
    logits = _log_masses(seg, a, mechanism)
    k_choose, k_offset, k_uniform = jax.random.split(key, 3)
    # STEP 1 (Alg 1): inverse CDF on softmax(log-weights) (spec §2.2 "GPU" option): one uniform instead of
    # one Gumbel per segment. side="right" returns the first j with cumsum[j] > v, so a zero-weight segment
    # (equal cumsums, spec §7 pitfall 6) is never chosen. Float64 resolution: a segment whose probability
    # is below ~1e-16 of the total is effectively never drawn (the usual floating-point caveat, pitfall 3).
    weights = jnp.exp(logits - jnp.max(logits))
    cumulative = jnp.cumsum(weights)
    target = _uniform(k_choose) * cumulative[-1]
    j = jnp.minimum(jnp.searchsorted(cumulative, target, side="right"), logits.shape[0] - 1)
    start, sign, length, count, flat = seg.start[j], seg.sign[j], seg.length[j], seg.count[j], seg.flat[j]
    u = _uniform(k_offset)
    # STEP 2: continuous truncated exponential on [0, m] (in units of pieces), stable inverse CDF (spec §2.2):
    # t = -log1p(u expm1(-m a)) / a; m = inf gives an Exp(a) draw (the tail rule).
    t = -jnp.log1p(u * jnp.expm1(-count * a)) / a
    t = jnp.clip(t, 0.0, count)
    if mechanism == "piecewise_laplace":
        units = t
    else:
        # INV: the piece index is the integer part of t (a truncated geometric), then uniform inside (spec §2.4).
        piece = jnp.minimum(jnp.floor(t), count - 1.0)
        units = piece + _uniform(k_uniform)
    units = jnp.where(flat, u, units)
    offset = jnp.clip(units * length, 0.0, count * length)
    value = start + sign * offset
    value = jnp.where(flat, jnp.clip(value, seg.center - seg.rho, seg.center + seg.rho), value)
    return value, seg.center, j


def _check_rho(rho):
    return check_nonnegative("rho", rho)


def check_bounds(bounds: Any) -> LocalBounds:
    """Checks the type and (when concrete) the basic structure of a :class:`LocalBounds`."""
    if not isinstance(bounds, LocalBounds):
        raise TypeError(f"bounds must be a LocalBounds (from make_local_bounds or a bound provider such as "
                        f"median_bounds), got {type(bounds).__name__}.")
    if any(is_tracer(leaf) for leaf in bounds):
        return bounds
    upper = np.asarray(bounds.upper)
    if upper.ndim != 1:
        raise ValueError(f"bounds must describe one dataset (upper of shape [K+1]), got shape {upper.shape}. "
                         "Use jax.vmap for batching.")
    make_local_bounds(bounds.upper, bounds.lower, upper_step=float(bounds.upper_step),
                      lower_step=float(bounds.lower_step), upper_limit=float(bounds.upper_limit),
                      lower_limit=float(bounds.lower_limit))
    return bounds


@functools.partial(jax.jit, static_argnames=("mechanism",))
def _release(key, bounds, epsilon, rho, mechanism):
    value, center, j = _sample_kernel(key, bounds, epsilon, rho, mechanism)
    return Release(value, PiecewiseLaplaceInfo(jnp.asarray(epsilon, jnp.float64), center, j))


def release_from_bounds(key, bounds, epsilon, rho, mechanism) -> Release:
    """Checked entry shared by :func:`piecewise_laplace` and ``inverse_sensitivity``."""
    require_x64(mechanism)
    key = check_key(key)
    bounds = check_bounds(bounds)
    epsilon = check_epsilon(epsilon)
    rho = _check_rho(rho)
    return _release(key, bounds, jnp.asarray(epsilon, jnp.float64), jnp.asarray(rho, jnp.float64), mechanism)


def piecewise_laplace(key: Key, bounds: LocalBounds, *, epsilon: float, rho: float = 0.0) -> Release:
    """The piecewise Laplace mechanism, sampled exactly by Algorithm 1 (Durfee 2025, Def 3.1, Alg 1, Thm 1).

    With :math:`a = \\varepsilon/2`, :math:`\\Delta(x; \\pm l)` the piece lengths
    and :math:`W = \\sum_{l\\ge1} e^{-la}(\\Delta(x;l) + \\Delta(x;-l))`, the
    output density is

    .. math::
        \\pi(y) = \\frac{a}{(1 - e^{-a})\\,W}
                 \\exp\\Big(-a\\big(l + \\tfrac{y - U_{l-1}}{U_l - U_{l-1}}\\big)\\Big),
        \\qquad y \\in (U_{l-1}, U_l],

    and symmetrically below :math:`f(x)`. Algorithm 1: pick piece
    :math:`\\pm l` with probability :math:`\\propto e^{-la}\\Delta(x;\\pm l)`
    (Gumbel-max in log space), then draw a truncated exponential
    :math:`\\mathrm{Expo}^T(\\Delta, \\varepsilon/2)` inside it.

    **Factor two.** With all pieces of length :math:`\\Delta` this is
    :math:`f(x) + \\mathrm{Lap}(2\\Delta/\\varepsilon)`, i.e. the Laplace
    mechanism at :math:`\\varepsilon/2` (paper §4.1): at equal epsilon plain
    Laplace wins in the worst case. PLM is :math:`\\varepsilon`-DP and
    :math:`\\varepsilon`-bounded-range, hence :math:`\\varepsilon^2/8`-zCDP
    (§4.1), which composes almost like :math:`\\varepsilon/2`-DP.

    ``rho > 0`` gives the rho-smooth variant of §4.2 (flat on
    :math:`[f(x)-\\rho, f(x)+\\rho]`, outward shift by rho).

    Args:
      key: a single PRNG key.
      bounds: local bounds of one dataset (:class:`LocalBounds`), e.g. from
        :func:`median_bounds`. Batch with ``jax.vmap``.
      epsilon: privacy parameter, finite and > 0.
      rho: smoothing width (public), >= 0.

    Returns:
      ``Release(value, PiecewiseLaplaceInfo)`` with a float64 scalar value.

    Raises:
      ValueError, TypeError: for bad parameters or malformed bounds.

    Privacy:
      :math:`\\varepsilon`-DP (Thm 1) when ``bounds`` satisfy (V0)-(V2) of
      spec 001 §2.7 for every neighbouring pair. Idealized numerics
      (float64 sampler; spec §7 pitfall 15).

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.make_local_bounds([5.0, 5.2, 7.0, 10.0], [5.0, 4.5, 2.0, 0.0])
      >>> r = io.piecewise_laplace(jax.random.key(0), b, epsilon=1.0)
      >>> bool(0.0 <= float(r.value) <= 10.0)
      True

    References:
      Durfee, `Unifying Laplace Mechanism with Instance Optimality in
      Differential Privacy <https://arxiv.org/abs/2505.02798>`_, 2025,
      Def 3.1, Alg 1, Lemma 3.1, Thm 1, §4.1-4.2.
    """
    return release_from_bounds(key, bounds, epsilon, rho, "piecewise_laplace")


def piecewise_laplace_guarantee(*, epsilon: float, rho: float = 0.0) -> PureDP:
    """:math:`\\varepsilon`-DP (Durfee 2025, Thm 1); also :math:`\\varepsilon`-BR (§4.1)."""
    _check_rho(rho)
    return PureDP(check_epsilon(epsilon))


# ----------------------------------------------------------------------------------------------------------------
# Densities, CDFs and exact utility (spec §2.1, §2.5)


def _unnormalised_log_density(y, seg: _Segments, a, mechanism):
    offset = seg.sign * (y - seg.start)
    total = seg.count * seg.length
    inside = (offset > 0) & (offset <= total) & (seg.length > 0)
    # The flat centre is [f0 - rho, f0 + rho] computed exactly as the pieces' ends (no rounding gap).
    in_flat = (y >= seg.center - seg.rho) & (y <= seg.center + seg.rho) & (seg.length > 0)
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
def _log_density(y, bounds, epsilon, rho, mechanism):
    a = 0.5 * epsilon
    seg = _segments(bounds, rho)
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
def _cdf(y, bounds, epsilon, rho, mechanism):
    a = 0.5 * epsilon
    seg = _segments(bounds, rho)
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
    """E[offset] and E[offset^2] inside each segment (spec §2.5 with truncated-geometric blocks)."""
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
    # Flat centre: uniform on [f0 - rho, f0 + rho] measured from its left end.
    t1 = jnp.where(seg.flat, 0.5, t1)
    t2 = jnp.where(seg.flat, 1.0 / 3.0, t2)
    return D * t1, D * D * t2


@functools.partial(jax.jit, static_argnames=("mechanism",))
def _moments(bounds, epsilon, rho, mechanism):
    a = 0.5 * epsilon
    seg = _segments(bounds, rho)
    logits = _log_masses(seg, a, mechanism)
    probs = jnp.exp(logits - jax.scipy.special.logsumexp(logits))
    o1, o2 = _offset_moments(seg, a, mechanism)
    E = jnp.abs(seg.start - seg.center)
    abs1 = E + o1
    sq = E**2 + 2 * E * o1 + o2
    # Flat centre: |err| is uniform on [0, rho]: E = rho/2, E^2 = rho^2/3.
    half = 0.5 * seg.length
    abs1 = jnp.where(seg.flat, 0.5 * half, abs1)
    sq = jnp.where(seg.flat, half**2 / 3.0, sq)
    live = (seg.length > 0) & (seg.count > 0) & (probs > 0)
    return jnp.sum(jnp.where(live, probs * abs1, 0.0)), jnp.sum(jnp.where(live, probs * sq, 0.0))


def _check_mechanism(mechanism):
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}.")
    return mechanism


def _prepare(bounds, epsilon, rho, mechanism):
    require_x64("piecewise_laplace distribution functions")
    if not isinstance(bounds, LocalBounds):
        raise TypeError(f"bounds must be a LocalBounds, got {type(bounds).__name__}.")
    return (jnp.asarray(check_epsilon(epsilon), jnp.float64), jnp.asarray(_check_rho(rho), jnp.float64),
            _check_mechanism(mechanism))


def log_density(y: Any, bounds: LocalBounds, *, epsilon: float, rho: float = 0.0,
                mechanism: str = "piecewise_laplace") -> Array:
    """Exact log-density of PLM (M.1) or INV (M.2) at the points ``y`` (Durfee 2025, Def 3.1, Def 4.1).

    .. math::
        \\log \\pi_{\\text{plm}}(y) = \\log a - \\log(1 - e^{-a}) - \\log W + a\\,q_{\\text{plm}}(y; x),
        \\qquad \\log \\pi_{\\text{inv}}(y) = -a\\,\\ell(y; x) - \\log W.

    Args:
      y: ``float64[k]`` evaluation points (1-D).
      bounds: local bounds of one dataset.
      epsilon: privacy parameter.
      rho: smoothing width.
      mechanism: "piecewise_laplace" or "inverse_sensitivity".

    Returns:
      ``float64[k]`` log-densities (``-inf`` outside the support).

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.make_local_bounds([0.0, 1.0], [0.0, -1.0])
      >>> float(io.log_density([0.5], b, epsilon=2.0)[0]) < 0
      True
    """
    epsilon, rho, mechanism = _prepare(bounds, epsilon, rho, mechanism)
    y = jnp.atleast_1d(jnp.asarray(y, jnp.float64))
    return _log_density(y, bounds, epsilon, rho, mechanism)


def cdf(y: Any, bounds: LocalBounds, *, epsilon: float, rho: float = 0.0,
        mechanism: str = "piecewise_laplace") -> Array:
    """Exact CDF :math:`P(M(x) \\le y)` of PLM or INV (closed form per segment, spec 001 §2.2, §2.5).

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.make_local_bounds([0.0, 1.0], [0.0, -1.0])
      >>> [round(float(v), 12) for v in io.cdf([-1.0, 0.0, 1.0], b, epsilon=1.0)]
      [0.0, 0.5, 1.0]
    """
    epsilon, rho, mechanism = _prepare(bounds, epsilon, rho, mechanism)
    y = jnp.atleast_1d(jnp.asarray(y, jnp.float64))
    return _cdf(y, bounds, epsilon, rho, mechanism)


def absolute_error_cdf(alpha: Any, bounds: LocalBounds, *, epsilon: float, rho: float = 0.0,
                       mechanism: str = "piecewise_laplace") -> Array:
    """:math:`P(|M(x) - f(x)| \\le \\alpha)` exactly: the quantity of Thm 2 (Durfee 2025).

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.make_local_bounds([0.0, 1.0], [0.0, -1.0])
      >>> float(io.absolute_error_cdf([1.0], b, epsilon=1.0)[0])
      1.0
    """
    epsilon, rho, mechanism = _prepare(bounds, epsilon, rho, mechanism)
    alpha = jnp.atleast_1d(jnp.asarray(alpha, jnp.float64))
    f0 = bounds.upper[0]
    return _cdf(f0 + alpha, bounds, epsilon, rho, mechanism) - _cdf(f0 - alpha, bounds, epsilon, rho, mechanism)


def error_moments(bounds: LocalBounds, *, epsilon: float, rho: float = 0.0,
                  mechanism: str = "piecewise_laplace") -> tuple[Array, Array]:
    """Exact :math:`E|M(x) - f(x)|` and :math:`E(M(x) - f(x))^2` (spec 001 §2.5). Batched over datasets.

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.make_local_bounds([0.0], [0.0], upper_step=1.0, lower_step=1.0)  # worst case: Lap(2/eps)
      >>> [round(float(v), 10) for v in io.error_moments(b, epsilon=1.0)]
      [2.0, 8.0]
    """
    epsilon, rho, mechanism = _prepare(bounds, epsilon, rho, mechanism)
    fn = functools.partial(_moments, mechanism=mechanism)
    for _ in range(np.ndim(bounds.upper) - 1):
        fn = jax.vmap(fn, in_axes=(0, None, None))
    return fn(bounds, epsilon, rho)


def piece_log_weights(bounds: LocalBounds, *, epsilon: float, rho: float = 0.0,
                      mechanism: str = "piecewise_laplace") -> Array:
    """Normalised log-probabilities of the segments chosen in Step 1 of Alg 1.

    Order: ``+1..+K``, ``-1..-K``, upper tail block, upper partial piece,
    lower tail block, lower partial piece, rho-centre.

    Examples:
      >>> import numpy as np
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.make_local_bounds([0.0, 1.0], [0.0, -3.0])
      >>> np.round(np.exp(np.asarray(io.piece_log_weights(b, epsilon=1.0)))[:2], 3)
      array([0.25, 0.75])
    """
    epsilon, rho, mechanism = _prepare(bounds, epsilon, rho, mechanism)

    def one(b, e, r):
        logits = _log_masses(_segments(b, r), 0.5 * e, mechanism)
        return logits - jax.scipy.special.logsumexp(logits)

    fn = one
    for _ in range(np.ndim(bounds.upper) - 1):
        fn = jax.vmap(fn, in_axes=(0, None, None))
    return jax.jit(fn)(bounds, epsilon, rho)
