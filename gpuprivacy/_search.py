"""Branchless searches that fuse into device kernels.

``jnp.searchsorted`` lowers to a while loop, which XLA does not fuse with the
gather around it; nested in another loop (unranking, slot positions) it is
the bottleneck of the subset engine. These searches are unrolled over the
static bit length of the table, a handful of compare-and-select steps.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def count_at_most(sorted_values: jax.Array, queries: jax.Array) -> jax.Array:
    """``#{i : sorted_values[i] <= q}`` for each query (``sorted_values`` 1-D, nondecreasing).

    The same as ``jnp.searchsorted(sorted_values, queries, side="right")``,
    as int32, with ``ceil(log2(len + 1))`` unrolled steps.
    """
    width = sorted_values.shape[0]
    count = jnp.zeros(queries.shape, jnp.int32)
    if width == 0:
        return count
    step = 1 << (width.bit_length() - 1)
    while step:
        probe = count + step
        ok = (probe <= width) & (sorted_values[jnp.minimum(probe, width) - 1] <= queries)
        count = jnp.where(ok, probe, count)
        step >>= 1
    return count
