"""Smooth-sensitivity baselines for the median (Nissim, Raskhodnikova & Smith 2007).

.. math::
    S^*_\\beta(x) = \\max_{k \\ge 0} e^{-k\\beta} A^{(k)}(x), \\qquad
    A^{(k)}(x) = \\max_{t = 0..k+1} \\big(x_{(m+t)} - x_{(m+t-k-1)}\\big),

with :math:`x_{(0)} = \\ell`, :math:`x_{(n+1)} = u` (NRS07 §3.1, the median).
Release :math:`f(x) + (S^*_\\beta(x)/\\alpha) Z` with an
:math:`(\\alpha,\\beta)`-admissible ``Z`` (NRS07 Def 2.5, Lemma 2.6):

* ``noise="cauchy"``: :math:`h(z) \\propto 1/(1+z^2)`,
  :math:`\\alpha = \\beta = \\varepsilon/6` (pure :math:`\\varepsilon`-DP).
  Check of the constants [NRS07 Def 2.5, split :math:`\\varepsilon/2` +
  :math:`\\varepsilon/2`]: *sliding*,
  :math:`|\\tfrac{d}{dz}\\log(1+z^2)| = 2|z|/(1+z^2) \\le 1`, so a shift by
  :math:`\\alpha = \\varepsilon/6` costs at most :math:`\\varepsilon/6 \\le
  \\varepsilon/2`; *dilation*, :math:`h(z)/(e^{-\\lambda}h(e^{-\\lambda}z)) =
  e^{\\lambda}(1+e^{-2\\lambda}z^2)/(1+z^2) \\le e^{3|\\lambda|} =
  e^{\\varepsilon/2}` for :math:`|\\lambda| \\le \\beta = \\varepsilon/6`.
* ``noise="laplace"``: :math:`\\alpha = \\varepsilon/2`,
  :math:`\\beta = \\varepsilon/(2\\ln(2/\\delta))`, (epsilon, delta)-DP
  (NRS07 Lemma 2.9).

Truncation at a public ``K`` stays a valid smooth bound (an early
stop, made public): :math:`\\max(\\max_{k \\le K} e^{-k\\beta}A^{(k)},\\
e^{-(K+1)\\beta}\\,\\mathrm{GS})` is :math:`\\beta`-smooth and at least
:math:`S^*_\\beta` since :math:`A^{(k)} \\le \\mathrm{GS} = u - \\ell`.

Computation (the exact searches, their floating point and their dispatch):
:mod:`._smooth_pairs`, :mod:`._smooth_searches`, :mod:`._smooth_blocked`,
:mod:`._smooth_kernel`; the quadratic reference: :mod:`._smooth_definition`.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gpuprivacy import _threefry as threefry
from gpuprivacy._checks import (CAUCHY_TAIL, LAPLACE_TAIL, check_delta, check_epsilon, check_int, check_key,
                                check_noise_scale, epsilon_ok)
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Key
from gpuprivacy.accounting import ApproxDP, PureDP
from gpuprivacy.mechanisms._common import check_bool, check_choice
from gpuprivacy.mechanisms._instance_optimal._dataset_checks import check_dataset, check_domain, median_rank, sort_rows
from gpuprivacy.mechanisms._release import Release, stated_guarantee, withheld_unless

# Re-exported: the searches and the kernel's internals, as tests and experiments reach them here. The
# constants are copies: a test that patches one patches it in its own module (_smooth_kernel, _smooth_pairs).
from gpuprivacy.mechanisms._instance_optimal._smooth_blocked import _blocked_search as _blocked_search
from gpuprivacy.mechanisms._instance_optimal._smooth_definition import (
    smooth_sensitivity_by_definition as smooth_sensitivity_by_definition)
from gpuprivacy.mechanisms._instance_optimal._smooth_kernel import _CPU_CHUNK_VALUES as _CPU_CHUNK_VALUES
from gpuprivacy.mechanisms._instance_optimal._smooth_kernel import _LARGEST_GAPS_PAIRS as _LARGEST_GAPS_PAIRS
from gpuprivacy.mechanisms._instance_optimal._smooth_kernel import _median_smooth_sensitivity
from gpuprivacy.mechanisms._instance_optimal._smooth_kernel import takes_largest_gaps as takes_largest_gaps
from gpuprivacy.mechanisms._instance_optimal._smooth_pairs import _NEAR_TIE as _NEAR_TIE
from gpuprivacy.mechanisms._instance_optimal._smooth_searches import _by_largest_gaps as _by_largest_gaps
from gpuprivacy.mechanisms._instance_optimal._smooth_searches import _divide_and_conquer as _divide_and_conquer

SMOOTH_NOISES = ("cauchy", "laplace")


class SmoothSensitivityInfo(NamedTuple):
    """Side information of :func:`smooth_sensitivity_median`.

    Attributes:
      beta: the smoothing parameter (public).
      nonprivate_smooth_sensitivity: :math:`S^*_\\beta(x)` (NOT private).
      nonprivate_scale: the noise scale :math:`S^*/\\alpha` (NOT private).
      nonprivate_value: the exact median (NOT private).
      valid: False when a traced epsilon was invalid; the release is then NaN (fail closed).
    """

    beta: jax.Array
    nonprivate_smooth_sensitivity: jax.Array
    nonprivate_scale: jax.Array
    nonprivate_value: jax.Array
    valid: jax.Array = True


def smooth_parameters(epsilon: float, noise: str, delta: float | None) -> tuple[float, float]:
    """``(alpha, beta)`` of the admissible noise that ``smooth_sensitivity_median`` calibrates with (NRS07 Def 2.5):
    Cauchy noise ``(epsilon/6, epsilon/6)`` (pure DP), Laplace noise ``(epsilon/2, epsilon/(2 ln(2/delta)))``
    (Lemma 2.9). The release is ``median + (S*_beta / alpha) Z``."""
    if noise == "cauchy":
        return epsilon / 6.0, epsilon / 6.0
    return epsilon / 2.0, epsilon / (2.0 * math.log(2.0 / delta))


def median_smooth_sensitivity(data: Any, *, beta: float, lower: float, upper: float, clip: bool = False,
                              max_distance: int | None = None) -> jax.Array:
    """:math:`S^*_\\beta(x)` of the median under swaps (NRS07 §3.1).

    Computed in O(n log n) time and O(n) memory by an exact search that
    returns the definition's maximum of float64 products (:mod:`._smooth_kernel`):
    on the CPU, for n up to 5789 (or a small ``max_distance``), from the
    largest gap at each distance, past that by a blocked search; on
    accelerators by a divide and conquer.

    Args:
      data: ``float64[n]`` in ``[lower, upper]``.
      beta: smoothing parameter > 0.
      lower, upper: the public domain.
      clip: clip out-of-domain data instead of raising.
      max_distance: public truncation ``K`` (default ``n``); a valid upper
        bound either way (module docstring).

    Returns:
      A float64 scalar.

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> x = [0.5, 1, 2, 4.5, 5, 5.2, 7, 9, 9.5]
      >>> round(float(io.median_smooth_sensitivity(x, beta=1/6, lower=0, upper=10)), 6)
      3.59392
    """
    require_x64("median_smooth_sensitivity")
    beta = check_epsilon(beta, "beta")
    lower, upper = check_domain(lower, upper)
    x = check_dataset(data, lower, upper, clip)
    n = x.shape[0]
    K = n if max_distance is None else check_int("max_distance", max_distance, minimum=0)
    return _median_smooth_sensitivity(sort_rows(x), jnp.asarray(beta, jnp.float64), lower, upper, median_rank(n), K)[0]


@functools.partial(jax.jit, static_argnames=("rank", "max_distance", "noise"))
def _smooth_release(key, x, alpha, beta, lower, upper, rank, max_distance, noise):
    smooth, median = _median_smooth_sensitivity(sort_rows(x), beta, lower, upper, rank, max_distance)
    if noise == "cauchy":
        z = jax.random.cauchy(key, (), jnp.float64)
    else:
        z = threefry.laplace(key, (), jnp.float64)
    scale = smooth / alpha
    return Release(median + scale * z, SmoothSensitivityInfo(beta, smooth, scale, median))


def _check_noise_delta(noise, delta):
    noise = check_choice("noise", noise, SMOOTH_NOISES)
    if noise == "laplace":
        if delta is None:
            raise ValueError("noise='laplace' gives (epsilon, delta)-DP and needs delta (e.g. delta=1e-6); "
                             "noise='cauchy' is pure epsilon-DP and takes no delta.")
        delta = check_delta(delta)
    elif delta is not None:
        raise ValueError(f"noise='cauchy' is pure epsilon-DP and takes no delta, got delta={delta!r}. Pass "
                         "delta=None, or noise='laplace' for the (epsilon, delta) version.")
    return noise, delta


def smooth_sensitivity_median(key: Key, data: Any, *, epsilon: float, lower: float, upper: float,
                              clip: bool = False, noise: str = "cauchy", delta: float | None = None,
                              max_distance: int | None = None) -> Release:
    """The smooth-sensitivity median (Nissim, Raskhodnikova & Smith 2007, §3.1, Lemmas 2.6, 2.9).

    .. math::
        M(x) = \\mathrm{med}(x) + \\frac{S^*_\\beta(x)}{\\alpha} Z,

    ``noise="cauchy"``: :math:`Z` standard Cauchy, :math:`\\alpha = \\beta =
    \\varepsilon/6`, pure :math:`\\varepsilon`-DP (scale
    :math:`6 S^*_{\\varepsilon/6}/\\varepsilon`). ``noise="laplace"``:
    :math:`Z \\sim \\mathrm{Lap}(1)`, :math:`\\alpha = \\varepsilon/2`,
    :math:`\\beta = \\varepsilon/(2\\ln(2/\\delta))`,
    :math:`(\\varepsilon, \\delta)`-DP. Swap neighbours, n public, median
    rank ``(n+1)//2``. The output is not clipped (clipping to the domain is
    allowed post-processing; callers may do it).

    Args:
      key: a single PRNG key.
      data: ``float64[n]`` unsorted values in ``[lower, upper]``.
      epsilon: privacy parameter.
      lower, upper: the public domain.
      clip: clamp rows outside ``[lower, upper]`` to it instead of raising.
      noise: "cauchy" (pure DP) or "laplace" (approximate DP).
      delta: required for ``noise="laplace"``, must be None for Cauchy.
      max_distance: public truncation of the max over k (default n).

    Returns:
      ``Release(value, SmoothSensitivityInfo, guarantee)``, the guarantee that of
      :func:`smooth_sensitivity_median_guarantee` for the same parameters.

    Raises:
      ValueError: bad domain, data, epsilon, delta or noise.

    Privacy:
      See above; Cauchy constants checked in the module docstring.
      Idealized numerics.

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> r = io.smooth_sensitivity_median(jax.random.key(0), [1.0, 2.0, 3.0], epsilon=1.0, lower=0, upper=4)
      >>> r.value.dtype
      dtype('float64')

    References:
      Nissim, Raskhodnikova & Smith, `Smooth Sensitivity and Sampling in
      Private Data Analysis <https://doi.org/10.1145/1250790.1250803>`_, STOC 2007.
    """
    require_x64("smooth_sensitivity_median")
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    noise, delta = _check_noise_delta(noise, delta)
    lower, upper = check_domain(lower, upper)
    x = check_dataset(data, lower, upper, clip)
    n = x.shape[0]
    K = n if max_distance is None else check_int("max_distance", max_distance, minimum=0)
    guarantee = stated_guarantee(smooth_sensitivity_median_guarantee, epsilon=epsilon, lower=lower, upper=upper,
                                 clip=clip, noise=noise, delta=delta,
                                 max_distance=None if max_distance is None else K)
    alpha, beta = smooth_parameters(epsilon, noise, delta)
    # The noise is (smooth sensitivity <= upper - lower) / alpha times a Cauchy-like or Laplace draw.
    check_noise_scale((upper - lower) / smooth_parameters(1.0, noise, delta)[0], epsilon,
                      what="smooth_sensitivity_median",
                      tail=CAUCHY_TAIL if noise == "cauchy" else LAPLACE_TAIL)
    release = _smooth_release(key, x, jnp.asarray(alpha, jnp.float64), jnp.asarray(beta, jnp.float64),
                              jnp.asarray(lower, jnp.float64), jnp.asarray(upper, jnp.float64), median_rank(n), K,
                              noise)
    release = Release(release.value, release.info, guarantee)
    return withheld_unless(release, epsilon_ok(epsilon))  # a traced epsilon skipped the eager check


def smooth_sensitivity_median_guarantee(*, epsilon: float, lower: float, upper: float, clip: bool = False,
                                        noise: str = "cauchy", delta: float | None = None,
                                        max_distance: int | None = None) -> PureDP | ApproxDP:
    """``PureDP(epsilon)`` for Cauchy noise, ``ApproxDP(epsilon, delta)`` for Laplace (NRS07 Lemmas 2.6, 2.9).

    Takes exactly the mechanism's parameters (``guarantee(**params)``); ``lower``/``upper`` are
    required, as for the mechanism, and validated.
    """
    epsilon = check_epsilon(epsilon)
    noise, delta = _check_noise_delta(noise, delta)
    check_domain(lower, upper)
    check_bool("clip", clip)
    if max_distance is not None:
        check_int("max_distance", max_distance, minimum=0)
    return PureDP(epsilon) if noise == "cauchy" else ApproxDP(epsilon, delta)
