"""Study "lebensold2024-gaussian-selection": accounting over parameter grids and the exact stopping-time law."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import accounting


# ---------------------------------------------------------------------------------------------
# Accounting over parameter grids (thin wrappers: the library vectorises over broadcast arrays).
#
# The mechanisms compute their epsilon tables under jax.ensure_compile_time_eval(), which is part of
# jit's cache key; evaluating this study's grids in the same context lets the process compile the
# accounting's quadrature kernel once instead of twice (about 6 s on a CPU). Values are unaffected.


def _at_epsilon_post(t, sigma_threshold, sigma_query, threshold, sensitivity, lower, upper) -> np.ndarray:
    """accounting.gaussian_at_epsilon over broadcast arrays (upper bounds), as an array."""
    with jax.ensure_compile_time_eval():
        return np.asarray(accounting.gaussian_at_epsilon(t, sigma_threshold, sigma_query, threshold, sensitivity,
                                                         lower, upper), dtype=np.float64)


def _at_epsilon_no_top(t, sigma_threshold, sigma_query, threshold, sensitivity, lower, upper) -> np.ndarray:
    with jax.ensure_compile_time_eval():
        return np.asarray(accounting.gaussian_at_epsilon_no_top(t, sigma_threshold, sigma_query, threshold,
                                                                sensitivity, lower, upper), dtype=np.float64)


def _rnm_epsilon(sigma, d, sensitivity, lower=0.0, upper=1.0) -> np.ndarray:
    """accounting.gaussian_rnm_epsilon over broadcast arrays (upper bounds), as an array."""
    with jax.ensure_compile_time_eval():
        return np.asarray(accounting.gaussian_rnm_epsilon(sigma, d, sensitivity, lower, upper), dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# Exact stopping-time law of Gaussian above threshold on the all-zero stream (Lebensold et al. 2024, Fig. 1; the exact law is ours).
#
# P(T > k) = E_x[Phi((rho + sigmaX x)/sigmaZ)^k], x ~ N(0, 1): the first k noisy queries
# Z_i ~ N(0, sigmaZ^2) all stay below the noisy threshold rho + sigmaX x. The integrand is
# log-concave; for sigmaZ = sqrt(3) sigmaX and k <= 2^20 its mass lies well inside the grid
# (checked at run time: both ends must be e^-30 below the peak).

_LAW_GRID = np.linspace(-14.0, 26.0, 8001)
_LAW_QUANTILE_MAX_K = 2**20


def _log_survival_one(k, threshold, sigma_threshold, sigma_query):
    x = jnp.asarray(_LAW_GRID, dtype=jnp.float64)
    h = _LAW_GRID[1] - _LAW_GRID[0]
    values = (-0.5 * x * x - 0.5 * math.log(2 * math.pi)
              + k * jax.scipy.special.log_ndtr((threshold + sigma_threshold * x) / sigma_query))
    peak = jnp.max(values)
    edge = jnp.maximum(values[0], values[-1]) - peak
    return jax.scipy.special.logsumexp(values) + math.log(h), edge


@jax.jit
def _log_survival(k, threshold, sigma_threshold, sigma_query):
    """log P(T > k) for a vector of k (float64) at one configuration; and the worst edge gap."""
    log_s, edge = jax.lax.map(lambda kk: _log_survival_one(kk, threshold, sigma_threshold, sigma_query), k,
                              batch_size=64)
    return log_s, jnp.max(edge)


@jax.jit
def _survival_quantiles(threshold, sigma_threshold, sigma_query, levels):
    """Smallest integer k with P(T > k) <= level, for each level (bisection over k), vmapped."""

    def one(level):
        def body(_, bracket):
            lo, hi = bracket  # P(T > lo) > level >= P(T > hi)
            mid = jnp.floor(0.5 * (lo + hi))
            above = _log_survival_one(mid, threshold, sigma_threshold, sigma_query)[0] > jnp.log(level)
            return jnp.where(above, mid, lo), jnp.where(above, hi, mid)

        _, hi = jax.lax.fori_loop(0, 24, body, (jnp.zeros((), jnp.float64),
                                                jnp.full((), float(_LAW_QUANTILE_MAX_K), jnp.float64)))
        return hi

    return jax.vmap(one)(levels)


def _stopping_law(threshold, sigma_threshold, sigma_query, *, k_max=None) -> dict:
    """Median, 80th percentile and P(T > 200) of the 1-based stopping time; optionally log P(T > k), k <= k_max."""
    args = tuple(jnp.asarray(v, jnp.float64) for v in (threshold, sigma_threshold, sigma_query))
    quantiles = np.asarray(_survival_quantiles(*args, jnp.asarray([0.5, 0.2], jnp.float64)))
    probe, edge = _log_survival(jnp.asarray([200.0, float(_LAW_QUANTILE_MAX_K)], jnp.float64), *args)
    if float(edge) > -30.0:
        raise RuntimeError(f"stopping-time law: the integration grid does not contain the mass at rho={threshold}, "
                           f"sigmaX={sigma_threshold}, sigmaZ={sigma_query} (edge gap {float(edge):.1f}).")
    out = {"median": int(quantiles[0]), "p80": int(quantiles[1]), "survival_200": float(np.exp(probe[0]))}
    if out["p80"] >= _LAW_QUANTILE_MAX_K:
        out["p80"] = None
    if k_max is not None:
        log_s, edge = _log_survival(jnp.arange(k_max + 1, dtype=jnp.float64), *args)
        out["survival"] = np.exp(np.asarray(log_s))
    return out
