"""Shifted Inverse (promise: monotone f), Linder et al. 2025, Lemma 3.2 (after Fang, Dong & Yi 2022).

Linder, Raskhodnikova, Smith & Steinke, *Privately Evaluating Untrusted Black-Box Functions*, Lemma 3.2. Its
selection step is also the last step of Sens-o-Matic (:mod:`gpuprivacy.mechanisms._wrappers._sens_o_matic`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import mpmath
import numpy as np

from gpuprivacy._checks import check_epsilon, check_int, check_key, check_level, check_probability
from gpuprivacy._typing import Array, Key
from gpuprivacy.accounting import PureDP
from gpuprivacy.mechanisms._release import Release, stated_guarantee
from gpuprivacy.mechanisms._wrappers._common import (
    Cache,
    build_cache,
    check_common,
    check_grid,
    round_to_grid,
    run_on_cache,
)
from gpuprivacy.noise import gumbel
from gpuprivacy.mechanisms._common import concrete


class ShiftedInverseInfo(NamedTuple):
    """Info of :func:`shifted_inverse`.

    Attributes:
      index: grid index of the released value (a function of the value).
      depth: the public locality lam.
      nonprivate_num_queries: oracle calls made, ``Q(n, lam)`` (reveals n).
    """

    index: Array
    depth: int
    nonprivate_num_queries: int


def shifted_inverse_depth(*, epsilon: float, beta: float, grid_size: int) -> int:
    """lam_ShI: the smallest integer with ``lam + 1 > (4/epsilon) ln(k/beta)`` (Linder et al. 2025, Lemma 3.2; mpmath).

    Examples:
      >>> shifted_inverse_depth(epsilon=0.5, beta=0.025, grid_size=2**8)  # Sens-o-Matic eps=1, beta=0.05
      73
    """
    epsilon = check_epsilon(epsilon)
    beta = check_probability("beta", beta)
    k = check_int("grid_size", grid_size, minimum=2)
    with mpmath.workdps(50):
        x = 4 / mpmath.mpf(epsilon) * mpmath.log(mpmath.mpf(k) / mpmath.mpf(beta))
        check_level(float(x), epsilon=epsilon, what="the shifted inverse's depth lam (this epsilon is the shifted inverse's own: Sens-o-Matic passes epsilon/2)")
        # lam + 1 > x  <=>  lam >= floor(x) (x integer or not).
        return max(0, int(mpmath.floor(x)))


def shifted_inverse_guarantee(*, epsilon: float):
    """(epsilon, 0)-DP, **only if the oracle is monotone** (Lemma 3.2 / 3.4); not a privacy wrapper."""
    return PureDP(epsilon=check_epsilon(epsilon))


# ----------------------------------------------------------------------------------------------
# Kernels

def shifted_inverse_select(key, minima: Array, *, grid_size: int, epsilon: float) -> Array:
    """Exponential mechanism of ShI on per-level minima ``G_0..G_lam`` (grid indices; ``k`` = empty level).

    ``L_j = min({d : G_d <= j} u {lam+1})`` equals the number of d with
    ``P_d > j`` for the prefix minima P (nonincreasing), ``L_{-1} = lam + 1``
    encodes g(x, 0) = 0, ``score_j = min(lam + 1 - L_j, L_{j-1})`` in
    {0..lam+1} and ``Pr[j] ~ exp((epsilon/2) score_j)`` (Linder et al. 2025, Lemma 3.2);
    sampled by Gumbel-max in log space (idealized numerics).
    """
    lam = minima.shape[0] - 1
    prefix = jax.lax.cummin(minima)
    j = jnp.arange(grid_size, dtype=minima.dtype)
    # P is nonincreasing, so -P is nondecreasing and #{d : P_d > j} = #{d : -P_d < -j}.
    levels = jnp.searchsorted(-prefix, -j, side="left").astype(jnp.int64)
    previous = jnp.concatenate([jnp.full((1,), lam + 1, jnp.int64), levels[:-1]])
    scores = jnp.minimum(lam + 1 - levels, previous)
    logits = (epsilon / 2) * scores.astype(jnp.float64)
    return jnp.argmax(logits + gumbel(key, (grid_size,))).astype(jnp.int32)


def shifted_inverse_scores(minima: np.ndarray, grid_size: int) -> np.ndarray:
    """The integer scores of :func:`shifted_inverse_select` (NumPy; used by exact-distribution tests)."""
    minima = np.asarray(minima)
    lam = minima.shape[0] - 1
    levels = np.asarray([min([d for d in range(lam + 1) if minima[d] <= j] + [lam + 1]) for j in range(grid_size)])
    previous = np.concatenate([[lam + 1], levels[:-1]])
    return np.minimum(lam + 1 - levels, previous)


def shifted_inverse(key: Key, data, *, oracle_fn, grid, epsilon: float, beta: float, depth: int | None = None,
                    capacity: int | None = None, max_queries: int | None = None, chunk_size: int | None = None,
                    progress: bool = False) -> Release:
    """Shifted Inverse mechanism (Fang, Dong & Yi 2022; Lemma 3.2), **private only for monotone oracles**.

    .. math::
        G_d = \\min\\{f(s) : |x \\setminus s| = d\\},\\quad
        L_j = \\min(\\{d \\le \\lambda : G_d \\le y_j\\} \\cup \\{\\lambda+1\\}),\\quad
        \\Pr[j] \\propto \\exp\\big(\\tfrac{\\varepsilon}{2}\\min(\\lambda+1-L_j,\\ L_{j-1})\\big).

    This is NOT a privacy wrapper (Linder et al. 2025, Sec. 3.1): for a non-monotone f the
    scores can move by more than one between neighbours and epsilon-DP fails
    (the tests show a breach). Use :func:`sens_o_matic` for untrusted f. With
    probability >= 1 - beta, ``f(x) - DS_lam(x) <= out <= f(x)`` (one-sided).

    Args:
      key: a single PRNG key.
      data: ``[n, ...]`` rows.
      oracle_fn: a monotone ``f(rows, valid) -> scalar`` (promise).
      grid: the finite range Y (sorted, distinct, >= 2 points).
      epsilon: privacy parameter under the promise.
      beta: failure probability (sets lam, accuracy only).
      depth: the locality lam (default ``lam_ShI(epsilon, beta, k)``).
      capacity, max_queries, chunk_size, progress: as in :func:`sens_o_matic`.

    Returns:
      ``Release(value, ShiftedInverseInfo)``, value a grid point.

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy import oracle
      >>> from gpuprivacy.mechanisms import wrappers
      >>> out = wrappers.shifted_inverse(jax.random.key(1), np.ones(6), oracle_fn=oracle.count,
      ...                                grid=np.arange(10.0), epsilon=8.0, beta=0.1, depth=3)
      >>> float(out.value) <= 6
      True

    References:
      Linder et al., Lemma 3.2; Fang, Dong & Yi, Shifted Inverse, SIGMOD 2022.
    """
    concrete("epsilon", epsilon, "shifted_inverse")  # calibrated in Python
    key = check_key(key)
    y = check_grid(grid)
    epsilon = check_epsilon(epsilon)
    beta = check_probability("beta", beta)
    data, n, capacity, max_queries = check_common(data, capacity, max_queries)
    guarantee = stated_guarantee(shifted_inverse_guarantee, epsilon=epsilon)
    k = int(y.size)
    lam = shifted_inverse_depth(epsilon=epsilon, beta=beta, grid_size=k) if depth is None else \
        check_int("depth", depth, minimum=0)
    grid_device = jnp.asarray(y)
    cache = build_cache(oracle_fn, data, depth=lam, cap=min(lam, n), capacity=capacity, max_queries=max_queries,
                        chunk_size=chunk_size, progress=progress,
                        sanitise=lambda v: round_to_grid(v, grid_device), fill=jnp.int32(0), regime="levels")
    index = run_on_cache(_shi_release, cache, key, lam=lam, grid_size=k, epsilon=epsilon)
    return Release(grid_device[index], ShiftedInverseInfo(index, lam, cache.num_queries), guarantee)


def _shi_release(cache: Cache, key, *, lam: int, grid_size: int, epsilon: float):
    mins = [level.min() for level in cache.values]
    mins += [jnp.int32(grid_size)] * (lam + 1 - len(mins))  # levels deeper than n are empty
    minima = jnp.stack([jnp.asarray(m, jnp.int32) for m in mins])
    return shifted_inverse_select(key, minima, grid_size=grid_size, epsilon=epsilon)
