"""Median baselines and the analytic formulas of Tzamos et al. 2020 (Props. 3.8-3.9, eq. (3.4)) for the private median.

* :func:`nonprivate_median` (not private; utility reference),
* :func:`exponential_mechanism_median` (pure DP, rank utility on ``[lower, upper]``; Smith 2011),
* the restricted flattened Laplace (3.4): its exact normalizer and tails (diagnostics), and
  ``_flattened_laplace_shortcut``, the paper's Case-A shortcut, which is **not private** (its
  Lemma 3.2 fails; see docs/errata.md) and is kept private, for the study's unsafe reference only,
* the lower-bound sample sizes of Props 3.8 and 3.9 (Tzamos et al. 2020, Props. 3.8-3.9).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import mpmath
import numpy as np

from gpuprivacy import _threefry as threefry
from gpuprivacy._checks import (
    all_ok,
    epsilon_ok,
    fail_closed,
    traced_ok,
    check_data,
    check_epsilon,
    check_finite_real,
    check_key,
    check_probability,
    check_rows_in_domain,
    is_tracer,
)
from gpuprivacy._typing import Array, Key
from gpuprivacy._sort import sort
from gpuprivacy.accounting import PureDP
from gpuprivacy.mechanisms._common import check_bool
from gpuprivacy.mechanisms._median._config import median_config
from gpuprivacy.mechanisms._piecewise_sampler import sample_piecewise
from gpuprivacy.mechanisms._release import Release, stated_guarantee


def nonprivate_median(data) -> float:
    """The empirical (left, ``l = ceil(n/2)``) median ``X_(l)``. NOT private; a utility reference."""
    data = check_data(data)
    return float(np.sort(np.asarray(data, np.float64))[(data.shape[0] + 1) // 2 - 1])


class ExponentialMedianInfo(NamedTuple):
    """Info of :func:`exponential_mechanism_median` (``lower``/``upper`` are public).

    ``valid`` is False when a traced epsilon or domain was invalid; the release is then NaN, whatever
    the data (fail closed, docs/fail_closed.md).
    """

    lower: Array
    upper: Array
    valid: Array = True


def _check_exponential_domain(lower, upper):
    lower = check_finite_real("lower", lower)
    upper = check_finite_real("upper", upper)
    if not is_tracer(lower) and not is_tracer(upper) and not lower < upper:
        raise ValueError(f"lower must be < upper, got lower={lower!r}, upper={upper!r}.")
    return lower, upper


@jax.jit
def _exponential_median(key, data, epsilon, lower, upper):
    n = data.shape[0]
    x = sort(jnp.clip(jnp.where(jnp.isnan(data), lower, data), lower, upper))
    edges = jnp.concatenate([jnp.stack([lower]), x, jnp.stack([upper])])
    rank = jnp.arange(n + 1)
    # Interval i = [x_(i), x_(i+1)] has i points below: utility -|i - n/2|, sensitivity 1 under replacement.
    utility = -jnp.abs(rank.astype(jnp.float64) - n / 2.0)
    width = edges[1:] - edges[:-1]
    logits = jnp.where(width > 0, jnp.log(jnp.where(width > 0, width, 1.0)) + epsilon / 2.0 * utility, -jnp.inf)
    # The shared exact piece sampler: a piece by its log-mass, then a uniform point in it.
    value, _ = sample_piecewise(key, logits, edges[:-1], jnp.ones_like(width), width, jnp.zeros_like(width))
    return value


def exponential_mechanism_median(key: Key, data, *, epsilon: float, lower: float, upper: float,
                                 clip: bool = False) -> Release:
    """Exponential-mechanism median with rank utility on ``[lower, upper]`` (continuous output).

    Records must lie in the public domain ``[lower, upper]``; with ``clip=True`` records outside it
    are clamped to it (a record-wise map, so the guarantee is unchanged). With sorted records
    :math:`x_{(1)} \\le \\dots \\le x_{(n)}`, :math:`x_{(0)} = \\text{lower}`,
    :math:`x_{(n+1)} = \\text{upper}`, the output density is

    .. math:: f(\\omega) \\propto \\exp\\big(-\\tfrac{\\varepsilon}{2} |i(\\omega) - n/2|\\big),
        \\quad \\omega \\in [x_{(i)}, x_{(i+1)}],

    which is :math:`\\varepsilon`-DP under replacement (the rank utility has sensitivity 1).

    Args:
      key: a single PRNG key.
      data: vector of n finite records in ``[lower, upper]``.
      epsilon: privacy parameter (> 0).
      lower, upper: the public data domain and output range (finite, lower < upper).
      clip: clamp records outside ``[lower, upper]`` to it instead of raising (the behaviour
        before this option existed was to clamp silently).

    Returns:
      A :class:`Release` with the private median in ``[lower, upper]``.

    Raises:
      ValueError: ``lower >= upper``, NaN/inf in data, data outside ``[lower, upper]`` (unless
        ``clip=True``), ``epsilon <= 0``. Under ``jit``/``vmap`` (checks skipped) records are
        clamped to the domain and NaN records count as ``lower``; the kernel never raises.

    References:
      Smith, `Privacy-preserving statistical estimation with optimal convergence rates
      <https://doi.org/10.1145/1993636.1993743>`_, STOC 2011, Sec. 3; McSherry & Talwar 2007.

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy.mechanisms import median
      >>> out = median.exponential_mechanism_median(jax.random.key(0), np.arange(101.0), epsilon=1.0,
      ...                                           lower=-1000.0, upper=1000.0)
      >>> bool(30.0 < out.value < 70.0)
      True
    """
    key = check_key(key)
    data = check_data(data)
    epsilon = check_epsilon(epsilon)
    lower, upper = _check_exponential_domain(lower, upper)
    if not is_tracer(data) and data.ndim != 1:
        raise ValueError(f"data must be a vector of n records, got shape {data.shape}.")
    data = check_rows_in_domain(data, lower, upper, clip)
    guarantee = stated_guarantee(exponential_mechanism_median_guarantee, epsilon=epsilon, lower=lower, upper=upper,
                                 clip=clip)
    value = _exponential_median(key, jnp.asarray(data, jnp.float64), jnp.float64(epsilon), jnp.float64(lower),
                                jnp.float64(upper))
    ok = all_ok(epsilon_ok(epsilon), traced_ok(jnp.asarray(lower < upper), "lower must be < upper")
                if is_tracer(lower) or is_tracer(upper) else True)
    return Release(fail_closed(value, ok), ExponentialMedianInfo(lower=jnp.float64(lower), upper=jnp.float64(upper),
                                                                 valid=jnp.asarray(ok)), guarantee)


def exponential_mechanism_median_guarantee(*, epsilon: float, lower: float, upper: float,
                                           clip: bool = False) -> PureDP:
    """Pure epsilon-DP under replacement of one record (McSherry & Talwar 2007, Thm 6).

    Takes the mechanism's parameters (``guarantee(**params)``); ``lower``/``upper`` are required
    and validated like the mechanism's, though the guarantee does not depend on them or on ``clip``.
    """
    epsilon = check_epsilon(epsilon)
    _check_exponential_domain(lower, upper)
    check_bool("clip", clip)
    return PureDP(epsilon=epsilon)


# --- the restricted flattened Laplace (3.4): diagnostics and the UNSAFE shortcut ------------------

def flattened_laplace_log_normalizer(n, **params) -> float:
    """log Zhat of the restricted density (3.4) (Tzamos et al. 2020, eq. (3.4) closed form; constant over H when C >= 1/2).

    .. math:: \\hat Z = \\frac{2}{\\lambda}(1 - e^{-E}) + (2B - 6Cr) e^{-E},\\quad
        \\lambda = \\frac{\\varepsilon L n}{12 C},\\ E = \\frac{\\varepsilon L r n}{4}
    """
    cfg = median_config(n, warn=False, **params)
    lam, cap_e = 1.0 / cfg.scale, cfg.epsilon * cfg.cap / 4.0
    flat = 2.0 * cfg.support - 6.0 * cfg.constant * cfg.radius
    return float(np.logaddexp(math.log(2.0 / lam) + math.log(-math.expm1(-cap_e)), math.log(flat) - cap_e))


def flattened_laplace_tail(alpha, n, **params) -> float:
    """Exact ``P(|Ahat(X) - m(X)| >= alpha)`` of (3.4) for ``0 < alpha <= 3Cr`` and m in Xi (Tzamos et al. 2020, eq. (3.4))."""
    cfg = median_config(n, warn=False, **params)
    alpha = check_finite_real("alpha", alpha)
    if not 0 < alpha <= 3 * cfg.constant * cfg.radius:
        raise ValueError(f"alpha must be in (0, 3Cr] = (0, {3 * cfg.constant * cfg.radius}], got {alpha!r}.")
    lam, cap_e = 1.0 / cfg.scale, cfg.epsilon * cfg.cap / 4.0
    central = math.log(2.0 / lam) + math.log(max(math.exp(-lam * alpha) - math.exp(-cap_e), 0.0) or 1e-300)
    outer = math.log(2 * cfg.median_bound + 2 * cfg.constant * cfg.radius) - cap_e
    return float(math.exp(np.logaddexp(central, outer) - flattened_laplace_log_normalizer(n, **params)))


def flattened_laplace_log_density(omega, center, n, **params):
    """log of (3.4) at ``omega`` for a data set with median ``center`` (diagnostic; Tzamos et al. 2020, eq. (3.4))."""
    cfg = median_config(n, warn=False, **params)
    omega = np.asarray(omega, np.float64)
    value = -np.minimum(np.abs(omega - center) / cfg.scale, cfg.epsilon * cfg.cap / 4.0)
    return np.where(np.abs(omega) <= cfg.support, value - flattened_laplace_log_normalizer(n, **params), -np.inf)


@functools.partial(jax.jit, static_argnames=("n", "index", "scale", "cap_e", "support", "flat"))
def _shortcut(key, data, n, index, scale, cap_e, support, flat):
    m = sort(data)[index - 1]
    lam = 1.0 / scale
    logits = jnp.stack([jnp.log(jnp.maximum(m - flat + support, 0.0)) - cap_e,
                        math.log(2.0) - jnp.log(lam) + jnp.log(-jnp.expm1(-cap_e)),
                        jnp.log(jnp.maximum(support - m - flat, 0.0)) - cap_e])
    k1, k2, k3 = threefry.split(key, 3)
    piece = jax.random.categorical(k1, logits)
    u = threefry.uniform(k2, (), jnp.float64)
    sign = jnp.where(jax.random.bernoulli(k3), 1.0, -1.0)
    centre = m + sign * (-jnp.log1p(u * jnp.expm1(-cap_e)) / lam)
    left = -support + u * (m - flat + support)
    right = m + flat + u * (support - m - flat)
    return jnp.where(piece == 0, left, jnp.where(piece == 1, centre, right))


def _flattened_laplace_shortcut(key, data, **params):
    """UNSAFE: Algorithm 1 Case A applied blindly (flattened Laplace (3.4) at the median, Alg. 2).

    Not differentially private (Tzamos et al. 2020, Lemma 3.2 fails; see docs/errata.md: log-ratio 6.0 > 0.5 for d_H = 1).
    Kept only as the study's unsafe reference; never registered as a mechanism.
    """
    data = jnp.asarray(data, jnp.float64)
    cfg = median_config(data.shape[0], warn=False, **params)
    return _shortcut(key, jnp.asarray(data), cfg.n, cfg.median_index, cfg.scale, cfg.epsilon * cfg.cap / 4.0,
                     cfg.support, 3.0 * cfg.constant * cfg.radius)


# --- lower bounds (Tzamos et al. 2020, Props. 3.8-3.9) -----------------------------------------------------------------------

def lower_bound_sample_sizes(*, alpha: float, beta: float, epsilon: float, min_density: float, radius: float,
                             median_bound: float) -> dict:
    """Necessary sample sizes of Props 3.8 and 3.9 (Tzamos et al. 2020, Props. 3.8-3.9), with mpmath.

    ``n38 = log((1-beta)/beta) / -log(1 - 2 L alpha (1 - e^-eps))`` (local privacy term, eta -> 0) and
    ``n39 = log((1-beta) N) / -log(1 - 2 L r (1 - e^-eps))`` with ``N = floor(2R/(3 alpha))`` (range term).
    """
    beta = check_probability("beta", beta)
    with mpmath.workdps(40):
        drop = 1 - mpmath.exp(-mpmath.mpf(epsilon))
        n38 = mpmath.log((1 - mpmath.mpf(beta)) / beta) / -mpmath.log(1 - 2 * mpmath.mpf(min_density) * alpha * drop)
        count = math.floor(2 * median_bound / (3 * alpha))
        n39 = (mpmath.log((1 - mpmath.mpf(beta)) * count) / -mpmath.log(1 - 2 * mpmath.mpf(min_density) * radius * drop)
               if count >= 1 else mpmath.mpf(0))
    return {"local": float(n38), "range": float(n39)}
