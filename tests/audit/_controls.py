"""Positive controls: known-broken mechanisms the auditor must flag (never exported).

Sparse-vector variants from Lyu, Su & Li, "Understanding the Sparse Vector
Technique for Differential Privacy", PVLDB 10(6), 2017, Figure 1, each with
the epsilon its original authors claimed (LSL's analysis: Alg. 3, 5, 6 are
not private for any finite epsilon; Alg. 4 is ((1 + 6c)/4) epsilon-DP):

* Alg. 3 (Roth 2011 notes): threshold Lap(Delta/eps1), query noise
  Lap(c Delta/eps2) (half of Alg. 1's), and it releases the noisy value
  q_i + nu_i of each positive. We audit the released values rounded to a
  grid of width 8 (post-processing, so a violation there is a violation of
  Alg. 3; a coarse grid keeps the output space small enough to count).
* Alg. 4 (Stoddard et al. 2014): eps1 = eps/4, query noise Lap(Delta/eps2).
* Alg. 5 (Chen et al. 2015): no query noise at all.
* Alg. 6 (Chen & Machanavajjhala 2015): query noise Lap(Delta/eps2) and no cutoff.

Plus report-noisy-max with a quarter of the Laplace noise it needs.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import PureDP
from gpuprivacy.audit import AuditableMechanism


def _svt_variant(key, queries, *, threshold, threshold_scale, query_scale, cutoff, release_values, grid=8.0):
    """Bits (or rounded noisy values) of a sparse-vector variant; -inf codes the halted/⊥ slots."""
    k_threshold, k_queries = jax.random.split(key)
    rho = threshold_scale * jax.random.laplace(k_threshold, (), jnp.float64)
    nu = query_scale * jax.random.laplace(k_queries, queries.shape, jnp.float64)
    above = queries + nu >= threshold + rho
    count = jnp.cumsum(above.astype(jnp.int32))
    if cutoff is not None:
        # Positives after the c-th one are never reached (the algorithm halted).
        above = above & (count <= cutoff)
    if release_values:
        return jnp.where(above, jnp.round((queries + nu) / grid), -1e9)
    return above.astype(jnp.int8)


def svt_control(variant: int, *, epsilon=1.0, sensitivity=1.0, threshold=0.0, cutoff=1) -> AuditableMechanism:
    eps1 = epsilon / 4 if variant == 4 else epsilon / 2
    eps2 = epsilon - eps1
    scales = {
        3: dict(threshold_scale=sensitivity / eps1, query_scale=cutoff * sensitivity / eps2, cutoff=cutoff,
                release_values=True),
        4: dict(threshold_scale=sensitivity / eps1, query_scale=sensitivity / eps2, cutoff=cutoff,
                release_values=False),
        5: dict(threshold_scale=sensitivity / eps1, query_scale=0.0, cutoff=None, release_values=False),
        6: dict(threshold_scale=sensitivity / eps1, query_scale=sensitivity / eps2, cutoff=None,
                release_values=False),
    }[variant]
    body = functools.partial(_svt_variant, threshold=threshold, **scales)

    @functools.partial(jax.jit, static_argnums=2)
    def run(key, x, num_samples):
        return jax.vmap(lambda k: body(k, x))(jax.random.split(key, num_samples))

    return AuditableMechanism(
        name=f"lyu-su-li-alg{variant}", sample=lambda key, x, n: run(key, jnp.asarray(x, jnp.float64), int(n)),
        claim=PureDP(epsilon), output_kind="discrete", positive_control=True,
        description=f"Lyu-Su-Li Alg. {variant} (broken sparse vector)")


def too_little_noise_rnm(*, epsilon=1.0, sensitivity=1.0, num_candidates=10) -> AuditableMechanism:
    scale = sensitivity / (2 * epsilon)  # a quarter of the 2 Delta / epsilon that report noisy max needs

    @functools.partial(jax.jit, static_argnums=2)
    def run(key, x, num_samples):
        noise = jax.random.laplace(key, (num_samples, x.shape[0]), jnp.float64)
        return jnp.argmax(x[None, :] + scale * noise, axis=1)

    return AuditableMechanism(
        name="rnm-too-little-noise", sample=lambda key, x, n: run(key, jnp.asarray(x, jnp.float64), int(n)),
        claim=PureDP(epsilon), output_kind="discrete", output_range_size=num_candidates, positive_control=True,
        description="report noisy max with Laplace(Delta / (2 epsilon)) noise")
