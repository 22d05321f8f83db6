"""Subset-Extension (Algorithm 2, Thm 4.1) and modified TAHOE (Algorithm 3, Prop B.1), Linder et al. 2025, Algorithms 2-3.

Both use f-stability (Linder et al. 2025, Defs 4.1-4.2; see docs/errata.md): with the stability
floor ``psi(u)`` (the largest |z| of a bad edge ``|f'(z+i) - f'(z)| > 1``
inside u, restricted to |z| >= L_min), u is l-stable iff ``|u| >= l`` and
``psi(u) < l``. One SOS sweep computes psi for every subset (regime A).
Stability uses "> 1" for a bad edge, so equality is allowed (P9); values are
on the dyadic grid 2**-20 (N2), so the comparison is exact.

Truncated-Laplace widths (erratum 12, P7): the paper's width
``(1/eps0) ln(1/delta0)`` gives (eps0, delta0) only when
``e^eps0 <= 3 - 2 delta0``; we use
``tau = max(paper, (1/eps0) ln(1 + (e^eps0 - 1)/(2 delta0)))`` computed in
mpmath (rounded up for the integer tau of Subset-Extension), which keeps
every proof step valid.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import mpmath

from gpuprivacy import _threefry as threefry
from gpuprivacy._checks import (
    check_delta,
    check_epsilon,
    check_finite_real,
    check_key,
    check_level,
    check_noise_scale,
    check_positive,
)
from gpuprivacy._typing import Array, Key
from gpuprivacy._rounding import float_up, round_up
from gpuprivacy.accounting import ApproxDP
from gpuprivacy.mechanisms._release import Release, stated_guarantee
from gpuprivacy.mechanisms._wrappers._common import (
    NONRESPONSE,
    build_cache,
    check_common,
    check_powerset_wrapper,
    clamp_int,
    concrete_int,
    run_on_cache,
    sanitise_real,
)
from gpuprivacy.noise import laplace, truncated_laplace
from gpuprivacy import subsets as ps
from gpuprivacy.mechanisms._common import concrete

SUBSET_EXTENSION_Q = 20
_NO_BAD_EDGE = -(1 << 30)


class SubsetExtensionInfo(NamedTuple):
    """Info of :func:`subset_extension` / :func:`tahoe`.

    Attributes:
      level: the released level l (accounted; TAHOE's is real-valued).
      nonresponse: the released test bit (True = BOT).
      tau: the public tau.
      noise_scale: the public Laplace scale of the output (times c).
      nonprivate_depth: ``|x| - ceil(l)``.
      nonprivate_num_queries: oracle calls made.
    """

    level: Array
    nonresponse: Array
    tau: float
    noise_scale: float
    nonprivate_depth: Array
    nonprivate_num_queries: int


def truncation_width(epsilon: float, delta: float, sensitivity: float = 1.0):
    """Exact sufficient TruncLap width: ``(sensitivity/epsilon) ln(1 + (e^epsilon - 1)/(2 delta))`` (mpmath; P7)."""
    e, d = mpmath.mpf(epsilon), mpmath.mpf(delta)
    return mpmath.mpf(sensitivity) / e * mpmath.log1p(mpmath.expm1(e) / (2 * d))


def subset_extension_tau(*, epsilon: float, delta: float) -> int:
    """tau = max(ceil((1/eps0) ln(1/delta0)), ceil(corrected width)), eps0 = epsilon/3, delta0 = delta/2.

    Examples:
      >>> subset_extension_tau(epsilon=1.0, delta=1e-6), subset_extension_tau(epsilon=3.0, delta=1e-6)
      (44, 15)
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    with mpmath.workdps(50):
        eps0, delta0 = mpmath.mpf(epsilon) / 3, mpmath.mpf(delta) / 2
        paper = mpmath.ceil(mpmath.log(1 / delta0) / eps0)
        corrected = mpmath.ceil(truncation_width(eps0, delta0))
        check_level(float(max(paper, corrected)), epsilon=epsilon, what="Subset-Extension's tau")
        return max(1, int(max(paper, corrected)))


def subset_extension_guarantee(*, epsilon: float, delta: float):
    """(epsilon, delta)-DP for every f and c: 3 x eps0 and 2 x delta0 (Thm 4.1)."""
    # Computed, not exact: three eps0 = epsilon/3 shares and float noise scales 1/eps0 inside the kernels;
    # one ulp covers the float error (gpuprivacy._rounding.round_up).
    return ApproxDP(epsilon=round_up(check_epsilon(epsilon)), delta=check_delta(delta))


def tahoe_tau(*, epsilon: float, delta: float) -> float:
    """TAHOE's real tau: max((1/eps0) ln(1/delta0), corrected width), delta0 = delta/(3 e^eps0) (rounded up).

    Examples:
      >>> round(tahoe_tau(epsilon=1.0, delta=1e-6), 3)
      45.742
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    with mpmath.workdps(50):
        eps0 = mpmath.mpf(epsilon) / 3
        delta0 = mpmath.mpf(delta) / (3 * mpmath.exp(eps0))
        tau = max(mpmath.log(1 / delta0) / eps0, truncation_width(eps0, delta0))
        check_level(float(6 * tau), epsilon=epsilon, what="TAHOE's depth 6 tau")
        return float_up(tau)


def tahoe_guarantee(*, epsilon: float, delta: float):
    """(3 eps0, 3 e^eps0 delta0) = (epsilon, delta) (Prop B.1)."""
    # Computed, not exact: three eps0 = epsilon/3 shares and float noise scales 1/eps0 inside the kernels;
    # one ulp covers the float error (gpuprivacy._rounding.round_up).
    return ApproxDP(epsilon=round_up(check_epsilon(epsilon)), delta=check_delta(delta))


def stability_floor(values: Array, n: int, lowest_level) -> Array:
    """psi(u) for every bitmask u: the largest |z| of a bad edge inside u with |z| >= lowest_level (Linder et al. 2025, Defs 4.1-4.2).

    Returns int32 (sizes - 1 <= 31 and the no-edge value -2**30 fit): the SOS sweep then holds two int32
    arrays of 2**n entries, half the bytes of int64. The bad edges are found block by block.
    """
    def start_at(masks):
        sizes = jax.lax.population_count(masks).astype(jnp.int64)  # on the device, no 2**n constant
        bad = ps.bit_neighbours_differ_at(values, masks, n, 1.0) & (sizes - 1 >= lowest_level)
        return jnp.where(bad, (sizes - 1).astype(jnp.int32), jnp.int32(_NO_BAD_EDGE))

    return ps.subset_max(ps.powerset_map(start_at, n), n)


def _stable_at(psi, masks, low):
    """For a block of masks: (sizes, stable) with stable = |u| >= low and psi(u) < low (l-stable, Def 4.2)."""
    sizes = jax.lax.population_count(masks).astype(jnp.int64)
    return sizes, (sizes >= low) & (psi[masks].astype(jnp.int64) < low)


def _check_claim(c, data_n):
    c = check_positive("c", c)
    if not math.isfinite(c):
        raise ValueError(f"c must be finite and > 0, got {c!r}.")
    # Regime A: limited by the device's memory (2**n values per array), refused before any oracle call. (With
    # the paper's constants their depth is >= 19 tau, so much larger n is infeasible anyway, Linder et al. 2025,
    # Sec. 6.)
    check_powerset_wrapper(data_n, "the stability-based wrappers (regime A, the full power set)")
    return c


@functools.partial(jax.jit, static_argnames=("tau", "eps0", "q"))
def _se_depth(key, *, tau, eps0, q):
    # D = |x| - l = floor(q tau - R0), R0 ~ TruncLap(1/eps0, tau): in [(q-1) tau, (q+1) tau] always.
    r0 = truncated_laplace(key, -tau * eps0, tau * eps0) / eps0
    return clamp_int(jnp.floor(q * tau - r0))


def proxy_t(values: Array, n: int, low, tau: int):
    """``(T_{l,tau}[f'](x) - |x|/2, m_l(x))`` on power-set values of f' (Linder et al. 2025, Def 4.4).

    T averages ``S_h = max{C[f'](u) : u l-stable, |u| >= max(h, l)}`` exactly over
    h in {m - tau..m}; computed with the shift ``C'(u) = C[f'](u) - |x|/2`` (N1).
    Returns -inf for T when some S_h is empty (only possible on the BOT path, N3).
    """
    psi = stability_floor(values, n, jnp.maximum(low, 0))

    # Block by block (ps.powerset_blocks): the only 2**n arrays are the values and psi. Max is exact.
    def largest_stable(masks):
        sizes, stable = _stable_at(psi, masks, low)
        return jnp.max(jnp.where(stable, sizes, -1))

    def shifted_at(masks):
        sizes, stable = _stable_at(psi, masks, low)
        shifted = (values[masks] - (n - sizes).astype(jnp.float64)) / 2
        return jnp.where(stable, shifted, -jnp.inf)

    m = ps.powerset_blocks(largest_stable, n).max()
    per_size = ps.powerset_level_reduce(shifted_at, n, "max")
    suffix = jax.lax.cummax(per_size, reverse=True)
    h = m - tau + jnp.arange(tau + 1)
    return suffix[jnp.clip(jnp.maximum(h, low), 0, n)].mean(), m


def _se_kernel(cache, key, depth, *, tau, eps0, q):
    n, values = cache.n, cache.values
    test_key, noise_key = threefry.split(key)
    low = n - depth
    t_shifted, m = proxy_t(values, n, low, tau)
    r1 = truncated_laplace(test_key, -tau * eps0, tau * eps0) * (2.0 / eps0)  # TruncLap(2/eps0, 2 tau)
    bot = m.astype(jnp.float64) + r1 <= (n + low).astype(jnp.float64) / 2 + 5 * tau
    t_shifted = jnp.where(bot, 0.0, t_shifted)  # guarded: S may be -inf only on the BOT path (N3)
    # 2T - |x| = 2T'.
    out = 2 * t_shifted + laplace(noise_key) * (10 * q / eps0)
    return out, bot, low


def subset_extension(key: Key, data, *, oracle_fn, c: float, epsilon: float, delta: float,
                     capacity: int | None = None, max_queries: int | None = None, chunk_size: int | None = None,
                     progress: bool = False) -> Release:
    """Subset-Extension: claimed c-Lipschitz f, unbounded range, (epsilon, delta)-DP for every f (Alg 2, Thm 4.1).

    With ``eps0 = epsilon/3``, ``delta0 = delta/2``, q = 20 and tau from
    :func:`subset_extension_tau`:

    .. math::
        l = \\lceil |x| - q\\tau + R_0 \\rceil,\\ R_0 \\sim \\mathrm{TruncLap}(1/\\varepsilon_0, \\tau);\\quad
        b = [m_l(x) + R_1 \\le (|x| + l)/2 + 5\\tau],\\ R_1 \\sim \\mathrm{TruncLap}(2/\\varepsilon_0, 2\\tau);\\\\
        \\text{out} = c\\,(2 T_{l,\\tau}[f/c](x) - |x| + \\mathrm{Lap}(10q/\\varepsilon_0))\\ \\text{if } b = 0,
        \\text{ else BOT.}

    l and b are released (P5). If f is c-Lipschitz on ``N_{(q+1)tau}(x)``
    then b = 0 and ``out = f(x) + Lap(600 c/epsilon)`` exactly. The depth is
    ``floor(q tau - R0)`` in ``[19 tau, 21 tau]``; this implementation runs on
    the power set (n up to what the device's memory holds, n = 30 on an 80 GB
    GPU), where that depth covers every subset whenever ``19 tau >= n``.
    Oracle values: NaN -> 0, divided by c, clamped to +-2**30 and rounded to
    2**-20 (post-processing).

    Args:
      key: a single PRNG key.
      data: ``[n, ...]`` rows.
      oracle_fn: untrusted ``f(rows, valid) -> scalar``.
      c: the claimed Lipschitz constant (> 0, finite).
      epsilon: > 0.
      delta: in (0, 1).
      capacity, max_queries, chunk_size, progress: as in :func:`sens_o_matic`.

    Returns:
      ``Release(value, SubsetExtensionInfo)``; value is NaN for BOT.

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy import oracle
      >>> from gpuprivacy.mechanisms import wrappers
      >>> out = wrappers.subset_extension(jax.random.key(0), np.ones(8), oracle_fn=oracle.count, c=1.0,
      ...                                 epsilon=1.0, delta=1e-6)
      >>> bool(out.info.nonresponse), out.info.tau
      (False, 44)

    References:
      Linder et al., Algorithm 2, Theorem 4.1, Lemma 4.6, Claims 4.7-4.8.
    """
    concrete("epsilon", epsilon, "subset_extension")  # calibrated in Python
    concrete("delta", delta, "subset_extension")  # calibrated in Python
    key = check_key(key)
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    data, n, capacity, max_queries = check_common(data, capacity, max_queries)
    c = _check_claim(c, n)
    guarantee = stated_guarantee(subset_extension_guarantee, epsilon=epsilon, delta=delta)
    q = SUBSET_EXTENSION_Q
    tau = subset_extension_tau(epsilon=epsilon, delta=delta)
    eps0 = epsilon / 3
    cap = min((q + 1) * tau, n)
    ps.plan_queries(n, cap, max_queries=max_queries, what="subset_extension")
    level_key, out_key = threefry.split(key)
    depth = _se_depth(level_key, tau=tau, eps0=eps0, q=q)
    known_depth = concrete_int(depth)
    eval_depth = cap if known_depth is None else min(known_depth, cap)
    cache = build_cache(oracle_fn, data, depth=eval_depth, cap=cap, capacity=capacity, max_queries=max_queries,
                        chunk_size=chunk_size, progress=progress, sanitise=lambda v: sanitise_real(v, scale=c),
                        fill=jnp.float64(0.0), regime="powerset")
    out, bot, low = run_on_cache(_se_kernel, cache, out_key, depth, tau=tau, eps0=eps0, q=q)
    value = jnp.where(bot, NONRESPONSE, c * out)
    info = SubsetExtensionInfo(low, bot, tau, 10 * q / eps0 * c, depth, cache.num_queries)
    return Release(value, info, guarantee)


def _tahoe_kernel(cache, key, depth_key, *, tau, eps0):
    n, values = cache.n, cache.values
    h_key, noise_key = threefry.split(key)
    r1 = truncated_laplace(depth_key, -tau * eps0, tau * eps0) / eps0
    level = n - 5 * tau - r1  # released, real; "size >= l" means size >= ceil(l)
    low = jnp.ceil(level).astype(jnp.int64)
    psi = stability_floor(values, n, jnp.maximum(low, 0))

    def largest_stable(masks):  # block by block: no 2**n temporaries besides psi
        sizes, stable = _stable_at(psi, masks, low)
        return jnp.max(jnp.where(stable, sizes, -1))

    m = ps.powerset_blocks(largest_stable, n).max()
    r2 = truncated_laplace(h_key, -tau * eps0, tau * eps0) / eps0
    h = n - tau - r2  # NOT released
    bot = m.astype(jnp.float64) < h
    # Any stable set of size m is private (Prop B.1); canonical rule: the lowest bitmask (argmax of a boolean
    # array of 2**n entries, built block by block: 1 byte per subset).
    chosen = jnp.argmax(ps.powerset_map(lambda masks: _stable_at(psi, masks, low)[1]
                                        & (jax.lax.population_count(masks).astype(jnp.int64) == m), n))
    out = values[chosen] + laplace(noise_key) * (12 * tau / eps0)
    return out, bot, level, n - low


def tahoe(key: Key, data, *, oracle_fn, c: float, epsilon: float, delta: float, capacity: int | None = None,
          max_queries: int | None = None, chunk_size: int | None = None, progress: bool = False) -> Release:
    """Modified TAHOE (Kohli & Laskowski 2023, as re-analysed in Algorithm 3 / Prop B.1), a baseline.

    .. math::
        l = |x| - 5\\tau - r_1,\\ h = |x| - \\tau - r_2,\\ r_i \\sim \\mathrm{TruncLap}(1/\\varepsilon_0, \\tau);\\quad
        \\text{out} = c\\,(f'(u) + \\mathrm{Lap}(12\\tau/\\varepsilon_0))

    for an l-stable u of the largest size m, BOT if m < h. Noise follows the
    algorithm, ``12 tau/eps0 = 108 ln(1/delta0)/epsilon**2`` (erratum 6; Prop
    B.1's 36 is too small). Power set only (n up to what the device's memory holds). Same sanitisation as
    :func:`subset_extension`.

    Args:
      key, data, oracle_fn, c, epsilon, delta, capacity, max_queries, chunk_size, progress:
        as in :func:`subset_extension`.

    Returns:
      ``Release(value, SubsetExtensionInfo)``; NaN for BOT.

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy import oracle
      >>> from gpuprivacy.mechanisms import wrappers
      >>> out = wrappers.tahoe(jax.random.key(0), np.ones(8), oracle_fn=oracle.count, c=1.0, epsilon=1.0, delta=1e-6)
      >>> bool(out.info.nonresponse)
      False

    References:
      Linder et al., Algorithm 3, Proposition B.1; Kohli & Laskowski, PETS 2023.
    """
    concrete("epsilon", epsilon, "tahoe")  # calibrated in Python
    concrete("delta", delta, "tahoe")  # calibrated in Python
    key = check_key(key)
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    data, n, capacity, max_queries = check_common(data, capacity, max_queries)
    c = _check_claim(c, n)
    guarantee = stated_guarantee(tahoe_guarantee, epsilon=epsilon, delta=delta)
    tau = tahoe_tau(epsilon=epsilon, delta=delta)
    eps0 = epsilon / 3
    # The output's Laplace scale 12 tau / eps0 * c = (36 tau c) / epsilon.
    check_noise_scale(36.0 * tau * c, epsilon, what="tahoe")
    cap = min(math.floor(6 * tau) + 1, n)
    ps.plan_queries(n, cap, max_queries=max_queries, what="tahoe")
    depth_key, out_key = threefry.split(key)
    cache = build_cache(oracle_fn, data, depth=cap, cap=cap, capacity=capacity, max_queries=max_queries,
                        chunk_size=chunk_size, progress=progress, sanitise=lambda v: sanitise_real(v, scale=c),
                        fill=jnp.float64(0.0), regime="powerset")
    out, bot, level, depth = run_on_cache(_tahoe_kernel, cache, out_key, depth_key, tau=tau, eps0=eps0)
    value = jnp.where(bot, NONRESPONSE, c * out)
    info = SubsetExtensionInfo(level, bot, tau, 12 * tau / eps0 * c, depth, cache.num_queries)
    return Release(value, info, guarantee)


def check_real_claim(name, value):
    return check_finite_real(name, value)
