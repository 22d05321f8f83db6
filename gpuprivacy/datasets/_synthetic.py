"""Seeded synthetic query vectors for sweeps and tests."""

from __future__ import annotations

import functools
import math

import numpy as np

from gpuprivacy._checks import check_int


def synthetic_uniform_queries(d: int, *, seed: int = 0) -> np.ndarray:
    """``d`` queries drawn independently and uniformly from [0, 1).

    The values come from NumPy's ``PCG64`` bit generator seeded with ``seed``
    (``np.random.default_rng(seed).random(d)``), whose stream NumPy keeps
    stable across releases, so a seed names the same vector everywhere. The
    vector is public test data: it is not a privacy-relevant release.

    Args:
      d: number of queries, >= 1.
      seed: a non-negative integer.

    Returns:
      ``float64[d]``.

    Examples:
      >>> q = synthetic_uniform_queries(5, seed=1)
      >>> q.shape, bool(((0 <= q) & (q < 1)).all())
      ((5,), True)
    """
    d = check_int("d", d, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    return np.random.default_rng(seed).random(d)


def synthetic_energy_queries(num_users: int, num_days: int, *, seed: int, peak_day: int,
                             cap_kwh: float) -> np.ndarray:
    """Daily mean household energy use, clipped and scaled to [0, 1]: a SYNTHETIC stand-in.

    Stands in for the London LCL and NEAR smart-meter series of Lebensold et
    al. (arXiv 2402.06137v2, App. B), which cannot be shipped. Household ``u`` uses

    .. math::

      x_{u,t} = \\exp(\\mu_u + A\\cos(2\\pi(t - t_{peak})/365.25) + w_{t \\bmod 7} + e_{u,t})

    kWh on day ``t``, with :math:`\\mu_u \\sim N(\\log 9, 0.5^2)`, ``A = 0.25``,
    :math:`w \\sim N(0, 0.05^2)` and :math:`e \\sim N(0, 0.3^2)`; the query is
    :math:`q_t = N^{-1}\\sum_u \\min(x_{u,t}, B)/B`, so replacing one household
    moves every :math:`q_t` by at most :math:`1/N` (the DP-rigorous scaling).

    Args:
      num_users: households ``N`` >= 1.
      num_days: days >= 1.
      seed: non-negative integer seed of NumPy's PCG64 stream.
      peak_day: day index of the seasonal peak.
      cap_kwh: the public clipping cap ``B`` > 0.

    Returns:
      read-only ``float64[num_days]`` in [0, 1]; equal arguments return the same (cached) array.

    Examples:
      >>> q = synthetic_energy_queries(50, 10, seed=1, peak_day=0, cap_kwh=40.0)
      >>> q.shape, bool(((0 <= q) & (q <= 1)).all())
      ((10,), True)
    """
    num_users = check_int("num_users", num_users, minimum=1)
    num_days = check_int("num_days", num_days, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    peak_day = check_int("peak_day", peak_day)
    if not (isinstance(cap_kwh, (int, float)) and math.isfinite(cap_kwh) and cap_kwh > 0):
        raise ValueError(f"cap_kwh must be a finite number > 0, got {cap_kwh!r}.")
    return _energy_queries(num_users, num_days, seed, peak_day, float(cap_kwh))


@functools.lru_cache(maxsize=8)
def _energy_queries(num_users: int, num_days: int, seed: int, peak_day: int, cap_kwh: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    levels = rng.normal(math.log(9.0), 0.5, size=num_users)  # mu_u: typical ~9 kWh/day per household
    weekday = rng.normal(0.0, 0.05, size=7)
    t = np.arange(num_days)
    season = 0.25 * np.cos(2.0 * math.pi * (t - peak_day) / 365.25)  # highest at the seasonal peak
    total = np.zeros(num_days)
    for start in range(0, num_users, 1024):  # bounded memory: 1024 users at a time
        mu = levels[start:start + 1024, None]
        noise = rng.normal(0.0, 0.3, size=(mu.shape[0], num_days))
        total += np.minimum(np.exp(mu + season + weekday[t % 7] + noise), cap_kwh).sum(axis=0)
    queries = total / (num_users * cap_kwh)
    queries.setflags(write=False)
    return queries
