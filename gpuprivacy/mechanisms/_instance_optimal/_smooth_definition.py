"""The median's smooth sensitivity straight from its definition (Nissim, Raskhodnikova & Smith 2007, §3.1),
the quadratic reference the exact searches are tested and benchmarked against."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def smooth_sensitivity_by_definition(sorted_data, beta, lower, upper, rank: int, max_distance: int):
    """:math:`S^*_\\beta` straight from its definition in O(n K) (NRS07 §3.1): the largest gap at each
    distance k, weighted by :math:`e^{-k\\beta}`, and the tail bound :math:`e^{-(K+1)\\beta}(u - \\ell)`.

    Not used by any release (the searches of :mod:`._smooth_kernel` are); kept as the reference that search is
    tested against and benchmarked against. ``sorted_data`` [n] sorted, ``rank`` the 1-based median rank.
    """
    n = sorted_data.shape[0]
    padded = jnp.concatenate([jnp.full(1, lower), sorted_data, jnp.full(1, upper)])
    t = jnp.arange(max_distance + 2)

    def at_distance(k):
        hi_index = jnp.clip(rank + t, 0, n + 1)
        lo_index = jnp.clip(rank + t - k - 1, 0, n + 1)
        gaps = jnp.where(t <= k + 1, padded[hi_index] - padded[lo_index], 0.0)
        return jnp.max(gaps)

    ks = jnp.arange(max_distance + 1)
    local = jax.lax.map(at_distance, ks, batch_size=min(max_distance + 1, 256))
    weighted = jnp.exp(-ks.astype(jnp.float64) * beta) * local
    tail = jnp.exp(-(max_distance + 1) * beta) * (upper - lower)
    return jnp.maximum(jnp.max(weighted), tail)
