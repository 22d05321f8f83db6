"""PLM and INV for common statistics: median, quantiles, clipped mean, counts (spec 001 §4.1).

Each function takes one unsorted 1-D float64 dataset with a public domain
``[lower, upper]`` (swap neighbours, ``n`` public), computes the exact local
bounds in closed form and samples in one jitted kernel. Batch with
``jax.vmap`` (or :func:`gpuprivacy.mechanisms.run_trials`).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from gpuprivacy._checks import check_epsilon, check_key
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Key
from gpuprivacy.accounting import PureDP
from gpuprivacy.mechanisms._instance_optimal._local_bounds import (
    _clipped_mean_bounds,
    _max_pieces,
    _order_statistic_bounds,
    check_dataset,
    check_domain,
    count_bounds,
    median_rank,
    quantile_rank,
    sort_rows,
)
from gpuprivacy.mechanisms._instance_optimal._piecewise_laplace import PiecewiseLaplaceInfo, _sample_kernel
from gpuprivacy.mechanisms._release import Release


@functools.partial(jax.jit, static_argnames=("statistic", "rank", "pieces", "mechanism"))
def _statistic_release(key, data, epsilon, lower, upper, statistic, rank, pieces, mechanism):
    x = sort_rows(data)
    if statistic == "order":
        bounds = _order_statistic_bounds(x, lower, upper, rank, pieces)
    else:
        bounds = _clipped_mean_bounds(x, lower, upper)
    value, center, j = _sample_kernel(key, bounds, epsilon, jnp.zeros((), jnp.float64), mechanism)
    return Release(value, PiecewiseLaplaceInfo(epsilon, center, j))


def _run(key, data, epsilon, lower, upper, clip, statistic, mechanism, *, quantile=None, median=False,
         max_pieces=None):
    require_x64(mechanism)
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    lower, upper = check_domain(lower, upper)
    x = check_dataset(data, lower, upper, clip)
    n = x.shape[0]
    rank = 0
    pieces = 0
    if statistic == "order":
        rank = median_rank(n) if median else quantile_rank(quantile, n)
        pieces = _max_pieces(max_pieces, n)
    return _statistic_release(key, x, jnp.asarray(epsilon, jnp.float64), jnp.asarray(lower, jnp.float64),
                              jnp.asarray(upper, jnp.float64), statistic, rank, pieces, mechanism)


_DOC = """{title} (Durfee 2025, {ref}; spec 001 §4.1).

    Swap neighbours, ``n`` public, data in the public domain
    ``[lower, upper]``. The local bounds are exact closed forms from the
    sorted data ({bounds}); the release is {what}.

    .. math::
        {math}

    Args:
      key: a single PRNG key.
      data: ``float64[n]`` unsorted values in ``[lower, upper]``.
      epsilon: privacy parameter, finite and > 0.
      lower, upper: the public domain, ``lower < upper``.
{extra}      clip: clip out-of-domain values into the domain instead of raising.

    Returns:
      ``Release(value, PiecewiseLaplaceInfo)``; ``value`` is a float64 scalar
      in ``[lower, upper]``.

    Raises:
      ValueError: ``lower >= upper``, NaN/inf in data, data outside the domain
        (unless ``clip=True``), ``epsilon <= 0``, a batch of keys.

    Privacy:
      :math:`\\\\varepsilon`-DP (Thm 1 / Def 4.1). Idealized numerics.
      {factor} Data checks run at this boundary; under ``jit``/``vmap``
      (where they are skipped) data are clipped into the domain and the
      kernel is total: it never raises (NaN data, rejected by the checks,
      give an unspecified release).

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> r = io.{name}(jax.random.key(0), [0.5, 1, 2, 4.5, 5, 5.2, 7, 9, 9.5],{call} epsilon=1.0, lower=0.0, upper=10.0)
      >>> bool(0.0 <= float(r.value) <= 10.0)
      True

    References:
      Durfee, `Unifying Laplace Mechanism with Instance Optimality in
      Differential Privacy <https://arxiv.org/abs/2505.02798>`_, 2025; Asi &
      Duchi, NeurIPS 2020 (inverse sensitivity).
    """

_PLM_MATH = ("\\\\pi(y) \\\\propto \\\\exp\\\\big(-\\\\tfrac{\\\\varepsilon}{2}\\\\big(l + "
             "\\\\tfrac{y - U_{l-1}}{U_l - U_{l-1}}\\\\big)\\\\big),\\\\ y \\\\in (U_{l-1}, U_l]")
_INV_MATH = "\\\\pi(y) \\\\propto \\\\exp(-\\\\tfrac{\\\\varepsilon}{2}\\\\,\\\\ell(y; x))"
_FACTOR = ("In the worst case (all pieces of equal length) this is Laplace at epsilon/2 "
           "(paper §4.1): at equal epsilon plain Laplace can be better.")


def _doc(name, title, ref, math, what, bounds, extra="", call=""):
    return _DOC.format(name=name, title=title, ref=ref, math=math.replace("\\\\", "\\"), what=what, bounds=bounds,
                       extra=extra, call=call, factor=_FACTOR).replace("\\\\", "\\")


_QUANTILE_ARGS = "      quantile: in [0, 1]; the rank is ``max(1, ceil(quantile * n))``.\n"
_MEDIAN_BOUNDS = ":math:`U_l = x_{(m+l)}`, :math:`L_l = x_{(m-l)}`, ``m = (n+1)//2``"
_QUANTILE_BOUNDS = ":math:`U_l = x_{(r+l)}`, :math:`L_l = x_{(r-l)}`"
_MEAN_BOUNDS = ":math:`U_l = \\bar x + \\sum_{i \\le l}(\\text{upper} - x_{(i)})/n`"
_PLM_WHAT = "sampled exactly by Algorithm 1 (piece by Gumbel-max, truncated exponential inside)"
_INV_WHAT = "Step 1 of Algorithm 1 then a uniform draw inside the piece"


def piecewise_laplace_median(key: Key, data: Any, *, epsilon: float, lower: float, upper: float,
                             clip: bool = False) -> Release:
    return _run(key, data, epsilon, lower, upper, clip, "order", "piecewise_laplace", median=True)


def inverse_sensitivity_median(key: Key, data: Any, *, epsilon: float, lower: float, upper: float,
                               clip: bool = False) -> Release:
    return _run(key, data, epsilon, lower, upper, clip, "order", "inverse_sensitivity", median=True)


def piecewise_laplace_quantile(key: Key, data: Any, *, quantile: float, epsilon: float, lower: float, upper: float,
                               clip: bool = False) -> Release:
    return _run(key, data, epsilon, lower, upper, clip, "order", "piecewise_laplace", quantile=quantile)


def inverse_sensitivity_quantile(key: Key, data: Any, *, quantile: float, epsilon: float, lower: float,
                                 upper: float, clip: bool = False) -> Release:
    return _run(key, data, epsilon, lower, upper, clip, "order", "inverse_sensitivity", quantile=quantile)


def piecewise_laplace_clipped_mean(key: Key, data: Any, *, epsilon: float, lower: float, upper: float,
                                   clip: bool = False) -> Release:
    return _run(key, data, epsilon, lower, upper, clip, "mean", "piecewise_laplace")


def inverse_sensitivity_clipped_mean(key: Key, data: Any, *, epsilon: float, lower: float, upper: float,
                                     clip: bool = False) -> Release:
    return _run(key, data, epsilon, lower, upper, clip, "mean", "inverse_sensitivity")


piecewise_laplace_median.__doc__ = _doc("piecewise_laplace_median", "Private median by the piecewise Laplace "
                                        "mechanism", "Def 3.1, Alg 1, Thm 1", _PLM_MATH, _PLM_WHAT, _MEDIAN_BOUNDS)
inverse_sensitivity_median.__doc__ = _doc("inverse_sensitivity_median", "Private median by the inverse "
                                          "sensitivity mechanism", "Def 4.1", _INV_MATH, _INV_WHAT, _MEDIAN_BOUNDS)
piecewise_laplace_quantile.__doc__ = _doc("piecewise_laplace_quantile", "Private quantile by the piecewise "
                                          "Laplace mechanism", "Def 3.1, Alg 1", _PLM_MATH, _PLM_WHAT,
                                          _QUANTILE_BOUNDS, _QUANTILE_ARGS, " quantile=0.25,")
inverse_sensitivity_quantile.__doc__ = _doc("inverse_sensitivity_quantile", "Private quantile by the inverse "
                                            "sensitivity mechanism", "Def 4.1", _INV_MATH, _INV_WHAT,
                                            _QUANTILE_BOUNDS, _QUANTILE_ARGS, " quantile=0.25,")
piecewise_laplace_clipped_mean.__doc__ = _doc("piecewise_laplace_clipped_mean", "Private bounded mean by the "
                                              "piecewise Laplace mechanism", "Def 3.1, Alg 1", _PLM_MATH, _PLM_WHAT,
                                              _MEAN_BOUNDS)
inverse_sensitivity_clipped_mean.__doc__ = _doc("inverse_sensitivity_clipped_mean", "Private bounded mean by the "
                                                "inverse sensitivity mechanism", "Def 4.1", _INV_MATH, _INV_WHAT,
                                                _MEAN_BOUNDS)


def _pure(epsilon, **kwargs):
    del kwargs
    return PureDP(check_epsilon(epsilon))


def piecewise_laplace_median_guarantee(*, epsilon: float, lower: float = 0.0, upper: float = 1.0,
                                       clip: bool = False) -> PureDP:
    """:math:`\\varepsilon`-DP under swaps (Durfee 2025, Thm 1)."""
    check_domain(lower, upper)
    return _pure(epsilon)


def inverse_sensitivity_median_guarantee(*, epsilon: float, lower: float = 0.0, upper: float = 1.0,
                                         clip: bool = False) -> PureDP:
    """:math:`\\varepsilon`-DP under swaps (Durfee 2025, Def 4.1)."""
    check_domain(lower, upper)
    return _pure(epsilon)


def piecewise_laplace_quantile_guarantee(*, epsilon: float, quantile: float = 0.5, lower: float = 0.0,
                                         upper: float = 1.0, clip: bool = False) -> PureDP:
    """:math:`\\varepsilon`-DP under swaps (Durfee 2025, Thm 1)."""
    check_domain(lower, upper)
    return _pure(epsilon)


def inverse_sensitivity_quantile_guarantee(*, epsilon: float, quantile: float = 0.5, lower: float = 0.0,
                                           upper: float = 1.0, clip: bool = False) -> PureDP:
    """:math:`\\varepsilon`-DP under swaps (Durfee 2025, Def 4.1)."""
    check_domain(lower, upper)
    return _pure(epsilon)


def piecewise_laplace_clipped_mean_guarantee(*, epsilon: float, lower: float = 0.0, upper: float = 1.0,
                                             clip: bool = False) -> PureDP:
    """:math:`\\varepsilon`-DP under swaps (Durfee 2025, Thm 1)."""
    check_domain(lower, upper)
    return _pure(epsilon)


def inverse_sensitivity_clipped_mean_guarantee(*, epsilon: float, lower: float = 0.0, upper: float = 1.0,
                                               clip: bool = False) -> PureDP:
    """:math:`\\varepsilon`-DP under swaps (Durfee 2025, Def 4.1)."""
    check_domain(lower, upper)
    return _pure(epsilon)


@functools.partial(jax.jit, static_argnames=("pieces", "mechanism"))
def _count_release(key, count, epsilon, pieces, mechanism):
    from gpuprivacy.mechanisms._instance_optimal._piecewise_laplace import LocalBounds

    levels = jnp.arange(pieces + 1, dtype=jnp.float64)
    one = jnp.ones((), jnp.float64)
    bounds = LocalBounds(count + levels, jnp.maximum(count - levels, 0.0), one, one, jnp.asarray(jnp.inf),
                         jnp.zeros((), jnp.float64))
    value, center, j = _sample_kernel(key, bounds, epsilon, jnp.zeros((), jnp.float64), mechanism)
    return Release(value, PiecewiseLaplaceInfo(epsilon, center, j))


def piecewise_laplace_count(key: Key, count: Any, *, epsilon: float) -> Release:
    """A private count by PLM under add/remove neighbours (spec 001 §4.1, §6.5).

    :math:`U_l = c + l`, :math:`L_l = \\max(c-l, 0)`: PLM is exactly
    :math:`c + \\mathrm{Lap}(2/\\varepsilon)` truncated to :math:`[0, \\infty)`
    (the factor two of §4.1 again; sampled with the tail rule of spec §2.2).

    .. math:: \\pi(y) \\propto e^{-\\varepsilon |y - c| / 2}, \\quad y \\ge 0.

    Args:
      key: a single PRNG key.
      count: the exact count, a nonnegative integer.
      epsilon: privacy parameter.

    Returns:
      ``Release(value, PiecewiseLaplaceInfo)``, a float64 scalar >= 0.

    Privacy:
      :math:`\\varepsilon`-DP under add/remove (Thm 1). Idealized numerics.

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> float(io.piecewise_laplace_count(jax.random.key(0), 3, epsilon=1.0).value) >= 0
      True
    """
    return _count(key, count, epsilon, "piecewise_laplace")


def inverse_sensitivity_count(key: Key, count: Any, *, epsilon: float) -> Release:
    """A private count by INV (continuous setting) under add/remove (spec 001 §4.1, §6.5).

    .. math:: \\pi(y) \\propto e^{-\\varepsilon \\lceil |y - c| \\rceil / 2}, \\quad y \\ge 0.

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> float(io.inverse_sensitivity_count(jax.random.key(0), 3, epsilon=1.0).value) >= 0
      True
    """
    return _count(key, count, epsilon, "inverse_sensitivity")


def _count(key, count, epsilon, mechanism):
    require_x64(mechanism)
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    bounds = count_bounds(count)  # validates
    if bounds.upper.ndim != 1:
        raise ValueError(f"count must be a scalar, got shape {bounds.upper.shape[:-1]}. Use jax.vmap for batching.")
    return _count_release(key, bounds.upper[0], jnp.asarray(epsilon, jnp.float64), 0, mechanism)


def piecewise_laplace_count_guarantee(*, epsilon: float) -> PureDP:
    """:math:`\\varepsilon`-DP under add/remove (Durfee 2025, Thm 1)."""
    return _pure(epsilon)


def inverse_sensitivity_count_guarantee(*, epsilon: float) -> PureDP:
    """:math:`\\varepsilon`-DP under add/remove (Durfee 2025, Def 4.1)."""
    return _pure(epsilon)


def laplace_median(key: Key, data: Any, *, epsilon: float, lower: float, upper: float,
                   clip: bool = False) -> Release:
    """Baseline: median plus :math:`\\mathrm{Lap}(\\mathrm{GS}/\\varepsilon)`, GS = upper - lower (swap).

    The global-sensitivity Laplace mechanism of Dwork et al. (2006) on the
    median, clipped into the domain (post-processing). Used as the "plain
    Laplace" baseline in the seed-001 study.

    .. math:: M(x) = \\mathrm{clip}(\\mathrm{med}(x) + \\mathrm{Lap}((u - \\ell)/\\varepsilon), \\ell, u)

    Args:
      key: a single PRNG key.
      data: ``float64[n]`` values in the domain.
      epsilon: privacy parameter.
      lower, upper: public domain.
      clip: clip out-of-domain data instead of raising.

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> r = io.laplace_median(jax.random.key(0), [1.0, 2.0, 3.0], epsilon=1.0, lower=0.0, upper=4.0)
      >>> bool(0.0 <= float(r.value) <= 4.0)
      True
    """
    from gpuprivacy.mechanisms._classic._additive import LaplaceInfo
    require_x64("laplace_median")
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    lower, upper = check_domain(lower, upper)
    x = check_dataset(data, lower, upper, clip)
    value, med = _laplace_median(key, x, jnp.asarray(epsilon, jnp.float64), lower, upper)
    return Release(value, LaplaceInfo(jnp.asarray((upper - lower) / epsilon), med))


@jax.jit
def _laplace_median(key, x, epsilon, lower, upper):
    n = x.shape[0]
    med = jnp.sort(x)[(n + 1) // 2 - 1]
    noise = jax.random.laplace(key, (), jnp.float64)
    return jnp.clip(med + (upper - lower) / epsilon * noise, lower, upper), med


def laplace_median_guarantee(*, epsilon: float, lower: float = 0.0, upper: float = 1.0,
                             clip: bool = False) -> PureDP:
    """:math:`\\varepsilon`-DP (Dwork et al. 2006)."""
    check_domain(lower, upper)
    return _pure(epsilon)
