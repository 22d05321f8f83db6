"""The local bounds :math:`U_l, L_l` that drive PLM and INV: the :class:`LocalBounds` type and its checks.

Durfee 2025, Secs. 3.1, 5: :func:`make_local_bounds` builds and checks user-supplied (certified)
bounds, :func:`check_bounds` checks the argument of a release, and
:func:`check_local_bounds_neighbours` property-tests condition (V2) on neighbouring pairs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_nonnegative, is_tracer
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Array


class LocalBounds(NamedTuple):
    """Local upper and lower bounds of a statistic (Durfee 2025, Sec. 3.1, Cor 3.1, Sec. 5).

    ``upper[l]`` and ``lower[l]`` are :math:`U_l = \\bar f(x; l)` and
    :math:`L_l = \\underline f(x; l)` for ``l = 0..K`` (``upper[0] = lower[0]
    = f(x)``). Beyond ``K`` the bounds follow a public rule (Durfee 2025, Sec. 5.2):

    .. math::
        U_l = \\min(U_K + (l - K)\\,\\text{upper\\_step},\\ \\text{upper\\_limit}), \\quad l > K,

    and symmetrically for ``lower``. ``upper_step = 0`` means the range of
    ``f`` ends at ``upper[K]``. Privacy needs the family to satisfy, for every pair of
    neighbours: (V0) ``U_0 = L_0``; (V1) ``U`` nondecreasing and ``L`` nonincreasing in ``l``; (V2)
    ``U_l(x) <= U_{l+1}(x')`` and ``L_l(x) >= L_{l+1}(x')`` (Durfee 2025, Cor 3.1; the Thm 1 proof uses
    only these, Sec. 5); the bound providers of
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


def make_local_bounds(upper: Any, lower: Any, *, upper_step: float = 0.0, lower_step: float = 0.0,
                      upper_limit: float = math.inf, lower_limit: float = -math.inf) -> LocalBounds:
    """Builds and checks :class:`LocalBounds` from user-supplied (certified) arrays.

    The arrays may have a leading batch axis. Checked: finite values,
    ``upper[..., 0] == lower[..., 0]``, monotone in ``l``, nonnegative steps,
    limits outside ``[lower[K], upper[K]]``. Whether the family is *valid*
    (condition (V2) of :class:`LocalBounds`) cannot be checked from one dataset;
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
                         "(Durfee 2025, Algorithm 1 needs a finite normaliser). Use upper_step/lower_step with a "
                         "global sensitivity instead.")
    if np.any(upper_np[..., 0] != lower_np[..., 0]):
        raise ValueError("upper[..., 0] must equal lower[..., 0] (both are f(x)); got "
                         f"{upper_np[..., 0]!r} and {lower_np[..., 0]!r}.")
    if np.any(np.diff(upper_np, axis=-1) < 0) or np.any(np.diff(lower_np, axis=-1) > 0):
        raise ValueError("upper must be nondecreasing and lower nonincreasing in l (condition (V1); "
                         "Durfee 2025, Sec. 3.1).")
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


def _check_smoothness(smoothness):
    return check_nonnegative("smoothness", smoothness)


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


def check_local_bounds_neighbours(bounds_fn: Callable[[Any], LocalBounds], pairs) -> list[tuple[int, int, str]]:
    """Property test of condition (V2) of :class:`LocalBounds` (Durfee 2025, Cor 3.1) on neighbouring pairs.

    For each ``(x, x')`` in ``pairs`` checks, in both directions and for every
    level (the tail rule included, 3 levels past K),
    :math:`U(x;l) \\le U(x';l+1)` and :math:`L(x;l) \\ge L(x';l+1)`.

    Returns:
      ``(pair index, level, side)`` for every violation (empty if none).

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> fn = lambda x: io.median_bounds(x, lower=0, upper=10)
      >>> io.check_local_bounds_neighbours(fn, [([1.0, 2.0, 3.0], [1.0, 2.0, 9.0])])
      []
    """
    violations = []
    for index, (x, x_prime) in enumerate(pairs):
        for first, second in ((x, x_prime), (x_prime, x)):
            b1, b2 = bounds_fn(first), bounds_fn(second)
            levels = max(np.shape(b1.upper)[-1], np.shape(b2.upper)[-1]) + 3
            for side, sign in (("upper", 1.0), ("lower", -1.0)):
                e1 = extended_bounds(b1, levels, side)
                e2 = extended_bounds(b2, levels + 1, side)
                bad = np.flatnonzero(sign * (e1 - e2[1:]) > 1e-12 * (1 + np.abs(e1)))
                violations.extend((index, int(level), side) for level in bad)
    return violations


def extended_bounds(bounds: LocalBounds, levels: int, side: str) -> np.ndarray:
    """``U_0..U_{levels-1}`` (or ``L``) with the tail rule of :class:`LocalBounds` applied past K."""
    if side == "upper":
        values, step, limit, sign = np.asarray(bounds.upper), float(bounds.upper_step), float(bounds.upper_limit), 1.0
    else:
        values, step, limit, sign = np.asarray(bounds.lower), float(bounds.lower_step), float(bounds.lower_limit), -1.0
    K = values.shape[0] - 1
    out = np.empty(levels)
    for level in range(levels):
        if level <= K:
            out[level] = values[level]
        else:
            moved = values[-1] + sign * step * (level - K)
            out[level] = min(moved, limit) if sign > 0 else max(moved, limit)
    return out
