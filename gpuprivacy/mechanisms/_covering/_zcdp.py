"""zCDP black-box estimate by noisy binary search (Steinke & Steinke 2025, Thm 4.5, App. A.3-A.4), and the conversions.

Step 5 of the covering-design pipeline (:mod:`._grid`); :func:`zcdp_rho_for` and
:func:`gdp_mu_for` convert an (epsilon, delta) target to rho and mu.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from gpuprivacy import noise as _noise
from gpuprivacy._rounding import round_down
from gpuprivacy._checks import check_epsilon, check_key, check_positive, check_probability
from gpuprivacy.accounting import ZCDP
from gpuprivacy.designs import (
    DEFAULT_MAX_WORK,
    hitting_counts,
    required_t,
    robust_order_statistics,
    zcdp_search_parameters,
)
from gpuprivacy.mechanisms._covering._grid import _as_grid_values, _info, _prepare_design, grid_values, output_grid
from gpuprivacy.mechanisms._release import Release, stated_guarantee
from gpuprivacy.subsets import SubsetFamily
from gpuprivacy.mechanisms._common import concrete


# ---------------------------------------------------------------------------------------------------------------
# zCDP: naive noisy binary search with explicit constants (Steinke & Steinke 2025, Thm 4.5, App. A.3-A.4;
# the explicit constants are ours).

@functools.partial(jax.jit, static_argnums=(3, 4))
def _binary_search(key, ell, sigma, steps, grid_size):
    """s noisy comparisons ``l_C(y_mid) + N(0, sigma^2) > tau``; always exactly s Gaussian draws."""
    tau = ell[-1]  # threshold passed as the last entry (float)
    counts = ell[:-1]

    def body(i, state):
        lo, hi = state
        z = _noise.gaussian(jax.random.fold_in(key, i), (), jnp.float64)
        mid = (lo + hi) // 2
        active = hi - lo > 1
        noisy = counts[jnp.clip(mid, 0, grid_size - 1)] + sigma * z
        go_up = noisy > tau
        lo = jnp.where(active & go_up, mid, lo)
        hi = jnp.where(active & ~go_up, mid, hi)
        return lo, hi

    _, hi = jax.lax.fori_loop(0, steps, body, (jnp.int64(-1), jnp.int64(grid_size - 1)))
    return hi


def blackbox_estimate_zcdp_from_values(key, values, *, design: SubsetFamily, rho: float, lower: float, upper: float,
                                       resolution: float, beta: float = 1e-2,
                                       max_work: int = DEFAULT_MAX_WORK) -> Release:
    """rho-zCDP estimator from grid values (see :func:`blackbox_estimate_zcdp`)."""
    concrete("rho", rho, "blackbox_estimate_zcdp_from_values")  # calibrated in Python
    key = check_key(key)
    rho = check_positive("rho", rho)
    grid = output_grid(lower=lower, upper=upper, resolution=resolution)
    beta = check_probability("beta", beta)
    steps, sigma, eta = zcdp_search_parameters(rho=rho, num_outputs=grid.size, beta=beta)
    t, cap = required_t("zcdp", rho=rho, num_outputs=grid.size, beta=beta)
    plan = _prepare_design(design, t, cap, max_work)
    guarantee = stated_guarantee(blackbox_estimate_zcdp_guarantee, rho=rho)
    gv = _as_grid_values(values, design, grid.size)
    f = robust_order_statistics(gv.indices, design, cap=cap, plan=plan)
    index = _zcdp_release(key, f, sigma, eta, steps, grid.size)
    return Release(jnp.asarray(grid)[index], _info(index, t, cap, eta, grid.size, design, plan, f, gv), guarantee)


def _zcdp_release(key, f, sigma, eta, steps, grid_size):
    ell, _ = hitting_counts(jnp.asarray(f), grid_size)
    packed = jnp.append(ell.astype(jnp.float64), jnp.float64(eta))
    return _binary_search(key, packed, jnp.float64(sigma), steps, grid_size)


def blackbox_estimate_zcdp(key, data, oracle_fn, *, design: SubsetFamily, rho: float, lower: float, upper: float,
                           resolution: float, beta: float = 1e-2, present=None, max_work: int = DEFAULT_MAX_WORK,
                           chunk_size: int | None = None, progress: bool = False) -> Release:
    """rho-zCDP estimate by noisy binary search on the sensitivity-1 count l_C (Steinke & Steinke 2025, Thm 4.5).

    With ``s = ceil(log2 |Y|)`` steps, ``sigma = sqrt(s / (2 rho))`` and
    ``eta = sigma Phi^{-1}(1 - beta/s)``, each step compares
    ``l_C(x, y_mid) + N(0, sigma^2)`` with ``tau = eta`` (exactly s Gaussian
    draws, data-independent count). Composition of s Gaussian mechanisms of
    sensitivity 1: rho-zCDP (Bun & Steinke 2016, Prop. 1.6, Lemma 2.3).

    .. math:: \\sigma^2 = \\frac{s}{2\\rho},\\quad C = \\lceil 2\\eta\\rceil,\\quad t = C - 1.

    Accuracy: with probability >= 1 - beta the output y satisfies
    ``l(x, y_{hi-1}) > 0`` (so y <= g(x)) and ``l(x, y) < 2 eta``.

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy import designs, oracle
      >>> from gpuprivacy.mechanisms import blackbox
      >>> data = np.linspace(0.0, 1.0, 600)
      >>> t, _ = designs.required_t("zcdp", rho=0.5, num_outputs=5, beta=0.1)
      >>> design = designs.sample_and_aggregate(600, t=t)
      >>> r = blackbox.blackbox_estimate_zcdp(jax.random.key(0), data, oracle.median, design=design, rho=0.5,
      ...                                     lower=0.0, upper=1.0, resolution=0.25, beta=0.1)
      >>> float(r.value) in (0.0, 0.25, 0.5, 0.75, 1.0)
      True

    References:
      Steinke & Steinke 2025, Thm 4.5, Prop. A.3, App. A.4 (the naive binary search; its
      explicit constants are ours).
    """
    concrete("rho", rho, "blackbox_estimate_zcdp")  # calibrated in Python
    key = check_key(key)
    rho = check_positive("rho", rho)
    grid = output_grid(lower=lower, upper=upper, resolution=resolution)
    t, cap = required_t("zcdp", rho=rho, num_outputs=grid.size, beta=check_probability("beta", beta))
    _prepare_design(design, t, cap, max_work)
    guarantee = stated_guarantee(blackbox_estimate_zcdp_guarantee, rho=rho)  # stated before the oracle runs
    values = grid_values(data, oracle_fn, design, lower=lower, upper=upper, resolution=resolution, present=present,
                         chunk_size=chunk_size, progress=progress)
    release = blackbox_estimate_zcdp_from_values(key, values, design=design, rho=rho, lower=lower, upper=upper,
                                                 resolution=resolution, beta=beta, max_work=max_work)
    return release._replace(guarantee=guarantee)  # the same statement, by the same function


def blackbox_estimate_zcdp_guarantee(*, rho: float) -> ZCDP:
    """rho-zCDP (s adaptive Gaussian mechanisms with sigma^2 = s/(2 rho) on a sensitivity-1 count)."""
    return ZCDP(check_positive("rho", rho))


def _check_target(epsilon, delta) -> tuple[float, float]:
    """The (epsilon, delta) target of a conversion, validated."""
    return check_epsilon(epsilon), check_probability("delta", delta)


def zcdp_rho_for(*, epsilon: float, delta: float) -> float:
    """(4.9) [Ste22, Remark 15]: ``rho = eps^2 / (4 log(1/delta) + 4 eps)`` makes rho-zCDP imply (eps, delta)-DP.

    Rounded down (a smaller rho is the safe side); 0.01687 at (eps, delta) = (1, 1e-6).

    Examples:
      >>> from gpuprivacy.mechanisms import blackbox
      >>> round(blackbox.zcdp_rho_for(epsilon=1.0, delta=1e-6), 5)
      0.01687
    """
    epsilon, delta = _check_target(epsilon, delta)
    rho = epsilon**2 / (4 * math.log(1 / delta) + 4 * epsilon)
    return round_down(rho)  # math.log is inexact: one ulp down covers it (the safe side is a smaller rho)


def gdp_mu_for(*, epsilon: float, delta: float) -> float:
    """The largest mu with mu-GDP implying (eps, delta)-DP: ``delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``.

    Solved with mpmath (50 digits) and rounded down; 0.2367 at (eps, delta) = (1, 1e-6). The zCDP estimator is
    sqrt(2 rho)-GDP (Thm 4.5), so ``rho = mu^2 / 2`` with this mu is the exact GDP route.

    Examples:
      >>> from gpuprivacy.mechanisms import blackbox
      >>> round(blackbox.gdp_mu_for(epsilon=1.0, delta=1e-6), 4)
      0.2367
    """
    import mpmath

    epsilon, delta = _check_target(epsilon, delta)
    with mpmath.workdps(50):
        eps = mpmath.mpf(epsilon)

        def gap(mu):
            return (mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)
                    - mpmath.mpf(delta))

        lo, hi = mpmath.mpf("1e-6"), mpmath.mpf(1)
        while gap(hi) < 0:
            hi *= 2
        for _ in range(200):  # bisection: delta(mu) increases in mu
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if gap(mid) < 0 else (lo, mid)
        return float(lo)
