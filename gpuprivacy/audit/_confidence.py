"""Exact binomial confidence bounds (Clopper & Pearson 1934), vectorised.

The bounds are the Beta quantiles

.. math:: p_{\\text{lower}} = B^{-1}(\\alpha;\\, k, n - k + 1), \\qquad
          p_{\\text{upper}} = B^{-1}(1 - \\alpha;\\, k + 1, n - k),

found by bisection on JAX's regularised incomplete beta function in
float64, then moved outward by a relative 1e-6, far more than the float error of
``betainc`` (about 1e-8 relative at n = 10^7), so the intervals can only be
wider than the exact ones, never narrower.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

_BISECTION_STEPS = 64
_SAFETY = 1e-6


@jax.jit
def _beta_quantile(a, b, target):
    # Smallest x with I_x(a, b) >= target; I is increasing in x.
    def body(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        above = jax.scipy.special.betainc(a, b, mid) >= target
        return jnp.where(above, lo, mid), jnp.where(above, mid, hi)

    lo, hi = jax.lax.fori_loop(0, _BISECTION_STEPS, body, (jnp.zeros_like(a), jnp.ones_like(a)))
    return lo, hi


def clopper_pearson(successes, trials, alpha):
    """One-sided Clopper-Pearson bounds, each holding with probability >= 1 - alpha.

    Args:
      successes: int array k (0 <= k <= n).
      trials: int n (scalar or array broadcastable with k), n >= 1.
      alpha: the one-sided error level of EACH bound, in (0, 1).

    Returns:
      ``(lower, upper)`` float64 arrays: ``P[p < lower] <= alpha`` and
      ``P[p > upper] <= alpha``.
    """
    k = np.asarray(successes, dtype=np.float64)
    n = np.broadcast_to(np.asarray(trials, dtype=np.float64), k.shape)
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise ValueError("clopper_pearson needs 0 <= successes <= trials and trials >= 1.")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}.")
    with jax.numpy_dtype_promotion("standard"):
        # lower: I_x(k, n-k+1) = alpha  (defined for k >= 1; 0 when k = 0)
        a_lo = np.maximum(k, 1.0)
        lo_lo, _ = _beta_quantile(jnp.asarray(a_lo), jnp.asarray(n - k + 1.0), jnp.asarray(alpha, jnp.float64))
        # upper: I_x(k+1, n-k) = 1 - alpha  (defined for k <= n-1; 1 when k = n)
        b_up = np.maximum(n - k, 1.0)
        _, hi_up = _beta_quantile(jnp.asarray(k + 1.0), jnp.asarray(b_up), jnp.asarray(1.0 - alpha, jnp.float64))
    lower = np.where(k == 0, 0.0, np.asarray(lo_lo) * (1.0 - _SAFETY))
    upper = np.where(k == n, 1.0, np.minimum(1.0, np.asarray(hi_up) * (1.0 + _SAFETY)))
    return lower, upper
