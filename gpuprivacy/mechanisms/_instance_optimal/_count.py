"""Piecewise Laplace and inverse sensitivity for a count (Durfee 2025, Sec. 4.1): the local bounds of a count are exact."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from gpuprivacy._checks import check_epsilon, check_key, check_noise_scale
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Key
from gpuprivacy.accounting import PureDP
from gpuprivacy.mechanisms._instance_optimal._dataset_checks import pure_guarantee
from gpuprivacy.mechanisms._instance_optimal._local_bounds_type import LocalBounds
from gpuprivacy.mechanisms._instance_optimal._piecewise_laplace import _sample_kernel, piecewise_release
from gpuprivacy.mechanisms._instance_optimal._statistic_bounds import count_bounds
from gpuprivacy.mechanisms._release import Release, stated_guarantee


@functools.partial(jax.jit, static_argnames=("pieces", "mechanism"))
def _count_release(key, count, epsilon, pieces, mechanism):
    levels = jnp.arange(pieces + 1, dtype=jnp.float64)
    one = jnp.ones((), jnp.float64)
    bounds = LocalBounds(count + levels, jnp.maximum(count - levels, 0.0), one, one, jnp.asarray(jnp.inf),
                         jnp.zeros((), jnp.float64))
    value, center, j = _sample_kernel(key, bounds, epsilon, jnp.zeros((), jnp.float64), mechanism)
    return piecewise_release(value, epsilon, center, j)


def piecewise_laplace_count(key: Key, count: Any, *, epsilon: float) -> Release:
    """A private count by PLM under add/remove neighbours (Durfee 2025, Def 3.1, Thm 1).

    :math:`U_l = c + l`, :math:`L_l = \\max(c-l, 0)`: PLM is exactly
    :math:`c + \\mathrm{Lap}(2/\\varepsilon)` truncated to :math:`[0, \\infty)`
    (the factor two of Durfee 2025, Sec. 4.1, again; the unbounded upper tail is
    sampled as one exponential, our exact tail rule for a finite global sensitivity).

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
    return _count(key, count, epsilon, "piecewise_laplace", piecewise_laplace_count_guarantee)


def inverse_sensitivity_count(key: Key, count: Any, *, epsilon: float) -> Release:
    """A private count by INV (continuous setting) under add/remove (Durfee 2025, Def 4.1).

    .. math:: \\pi(y) \\propto e^{-\\varepsilon \\lceil |y - c| \\rceil / 2}, \\quad y \\ge 0.

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> release = io.inverse_sensitivity_count(jax.random.key(0), 3, epsilon=1.0)
      >>> bool(release.value >= 0)
      True
    """
    return _count(key, count, epsilon, "inverse_sensitivity", inverse_sensitivity_count_guarantee)


def _count(key, count, epsilon, mechanism, guarantee_fn):
    require_x64(mechanism)
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    check_noise_scale(2.0, epsilon, what=mechanism + "_count")  # the tails fall as e^(-epsilon |y - c| / 2)
    bounds = count_bounds(count)  # validates
    if bounds.upper.ndim != 1:
        raise ValueError(f"count must be a scalar, got shape {bounds.upper.shape[:-1]}. Use jax.vmap for batching.")
    guarantee = stated_guarantee(guarantee_fn, epsilon=epsilon)
    release = _count_release(key, bounds.upper[0], jnp.asarray(epsilon, jnp.float64), 0, mechanism)
    return release._replace(guarantee=guarantee)  # static metadata, attached outside the jitted kernel


def piecewise_laplace_count_guarantee(*, epsilon: float) -> PureDP:
    """:math:`\\varepsilon`-DP under add/remove (Durfee 2025, Thm 1)."""
    return pure_guarantee(epsilon)


def inverse_sensitivity_count_guarantee(*, epsilon: float) -> PureDP:
    """:math:`\\varepsilon`-DP under add/remove (Durfee 2025, Def 4.1)."""
    return pure_guarantee(epsilon)
