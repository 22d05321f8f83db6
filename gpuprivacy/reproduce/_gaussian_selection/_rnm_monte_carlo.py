"""Study "lebensold2024-gaussian-selection": Monte Carlo of the Gaussian RNM bound, and the datasets' queries."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import datasets


# ---------------------------------------------------------------------------------------------
# Monte Carlo of the Gaussian RNM bound (Lebensold et al. 2024, Fig. 3, Sec. 3.4).
#
# eps = log E_z[Phi(z - u1)^n] - log E_z[Phi(z - u0)^n], n = d - 1, u1 = (c - 2 Delta)/sigma,
# u0 = c/sigma. Importance sampling: x = x* + s z with x* the mode of the denominator's
# log-integrand l(x) = -x^2/2 + n log Phi(x - u0) and s = max(kappa^-1/2, 0.75), kappa = -l''(x*);
# the floor s^2 > 1/2 keeps the weights' variance finite (the integrands decay like phi(x) on the
# right). Common random numbers: the same x for numerator and denominator. The standard error is
# the delta method on the pooled sums (S1, S0, S11, S00, S10), accumulated in float64 over chunks
# whose keys are fold_in(key, chunk), so the estimate does not depend on how it is chunked.

_IS_MIN_SCALE = 0.75
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _rnm_mode(n, u):
    def slope(x):
        mills = jnp.exp(-0.5 * (x - u) ** 2 - _HALF_LOG_2PI - jax.scipy.special.log_ndtr(x - u))
        return -x + n * mills

    def body(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        up = slope(mid) > 0.0
        return jnp.where(up, mid, lo), jnp.where(up, hi, mid)

    # l' is decreasing, l'(0) = n lambda(-u) >= 0 and l'(x) <= -x + n sqrt(2/pi) ... < 0 at x = n + 40 + u.
    lo, hi = jax.lax.fori_loop(0, 200, body, (jnp.zeros_like(n), n + 40.0 + jnp.abs(u)))
    mode = 0.5 * (lo + hi)
    w = mode - u
    mills = jnp.exp(-0.5 * w * w - _HALF_LOG_2PI - jax.scipy.special.log_ndtr(w))
    return mode, 1.0 + n * mills * (w + mills)


@functools.partial(jax.jit, static_argnames=("chunk_size", "num_chunks"))
def _rnm_importance_sums(keys, n, u_num, u_den, *, chunk_size, num_chunks):
    """Pooled importance-sampling sums per configuration (vmapped over the leading axis)."""

    def one(key, n, u_num, u_den):
        mode, curvature = _rnm_mode(n, u_den)
        scale = jnp.maximum(curvature ** -0.5, _IS_MIN_SCALE)
        offset = -0.5 * mode * mode + n * jax.scipy.special.log_ndtr(mode - u_den)

        def body(i, sums):
            z = jax.random.normal(jax.random.fold_in(key, i), (chunk_size,), jnp.float64)
            x = mode + scale * z
            base = -0.5 * x * x + 0.5 * z * z + jnp.log(scale) - offset  # log(phi(x)/q(x)) - offset
            w_num = jnp.exp(base + n * jax.scipy.special.log_ndtr(x - u_num))
            w_den = jnp.exp(base + n * jax.scipy.special.log_ndtr(x - u_den))
            return sums + jnp.stack([w_num.sum(), w_den.sum(), (w_num * w_num).sum(), (w_den * w_den).sum(),
                                     (w_num * w_den).sum()])

        sums = jax.lax.fori_loop(0, num_chunks, body, jnp.zeros(5, jnp.float64))
        return sums, mode, scale

    return jax.vmap(one)(keys, n, u_num, u_den)


@functools.partial(jax.jit, static_argnames=("chunk_size", "num_chunks"))
def _rnm_plain_log_means(keys, n, u_num, u_den, *, chunk_size, num_chunks):
    """The paper's estimator: log-means over independent plain N(0, 1) samples for NUM and DEN."""

    def one(key, n, u_num, u_den):
        def body(i, acc):
            key_num, key_den = jax.random.split(jax.random.fold_in(key, i))
            z_num = jax.random.normal(key_num, (chunk_size,), jnp.float64)
            z_den = jax.random.normal(key_den, (chunk_size,), jnp.float64)
            chunk = jnp.stack([jax.scipy.special.logsumexp(n * jax.scipy.special.log_ndtr(z_num - u_num)),
                               jax.scipy.special.logsumexp(n * jax.scipy.special.log_ndtr(z_den - u_den))])
            return jnp.logaddexp(acc, chunk)

        acc = jax.lax.fori_loop(0, num_chunks, body, jnp.full(2, -jnp.inf, jnp.float64))
        return acc - math.log(chunk_size * num_chunks)

    return jax.vmap(one)(keys, n, u_num, u_den)


def _importance_estimate(sums: np.ndarray, num_samples: int) -> tuple[float, float]:
    s1, s0, s11, s00, s10 = (float(v) for v in sums)
    m1, m0 = s1 / num_samples, s0 / num_samples
    # r_j = w1_j/m1 - w0_j/m0 has mean 0; eps_hat - eps ~ mean(r) (delta method).
    var_r = (s11 / m1**2 - 2.0 * s10 / (m1 * m0) + s00 / m0**2) / num_samples
    return math.log(m1) - math.log(m0), math.sqrt(max(var_r, 0.0) / num_samples)


def _dataset_queries(config: dict, name: str, d: int) -> np.ndarray:
    if name == "bikes":
        return datasets.bikes_daily_queries(d)
    spec = config["synthetic_energy"][name]
    series = datasets.synthetic_energy_queries(spec["num_users"], spec["num_days"], seed=spec["seed"],
                                               peak_day=spec["peak_day"], cap_kwh=spec["cap_kwh"])
    return np.array(series[:d])
