"""Bounded-range wrappers: Small-Diameter Subset Extension, the Lipschitz filter, Double-Monotonization.

Linder et al. 2025, Algorithm 4 (Thm C.1), Cor C.2, Algorithm 5 (Thm D.1).
Oracle values are clamped to [0, r] (NaN -> 0), divided by c and rounded to
the dyadic grid 2**-20 (post-processing, P2/N2).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import mpmath
import numpy as np

from gpuprivacy import _threefry as threefry
from gpuprivacy._checks import (
    check_epsilon,
    check_int,
    check_key,
    check_positive,
    check_probability,
)
from gpuprivacy._typing import Array, Key
from gpuprivacy._rounding import divide_up, float_up
from gpuprivacy._sort import sort
from gpuprivacy.accounting import ApproxDP, PureDP
from gpuprivacy.mechanisms._piecewise_sampler import sample_piecewise
from gpuprivacy.mechanisms._release import Release, stated_guarantee
from gpuprivacy.mechanisms._wrappers._common import (
    NONRESPONSE,
    Cache,
    build_cache,
    check_common,
    check_powerset_wrapper,
    clamp_int,
    closure_max_level_min,
    concrete_int,
    laplace_cdf_mp,
    plan_cap,
    run_on_cache,
    sanitise_real,
)
from gpuprivacy.mechanisms._wrappers._subset_extension import stability_floor
from gpuprivacy.noise import laplace
from gpuprivacy import subsets as ps
from gpuprivacy.mechanisms._common import concrete


class SmallDiameterInfo(NamedTuple):
    """Info of :func:`small_diameter_subset_extension`: public tau and noise scale; queries made."""

    tau: int
    noise_scale: float
    nonprivate_num_queries: int


class DoubleMonotonizationInfo(NamedTuple):
    """Info of :func:`double_monotonization`.

    Attributes:
      w: the released noisy size ``|x| + Lap(2/epsilon)`` (accounted).
      nonresponse: True iff BOT (only with a public ``max_depth``).
      tau: the public integer tau.
      nonprivate_depth: ``|x| - l``.
      nonprivate_num_queries: oracle calls made.
    """

    w: Array
    nonresponse: Array
    tau: int
    nonprivate_depth: Array
    nonprivate_num_queries: int


def _check_range(r, c):
    r = check_positive("r", r)
    c = check_positive("c", c)
    if not (math.isfinite(r) and math.isfinite(c)):
        raise ValueError(f"r and c must be finite and > 0, got r={r!r}, c={c!r}.")
    return r, c


def small_diameter_tau(*, r: float, c: float) -> int:
    """tau = ceil(3 r/c) (Alg 4, N7); the depth is 2 tau (erratum 7: not 2r/c).

    Examples:
      >>> small_diameter_tau(r=10.0, c=1.0), small_diameter_tau(r=4.0, c=1.0)
      (30, 12)
    """
    r, c = _check_range(r, c)
    return max(1, int(mpmath.ceil(3 * mpmath.mpf(r) / mpmath.mpf(c))))


def small_diameter_subset_extension_guarantee(*, epsilon: float, r: float, c: float):
    """(epsilon, 0)-DP for every f: ``2 P_tau`` has sensitivity <= 2(4 + 3 r/(c tau)) <= 10 (Lemma C.4)."""
    _check_range(r, c)
    return PureDP(epsilon=check_epsilon(epsilon))  # one Laplace, scale divide_up(10, epsilon): exact


def _proxy_p(values: Array, n: int, tau: int) -> Array:
    """``P_tau[f'](x)`` on power-set values of f' (Linder et al. 2025, Def C.2), exact averages over tau+1 integers."""
    psi = stability_floor(values, n, max(n - 2 * tau, 0))
    level_range = range(n - 2 * tau, n - tau + 1)

    def per_level(level):
        def lifted_at(masks):
            # One block of masks at a time (ps.powerset_level_reduce): sizes from a popcount on the device.
            sizes = jax.lax.population_count(masks).astype(jnp.int64)
            stable = (sizes >= level) & (psi[masks].astype(jnp.int64) < level)
            lifted = jnp.maximum((values[masks] + (sizes - level).astype(jnp.float64)) / 2, 0.0)  # C_l, floor 0
            return jnp.where(stable, lifted, 0.0)

        return ps.powerset_level_reduce(lifted_at, n, "max")

    # One level at a time (lax.map) and block by block: the only 2**n arrays are the values and psi
    # (unrolled, XLA kept the masked values of every level alive at once). Maxima are exact.
    per_sizes = jax.lax.map(per_level, jnp.asarray(np.asarray(level_range, dtype=np.int64)))
    total = jnp.float64(0.0)
    for i, level in enumerate(level_range):
        suffix = jax.lax.cummax(jnp.maximum(per_sizes[i], 0.0), reverse=True)
        h = np.arange(n - tau, n + 1)
        total = total + suffix[np.clip(np.maximum(h, level), 0, n)].mean()
    return total / (tau + 1)


def _bounded_cache(oracle_fn, data, n, *, r, c, depth, capacity, max_queries, chunk_size, progress):
    # Regime A: limited by the device's memory (2**n values per array), refused before any oracle call.
    check_powerset_wrapper(n, "this bounded-range wrapper (regime A, the full power set)")
    return build_cache(oracle_fn, data, depth=depth, cap=depth, capacity=capacity, max_queries=max_queries,
                       chunk_size=chunk_size, progress=progress,
                       sanitise=lambda v: sanitise_real(v, scale=c, lower=0.0, upper=r), fill=jnp.float64(0.0),
                       regime="powerset")


def small_diameter_subset_extension(key: Key, data, *, oracle_fn, r: float, c: float, epsilon: float,
                                    capacity: int | None = None, max_queries: int | None = None,
                                    chunk_size: int | None = None, progress: bool = False) -> Release:
    """Small-Diameter Subset Extension: range [0, r], claimed c, pure epsilon-DP for every f (Alg 4, Thm C.1).

    .. math::
        \\text{out} = c\\,\\big(2 P_\\tau[f/c](x) - \\tfrac{3\\tau}{2} + \\mathrm{Lap}(10/\\varepsilon)\\big),
        \\qquad \\tau = \\lceil 3r/c \\rceil,

    where P averages ``S_{l,h}[C_l[f']]`` exactly over l in {|x|-2tau..|x|-tau}
    and h in {|x|-tau..|x|}. No noisy level: depth ``2 tau`` is deterministic.
    If f is c-Lipschitz on ``N_{2tau}(x)``, ``out = f(x) + Lap(10 c/epsilon)``.
    Power set layout (n up to what the device's memory holds, :func:`gpuprivacy.subsets.powerset_max_n`).

    Args:
      key: a single PRNG key.
      data: ``[n, ...]`` rows.
      oracle_fn: untrusted f; values clamped to [0, r], NaN -> 0.
      r: the public range bound (> 0).
      c: the claimed Lipschitz constant (> 0).
      epsilon: > 0.
      capacity, max_queries, chunk_size, progress: as in :func:`sens_o_matic`.

    Returns:
      ``Release(value, SmallDiameterInfo)``.

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy import oracle
      >>> from gpuprivacy.mechanisms import wrappers
      >>> out = wrappers.small_diameter_subset_extension(jax.random.key(0), np.ones(6), oracle_fn=oracle.count,
      ...                                                r=8.0, c=1.0, epsilon=1.0)
      >>> out.info.tau
      24

    References:
      Linder et al., Algorithm 4, Theorem C.1, Lemma C.4, Claim C.5.
    """
    concrete("epsilon", epsilon, "small_diameter_subset_extension")  # calibrated in Python
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    r, c = _check_range(r, c)
    data, n, capacity, max_queries = check_common(data, capacity, max_queries)
    guarantee = stated_guarantee(small_diameter_subset_extension_guarantee, epsilon=epsilon, r=r, c=c)
    tau = small_diameter_tau(r=r, c=c)
    ps.plan_queries(n, 2 * tau, max_queries=max_queries, what="small_diameter_subset_extension")
    cache = _bounded_cache(oracle_fn, data, n, r=r, c=c, depth=2 * tau, capacity=capacity,
                           max_queries=max_queries, chunk_size=chunk_size, progress=progress)
    value = _small_diameter_release(key, cache.values, n, tau, epsilon, c)
    return Release(value, SmallDiameterInfo(tau, 10.0 * c / epsilon, cache.num_queries), guarantee)


proxy_p = jax.jit(_proxy_p, static_argnums=(1, 2))
_proxy_p_jit = proxy_p


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _small_diameter_release(key, values, n, tau, epsilon, c):
    centre = 2 * _proxy_p(values, n, tau) - 1.5 * tau
    return c * (centre + laplace(key) * divide_up(10, epsilon))  # epsilon is static (concrete)


def lipschitz_filter(data, *, oracle_fn, r: float, c: float, capacity: int | None = None,
                     max_queries: int | None = None, chunk_size: int | None = None) -> float:
    """Deterministic local Lipschitz filter (Cor C.2): ``y_x = c (2 P_tau[f/c](x) - 3 tau/2)``, tau = ceil(r/c).

    For every f into [0, r] (values clamped, NaN -> 0), x -> y_x is
    14c-Lipschitz (add/remove), and ``y_x = f(x)`` when f is c-Lipschitz on
    ``N_{2 tau}(x)`` (erratum 7: the corollary's "N_{r/c}" should be
    ``N_{2r/c}``). Not a mechanism (no noise): add noise of scale 14c/epsilon
    to release it.

    Examples:
      >>> import numpy as np
      >>> from gpuprivacy import oracle
      >>> from gpuprivacy.mechanisms import wrappers
      >>> wrappers.lipschitz_filter(np.ones(5), oracle_fn=oracle.count, r=8.0, c=1.0)
      5.0
    """
    r, c = _check_range(r, c)
    data, n, capacity, max_queries = check_common(data, capacity, max_queries)
    tau = max(1, int(mpmath.ceil(mpmath.mpf(r) / mpmath.mpf(c))))
    ps.plan_queries(n, 2 * tau, max_queries=max_queries, what="lipschitz_filter")
    cache = _bounded_cache(oracle_fn, data, n, r=r, c=c, depth=2 * tau, capacity=capacity,
                           max_queries=max_queries, chunk_size=chunk_size, progress=False)
    return float(c * (2 * _proxy_p_jit(cache.values, n, tau) - 1.5 * tau))


# ----------------------------------------------------------------------------------------------
# Double-Monotonization

def double_monotonization_tau(*, r: float, c: float, epsilon: float, beta: float) -> int:
    """Integer tau = ceil((16/epsilon) ln(4 r'/beta)), r' = r/c; requires ``r' >= (16/epsilon) ln(4r'/beta)`` (N7, erratum 8).

    Examples:
      >>> double_monotonization_tau(r=1000.0, c=1.0, epsilon=1.0, beta=0.05)
      181
    """
    r, c = _check_range(r, c)
    epsilon = check_epsilon(epsilon)
    beta = check_probability("beta", beta)
    with mpmath.workdps(50):
        rr = mpmath.mpf(r) / mpmath.mpf(c)
        tau = 16 / mpmath.mpf(epsilon) * mpmath.log(4 * rr / mpmath.mpf(beta))
        if rr < tau:
            raise ValueError(f"Double-Monotonization needs r/c >= tau = (16/epsilon) ln(4 (r/c)/beta) (Alg 5); got "
                             f"r/c = {float(rr):.6g} < tau = {float(tau):.6g}. Raise r (or epsilon/beta) or use "
                             "small_diameter_subset_extension.")
        return int(mpmath.ceil(tau))


def double_monotonization_cap_delta(*, epsilon: float, beta: float, tau: int, max_depth: int) -> float:
    """``e^epsilon P(D > max_depth)`` with ``D = ceil(tau + (2/epsilon) ln(2/beta) - Z)``, Z ~ Lap(2/epsilon) (P6(c))."""
    with mpmath.workdps(50):
        e = mpmath.mpf(epsilon)
        p = laplace_cdf_mp(tau + 2 / e * mpmath.log(2 / mpmath.mpf(beta)) - max_depth, 2 / e)
        return min(1.0, float_up(mpmath.exp(e) * p))


def double_monotonization_guarantee(*, epsilon: float, r: float, c: float, beta: float,
                                    max_depth: int | None = None):
    """(epsilon, 0)-DP for every f (Thm D.1); (epsilon, e^epsilon p) with a public depth cap."""
    epsilon = check_epsilon(epsilon)
    tau = double_monotonization_tau(r=r, c=c, epsilon=epsilon, beta=beta)
    # epsilon/2 (Laplace level noise, scale divide_up(2, epsilon)) + epsilon/2 (exponential mechanism): exact.
    if max_depth is None:
        return PureDP(epsilon=epsilon)
    delta = double_monotonization_cap_delta(epsilon=epsilon, beta=beta, tau=tau,
                                            max_depth=check_int("max_depth", max_depth, minimum=0))
    if delta >= 1.0:
        raise ValueError(f"max_depth={max_depth} is too small: the cap's delta is >= 1.")
    return ApproxDP(epsilon=epsilon, delta=delta)


def median_exponential_mechanism(key, values: Array, *, epsilon: float, lower: float, upper: float) -> Array:
    """MedianExpMech (App D.2): a in [lower, upper] with density ~ exp(-(epsilon/2) score(a)).

    ``score(a) = max(0, L(a) - floor(m/2), G(a) - floor(m/2))`` with
    ``L = #{y_i < a}``, ``G = #{y_i > a}`` (Linder et al. 2025, App. D.2). The density is
    piecewise constant; pick a piece with probability ~ |I| exp(-epsilon s/2)
    (log-space inverse CDF; zero-length pieces get -inf), then a uniform
    point in it, by the shared sampler
    :func:`gpuprivacy.mechanisms._piecewise_sampler.sample_piecewise`. Idealized numerics.
    """
    m = values.shape[0]
    points = sort(jnp.concatenate([jnp.clip(values, lower, upper), jnp.asarray([lower, upper])]))
    left, right = points[:-1], points[1:]
    middle = (left + right) / 2
    less = (values[None, :] < middle[:, None]).sum(axis=1)
    greater = (values[None, :] > middle[:, None]).sum(axis=1)
    half = m // 2
    score = jnp.maximum(0, jnp.maximum(less - half, greater - half)).astype(jnp.float64)
    length = right - left
    logits = jnp.where(length > 0, jnp.log(jnp.where(length > 0, length, 1.0)) - (epsilon / 2) * score, -jnp.inf)
    value, _ = sample_piecewise(key, logits, left, jnp.ones_like(left), length, jnp.zeros_like(left))
    return value


def _dm_noise(key, epsilon):
    return laplace(key) * divide_up(2, epsilon)  # scale >= 2/epsilon


def double_monotonization(key: Key, data, *, oracle_fn, r: float, c: float, epsilon: float, beta: float,
                          max_depth: int | None = None, capacity: int | None = None,
                          max_queries: int | None = None, chunk_size: int | None = None,
                          progress: bool = False) -> Release:
    """Double-Monotonization wrapper: range [0, r], claimed c, pure epsilon-DP for every f (Alg 5, Thm D.1).

    In units of c (f' = f/c, r' = r/c), with integer tau (N7):

    .. math::
        w = |x| + \\mathrm{Lap}(2/\\varepsilon),\\ l = \\lfloor w - \\tau - \\tfrac{2}{\\varepsilon}\\ln\\tfrac{2}{\\beta}\\rfloor,\\
        g = M_l[C_l[f']],\\ y_j = \\min_{z \\in N_j(x)} (g(z) - |z| + |x| - j),\\\\
        a = \\mathrm{MedianExpMech}_{\\varepsilon/2}(y_0..y_\\tau; [-3\\tau/2, (r' + 5\\tau)/2]),\\quad
        \\text{out} = c\\,(2a + \\tau + l - w).

    w is released. Privacy: epsilon/2 (w) + epsilon/2 (the score has
    sensitivity 1 since g is monotone, Lemma D.4). The depth
    ``ceil(tau + (2/epsilon) ln(2/beta) - Z)`` is a function of the noise with
    an unbounded tail: without ``max_depth`` the planner requires the power
    set; with a public ``max_depth`` D > max_depth gives BOT and the
    guarantee is ``(epsilon, e^epsilon P(D > max_depth))`` (P6).

    Args:
      key: a single PRNG key.
      data: ``[n, ...]`` rows.
      oracle_fn: untrusted f; values clamped to [0, r], NaN -> 0.
      r: range bound; needs ``r/c >= (16/epsilon) ln(4 (r/c)/beta)``.
      c: claimed Lipschitz constant.
      epsilon: > 0.
      beta: in (0, 1).
      max_depth: optional public depth cap.
      capacity, max_queries, chunk_size, progress: as in :func:`sens_o_matic`.

    Returns:
      ``Release(value, DoubleMonotonizationInfo)``; NaN for BOT.

    Raises:
      ValueError: r/c < tau (the theorem's precondition), bad parameters, too many queries.

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy import oracle
      >>> from gpuprivacy.mechanisms import wrappers
      >>> out = wrappers.double_monotonization(jax.random.key(0), np.ones(10), oracle_fn=oracle.count,
      ...                                      r=2000.0, c=1.0, epsilon=8.0, beta=0.05)
      >>> out.info.tau
      24

    References:
      Linder et al., Algorithm 5, Theorem D.1, Lemmas D.3-D.4.
    """
    concrete("epsilon", epsilon, "double_monotonization")  # calibrated in Python
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    beta = check_probability("beta", beta)
    r, c = _check_range(r, c)
    data, n, capacity, max_queries = check_common(data, capacity, max_queries)
    if max_depth is not None:
        max_depth = check_int("max_depth", max_depth, minimum=0)
    # The guarantee first: a max_depth whose cap's delta reaches 1 is refused here, before any noise.
    guarantee = stated_guarantee(double_monotonization_guarantee, epsilon=epsilon, r=r, c=c, beta=beta,
                                 max_depth=max_depth)
    tau = double_monotonization_tau(r=r, c=c, epsilon=epsilon, beta=beta)
    cap = plan_cap(n, max_depth)
    ps.plan_queries(n, cap, max_queries=max_queries, what="double_monotonization")
    level_key, out_key = threefry.split(key)
    offset = float(2 / mpmath.mpf(epsilon) * mpmath.log(2 / mpmath.mpf(beta)))
    w = n + _dm_noise(level_key, epsilon)
    low = clamp_int(jnp.floor(w - tau - offset))
    depth = n - low
    known_depth = concrete_int(depth)
    if known_depth is not None and max_depth is not None and known_depth > max_depth:
        info = DoubleMonotonizationInfo(w, jnp.asarray(True), tau, depth, 0)
        return Release(jnp.asarray(NONRESPONSE), info, guarantee)
    eval_depth = cap if known_depth is None else max(0, min(known_depth, cap))
    cache = build_cache(oracle_fn, data, depth=eval_depth, cap=cap, capacity=capacity, max_queries=max_queries,
                        chunk_size=chunk_size, progress=progress,
                        sanitise=lambda v: sanitise_real(v, scale=c, lower=0.0, upper=r), fill=jnp.float64(0.0))
    rr = r / c
    value = run_on_cache(_dm_release, cache, out_key, w, low, tau=tau, epsilon=epsilon, rr=rr)
    bot = jnp.asarray(False) if max_depth is None else depth > max_depth
    value = jnp.where(bot, NONRESPONSE, c * value)
    return Release(value, DoubleMonotonizationInfo(w, bot, tau, depth, cache.num_queries), guarantee)


def _dm_release(cache: Cache, key, w, low, *, tau, epsilon, rr):
    lowf = low.astype(jnp.float64)
    # g = M_l[C_l[f']] with floor -l/2 (Def D.1); per-level minima H_d, d = 0..tau.
    minima = closure_max_level_min(cache, low, lambda v, s: (v + (s - low).astype(jnp.float64)) / 2,
                                   -lowf / 2, tau + 1, jnp.inf)
    d = jnp.arange(tau + 1, dtype=jnp.float64)
    offsets = jax.lax.cummin(minima + d) - d  # y_j = min_{d <= j} (H_d + d) - j
    a = median_exponential_mechanism(key, offsets, epsilon=epsilon / 2, lower=-1.5 * tau,
                                      upper=(rr + 5 * tau) / 2)
    return 2 * a + tau + lowf - w
