"""Sens-o-Matic: automated sensitivity detection, private for every oracle (Linder et al. 2025, Algorithm 1, Thm 3.1).

Linder, Raskhodnikova, Smith & Steinke, *Privately Evaluating Untrusted Black-Box Functions*, Algorithm 1 and
Theorem 3.1: a noisy level ``l = floor(|x| - 3 lam/4 + Lap(2/epsilon))`` and the Shifted Inverse mechanism
(:mod:`gpuprivacy.mechanisms._wrappers._shifted_inverse`) run at depth ``lamS`` on the level's closure.
"""


from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import mpmath
import numpy as np

from gpuprivacy import _threefry as threefry
from gpuprivacy._checks import check_epsilon, check_int, check_key, check_probability
from gpuprivacy._typing import Array, Key
from gpuprivacy._rounding import divide_up, float_up
from gpuprivacy.accounting import ApproxDP, PureDP
from gpuprivacy.mechanisms._release import Release, stated_guarantee
from gpuprivacy.mechanisms._wrappers._common import (
    NONRESPONSE,
    Cache,
    build_cache,
    check_common,
    check_grid,
    clamp_int,
    closure_max_level_min,
    concrete_int,
    laplace_cdf_mp,
    plan_cap,
    round_to_grid,
    run_on_cache,
)
from gpuprivacy.noise import laplace
from gpuprivacy.subsets import plan_queries
from gpuprivacy.mechanisms._common import concrete
from gpuprivacy.mechanisms._wrappers._shifted_inverse import shifted_inverse_depth, shifted_inverse_select


class SensOMaticInfo(NamedTuple):
    """Info of :func:`sens_o_matic`.

    Attributes:
      level: the released level ``l = floor(|x| - 3 lam/4 + Lap(2/epsilon))`` (accounted, Linder et al. 2025, Algorithm 1).
      nonresponse: True iff the release is BOT (only with a public ``max_depth`` cap).
      index: grid index of the released value (-1 for BOT).
      shifted_inverse_depth: the public depth lamS of the inner Shifted Inverse.
      nonprivate_depth: ``D = |x| - l`` (with l it reveals |x|).
      nonprivate_num_queries: oracle calls made.
    """

    level: Array
    nonresponse: Array
    index: Array
    shifted_inverse_depth: int
    nonprivate_depth: Array
    nonprivate_num_queries: int


def sens_o_matic_depths(*, epsilon: float, beta: float, grid_size: int) -> tuple[int, int]:
    """``(lamS, lam)`` of Algorithm 1: ``lamS = lam_ShI(epsilon/2, beta/2, k)``, ``lam = 2 lamS`` (Linder et al. 2025, Algorithm 1).

    Examples:
      >>> sens_o_matic_depths(epsilon=1.0, beta=0.05, grid_size=2**16)
      (118, 236)
    """
    lam_s = shifted_inverse_depth(epsilon=check_epsilon(epsilon) / 2, beta=check_probability("beta", beta) / 2,
                                  grid_size=grid_size)
    return lam_s, 2 * lam_s


def sens_o_matic_cap_delta(*, epsilon: float, beta: float, grid_size: int, max_depth: int) -> float:
    """delta of the depth cap: ``e^epsilon * P(D > max_depth)`` with ``D = ceil(3 lam/4 - Z)`` (see docs/errata.md).

    ``ceil(a) > m`` iff ``a > m`` for an integer m, so
    ``P(D > m) = P(Z < 3 lam/4 - m) = F_Lap(2/epsilon)(3 lam/4 - m)``; mpmath, rounded up.
    """
    _, lam = sens_o_matic_depths(epsilon=epsilon, beta=beta, grid_size=grid_size)
    max_depth = check_int("max_depth", max_depth, minimum=0)
    with mpmath.workdps(50):
        p = laplace_cdf_mp(mpmath.mpf(3) * lam / 4 - max_depth, 2 / mpmath.mpf(epsilon))
        return min(1.0, float_up(mpmath.exp(mpmath.mpf(epsilon)) * p))


def sens_o_matic_guarantee(*, epsilon: float, beta: float, grid_size: int, max_depth: int | None = None):
    """Sens-o-Matic's guarantee (Thm 3.1): pure epsilon-DP for every f; (epsilon, delta) with a depth cap.

    Examples:
      >>> sens_o_matic_guarantee(epsilon=1.0, beta=0.05, grid_size=8).epsilon >= 1.0
      True
    """
    epsilon = check_epsilon(epsilon)
    check_probability("beta", beta)
    check_int("grid_size", grid_size, minimum=2)
    # epsilon/2 (the level, Laplace scale divide_up(2, epsilon) >= 2/epsilon) + epsilon/2 (ShI): the halves
    # are exact, so the guarantee is exactly the user's epsilon (gpuprivacy._rounding contract).
    if max_depth is None:
        return PureDP(epsilon=epsilon)
    delta = sens_o_matic_cap_delta(epsilon=epsilon, beta=beta, grid_size=grid_size, max_depth=max_depth)
    if delta >= 1.0:
        raise ValueError(f"max_depth={max_depth} is so small that the cap's delta = e^epsilon P(D > max_depth) "
                         "is >= 1; raise max_depth (delta falls by e^(-epsilon/2) per extra level).")
    return ApproxDP(epsilon=epsilon, delta=delta)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _som_depth(key, lam: int, scale: float):
    # scale = divide_up(2, epsilon) >= 2/epsilon, so the level costs at most epsilon/2.
    # D = |x| - l = ceil(3 lam/4 - Z), Z ~ Lap(2/epsilon): a function of the noise only (Linder et al. 2025, Algorithm 1, Thm 3.1).
    z = laplace(key) * scale
    return clamp_int(jnp.ceil(0.75 * lam - z))


def _som_release(cache: Cache, key, depth, *, lam_s: int, grid_size: int, epsilon: float,
                 max_depth: int | None):
    low = cache.n - depth
    minima = closure_max_level_min(cache, low, lambda v, s: v, jnp.int32(0), lam_s + 1, jnp.int32(grid_size))
    index = shifted_inverse_select(key, minima, grid_size=grid_size, epsilon=epsilon / 2)
    bot = jnp.asarray(False) if max_depth is None else depth > max_depth
    return jnp.where(bot, -1, index), bot, low


def sens_o_matic(key: Key, data, *, oracle_fn, grid, epsilon: float, beta: float, max_depth: int | None = None,
                 capacity: int | None = None, max_queries: int | None = None, chunk_size: int | None = None,
                 verify_determinism: bool = False, progress: bool = False) -> Release:
    """Sens-o-Matic: automated sensitivity detection, private for **every** oracle (Algorithm 1, Thm 3.1).

    With ``lamS = lam_ShI(epsilon/2, beta/2, k)`` and ``lam = 2 lamS``:

    .. math::
        l = \\lfloor |x| - \\tfrac34 \\lambda + Z \\rfloor,\\ Z \\sim \\mathrm{Lap}(2/\\varepsilon);\\qquad
        \\text{out} = \\mathrm{ShI}_{\\varepsilon/2,\\ \\lambda_S}\\big(x, M_l[f]\\big),\\quad
        M_l[f](x) = \\max\\big(\\{f(z) : z \\subseteq x, |z| \\ge l\\} \\cup \\{y_1\\}\\big).

    The released pair is ``(l, out)``. Privacy: epsilon/2 for l plus epsilon/2
    for ShI on the monotone M_l[f] (Lemma 3.4), so pure epsilon-DP for every f.
    Accuracy: with probability >= 1 - beta, ``min f(N_lam(x)) <= out <= max f(N_lam(x))``
    (values rounded to the grid). The depth ``D = |x| - l`` depends on the noise
    only; the query set is every subset of size >= max(l, 0), ``Q(n, D)`` queries.

    Depth cap (see docs/errata.md): capping D breaks pure DP. Without ``max_depth``
    the planner requires the power set, ``2**n <= max_queries``. With a public
    ``max_depth`` the release is BOT whenever D > max_depth, an event of the
    noise alone with probability p, and the guarantee becomes
    ``(epsilon, e^epsilon p)`` (:func:`sens_o_matic_cap_delta`, exact, mpmath).

    Oracle values are rounded to the nearest grid point (ties down); NaN and
    -inf map to ``grid[0]``, +inf to ``grid[-1]`` (post-processing of f).

    Args:
      key: a single PRNG key.
      data: ``[n, ...]`` rows (the atoms).
      oracle_fn: untrusted ``f(rows, valid) -> scalar``.
      grid: the public finite range Y (sorted, distinct, >= 2 points).
      epsilon: privacy parameter (> 0).
      beta: failure probability in (0, 1) (accuracy only).
      max_depth: optional public cap on D (turns the guarantee into (epsilon, delta)).
      capacity: public block size the oracle is traced with (default 32).
      max_queries: public budget of oracle calls (default 2**27).
      chunk_size: evaluator chunk size.
      verify_determinism: evaluate twice and raise (before any noise is used) if
        any subset gets two different values (doubles the queries; see
        :func:`gpuprivacy.oracle.evaluate_levels` for the oracle contract).
      progress: progress bar.

    Returns:
      ``Release(value, SensOMaticInfo)``; value is a grid point or NaN (BOT).

    Raises:
      ValueError: bad parameters, or the planned ``Q(n, cap)`` exceeds
        ``max_queries`` (raised before any noise is drawn).

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy import oracle
      >>> from gpuprivacy.mechanisms import wrappers
      >>> out = wrappers.sens_o_matic(jax.random.key(0), np.linspace(0.4, 0.6, 12), oracle_fn=oracle.mean,
      ...                             grid=np.linspace(0, 1, 11), epsilon=4.0, beta=0.1)
      >>> float(out.value)
      0.5

    References:
      Linder, Raskhodnikova, Smith & Steinke, Privately Evaluating Untrusted
      Black-Box Functions, Algorithm 1, Theorem 3.1, Lemma 3.2.
    """
    concrete("epsilon", epsilon, "sens_o_matic")  # calibrated in Python
    key = check_key(key)
    y = check_grid(grid)
    epsilon = check_epsilon(epsilon)
    beta = check_probability("beta", beta)
    data, n, capacity, max_queries = check_common(data, capacity, max_queries)
    if max_depth is not None:
        max_depth = check_int("max_depth", max_depth, minimum=0)
    k = int(y.size)
    # The guarantee first, from the same validated parameters: no release without a statable guarantee
    # (a max_depth so small that the cap's delta reaches 1 is refused here, before any noise).
    guarantee = stated_guarantee(sens_o_matic_guarantee, epsilon=epsilon, beta=beta, grid_size=k,
                                 max_depth=max_depth)
    lam_s, lam = sens_o_matic_depths(epsilon=epsilon, beta=beta, grid_size=k)
    cap = plan_cap(n, max_depth)
    plan_queries(n, cap, max_queries=max_queries, what="sens_o_matic")  # before any noise (P6)
    level_key, out_key = threefry.split(key)
    depth = _som_depth(level_key, lam, divide_up(2, epsilon))
    known_depth = concrete_int(depth)
    grid_device = jnp.asarray(y)
    if known_depth is not None and max_depth is not None and known_depth > max_depth:
        info = SensOMaticInfo(jnp.asarray(n - known_depth), jnp.asarray(True), jnp.asarray(-1, jnp.int32), lam_s,
                              depth, 0)
        return Release(jnp.asarray(NONRESPONSE), info, guarantee)
    eval_depth = cap if known_depth is None else max(0, min(known_depth, cap))
    cache = build_cache(oracle_fn, data, depth=eval_depth, cap=cap, capacity=capacity, max_queries=max_queries,
                        chunk_size=chunk_size, progress=progress,
                        sanitise=lambda v: round_to_grid(v, grid_device), fill=jnp.int32(0),
                        verify_determinism=verify_determinism)
    index, bot, low = run_on_cache(_som_release, cache, out_key, depth, lam_s=lam_s, grid_size=k,
                                   epsilon=epsilon, max_depth=max_depth)
    value = jnp.where(bot, NONRESPONSE, grid_device[jnp.maximum(index, 0)])
    info = SensOMaticInfo(low, bot, index, lam_s, depth, cache.num_queries)
    return Release(value, info, guarantee)


