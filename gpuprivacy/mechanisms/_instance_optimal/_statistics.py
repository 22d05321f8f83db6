"""PLM and INV for common statistics: median, quantiles, clipped mean, counts (Durfee 2025, Def 3.1, Def 4.1).

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

from gpuprivacy._checks import check_epsilon, check_key, check_noise_scale, check_probability
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Key
from gpuprivacy.accounting import PureDP
from gpuprivacy.mechanisms._instance_optimal._dataset_checks import (
    _max_pieces,
    pure_guarantee,
    check_dataset,
    check_domain,
    median_rank,
    quantile_rank,
    sort_rows,
)
from gpuprivacy.mechanisms._instance_optimal._piecewise_laplace import _sample_kernel, piecewise_release
from gpuprivacy.mechanisms._instance_optimal._statistic_bounds import (
    _clipped_mean_bounds,
    _order_statistic_bounds,
)
from gpuprivacy.mechanisms._release import Release, stated_guarantee


@functools.partial(jax.jit, static_argnames=("statistic", "rank", "pieces", "mechanism"))
def _statistic_release(key, data, epsilon, lower, upper, statistic, rank, pieces, mechanism):
    x = sort_rows(data)
    if statistic == "order":
        bounds = _order_statistic_bounds(x, lower, upper, rank, pieces)
    else:
        bounds = _clipped_mean_bounds(x, lower, upper)
    value, center, j = _sample_kernel(key, bounds, epsilon, jnp.zeros((), jnp.float64), mechanism)
    return piecewise_release(value, epsilon, center, j)


def _levels_that_move(n: int, rank: int) -> int:
    """Levels ``K`` of the rank-``rank`` order statistic's local bounds with every piece of positive length.

    ``U_l = x_(rank + l)`` reaches ``upper`` at ``l = n - rank + 1`` and ``L_l = x_(rank - l)`` reaches ``lower``
    at ``l = rank``; every piece past ``max(rank, n - rank + 1)`` has length 0, mass 0, and is never drawn. So
    ``K`` one past that level gives the law of ``K = n + 1`` (the exact bounds, Durfee 2025, Sec. 3.1) with
    about half the pieces for a median: the sampler's work is linear in the pieces.
    """
    return min(n + 1, max(rank, n - rank + 1) + 1)


def _run(key, data, epsilon, lower, upper, clip, statistic, mechanism, guarantee_fn, *, quantile=None,
         median=False, max_pieces=None):
    require_x64(mechanism)
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    check_noise_scale(2.0, epsilon, what=mechanism)  # the pieces' masses fall as e^(-epsilon l / 2)
    lower, upper = check_domain(lower, upper)
    x = check_dataset(data, lower, upper, clip)
    n = x.shape[0]
    rank = 0
    pieces = 0
    if statistic == "order":
        rank = median_rank(n) if median else quantile_rank(quantile, n)
        pieces = _max_pieces(max_pieces, n) if max_pieces is not None else _levels_that_move(n, rank)
    # The calling mechanism's own *_guarantee, with its own keywords (a quantile function also takes quantile).
    params = dict(epsilon=epsilon, lower=lower, upper=upper, clip=clip)
    if quantile is not None:
        params["quantile"] = quantile
    guarantee = stated_guarantee(guarantee_fn, **params)
    release = _statistic_release(key, x, jnp.asarray(epsilon, jnp.float64), jnp.asarray(lower, jnp.float64),
                                 jnp.asarray(upper, jnp.float64), statistic, rank, pieces, mechanism)
    return release._replace(guarantee=guarantee)  # static metadata, attached outside the jitted kernel


def piecewise_laplace_median(key: Key, data: Any, *, epsilon: float, lower: float, upper: float,
                             clip: bool = False) -> Release:
    """Private median by the piecewise Laplace mechanism (Durfee 2025, Def 3.1, Alg 1, Thm 1).

    Swap neighbours, ``n`` public, data in the public domain
    ``[lower, upper]``. The local bounds of the median are exact closed forms
    from the sorted data (:math:`U_l = x_{(m+l)}`, :math:`L_l = x_{(m-l)}`, ``m = (n+1)//2``); the release is
    sampled exactly by Algorithm 1 of the paper (the piece by log-space inverse CDF,
    then a truncated exponential inside it).

    .. math::
        \\pi(y) \\propto \\exp\\big(-\\tfrac{\\varepsilon}{2}\\big(l + \\tfrac{y - U_{l-1}}{U_l - U_{l-1}}\\big)\\big),\\ y \\in (U_{l-1}, U_l]

    Args:
      key: a single PRNG key.
      data: ``float64[n]`` unsorted values in ``[lower, upper]``.
      epsilon: privacy parameter, finite and > 0.
      lower, upper: the public domain, ``lower < upper``.
      clip: clip out-of-domain values into the domain instead of raising.

    Returns:
      ``Release(value, PiecewiseLaplaceInfo)``; ``value`` is the private
      median, a float64 scalar in ``[lower, upper]``.

    Raises:
      ValueError: ``lower >= upper``, NaN/inf in data, data outside the domain
        (unless ``clip=True``), ``epsilon <= 0``, a batch of keys.

    Privacy:
      :math:`\\varepsilon`-DP under swaps (Durfee 2025, Thm 1). Idealized numerics.
      In the worst case (all pieces of equal length) the median release is
      Laplace at epsilon/2 (Durfee 2025, Sec. 4.1): at equal epsilon plain
      Laplace can then be better.
      Data checks run at this boundary; under ``jit``/``vmap`` (where they are
      skipped) data are clipped into the domain and the kernel is total: it
      never raises (NaN data, rejected by the checks, give an unspecified
      release).

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> r = io.piecewise_laplace_median(jax.random.key(0), [0.5, 1, 2, 4.5, 5, 5.2, 7, 9, 9.5], epsilon=1.0, lower=0.0, upper=10.0)
      >>> bool(0.0 <= float(r.value) <= 10.0)
      True

    References:
      Durfee, `Unifying Laplace Mechanism with Instance Optimality in
      Differential Privacy <https://arxiv.org/abs/2505.02798>`_, 2025, Thm 1;
      Asi & Duchi, NeurIPS 2020 (inverse sensitivity).
    """
    return _run(key, data, epsilon, lower, upper, clip, "order",
                "piecewise_laplace", piecewise_laplace_median_guarantee, median=True)


def inverse_sensitivity_median(key: Key, data: Any, *, epsilon: float, lower: float, upper: float,
                               clip: bool = False) -> Release:
    """Private median by the inverse sensitivity mechanism (Durfee 2025, Def 4.1).

    Swap neighbours, ``n`` public, data in the public domain
    ``[lower, upper]``. The local bounds of the median are exact closed forms
    from the sorted data (:math:`U_l = x_{(m+l)}`, :math:`L_l = x_{(m-l)}`, ``m = (n+1)//2``); the release is
    Step 1 of Algorithm 1 of the paper (the piece) followed by a uniform
    draw inside the piece (the continuous inverse sensitivity mechanism).

    .. math::
        \\pi(y) \\propto \\exp(-\\tfrac{\\varepsilon}{2}\\,\\ell(y; x))

    It takes the same arguments, returns the same ``Release(value, PiecewiseLaplaceInfo)`` and
    raises the same errors as :func:`piecewise_laplace_median`; only the draw inside the chosen
    piece differs (uniform instead of a truncated exponential).

    Privacy:
      :math:`\\varepsilon`-DP under swaps (Durfee 2025, Def 4.1; Asi & Duchi
      2020). Idealized numerics. In the worst case (all pieces of equal
      length) the median release is as noisy as Laplace at epsilon/2.
      Data checks run at this boundary; under ``jit``/``vmap`` (where they are
      skipped) data are clipped into the domain and the kernel is total: it
      never raises (NaN data, rejected by the checks, give an unspecified
      release).

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> r = io.inverse_sensitivity_median(jax.random.key(0), [0.5, 1, 2, 4.5, 5, 5.2, 7, 9, 9.5], epsilon=1.0, lower=0.0, upper=10.0)
      >>> bool(0.0 <= float(r.value) <= 10.0)
      True

    References:
      Durfee, `Unifying Laplace Mechanism with Instance Optimality in
      Differential Privacy <https://arxiv.org/abs/2505.02798>`_, 2025, Def 4.1;
      Asi & Duchi, NeurIPS 2020 (inverse sensitivity).
    """
    return _run(key, data, epsilon, lower, upper, clip, "order",
                "inverse_sensitivity", inverse_sensitivity_median_guarantee, median=True)


def piecewise_laplace_quantile(key: Key, data: Any, *, quantile: float, epsilon: float, lower: float, upper: float,
                               clip: bool = False) -> Release:
    """Private quantile by the piecewise Laplace mechanism (Durfee 2025, Def 3.1, Alg 1).

    Swap neighbours, ``n`` public, data in the public domain
    ``[lower, upper]``. The local bounds of the quantile are exact closed forms
    from the sorted data (:math:`U_l = x_{(r+l)}`, :math:`L_l = x_{(r-l)}`, ``r = max(1, ceil(quantile * n))``); the release is
    sampled exactly by Algorithm 1 of the paper (the piece by log-space inverse CDF,
    then a truncated exponential inside it).

    .. math::
        \\pi(y) \\propto \\exp\\big(-\\tfrac{\\varepsilon}{2}\\big(l + \\tfrac{y - U_{l-1}}{U_l - U_{l-1}}\\big)\\big),\\ y \\in (U_{l-1}, U_l]

    Args:
      key: a single PRNG key.
      data: ``float64[n]`` unsorted values in ``[lower, upper]``.
      epsilon: privacy parameter, finite and > 0.
      lower, upper: the public domain, ``lower < upper``.
      quantile: in [0, 1]; the rank is ``max(1, ceil(quantile * n))``.
      clip: clip out-of-domain values into the domain instead of raising.

    Returns:
      ``Release(value, PiecewiseLaplaceInfo)``; ``value`` is the private
      quantile, a float64 scalar in ``[lower, upper]``.

    Raises and Privacy:
      as :func:`piecewise_laplace_median`: the same validation at the boundary, the same
      :math:`\\varepsilon`-DP under swaps (Durfee 2025, Thm 1; idealized numerics), the same worst
      case (Laplace at epsilon/2) and the same total kernel under ``jit``/``vmap``.

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> r = io.piecewise_laplace_quantile(jax.random.key(0), [0.5, 1, 2, 4.5, 5, 5.2, 7, 9, 9.5], quantile=0.25, epsilon=1.0, lower=0.0, upper=10.0)
      >>> bool(0.0 <= float(r.value) <= 10.0)
      True

    References:
      Durfee, `Unifying Laplace Mechanism with Instance Optimality in
      Differential Privacy <https://arxiv.org/abs/2505.02798>`_, 2025, Thm 1;
      Asi & Duchi, NeurIPS 2020 (inverse sensitivity).
    """
    return _run(key, data, epsilon, lower, upper, clip, "order",
                "piecewise_laplace", piecewise_laplace_quantile_guarantee, quantile=quantile)


def inverse_sensitivity_quantile(key: Key, data: Any, *, quantile: float, epsilon: float, lower: float,
                                 upper: float, clip: bool = False) -> Release:
    """Private quantile by the inverse sensitivity mechanism (Durfee 2025, Def 4.1).

    Swap neighbours, ``n`` public, data in the public domain
    ``[lower, upper]``. The local bounds of the quantile are exact closed forms
    from the sorted data (:math:`U_l = x_{(r+l)}`, :math:`L_l = x_{(r-l)}`, ``r = max(1, ceil(quantile * n))``); the release is
    Step 1 of Algorithm 1 of the paper (the piece) followed by a uniform
    draw inside the piece (the continuous inverse sensitivity mechanism).

    .. math::
        \\pi(y) \\propto \\exp(-\\tfrac{\\varepsilon}{2}\\,\\ell(y; x))

    It takes the same arguments, returns the same ``Release(value, PiecewiseLaplaceInfo)`` and
    raises the same errors as :func:`piecewise_laplace_quantile`; only the draw inside the chosen
    piece differs (uniform instead of a truncated exponential).

    Privacy:
      :math:`\\varepsilon`-DP under swaps (Durfee 2025, Def 4.1; Asi & Duchi
      2020). Idealized numerics. In the worst case (all pieces of equal
      length) the quantile release is as noisy as Laplace at epsilon/2.
      Data checks run at this boundary; under ``jit``/``vmap`` (where they are
      skipped) data are clipped into the domain and the kernel is total: it
      never raises (NaN data, rejected by the checks, give an unspecified
      release).

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> r = io.inverse_sensitivity_quantile(jax.random.key(0), [0.5, 1, 2, 4.5, 5, 5.2, 7, 9, 9.5], quantile=0.25, epsilon=1.0, lower=0.0, upper=10.0)
      >>> bool(0.0 <= float(r.value) <= 10.0)
      True

    References:
      Durfee, `Unifying Laplace Mechanism with Instance Optimality in
      Differential Privacy <https://arxiv.org/abs/2505.02798>`_, 2025, Def 4.1;
      Asi & Duchi, NeurIPS 2020 (inverse sensitivity).
    """
    return _run(key, data, epsilon, lower, upper, clip, "order",
                "inverse_sensitivity", inverse_sensitivity_quantile_guarantee, quantile=quantile)


def piecewise_laplace_clipped_mean(key: Key, data: Any, *, epsilon: float, lower: float, upper: float,
                                   clip: bool = False) -> Release:
    """Private bounded (clipped) mean by the piecewise Laplace mechanism (Durfee 2025, Def 3.1, Alg 1).

    Swap neighbours, ``n`` public, data in the public domain
    ``[lower, upper]``. The local bounds of the clipped mean are exact closed forms
    from the sorted data (:math:`U_l = \\bar x + \\sum_{i \\le l}(\\text{upper} - x_{(i)})/n`, :math:`L_l = \\bar x - \\sum_{i \\le l}(x_{(n+1-i)} - \\text{lower})/n`); the release is
    sampled exactly by Algorithm 1 of the paper (the piece by log-space inverse CDF,
    then a truncated exponential inside it).

    .. math::
        \\pi(y) \\propto \\exp\\big(-\\tfrac{\\varepsilon}{2}\\big(l + \\tfrac{y - U_{l-1}}{U_l - U_{l-1}}\\big)\\big),\\ y \\in (U_{l-1}, U_l]

    Args:
      key: a single PRNG key.
      data: ``float64[n]`` unsorted values in ``[lower, upper]``.
      epsilon: privacy parameter, finite and > 0.
      lower, upper: the public domain, ``lower < upper``.
      clip: clip out-of-domain values into the domain instead of raising.

    Returns:
      ``Release(value, PiecewiseLaplaceInfo)``; ``value`` is the private
      clipped mean, a float64 scalar in ``[lower, upper]``.

    Raises and Privacy:
      as :func:`piecewise_laplace_median`: the same validation at the boundary, the same
      :math:`\\varepsilon`-DP under swaps (Durfee 2025, Thm 1; idealized numerics), the same worst
      case (Laplace at epsilon/2) and the same total kernel under ``jit``/``vmap``.

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> r = io.piecewise_laplace_clipped_mean(jax.random.key(0), [0.5, 1, 2, 4.5, 5, 5.2, 7, 9, 9.5], epsilon=1.0, lower=0.0, upper=10.0)
      >>> bool(0.0 <= float(r.value) <= 10.0)
      True

    References:
      Durfee, `Unifying Laplace Mechanism with Instance Optimality in
      Differential Privacy <https://arxiv.org/abs/2505.02798>`_, 2025, Thm 1;
      Asi & Duchi, NeurIPS 2020 (inverse sensitivity).
    """
    return _run(key, data, epsilon, lower, upper, clip, "mean",
                "piecewise_laplace", piecewise_laplace_clipped_mean_guarantee)


def inverse_sensitivity_clipped_mean(key: Key, data: Any, *, epsilon: float, lower: float, upper: float,
                                     clip: bool = False) -> Release:
    """Private bounded (clipped) mean by the inverse sensitivity mechanism (Durfee 2025, Def 4.1).

    Swap neighbours, ``n`` public, data in the public domain
    ``[lower, upper]``. The local bounds of the clipped mean are exact closed forms
    from the sorted data (:math:`U_l = \\bar x + \\sum_{i \\le l}(\\text{upper} - x_{(i)})/n`, :math:`L_l = \\bar x - \\sum_{i \\le l}(x_{(n+1-i)} - \\text{lower})/n`); the release is
    Step 1 of Algorithm 1 of the paper (the piece) followed by a uniform
    draw inside the piece (the continuous inverse sensitivity mechanism).

    .. math::
        \\pi(y) \\propto \\exp(-\\tfrac{\\varepsilon}{2}\\,\\ell(y; x))

    It takes the same arguments, returns the same ``Release(value, PiecewiseLaplaceInfo)`` and
    raises the same errors as :func:`piecewise_laplace_clipped_mean`; only the draw inside the chosen
    piece differs (uniform instead of a truncated exponential).

    Privacy:
      :math:`\\varepsilon`-DP under swaps (Durfee 2025, Def 4.1; Asi & Duchi
      2020). Idealized numerics. In the worst case (all pieces of equal
      length) the clipped mean release is as noisy as Laplace at epsilon/2.
      Data checks run at this boundary; under ``jit``/``vmap`` (where they are
      skipped) data are clipped into the domain and the kernel is total: it
      never raises (NaN data, rejected by the checks, give an unspecified
      release).

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> r = io.inverse_sensitivity_clipped_mean(jax.random.key(0), [0.5, 1, 2, 4.5, 5, 5.2, 7, 9, 9.5], epsilon=1.0, lower=0.0, upper=10.0)
      >>> bool(0.0 <= float(r.value) <= 10.0)
      True

    References:
      Durfee, `Unifying Laplace Mechanism with Instance Optimality in
      Differential Privacy <https://arxiv.org/abs/2505.02798>`_, 2025, Def 4.1;
      Asi & Duchi, NeurIPS 2020 (inverse sensitivity).
    """
    return _run(key, data, epsilon, lower, upper, clip, "mean",
                "inverse_sensitivity", inverse_sensitivity_clipped_mean_guarantee)


def piecewise_laplace_median_guarantee(*, epsilon: float, lower: float, upper: float,
                                       clip: bool = False) -> PureDP:
    """:math:`\\varepsilon`-DP under swaps (Durfee 2025, Thm 1)."""
    return pure_guarantee(epsilon, lower, upper, clip)


def inverse_sensitivity_median_guarantee(*, epsilon: float, lower: float, upper: float,
                                         clip: bool = False) -> PureDP:
    """:math:`\\varepsilon`-DP under swaps (Durfee 2025, Def 4.1)."""
    return pure_guarantee(epsilon, lower, upper, clip)


def piecewise_laplace_quantile_guarantee(*, quantile: float, epsilon: float, lower: float, upper: float,
                                         clip: bool = False) -> PureDP:
    """:math:`\\varepsilon`-DP under swaps (Durfee 2025, Thm 1)."""
    check_probability("quantile", quantile, open_interval=False)
    return pure_guarantee(epsilon, lower, upper, clip)


def inverse_sensitivity_quantile_guarantee(*, quantile: float, epsilon: float, lower: float, upper: float,
                                           clip: bool = False) -> PureDP:
    """:math:`\\varepsilon`-DP under swaps (Durfee 2025, Def 4.1)."""
    check_probability("quantile", quantile, open_interval=False)
    return pure_guarantee(epsilon, lower, upper, clip)


def piecewise_laplace_clipped_mean_guarantee(*, epsilon: float, lower: float, upper: float,
                                             clip: bool = False) -> PureDP:
    """:math:`\\varepsilon`-DP under swaps (Durfee 2025, Thm 1)."""
    return pure_guarantee(epsilon, lower, upper, clip)


def inverse_sensitivity_clipped_mean_guarantee(*, epsilon: float, lower: float, upper: float,
                                               clip: bool = False) -> PureDP:
    """:math:`\\varepsilon`-DP under swaps (Durfee 2025, Def 4.1)."""
    return pure_guarantee(epsilon, lower, upper, clip)
