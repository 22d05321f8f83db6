"""Study "seed004": Gaussian selection mechanisms with pure (ex-ante / ex-post) DP.

Reproduces the numerical content of Lebensold, Precup & Balle, "On the
Privacy of Selection Mechanisms with Gaussian Noise", AISTATS 2024 (arXiv
2402.06137v2), as specified (and corrected) in
``shared/specs/004_gaussian_selection.md`` ("spec 004"):

* ``figure1``: ex-ante Zhu-Wang RDP + BBGHS vs ex-post
  :math:`\\varepsilon^{\\mathrm{post}}(t)` of Gaussian above threshold,
  the crossing time :math:`t^*`, and the stopping-time median / 80th
  percentile on the all-zero stream from the exact law
  :math:`P(T > k) = \\mathbb E_x[\\Phi((\\rho + \\sigma_X x)/\\sigma_Z)^k]`,
  checked by Monte Carlo of :func:`gpuprivacy.mechanisms.gaussian_above_threshold`
  (spec Sec. 4.5, 5.2, 5.4);
* ``figure2``: :math:`\\varepsilon^{\\mathrm{post}}(t)` against the threshold
  (spec Sec. 5.4);
* ``figure3``: the pure epsilon of Gaussian report noisy max by quadrature vs
  Monte Carlo with common random numbers and importance sampling at the mode,
  batched on the device, next to the paper's plain Monte Carlo (spec Sec. 6.1);
* ``figures7_8``: the pure RNM epsilon vs the post-processing baselines, and
  the difference over (sigma, d) (spec Sec. 3.2, 5.3);
* ``rnm_offline``: offline report noisy max on UCI Bikes (App. B.3; spec
  Sec. 4.11, 5.5) and on seeded synthetic energy stand-ins for LCL and NEAR
  (spec Sec. 5.1);
* ``fsrc_online``: the fully adaptive Gaussian sparse vector under filtered
  self-reporting composition vs the Whitehouse et al. filter on UCI Bikes
  (Fig. 4, 17, 18; spec Sec. 4.12, 5.6) and on the synthetic LCL stand-in.

Every number comes from the public API (:mod:`gpuprivacy.accounting`,
:mod:`gpuprivacy.mechanisms`, :mod:`gpuprivacy.datasets`); the only numerics
written here are the Monte Carlo estimators of Fig. 3 and the exact
stopping-time law of Fig. 1, which are checks, not accounting, and the
seeded generator of the synthetic energy stand-ins (spec Sec. 5.1), which
``gpuprivacy.datasets`` does not ship yet. Each part can be run alone with
:func:`run_seed004_part`; :func:`seed004_config` holds all parameters.
"""

from __future__ import annotations

import csv
import functools
import json
import math
import pathlib
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import accounting, datasets, mechanisms
from gpuprivacy._progress import Progress
from gpuprivacy.reproduce._plots import require_matplotlib
from gpuprivacy.reproduce._registry import register_study

NAME = "seed004"
SEED = 240206137  # arXiv 2402.06137
PARTS = ("figure1", "figure2", "figure3", "figures7_8", "rnm_offline", "fsrc_online")
PAPER = ("Lebensold, Precup & Balle, *On the Privacy of Selection Mechanisms with Gaussian Noise*, AISTATS 2024 "
         "([arXiv 2402.06137v2](https://arxiv.org/abs/2402.06137v2))")
SQRT3 = math.sqrt(3.0)

# The budget used to observe the spend of an unconstrained filter (the paper's experiments report the
# final spend, i.e. epsilon = infinity; the mechanisms need a finite epsilon).
UNBOUNDED_BUDGET = 1e9



# ---------------------------------------------------------------------------------------------
# Configuration.


def seed004_config(*, quick: bool = False) -> dict:
    """All parameters of study ``seed004`` as a JSON-ready dict.

    Full mode uses the paper's sizes (10,000 stopping-time simulations,
    1,000 RNM trials, 50 sparse-vector runs, the paper's grids); quick mode
    keeps every part but shrinks grids, trials and runs so that the whole
    study runs in well under a minute on two CPU cores. Quick mode keeps
    every grid point that has a reference value in spec 004 (Secs 5.3-5.6).

    Args:
      quick: the reduced smoke-test configuration.

    Returns:
      ``{"seed", "quick", "parts", "<part>": {...}}``.
    """
    if not isinstance(quick, bool):
        raise TypeError(f"quick must be True or False, got {quick!r}.")
    bikes_n = datasets.BIKES_DAILY_POPULATION
    figure1 = {
        "sensitivity": 1e-3, "delta": 1e-5, "lower": 0.0, "upper": 1.0,
        "thresholds": [0.5, 0.65, 0.75],
        # Paper Fig. 1: sigma in linspace(0.2, 0.3, 20), t in linspace(50, 3, 20, int); sigmaX = sigma,
        # sigmaZ = sqrt(3) sigma (spec 5.2).
        "heatmap_sigmas": [round(float(s), 12) for s in np.linspace(0.2, 0.3, 6 if quick else 20)],
        "heatmap_times": [int(t) for t in np.linspace(50, 3, 20).astype(int)],
        "curve_sigmas": [0.2, 0.3],
        "curve_max_time": 200,
        # All-zero stream (spec 4.5); 1000 steps instead of the notebook's 200, so that every
        # 80th percentile is observed (rho = 0.75, sigma = 0.2 has p80 = 207).
        "simulation_stream_length": 1000,
        "simulation_trials": 2000 if quick else 10_000,
        "simulation_configs": [[0.5, 0.2]] if quick else [[r, s] for r in (0.5, 0.65, 0.75) for s in (0.2, 0.3)],
        "dkw_failure_probability": 1e-6,
    }
    figure2 = {
        "sensitivity": 1e-3, "lower": 0.0, "upper": 1.0, "sigma_threshold": 0.15,
        "sigma_query": SQRT3 * 0.15,
        "times": [1, 2, 3, 5, 10, 20, 50, 100],
        "thresholds": [round(0.1 * i, 10) for i in range(11)] if quick else [round(0.025 * i, 10) for i in range(41)],
        "no_top_threshold": 0.5, "no_top_times": [1, 5, 20, 100],
        "growth_threshold": 0.3, "growth_times": [1000, 10_000, 100_000, 1_000_000, 100_000_000],
    }
    figure3 = {
        "sigma": 0.3, "sensitivity": 0.01, "lower": 0.0, "upper": 1.0,
        "d": [2, 3, 5, 10, 20, 50, 100, 200, 500, 1000],
        "is_chunk_size": 2**16 if quick else 2**20, "is_num_chunks": 4 if quick else 16,
        # The paper's estimator: plain N(0, 1) samples, independent for numerator and denominator,
        # repeated (100 trials in the paper, each of 10^10 samples on a V100).
        "plain_chunk_size": 2**14 if quick else 2**18, "plain_num_chunks": 1,
        "plain_repeats": 8 if quick else 100,
    }
    figure7 = {
        "sensitivity": 1e-3, "delta": 1e-5, "lower": 0.0, "upper": 1.0,
        "sigmas": [0.1, 0.2, 0.3, 0.4, 0.5],
        "d": [int(d) for d in np.logspace(4, 10, 8, base=2).astype(int)],  # 16 ... 1024, as the paper's code
        "conversions": ["analytic", "bbghs", "markov"],
        "heatmap_sigmas": [round(float(s), 12) for s in np.linspace(0.05, 0.5, 6 if quick else 19)],
        "heatmap_d": sorted({round(float(d)) for d in np.geomspace(2, 1024, 6 if quick else 19)}),
    }
    rnm_sigmas = [0.02, 0.05, 0.1, 0.2] if quick else [0.02, 0.03, 0.05, 0.08, 0.1, 0.15, 0.2, 0.3]
    rnm_offline = {
        "delta": 1e-5, "lower": 0.0, "upper": 1.0, "sigmas": rnm_sigmas,
        "trials": 200 if quick else 1000,
        "datasets": [
            {"name": "bikes", "d": [90, 365], "population": bikes_n},
            {"name": "lcl-synthetic", "d": [365] if quick else [829, 365], "population": 5564},
        ] + ([] if quick else [{"name": "near-synthetic", "d": [364], "population": 300}]),
    }
    fsrc_online = {
        "lower": 0.0, "upper": 1.0, "runs": 10 if quick else 50, "budget": 1.0,
        "schedule": "inverse_square",
        "whitehouse_conversions": ["markov"] if quick else ["markov", "bbghs"],
        "datasets": [
            {"name": "bikes", "threshold": 0.575, "population": bikes_n, "num_days": 731,
             "sigma_thresholds": [0.09, 0.12, 0.15] if quick
             else [round(0.09 + 0.01 * i, 10) for i in range(7)]},
            # Quick mode keeps the first 731 of the 829 days, so that the sparse-vector kernels compiled
            # for the Bikes stream are reused.
            {"name": "lcl-synthetic", "threshold": 0.33, "population": 5564, "num_days": 731 if quick else 829,
             "sigma_thresholds": [0.04] if quick else [round(0.04 + 0.02 * i, 10) for i in range(7)]},
        ],
    }
    energy = {
        # Spec 004 Sec. 5.1 synthetic stand-ins: x_{u,t} = exp(mu_u + A cos(2 pi (t - t_peak)/365.25)
        # + w_dow(t) + e_{u,t}), mu_u ~ N(log 9, 0.5^2), A = 0.25, w ~ N(0, 0.05^2), e ~ N(0, 0.3^2),
        # clipped to a public cap B; q_t = mean_u x_{u,t} / B.
        "lcl-synthetic": {"num_users": 5564, "num_days": 829, "seed": SEED + 1, "peak_day": 53,
                          "cap_kwh": 40.0, "first_day": "2011-11-23"},
        "near-synthetic": {"num_users": 300, "num_days": 364, "seed": SEED + 2, "peak_day": 196,
                           "cap_kwh": 40.0, "first_day": "2013-01-01"},
    }
    return {"seed": SEED, "quick": quick, "parts": list(PARTS), "figure1": figure1, "figure2": figure2,
            "figure3": figure3, "figures7_8": figure7, "rnm_offline": rnm_offline, "fsrc_online": fsrc_online,
            "synthetic_energy": energy}


# ---------------------------------------------------------------------------------------------
# Reference values of spec 004 and the comparison rows.


def _decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def _compare(rows: list, quantity: str, section: str, ours, spec, *, tolerance: float | None = None,
             note: str = "") -> None:
    """Appends one ours-vs-spec row. ``spec`` is the string printed in the spec.

    Without ``tolerance`` the spec value is taken as rounded to its printed digits, so the
    row is "ok" when ours rounds to it (half a unit in the last place). Integers must match.
    """
    spec_value = float(spec)
    if ours is None:
        rows.append({"quantity": quantity, "section": section, "spec": spec, "ours": None, "abs_diff": None,
                     "rel_diff": None, "tolerance": tolerance, "status": "missing", "note": note})
        return
    ours = float(ours)
    if tolerance is None:
        tolerance = 0.5 * 10.0 ** -_decimals(spec) * (1 + 1e-9) if "." in spec else 0.0
    diff = abs(ours - spec_value)
    rows.append({"quantity": quantity, "section": section, "spec": spec, "ours": ours, "abs_diff": diff,
                 "rel_diff": diff / abs(spec_value) if spec_value else None, "tolerance": tolerance,
                 "status": "ok" if diff <= tolerance else "differs", "note": note})


# Spec 004 Sec. 5.3 (Fig. 7 grid; Delta = 1e-3, [0, 1], delta = 1e-5).
SPEC_FIG7 = {
    "pure": {
        0.1: "0.20405 0.21492 0.22434 0.23183 0.23814 0.24370 0.24868 0.25323",
        0.2: "0.05797 0.06211 0.06591 0.06907 0.07181 0.07428 0.07654 0.07863",
        0.3: "0.02921 0.03165 0.03395 0.03589 0.03760 0.03917 0.04060 0.04194",
        0.4: "0.01846 0.02017 0.02179 0.02318 0.02441 0.02554 0.02659 0.02757",
        0.5: "0.01315 0.01445 0.01569 0.01677 0.01773 0.01862 0.01944 0.02021",
    },
    "analytic": {
        0.1: "0.1254 0.1703 0.2386 0.3313 0.4578 0.6334 0.8765 1.2151",
        0.2: "0.0586 0.0798 0.1120 0.1556 0.2151 0.2976 0.4112 0.5686",
        0.3: "0.0375 0.0510 0.0718 0.0999 0.1382 0.1913 0.2644 0.3655",
        0.4: "0.0272 0.0371 0.0523 0.0729 0.1009 0.1397 0.1932 0.2672",
        0.5: "0.0212 0.0290 0.0409 0.0570 0.0790 0.1095 0.1515 0.2095",
    },
    "bbghs": {
        0.1: "0.1394 0.1887 0.2636 0.3650 0.5030 0.6942 0.9582 1.3252",
        0.3: "0.0422 0.0573 0.0803 0.1113 0.1535 0.2118 0.2919 0.4024",
        0.5: "0.0241 0.0328 0.0460 0.0639 0.0883 0.1219 0.1681 0.2318",
    },
    "markov": {
        0.1: "0.1927 0.2553 0.3486 0.4725 0.6379 0.8632 1.1688 1.5867",
        0.3: "0.0641 0.0848 0.1156 0.1564 0.2107 0.2843 0.3833 0.5175",
        0.5: "0.0384 0.0508 0.0693 0.0937 0.1262 0.1701 0.2292 0.3092",
    },
}
SPEC_FIG3 = "0.12594 0.17443 0.22036 0.26614 0.30067 0.33636 0.35867 0.37829 0.40127 0.41699"
# Spec 004 Sec. 5.4, Fig. 2 grid (sigmaX = 0.15, sigmaZ = sqrt(3) 0.15, Delta = 1e-3), rho = 0.0, ..., 1.0.
SPEC_FIG2 = {
    1: "0.00266 0.00340 0.00421 0.00508 0.00599 0.00693 0.00791 0.00890 0.00991 0.01094 0.01198",
    2: "0.01819 0.01804 0.01793 0.01785 0.01781 0.01779 0.01781 0.01785 0.01793 0.01804 0.01819",
    3: "0.02889 0.02812 0.02739 0.02668 0.02600 0.02536 0.02474 0.02417 0.02364 0.02315 0.02271",
    5: "0.04287 0.04132 0.03980 0.03831 0.03685 0.03543 0.03405 0.03271 0.03142 0.03019 0.02902",
    10: "0.06061 0.05817 0.05575 0.05336 0.05101 0.04870 0.04643 0.04422 0.04205 0.03996 0.03794",
    20: "0.07543 0.07236 0.06932 0.06630 0.06333 0.06039 0.05749 0.05465 0.05185 0.04912 0.04647",
    50: "0.09058 0.08702 0.08349 0.07998 0.07650 0.07306 0.06966 0.06629 0.06298 0.05971 0.05651",
    100: "0.09954 0.09577 0.09202 0.08829 0.08460 0.08093 0.07729 0.07369 0.07013 0.06661 0.06314",
}
SPEC_NO_TOP = {1: "0.00693", 5: "0.01909", 20: "0.03087", 100: "0.04158"}  # rho = 0.5
SPEC_GROWTH = {1000: "0.10867", 10_000: "0.12341", 100_000: "0.13544", 1_000_000: "0.14584",
               100_000_000: "0.16362"}  # rho = 0.3
# Spec 004 Sec. 5.4, Fig. 1 grid: (rho, sigma) -> ex-ante BBGHS, t*, median, p80 (None: "> 200").
SPEC_FIG1 = {
    (0.5, 0.2): ("0.0421", 29, 9, 33), (0.5, 0.3): ("0.0247", 37, 4, 13),
    (0.65, 0.2): ("0.0465", 66, 22, 94), (0.65, 0.3): ("0.0263", 65, 7, 22),
    (0.75, 0.2): ("0.0496", 137, 43, None), (0.75, 0.3): ("0.0275", 102, 9, 33),
}
SPEC_FIG1_EXPOST = {50: "0.0469", 30: "0.0423", 10: "0.0305", 3: "0.0156"}  # sigma = 0.2, rho = 0.5
# Spec 004 Sec. 5.5 (UCI Bikes offline RNM; accuracies carry MC noise of about +-0.004).
SPEC_BIKES_RNM = {
    365: {0.02: ("0.7413", "0.4821", "0.986"), 0.05: ("0.1265", "0.1776", "0.96"),
          0.1: ("0.0353", "0.0832", "0.93"), 0.15: ("0.0174", "0.0533", "0.912"),
          0.2: ("0.0108", "0.0388", "0.897")},
    90: {0.05: ("0.1218", "0.0826", "0.976"), 0.08: ("0.0502", "0.0492", "0.951"),
         0.1: ("0.0333", "0.0385", "0.94"), 0.2: ("0.0099", "0.0178", "0.907")},
}
SPEC_BIKES_UNIFORM = {365: "0.7285", 90: "0.8662"}
# At epsilon = eps_pure(sigma = 0.1, d = 365): accuracy of each mechanism.
SPEC_BIKES_EQUAL_EPSILON = {"laplace_standard": "0.995", "exponential_mechanism": "0.994",
                            "permute_and_flip": "0.997", "gaussian": "0.93", "laplace_post_processing": "0.740"}
SPEC_RNM_MC_NOISE = 0.004
# Spec 004 Sec. 5.6 (UCI Bikes FSRC; "indicative").
SPEC_BIKES_FSRC = {
    0.09: {"epsilon_max": "0.0239", "tops": "276", "fsrc_spend": "1.42", "whitehouse_style": "1.75",
           "basic": "6.58", "f1": "0.76"},
    0.12: {"epsilon_max": "0.0152", "fsrc_spend": "0.889", "whitehouse_style": "1.086", "basic": "4.13",
           "f1": "0.71"},
    0.15: {"epsilon_max": "0.0110", "fsrc_spend": "0.615", "whitehouse_style": "0.773", "basic": "2.94",
           "f1": "0.66"},
}
SPEC_BIKES_EXPOST_009 = {1: "0.00277", 2: "0.00643", 5: "0.0122", 10: "0.01635"}


def _spec_row(text: str) -> list[str]:
    return text.split()


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
# Exact stopping-time law of Gaussian above threshold on the all-zero stream (spec 4.5 [D]).
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


# ---------------------------------------------------------------------------------------------
# Monte Carlo of the Gaussian RNM bound (Fig. 3; spec 6.1 "MC cross-check").
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


# ---------------------------------------------------------------------------------------------
# Synthetic energy stand-ins (spec 004 Sec. 5.1): seeded, clearly synthetic, DP-rigorous scaling.


@functools.lru_cache(maxsize=8)
def _energy_series(num_users: int, num_days: int, seed: int, peak_day: int, cap_kwh: float) -> np.ndarray:
    """q_t = (1/N) sum_u min(x_{u,t}, B)/B in [0, 1]: replacing one user moves every q_t by <= 1/N."""
    rng = np.random.default_rng(seed)
    levels = rng.normal(math.log(9.0), 0.5, size=num_users)  # mu_u: typical ~9 kWh/day per household
    weekday = rng.normal(0.0, 0.05, size=7)
    t = np.arange(num_days)
    season = 0.25 * np.cos(2.0 * math.pi * (t - peak_day) / 365.25)  # highest at the winter peak
    total = np.zeros(num_days)
    for start in range(0, num_users, 1024):  # bounded memory: 1024 users at a time
        mu = levels[start:start + 1024, None]
        noise = rng.normal(0.0, 0.3, size=(mu.shape[0], num_days))
        total += np.minimum(np.exp(mu + season + weekday[t % 7] + noise), cap_kwh).sum(axis=0)
    queries = total / (num_users * cap_kwh)
    queries.setflags(write=False)
    return queries


def _dataset_queries(config: dict, name: str, d: int) -> np.ndarray:
    if name == "bikes":
        return datasets.bikes_daily_queries(d)
    spec = config["synthetic_energy"][name]
    series = _energy_series(spec["num_users"], spec["num_days"], spec["seed"], spec["peak_day"], spec["cap_kwh"])
    return np.array(series[:d])


DATASET_LABELS = {"bikes": "UCI Bikes (real data)", "lcl-synthetic": "LCL-like (SYNTHETIC stand-in)",
                  "near-synthetic": "NEAR-like (SYNTHETIC stand-in)"}


# ---------------------------------------------------------------------------------------------
# Part: Figure 1.


def _figure1(config: dict, key, out_dir: pathlib.Path) -> dict:
    c = config["figure1"]
    delta_q, delta, lower, upper = c["sensitivity"], c["delta"], c["lower"], c["upper"]
    rhos = np.array(c["thresholds"])
    sigmas = np.array(c["heatmap_sigmas"])
    times = np.array(c["heatmap_times"])
    curve_sigmas = np.array(c["curve_sigmas"])
    t_curve = np.arange(1, c["curve_max_time"] + 1)
    # One batch: the heat map grid [rho, sigma, t] and the curves [rho, curve sigma, t].
    heat_shape = (rhos.size, sigmas.size, times.size)
    curve_shape = (rhos.size, curve_sigmas.size, t_curve.size)
    r_h, s_h, t_h = np.meshgrid(rhos, sigmas, times, indexing="ij")
    r_c, s_c, t_c = np.meshgrid(rhos, curve_sigmas, t_curve, indexing="ij")
    rho_all = np.concatenate([r_h.ravel(), r_c.ravel()])
    sigma_all = np.concatenate([s_h.ravel(), s_c.ravel()])
    t_all = np.concatenate([t_h.ravel(), t_c.ravel()])
    post_all = _at_epsilon_post(t_all, sigma_all, SQRT3 * sigma_all, rho_all, delta_q, lower, upper)
    post_heat = post_all[:r_h.size].reshape(heat_shape)
    post_curve = post_all[r_h.size:].reshape(curve_shape)

    def ante(rho, sigma, conversion):
        return accounting.zhu_wang_at_epsilon(sigma, SQRT3 * sigma, rho, delta_q, delta, conversion=conversion)

    ante_heat = np.array([[ante(r, s, "bbghs") for s in sigmas] for r in rhos])
    ante_curve = {conv: np.array([[ante(r, s, conv) for s in curve_sigmas] for r in rhos])
                  for conv in ("bbghs", "markov")}
    laws_heat = [[_stopping_law(r, s, SQRT3 * s) for s in sigmas] for r in rhos]

    curves = []
    for i, rho in enumerate(rhos):
        for j, sigma in enumerate(curve_sigmas):
            post = post_curve[i, j]
            below = np.flatnonzero(post < ante_curve["bbghs"][i, j])
            law = _stopping_law(rho, sigma, SQRT3 * sigma)
            curves.append({
                "threshold": float(rho), "sigma": float(sigma),
                "ex_ante_bbghs": float(ante_curve["bbghs"][i, j]), "ex_ante_markov": float(ante_curve["markov"][i, j]),
                "t_star": int(below[-1] + 1) if below.size else None,
                "t_star_censored": bool(below.size and below[-1] + 1 == t_curve[-1]),
                "expost_increasing": bool(np.all(np.diff(post) > 0)),
                "median": law["median"], "p80": law["p80"], "survival_200": law["survival_200"],
                "epsilon_post": post.tolist(),
            })

    # Monte Carlo check of the exact law with the library's mechanism on the all-zero stream.
    length, trials = c["simulation_stream_length"], c["simulation_trials"]
    zeros = np.zeros(length)
    dkw = math.sqrt(math.log(2.0 / c["dkw_failure_probability"]) / (2.0 * trials))
    simulations = []
    for index, (rho, sigma) in enumerate(c["simulation_configs"]):
        # The capped ex-ante guarantee of this stream (spec 3.3 [D]); computing it first also fills the
        # mechanism's table cache outside the vmap trace of run_trials.
        capped = mechanisms.gaussian_above_threshold_guarantee(
            threshold=rho, sigma_threshold=sigma, sigma_query=SQRT3 * sigma, sensitivity=delta_q, lower=lower,
            upper=upper, num_queries=length).epsilon
        release = mechanisms.run_trials(mechanisms.gaussian_above_threshold, jax.random.fold_in(key, index), trials,
                                        zeros, threshold=rho, sigma_threshold=sigma, sigma_query=SQRT3 * sigma,
                                        sensitivity=delta_q, lower=lower, upper=upper)
        stops = np.asarray(release.value).astype(np.int64)
        stops = np.where(stops == mechanisms.NO_STOPPING_TIME, length + 1, stops)  # censored: T > length
        law = _stopping_law(rho, sigma, SQRT3 * sigma, k_max=length)
        k = np.arange(length + 1)
        empirical = (stops[None, :] > k[:, None]).mean(axis=1)
        deviation = float(np.max(np.abs(empirical - law["survival"])))
        simulations.append({
            "threshold": rho, "sigma": sigma, "trials": trials, "stream_length": length,
            "median_exact": law["median"], "p80_exact": law["p80"],
            "median_mc": int(np.sort(stops)[math.ceil(0.5 * trials) - 1]),
            "p80_mc": int(np.sort(stops)[math.ceil(0.8 * trials) - 1]),
            "max_survival_deviation": deviation, "dkw_bound": dkw, "within_dkw": deviation <= dkw,
            "capped_epsilon": capped,
        })

    heat = {"thresholds": rhos.tolist(), "sigmas": sigmas.tolist(), "times": times.tolist(),
            "epsilon_post": post_heat.tolist(), "ex_ante_bbghs": ante_heat.tolist(),
            "median": [[law["median"] for law in row] for row in laws_heat],
            "p80": [[law["p80"] for law in row] for row in laws_heat]}
    _plot_figure1_curves(curves, t_curve, out_dir / "fig1_expost_vs_exante.png", c)
    _plot_figure1_heatmap(heat, out_dir / "fig1_heatmap.png", c)

    rows = []
    for curve in curves:
        spec = SPEC_FIG1[(curve["threshold"], curve["sigma"])]
        label = f"ρ = {curve['threshold']}, σ = {curve['sigma']}"
        _compare(rows, f"Fig. 1 ex-ante ε (Zhu-Wang + BBGHS), {label}", "5.4", curve["ex_ante_bbghs"], spec[0])
        _compare(rows, f"Fig. 1 t* (largest t with ex-post < ex-ante), {label}", "5.4", curve["t_star"], str(spec[1]))
        _compare(rows, f"Fig. 1 median stopping time (exact law), {label}", "5.4", curve["median"], str(spec[2]))
        if spec[3] is None:
            _compare(rows, f"Fig. 1 P(T > 200) (exact law; spec: p80 > 200), {label}", "5.4",
                     curve["survival_200"], "0.205")
        else:
            _compare(rows, f"Fig. 1 80th pct stopping time (exact law), {label}", "5.4", curve["p80"], str(spec[3]))
    reference = next(cv for cv in curves if cv["threshold"] == 0.5 and cv["sigma"] == 0.2)
    for t, text in SPEC_FIG1_EXPOST.items():
        _compare(rows, f"Fig. 1 ex-post ε_post(t = {t}), ρ = 0.5, σ = 0.2", "5.4",
                 reference["epsilon_post"][t - 1], text)
    notebook = next(cv for cv in curves if cv["threshold"] == 0.75 and cv["sigma"] == 0.3)
    _compare(rows, "authors' notebook: ex-ante ε (BBGHS), ρ = 0.75, σ = 0.3", "5.4", notebook["ex_ante_bbghs"],
             "0.027534")
    _compare(rows, "authors' notebook: ex-post ε_post(3), ρ = 0.75, σ = 0.3", "5.4", notebook["epsilon_post"][2],
             "0.007968")
    _compare(rows, "authors' notebook: ex-ante ε with Markov conversion, ρ = 0.75, σ = 0.3", "5.4",
             notebook["ex_ante_markov"], "0.036386")
    return {"curves": curves, "heatmap": heat, "simulations": simulations, "comparisons": rows,
            "figures": ["fig1_expost_vs_exante.png", "fig1_heatmap.png"]}


# ---------------------------------------------------------------------------------------------
# Part: Figure 2.


def _figure2(config: dict, key, out_dir: pathlib.Path) -> dict:
    del key  # deterministic
    c = config["figure2"]
    args = (c["sigma_threshold"], c["sigma_query"])
    common = (c["sensitivity"], c["lower"], c["upper"])
    times = np.array(c["times"])
    rhos = np.array(c["thresholds"])
    t_grid, r_grid = np.meshgrid(times, rhos, indexing="ij")
    growth_t = np.array(c["growth_times"])
    t_all = np.concatenate([t_grid.ravel(), growth_t])
    r_all = np.concatenate([r_grid.ravel(), np.full(growth_t.size, c["growth_threshold"])])
    post_all = _at_epsilon_post(t_all, *args, r_all, *common)
    post = post_all[:t_grid.size].reshape(t_grid.shape)
    growth = post_all[t_grid.size:]
    no_top_t = np.array(c["no_top_times"])
    no_top_grid = _at_epsilon_no_top(no_top_t[:, None], *args, rhos[None, :], *common)
    no_top = no_top_grid[:, int(np.argmin(np.abs(rhos - c["no_top_threshold"])))]
    result = {
        "times": times.tolist(), "thresholds": rhos.tolist(), "epsilon_post": post.tolist(),
        "increasing_in_t": bool(np.all(np.diff(post, axis=0) > 0)),
        "t2_argmin_threshold": float(rhos[int(np.argmin(post[list(times).index(2)]))]),
        "no_top": {"threshold": c["no_top_threshold"], "times": no_top_t.tolist(), "epsilon": no_top.tolist(),
                   "epsilon_by_threshold": no_top_grid.tolist()},
        "growth": {"threshold": c["growth_threshold"], "times": growth_t.tolist(), "epsilon_post": growth.tolist()},
    }
    _plot_figure2(result, c, out_dir / "fig2_expost_vs_threshold.png")
    rows = []
    grid_rows = []
    for t, text in SPEC_FIG2.items():
        i = list(times).index(t)
        for k, value in enumerate(_spec_row(text)):
            rho = round(0.1 * k, 10)
            j = int(np.argmin(np.abs(rhos - rho)))
            _compare(grid_rows, f"Fig. 2 ε_post(t = {t}), ρ = {rho:.1f}", "5.4", post[i, j], value)
    rows += grid_rows
    for t, text in SPEC_NO_TOP.items():
        _compare(rows, f"ε_bot(t = {t}) (no top), ρ = 0.5", "5.4", no_top[list(no_top_t).index(t)], text)
    for t, text in SPEC_GROWTH.items():
        _compare(rows, f"ε_post(t = {t:.0e}), ρ = 0.3", "5.4", growth[list(growth_t).index(t)], text)
    result["comparisons"] = rows
    result["figures"] = ["fig2_expost_vs_threshold.png"]
    return result


# ---------------------------------------------------------------------------------------------
# Part: Figure 3.


def _figure3(config: dict, key, out_dir: pathlib.Path) -> dict:
    c = config["figure3"]
    d = np.array(c["d"])
    width = c["upper"] - c["lower"]
    n = (d - 1).astype(np.float64)
    u_num = np.full(d.size, (width - 2.0 * c["sensitivity"]) / c["sigma"])
    u_den = np.full(d.size, width / c["sigma"])
    quadrature = _rnm_epsilon(c["sigma"], d, c["sensitivity"], c["lower"], c["upper"])
    is_key, plain_key = jax.random.split(key)
    is_keys = jax.vmap(lambda i: jax.random.fold_in(is_key, i))(jnp.arange(d.size))
    t0 = time.perf_counter()
    sums, modes, scales = jax.device_get(_rnm_importance_sums(
        is_keys, jnp.asarray(n), jnp.asarray(u_num), jnp.asarray(u_den),
        chunk_size=c["is_chunk_size"], num_chunks=c["is_num_chunks"]))
    is_seconds = time.perf_counter() - t0
    num_is = c["is_chunk_size"] * c["is_num_chunks"]
    repeats = c["plain_repeats"]
    plain_keys = jax.vmap(lambda i: jax.random.fold_in(plain_key, i))(jnp.arange(d.size * repeats))
    t0 = time.perf_counter()
    plain = np.asarray(_rnm_plain_log_means(plain_keys, jnp.asarray(np.repeat(n, repeats)),
                                            jnp.asarray(np.repeat(u_num, repeats)),
                                            jnp.asarray(np.repeat(u_den, repeats)),
                                            chunk_size=c["plain_chunk_size"], num_chunks=c["plain_num_chunks"]))
    plain_seconds = time.perf_counter() - t0
    plain_eps = (plain[:, 0] - plain[:, 1]).reshape(d.size, repeats)
    records = []
    for i, dd in enumerate(d):
        estimate, se = _importance_estimate(sums[i], num_is)
        finite = plain_eps[i][np.isfinite(plain_eps[i])]
        records.append({
            "d": int(dd), "quadrature": float(quadrature[i]), "mc": estimate, "mc_se": se,
            "mc_z": (estimate - float(quadrature[i])) / se if se > 0 else None,
            "is_mode": float(modes[i]), "is_scale": float(scales[i]),
            "plain_mean": float(finite.mean()) if finite.size else None,
            "plain_sd": float(finite.std(ddof=1)) if finite.size > 1 else None,
            "plain_num_finite": int(finite.size),
        })
    result = {"records": records, "mc_samples": num_is, "plain_samples_per_repeat":
              c["plain_chunk_size"] * c["plain_num_chunks"], "plain_repeats": repeats,
              "mc_seconds": is_seconds, "plain_seconds": plain_seconds, "device": jax.devices()[0].device_kind}
    _plot_figure3(result, c, out_dir / "fig3_rnm_mc_vs_quadrature.png")
    rows = []
    for record, text in zip(records, _spec_row(SPEC_FIG3), strict=True):
        _compare(rows, f"Fig. 3 ε_RNM quadrature, d = {record['d']} (Δ = 0.01, σ = 0.3)", "5.3",
                 record["quadrature"], text)
    result["comparisons"] = rows
    result["figures"] = ["fig3_rnm_mc_vs_quadrature.png"]
    return result


# ---------------------------------------------------------------------------------------------
# Part: Figures 7 and 8.


def _figures7_8(config: dict, key, out_dir: pathlib.Path) -> dict:
    del key  # deterministic
    c = config["figures7_8"]
    sigmas, ds = np.array(c["sigmas"]), np.array(c["d"])
    hs, hd = np.array(c["heatmap_sigmas"]), np.array(c["heatmap_d"])
    s7, d7 = np.meshgrid(sigmas, ds, indexing="ij")
    s8, d8 = np.meshgrid(hs, hd, indexing="ij")
    pure = _rnm_epsilon(np.concatenate([s7.ravel(), s8.ravel()]), np.concatenate([d7.ravel(), d8.ravel()]),
                        c["sensitivity"], c["lower"], c["upper"])
    pure7, pure8 = pure[:s7.size].reshape(s7.shape), pure[s7.size:].reshape(s8.shape)
    pp7, pp8 = {}, {}
    for conversion in c["conversions"]:
        pp7[conversion] = np.asarray(accounting.gaussian_rnm_epsilon_postprocessing(
            s7, d7, c["sensitivity"], c["delta"], conversion=conversion))
        pp8[conversion] = np.asarray(accounting.gaussian_rnm_epsilon_postprocessing(
            s8, d8, c["sensitivity"], c["delta"], conversion=conversion))
    result = {
        "figure7": {"sigmas": sigmas.tolist(), "d": ds.tolist(), "pure": pure7.tolist(),
                    **{conversion: pp7[conversion].tolist() for conversion in c["conversions"]}},
        "figure8": {"sigmas": hs.tolist(), "d": hd.tolist(), "pure": pure8.tolist(),
                    **{conversion: pp8[conversion].tolist() for conversion in c["conversions"]}},
        "pure_increasing_in_d": bool(np.all(np.diff(pure7, axis=1) > 0)),
        "pure_decreasing_in_sigma": bool(np.all(np.diff(pure7, axis=0) < 0)),
        "pure_worse_than_analytic": [[float(s), int(d)] for s, d, p, a in
                                     zip(s7.ravel(), d7.ravel(), pure7.ravel(), pp7["analytic"].ravel()) if p > a],
    }
    _plot_figure7(result["figure7"], c, out_dir / "fig7_rnm_pure_vs_postprocessing.png")
    _plot_figure8(result["figure8"], c, out_dir / "fig8_rnm_difference_heatmap.png")
    rows = []
    for kind, table in SPEC_FIG7.items():
        values = pure7 if kind == "pure" else pp7[kind]
        name = {"pure": "pure ε_RNM", "analytic": "post-processing, analytic Gaussian",
                "bbghs": "post-processing, RDP + BBGHS", "markov": "post-processing, RDP + Markov (zCDP)"}[kind]
        for sigma, text in table.items():
            i = list(sigmas).index(sigma)
            for j, value in enumerate(_spec_row(text)):
                _compare(rows, f"Fig. 7 {name}, σ = {sigma}, d = {ds[j]}", "5.3", values[i, j], value)
    result["comparisons"] = rows
    result["figures"] = ["fig7_rnm_pure_vs_postprocessing.png", "fig8_rnm_difference_heatmap.png"]
    return result


# ---------------------------------------------------------------------------------------------
# Part: offline report noisy max (App. B.3).

RNM_MECHANISMS = ("gaussian", "laplace_standard", "laplace_post_processing", "exponential_mechanism",
                  "permute_and_flip")
RNM_LABELS = {
    "gaussian": "Gaussian RNM",
    "laplace_standard": "Laplace RNM, Lap(2Δ/ε) (standard)",
    "laplace_post_processing": "Laplace RNM, Lap(dΔ/ε) (post-processing)",
    "exponential_mechanism": "Exponential mechanism",
    "permute_and_flip": "Permute-and-flip",
}


def _accuracy(queries: np.ndarray, selected: np.ndarray) -> tuple[float, float]:
    """Eq. (39) with q_max = 1: 1 - mean(q_max_true - q_selected), and its standard error."""
    errors = queries.max() - queries[selected]
    return 1.0 - float(errors.mean()), float(errors.std(ddof=1)) / math.sqrt(errors.size)


def _rnm_offline(config: dict, key, out_dir: pathlib.Path, progress: bool) -> dict:
    c = config["rnm_offline"]
    sigmas = np.array(c["sigmas"])
    trials = c["trials"]
    jobs = [(dataset, d) for dataset in c["datasets"] for d in dataset["d"]]
    pure_all = _rnm_epsilon(np.tile(sigmas, len(jobs)), np.repeat([d for _, d in jobs], sigmas.size),
                            np.repeat([1.0 / ds["population"] for ds, _ in jobs], sigmas.size), c["lower"], c["upper"])
    pure_all = pure_all.reshape(len(jobs), sigmas.size)
    records, summaries = [], []
    with Progress(len(jobs) * sigmas.size, "seed004 rnm_offline", enabled=progress) as bar:
        for job_index, (dataset, d) in enumerate(jobs):
            name, sensitivity = dataset["name"], 1.0 / dataset["population"]
            queries = _dataset_queries(config, name, d)
            job_key = jax.random.fold_in(key, job_index)
            pp = {conv: np.asarray(accounting.gaussian_rnm_epsilon_postprocessing(
                sigmas, d, sensitivity, c["delta"], conversion=conv)) for conv in ("analytic", "bbghs", "markov")}
            for i, sigma in enumerate(sigmas):
                eps_pure = float(pure_all[job_index, i])
                base = {"dataset": name, "d": d, "sensitivity": sensitivity, "sigma": float(sigma),
                        "epsilon_pure": eps_pure, "epsilon_pp_analytic": float(pp["analytic"][i]),
                        "epsilon_pp_bbghs": float(pp["bbghs"][i]), "epsilon_pp_markov": float(pp["markov"][i]),
                        "trials": trials}
                sigma_key = jax.random.fold_in(job_key, i)
                calls = {
                    "gaussian": (mechanisms.gaussian_report_noisy_max,
                                 dict(sigma=float(sigma), sensitivity=sensitivity, lower=c["lower"], upper=c["upper"])),
                    "laplace_standard": (mechanisms.laplace_report_noisy_max,
                                         dict(epsilon=eps_pure, sensitivity=sensitivity, calibration="standard")),
                    "laplace_post_processing": (mechanisms.laplace_report_noisy_max,
                                                dict(epsilon=eps_pure, sensitivity=sensitivity,
                                                     calibration="post_processing")),
                    "exponential_mechanism": (mechanisms.exponential_mechanism,
                                              dict(epsilon=eps_pure, sensitivity=sensitivity)),
                    "permute_and_flip": (mechanisms.permute_and_flip, dict(epsilon=eps_pure, sensitivity=sensitivity)),
                }
                for m_index, mechanism in enumerate(RNM_MECHANISMS):
                    fn, kwargs = calls[mechanism]
                    selected = np.asarray(mechanisms.run_trials(fn, jax.random.fold_in(sigma_key, m_index), trials,
                                                                queries, **kwargs).value)
                    accuracy, se = _accuracy(queries, selected)
                    records.append({**base, "mechanism": mechanism, "label": RNM_LABELS[mechanism],
                                    "epsilon": eps_pure, "accuracy": accuracy, "accuracy_se": se,
                                    "prob_true_argmax": float(np.mean(queries[selected] == queries.max()))})
                bar.update()
            summaries.append({"dataset": name, "d": d, "sensitivity": sensitivity,
                              "uniform_accuracy": 1.0 - float(np.mean(queries.max() - queries)),
                              "argmax": int(np.argmax(queries)), "top_gap": float(np.diff(np.sort(queries)[-2:])[0]),
                              "max_query": float(queries.max())})
    figures = []
    for dataset in c["datasets"]:
        path = out_dir / f"rnm_{dataset['name']}.png"
        _plot_rnm(records, summaries, dataset, path)
        figures.append(path.name)
    rows = []
    for d, table in SPEC_BIKES_RNM.items():
        for sigma, (pure_text, pp_text, acc_text) in table.items():
            match = [r for r in records if r["dataset"] == "bikes" and r["d"] == d and r["sigma"] == sigma
                     and r["mechanism"] == "gaussian"]
            if not match:
                continue
            r = match[0]
            _compare(rows, f"Bikes d = {d}, σ = {sigma}: pure ε_RNM", "5.5", r["epsilon_pure"], pure_text)
            _compare(rows, f"Bikes d = {d}, σ = {sigma}: post-processing ε (analytic, δ = 1e-5)", "5.5",
                     r["epsilon_pp_analytic"], pp_text)
            _compare(rows, f"Bikes d = {d}, σ = {sigma}: Gaussian RNM accuracy (MC)", "5.5", r["accuracy"], acc_text,
                     tolerance=SPEC_RNM_MC_NOISE + 3 * r["accuracy_se"],
                     note=f"{trials} trials; tolerance = 0.004 (spec's MC noise) + 3 SE")
    for d, text in SPEC_BIKES_UNIFORM.items():
        summary = next((s for s in summaries if s["dataset"] == "bikes" and s["d"] == d), None)
        if summary is not None:
            _compare(rows, f"Bikes d = {d}: uniform-random accuracy", "5.5", summary["uniform_accuracy"], text)
    for mechanism, text in SPEC_BIKES_EQUAL_EPSILON.items():
        match = [r for r in records if r["dataset"] == "bikes" and r["d"] == 365 and r["sigma"] == 0.1
                 and r["mechanism"] == mechanism]
        if match:
            r = match[0]
            _compare(rows, f"Bikes d = 365, ε = ε_pure(σ = 0.1) = {r['epsilon']:.4f}: {RNM_LABELS[mechanism]} accuracy",
                     "5.5", r["accuracy"], text, tolerance=SPEC_RNM_MC_NOISE + 3 * r["accuracy_se"],
                     note=f"{trials} trials; tolerance = 0.004 + 3 SE")
    return {"records": records, "datasets": summaries, "comparisons": rows, "figures": figures}


# ---------------------------------------------------------------------------------------------
# Part: online FSRC vs the Whitehouse filter (Sec. 4.1, App. D).


def _f1(bits: np.ndarray, truth: np.ndarray) -> np.ndarray:
    tp = np.sum(bits & truth, axis=-1)
    fp = np.sum(bits & ~truth, axis=-1)
    fn = np.sum(~bits & truth, axis=-1)
    denominator = 2 * tp + fp + fn
    return np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 1.0)


def _sparse_vector_runs(fn, key, runs, queries, **kwargs) -> dict:
    release = mechanisms.run_trials(fn, key, runs, queries, **kwargs)
    bits = np.asarray(release.value)
    truth = np.asarray(release.info.nonprivate_true_answers)
    spent_by_step = np.asarray(release.info.spent_by_step)
    return {
        "bits": bits, "spent_by_step": spent_by_step,
        "spent": np.asarray(release.info.spent), "f1": _f1(bits, truth), "tops": bits.sum(axis=1),
        "num_runs": np.asarray(release.info.num_runs), "halted": np.asarray(release.info.halted),
        "delta_used": np.asarray(release.info.delta_used),
    }


def _fsrc_admissions(runs: dict, epsilon_max: np.ndarray, budget: float) -> dict:
    """Checks the FSRC rule (spec 4.3) on released outputs: run j starts only if spent + eps_max_j < budget.

    Run boundaries follow from the released bits (a run ends at its top; the next starts one step
    later), the spend before a run from ``spent_by_step``. Returns the largest admitted total
    spent + eps_max_j (must be < budget) and the smallest total at a halt (must be >= budget).
    """
    admitted, halting = [], []
    for bits, by_step, num_runs, halted in zip(runs["bits"], runs["spent_by_step"], runs["num_runs"],
                                               runs["halted"], strict=True):
        starts = np.concatenate([[0], np.flatnonzero(bits) + 1])
        before = np.concatenate([[0.0], by_step])[starts]  # spend after step s - 1 = before run starting at s
        n = int(num_runs)
        if n:
            admitted.append(float(np.max(before[:n] + epsilon_max[:n])))
        if halted:
            halting.append(float(before[n] + epsilon_max[n]))
    max_admitted = max(admitted) if admitted else None
    min_halting = min(halting) if halting else None
    return {"max_admitted_total": max_admitted, "min_halting_total": min_halting,
            "holds": (max_admitted is None or max_admitted < budget) and (min_halting is None or min_halting >= budget),
            "runs_over_budget": int(np.sum(np.asarray(runs["spent"]) > budget)),
            "max_excess": float(max(np.max(runs["spent"]) - budget, 0.0))}


def _summary(runs: dict) -> dict:
    def stats(x):
        x = np.asarray(x, dtype=np.float64)
        return {"mean": float(x.mean()), "sd": float(x.std(ddof=1)) if x.size > 1 else 0.0,
                "min": float(x.min()), "max": float(x.max())}

    return {"spent": stats(runs["spent"]), "f1": stats(runs["f1"]), "tops": stats(runs["tops"]),
            "num_runs": stats(runs["num_runs"]), "halted_fraction": float(np.mean(runs["halted"])),
            "delta_used": stats(runs["delta_used"]),
            "max_spent_by_step": float(np.max(runs["spent_by_step"])),
            "spent_by_step_mean": np.mean(runs["spent_by_step"], axis=0).tolist(),
            "per_run": {"spent": np.asarray(runs["spent"]).tolist(), "f1": np.asarray(runs["f1"]).tolist(),
                        "tops": np.asarray(runs["tops"]).astype(int).tolist()}}


def _fsrc_online(config: dict, key, out_dir: pathlib.Path, progress: bool) -> dict:
    c = config["fsrc_online"]
    results, rows, figures = [], [], []
    total = sum(len(ds["sigma_thresholds"]) for ds in c["datasets"])
    with Progress(total, "seed004 fsrc_online", enabled=progress) as bar:
        for ds_index, dataset in enumerate(c["datasets"]):
            name, rho, population = dataset["name"], dataset["threshold"], dataset["population"]
            queries = _dataset_queries(config, name, dataset["num_days"])
            delta_q = delta = 1.0 / population
            entries = []
            for s_index, sigma_threshold in enumerate(dataset["sigma_thresholds"]):
                run_key = jax.random.fold_in(jax.random.fold_in(key, ds_index), s_index)
                params = dict(threshold=rho, sigma_threshold=sigma_threshold, sigma_query=SQRT3 * sigma_threshold,
                              sensitivity=delta_q, lower=c["lower"], upper=c["upper"])
                # The capped ex-ante epsilon of ONE above-threshold run over the whole stream, for reference;
                # computing it here also fills the mechanisms' table cache outside the vmap trace.
                capped = mechanisms.gaussian_above_threshold_guarantee(num_queries=dataset["num_days"],
                                                                       **params).epsilon
                # Every method sees the same keys: the same noise, hence the same AT runs until a filter halts.
                fsrc = _sparse_vector_runs(mechanisms.gaussian_sparse_vector, run_key, c["runs"], queries,
                                           epsilon=UNBOUNDED_BUDGET, delta=delta, schedule=c["schedule"], **params)
                with warnings.catch_warnings():
                    # Reproduction only: the paper's constant-delta rule, to report its (invalid) delta.
                    warnings.simplefilter("ignore", mechanisms.PaperModeWarning)
                    paper = _sparse_vector_runs(mechanisms.gaussian_sparse_vector, run_key, c["runs"], queries,
                                                epsilon=UNBOUNDED_BUDGET, delta=delta, paper_mode=True, **params)
                fsrc_budget = _sparse_vector_runs(mechanisms.gaussian_sparse_vector, run_key, c["runs"], queries,
                                                  epsilon=c["budget"], delta=delta, schedule=c["schedule"], **params)
                whitehouse, whitehouse_budget = {}, {}
                for conversion in c["whitehouse_conversions"]:
                    wh_params = dict(delta_prime=delta, delta_double_prime=delta, schedule=c["schedule"],
                                     conversion=conversion, **params)
                    whitehouse[conversion] = _summary(_sparse_vector_runs(
                        mechanisms.gaussian_sparse_vector_whitehouse, run_key, c["runs"], queries,
                        epsilon=UNBOUNDED_BUDGET, **wh_params))
                    whitehouse_budget[conversion] = _summary(_sparse_vector_runs(
                        mechanisms.gaussian_sparse_vector_whitehouse, run_key, c["runs"], queries,
                        epsilon=c["budget"], **wh_params))
                # Per-AT epsilon_max: the paper's (delta_j = delta = 1/N) and the sound schedule's first value.
                eps_max_paper = accounting.zhu_wang_at_epsilon(sigma_threshold, SQRT3 * sigma_threshold, rho, delta_q,
                                                               delta, conversion="markov")
                deltas = mechanisms.self_reporting_filter_deltas(max(1, int(fsrc["num_runs"].max())), delta=delta,
                                                                 schedule=c["schedule"])
                eps_max_sound_first = accounting.zhu_wang_at_epsilon(
                    sigma_threshold, SQRT3 * sigma_threshold, rho, delta_q, float(deltas[0]), conversion="markov")
                eps_max_sound_last = accounting.zhu_wang_at_epsilon(
                    sigma_threshold, SQRT3 * sigma_threshold, rho, delta_q, float(deltas[-1]), conversion="markov")
                # eps_max_j of every run the budgeted filter considered, exactly as gaussian_sparse_vector
                # computes it (Zhu-Wang + Markov at delta_j, threshold shifted by the public lower end).
                considered = int(np.max(fsrc_budget["num_runs"])) + 1
                run_deltas = mechanisms.self_reporting_filter_deltas(considered, delta=delta, schedule=c["schedule"])
                run_eps_max = np.array([accounting.zhu_wang_at_epsilon(
                    sigma_threshold, SQRT3 * sigma_threshold, max(rho - c["lower"], 0.0), delta_q, float(d_j),
                    conversion="markov") for d_j in run_deltas])
                admissions = _fsrc_admissions(fsrc_budget, run_eps_max, c["budget"])
                # Final spend < budget + (largest ex-post loss of one run - smallest eps_max): the last run was
                # admitted with spent + eps_max < budget but is charged its realised eps_post(t) or eps_bot(t).
                admissions["excess_allowance"] = max(capped - float(run_eps_max[0]), 0.0)
                tops = float(np.mean(fsrc["tops"]))
                whitehouse_style = (math.sqrt(2.0 * math.log(1.0 / delta) * tops) * eps_max_paper
                                    + tops * eps_max_paper**2 / 2.0)
                entries.append({
                    "sigma_threshold": sigma_threshold, "sigma_query": SQRT3 * sigma_threshold,
                    "capped_epsilon_one_run": capped,
                    "fraction_true_above": float(np.mean(queries >= rho)),
                    "epsilon_max_paper": eps_max_paper, "epsilon_max_sound_first": eps_max_sound_first,
                    "epsilon_max_sound_last": eps_max_sound_last,
                    "fsrc": _summary(fsrc), "fsrc_budget": _summary(fsrc_budget), "fsrc_budget_rule": admissions,
                    "paper_mode_delta_used": _summary(paper)["delta_used"],
                    "paper_mode_same_release": bool(np.array_equal(paper["bits"], fsrc["bits"])
                                                    and np.array_equal(paper["spent"], fsrc["spent"])),
                    "sound_delta": delta,
                    "whitehouse": whitehouse, "whitehouse_budget": whitehouse_budget,
                    "whitehouse_style_spec": whitehouse_style, "basic_composition": tops * eps_max_paper,
                })
                bar.update()
            expost = mechanisms.gaussian_above_threshold_epsilon_post(
                np.array([1, 2, 5, 10]), threshold=rho, sigma_threshold=dataset["sigma_thresholds"][0],
                sigma_query=SQRT3 * dataset["sigma_thresholds"][0], sensitivity=delta_q, lower=c["lower"],
                upper=c["upper"], num_queries=dataset["num_days"])
            result = {"dataset": name, "label": DATASET_LABELS[name], "threshold": rho, "population": population,
                      "num_days": dataset["num_days"], "sensitivity": delta_q, "delta": delta, "budget": c["budget"],
                      "runs": c["runs"], "entries": entries,
                      "epsilon_post_first_sigma": {"times": [1, 2, 5, 10], "epsilon": np.asarray(expost).tolist()}}
            results.append(result)
            for kind in ("scatter", "spend"):
                path = out_dir / f"fsrc_{name}_{kind}.png"
                (_plot_fsrc_scatter if kind == "scatter" else _plot_fsrc_spend)(result, c, path)
                figures.append(path.name)
            if name == "bikes":
                for entry in entries:
                    spec = SPEC_BIKES_FSRC.get(round(entry["sigma_threshold"], 10))
                    if spec is None:
                        continue
                    label = f"Bikes σX = {entry['sigma_threshold']}"
                    runs = c["runs"]
                    fs = entry["fsrc"]
                    _compare(rows, f"{label}: ε_max per AT (Markov, δ = 1/N)", "5.6", entry["epsilon_max_paper"],
                             spec["epsilon_max"])
                    _compare(rows, f"{label}: FSRC final spend (mean of {runs} runs)", "5.6", fs["spent"]["mean"],
                             spec["fsrc_spend"], tolerance=0.05 * float(spec["fsrc_spend"])
                             + 3 * fs["spent"]["sd"] / math.sqrt(runs),
                             note="indicative reference; tolerance 5% + 3 SE")
                    # Both are functions of the mean number of tops k, whose Monte Carlo standard error
                    # enters the tolerance through the derivative in k.
                    eps_max, k = entry["epsilon_max_paper"], fs["tops"]["mean"]
                    k_se = fs["tops"]["sd"] / math.sqrt(runs)
                    slope = math.sqrt(2.0 * math.log(1.0 / delta) / k) * eps_max / 2.0 + eps_max**2 / 2.0
                    _compare(rows, f"{label}: Whitehouse-style spend, spec's formula", "5.6",
                             entry["whitehouse_style_spec"], spec["whitehouse_style"],
                             tolerance=0.05 * float(spec["whitehouse_style"]) + 3 * slope * k_se,
                             note="sqrt(2 log(1/δ') k) ε_max + k ε_max²/2 at our mean k; tolerance 5% + 3 SE")
                    _compare(rows, f"{label}: basic composition k·ε_max", "5.6", entry["basic_composition"],
                             spec["basic"], tolerance=0.05 * float(spec["basic"]) + 3 * eps_max * k_se,
                             note="at our mean k; tolerance 5% + 3 SE")
                    _compare(rows, f"{label}: F1 (mean of {runs} runs)", "5.6", fs["f1"]["mean"], spec["f1"],
                             tolerance=0.03 + 3 * fs["f1"]["sd"] / math.sqrt(runs),
                             note="indicative reference; tolerance 0.03 + 3 SE")
                    if "tops" in spec:
                        _compare(rows, f"{label}: number of tops (mean)", "5.6", fs["tops"]["mean"], spec["tops"],
                                 tolerance=0.05 * float(spec["tops"]) + 3 * fs["tops"]["sd"] / math.sqrt(runs),
                                 note="'~276' in the spec; tolerance 5% + 3 SE")
                if round(dataset["sigma_thresholds"][0], 10) == 0.09:
                    for t, value in zip((1, 2, 5, 10), np.asarray(expost), strict=True):
                        _compare(rows, f"Bikes σX = 0.09: ε_post(t = {t})", "5.6", value, SPEC_BIKES_EXPOST_009[t])
    return {"datasets": results, "comparisons": rows, "figures": figures}


# ---------------------------------------------------------------------------------------------
# Plots (object-oriented matplotlib, Agg canvas; see _plots.require_matplotlib).


def _figure(width=6.4, height=4.4, **kwargs):
    Figure, FigureCanvasAgg = require_matplotlib()
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained", **kwargs)
    FigureCanvasAgg(fig)
    return fig


def _plot_figure1_curves(curves, t, path, c):
    fig = _figure(13.0, 4.2)
    axes = fig.subplots(1, len(c["thresholds"]), sharey=True)
    colours = {0.2: "tab:blue", 0.3: "tab:orange"}
    for ax, rho in zip(axes, c["thresholds"], strict=True):
        for curve in (cv for cv in curves if cv["threshold"] == rho):
            colour = colours.get(curve["sigma"], "tab:green")
            ax.plot(t, curve["epsilon_post"], color=colour, label=f"ex-post ε_post(t), σX = {curve['sigma']}")
            ax.axhline(curve["ex_ante_bbghs"], color=colour, linestyle="--", linewidth=1,
                       label=f"ex-ante Zhu-Wang + BBGHS ({curve['ex_ante_bbghs']:.4f})")
            ax.axhline(curve["ex_ante_markov"], color=colour, linestyle=":", linewidth=1,
                       label=f"ex-ante Zhu-Wang + Markov ({curve['ex_ante_markov']:.4f})")
            if curve["t_star"] is not None:
                ax.plot([curve["t_star"]], [curve["epsilon_post"][curve["t_star"] - 1]], marker="o", color=colour,
                        markersize=6, linestyle="none", label=f"t* = {curve['t_star']}")
            for stat, marker in (("median", "v"), ("p80", "^")):
                if curve[stat] is not None and curve[stat] <= t[-1]:
                    ax.plot([curve[stat]], [0.0], marker=marker, color=colour, markersize=7, linestyle="none",
                            clip_on=False, label=f"{'median' if stat == 'median' else '80th pct'} T = {curve[stat]}")
        ax.set_xscale("log")
        ax.set_xlabel("stopping time t")
        ax.set_title(f"ρ = {rho}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, loc="upper left")
        ax.set_ylim(bottom=0.0)
    axes[0].set_ylabel("ε")
    fig.suptitle(f"Gaussian AT: ex-post vs ex-ante (Δ = {c['sensitivity']}, δ = {c['delta']}, σZ = √3 σX, "
                 "[a, b] = [0, 1]); ▼/▲ = median / 80th pct of T on the all-zero stream", fontsize=10)
    fig.savefig(path, format="png")


def _plot_figure1_heatmap(heat, path, c):
    from matplotlib.colors import TwoSlopeNorm

    post = np.array(heat["epsilon_post"])
    ante = np.array(heat["ex_ante_bbghs"])
    diff = np.maximum(ante[:, :, None] - post, -1.0)  # clipped below at -1, as the paper
    sigmas, times = np.array(heat["sigmas"]), np.array(heat["times"])
    limit = float(np.max(np.abs(diff))) or 1e-12
    fig = _figure(13.0, 4.2)
    axes = fig.subplots(1, len(heat["thresholds"]), sharey=True)
    for k, (ax, rho) in enumerate(zip(axes, heat["thresholds"], strict=True)):
        image = ax.pcolormesh(sigmas, times, diff[k].T, cmap="coolwarm_r", shading="nearest",
                              norm=TwoSlopeNorm(vcenter=0.0, vmin=-limit, vmax=limit))
        for stat, style in (("median", dict(color="blue", linestyle="--")), ("p80", dict(color="red"))):
            values = np.array([np.nan if v is None else v for v in heat[stat][k]], dtype=np.float64)
            ax.plot(sigmas, np.clip(values, times.min(), times.max()), linewidth=2,
                    label=f"{'median' if stat == 'median' else '80th pct'} stopping time (exact)", **style)
        ax.set_title(f"ρ = {rho}", fontsize=10)
        ax.set_xlabel("σX (σZ = √3 σX)")
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_ylabel("stopping time t")
    fig.colorbar(image, ax=list(axes), label="ex-ante (BBGHS) − ex-post ε  (blue: ex-post smaller)")
    fig.suptitle("Fig. 1: ex-ante minus ex-post ε of Gaussian AT (Δ = 1e-3, δ = 1e-5)", fontsize=10)
    fig.savefig(path, format="png")


def _plot_figure2(result, c, path):
    fig = _figure()
    ax = fig.add_subplot()
    post = np.array(result["epsilon_post"])
    colours = _colours("viridis", len(result["times"]))
    for i, t in enumerate(result["times"]):
        ax.plot(result["thresholds"], post[i], marker="o", markersize=2.5, color=colours[i], label=f"t = {t}")
    ax.set_xlabel("threshold ρ")
    ax.set_ylabel("ex-post ε_post(t)")
    ax.set_yscale("log")
    ax.set_title(f"Fig. 2: ε_post vs ρ (σX = {c['sigma_threshold']}, σZ = √3 σX, Δ = {c['sensitivity']}, "
                 "[0, 1])", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.savefig(path, format="png")


def _colours(name, count, low=0.15, high=0.85):
    from matplotlib import colormaps

    cmap = colormaps[name]
    return [cmap(x) for x in np.linspace(low, high, max(count, 1))]


def _plot_figure3(result, c, path):
    records = result["records"]
    d = np.array([r["d"] for r in records])
    quad = np.array([r["quadrature"] for r in records])
    mc = np.array([r["mc"] for r in records])
    se = np.array([r["mc_se"] for r in records])
    plain = np.array([np.nan if r["plain_mean"] is None else r["plain_mean"] for r in records])
    plain_sd = np.array([np.nan if r["plain_sd"] is None else r["plain_sd"] for r in records])
    fig = _figure(12.0, 4.4)
    left, right = fig.subplots(1, 2)
    left.plot(d, quad, color="tab:green", linewidth=2, label="numerical integration (gpuprivacy.accounting)")
    left.errorbar(d, mc, yerr=2 * se, color="black", marker="o", markersize=3, linestyle="none", capsize=2,
                  label=f"MC, CRN + importance sampling ({result['mc_samples']:.1e} samples, ± 2 SE)")
    left.errorbar(d, plain, yerr=plain_sd, color="tan", marker="s", markersize=3, linestyle="none", capsize=2,
                  label=f"MC as in the paper (plain, independent; {result['plain_repeats']} repeats of "
                        f"{result['plain_samples_per_repeat']:.1e}, ± 1 sd)")
    left.set_xscale("log")
    # The paper-style estimator's spread reaches far outside this range at large d (right panel).
    left.set_ylim(0.0, 2.0 * float(np.max(quad)))
    left.set_xlabel("number of candidates d")
    left.set_ylabel("ε_RNM (plain-MC error bars clipped)")
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=7)
    left.set_title(f"Fig. 3: Gaussian RNM, σ = {c['sigma']}, Δ = {c['sensitivity']}, [0, 1]", fontsize=10)
    right.plot(d, np.abs(mc - quad), marker="o", color="black", label="|CRN+IS MC − quadrature|")
    right.plot(d, se, linestyle="--", color="black", label="CRN+IS standard error")
    right.plot(d, np.abs(plain - quad), marker="s", color="tan", label="|plain MC mean − quadrature|")
    right.plot(d, plain_sd, linestyle="--", color="tan", label="plain MC sd over repeats")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("number of candidates d")
    right.set_ylabel("error in ε")
    right.grid(True, which="both", alpha=0.3)
    right.legend(fontsize=7)
    fig.savefig(path, format="png")


def _plot_figure7(data, c, path):
    fig = _figure(12.0, 4.4)
    left, right = fig.subplots(1, 2)
    pure = np.array(data["pure"])
    colours = _colours("plasma", len(data["sigmas"]))
    for i, sigma in enumerate(data["sigmas"]):
        left.plot(data["d"], pure[i], marker="o", markersize=3, color=colours[i], label=f"σ = {sigma}")
        for conversion, style in (("analytic", "-"), ("bbghs", "--"), ("markov", ":")):
            if conversion in data:
                right.plot(data["d"], np.array(data[conversion])[i], linestyle=style, color=colours[i],
                           label=f"σ = {sigma}" if conversion == "analytic" else None)
    left.set_title(f"pure ε_RNM (Thm 8, log of the ratio), Δ = {c['sensitivity']}", fontsize=10)
    right.set_title(f"post-processing (δ = {c['delta']}): analytic (—), RDP+BBGHS (--), RDP+Markov (··)", fontsize=9)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("number of candidates d")
        ax.set_ylabel("ε")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    right.set_ylim(0.0, max(0.35, float(np.max(pure)) * 1.1))
    fig.suptitle("Fig. 7: pure vs post-processing accounting of Gaussian report noisy max", fontsize=10)
    fig.savefig(path, format="png")


def _plot_figure8(data, c, path):
    from matplotlib.colors import SymLogNorm

    conversions = [k for k in ("analytic", "bbghs", "markov") if k in data]
    pure = np.array(data["pure"])
    diffs = [np.array(data[k]) - pure for k in conversions]
    limit = max(float(np.max(np.abs(x))) for x in diffs) or 1e-12
    fig = _figure(14.0, 4.4)
    axes = fig.subplots(1, len(conversions), sharey=True)
    names = {"analytic": "analytic Gaussian", "bbghs": "RDP + BBGHS", "markov": "RDP + Markov (zCDP)"}
    for ax, conversion, diff in zip(axes, conversions, diffs, strict=True):
        # Symmetric log scale: the differences range from ~1e-3 to ~1, and the sign change matters.
        image = ax.pcolormesh(data["d"], data["sigmas"], diff, cmap="coolwarm_r", shading="nearest",
                              norm=SymLogNorm(linthresh=1e-3, vmin=-limit, vmax=limit))
        if np.min(diff) < 0 < np.max(diff):
            ax.contour(data["d"], data["sigmas"], diff, levels=[0.0], colors="black", linewidths=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("number of candidates d")
        ax.set_title(f"{names[conversion]} − pure", fontsize=10)
    axes[0].set_ylabel("σ")
    fig.colorbar(image, ax=list(axes), label="post-processing ε − pure ε  (blue: pure bound tighter)")
    fig.suptitle(f"Fig. 8: difference of the RNM bounds (Δ = {c['sensitivity']}, δ = {c['delta']}); "
                 "black line: equal", fontsize=10)
    fig.savefig(path, format="png")


RNM_STYLES = {
    "gaussian": dict(color="tab:green"),
    "laplace_standard": dict(color="tab:blue"),
    "laplace_post_processing": dict(color="tab:cyan", linestyle="--"),
    "exponential_mechanism": dict(color="tab:orange"),
    "permute_and_flip": dict(color="tab:red", linestyle="-."),
}


def _plot_rnm(records, summaries, dataset, path):
    ds = dataset["d"]
    fig = _figure(6.4 * len(ds), 4.6)
    axes = np.atleast_1d(fig.subplots(1, len(ds)))
    for ax, d in zip(axes, ds, strict=True):
        rows = [r for r in records if r["dataset"] == dataset["name"] and r["d"] == d]
        for mechanism in RNM_MECHANISMS:
            rs = sorted((r for r in rows if r["mechanism"] == mechanism), key=lambda r: r["epsilon"])
            acc = np.array([r["accuracy"] for r in rs])
            se = np.array([r["accuracy_se"] for r in rs])
            eps = np.array([r["epsilon"] for r in rs])
            label = RNM_LABELS[mechanism] + (", pure ε (Thm 8)" if mechanism == "gaussian" else "")
            ax.plot(eps, acc, marker="o", markersize=3, label=label, **RNM_STYLES[mechanism])
            ax.fill_between(eps, acc - se, acc + se, alpha=0.2, linewidth=0, color=RNM_STYLES[mechanism]["color"])
            if mechanism == "gaussian":
                pp = np.array([r["epsilon_pp_analytic"] for r in rs])
                order = np.argsort(pp)
                ax.plot(pp[order], acc[order], marker="s", markersize=3, color="darkgreen", linestyle=":",
                        label="Gaussian RNM, post-processing ε (analytic, δ = 1e-5)")
        summary = next(s for s in summaries if s["dataset"] == dataset["name"] and s["d"] == d)
        ax.axhline(summary["uniform_accuracy"], color="grey", linestyle="--", linewidth=1,
                   label=f"uniform random day ({summary['uniform_accuracy']:.4f})")
        ax.set_xscale("log")
        ax.set_xlabel("ε (pure DP; Gaussian pp curve: (ε, 1e-5)-DP)")
        ax.set_ylabel("accuracy, eq. (39)")
        ax.set_title(f"{DATASET_LABELS[dataset['name']]}, d = {d}, Δ = 1/{dataset['population']}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.savefig(path, format="png")


def _plot_fsrc_scatter(result, c, path):
    fig = _figure(12.0, 4.6)
    left, right = fig.subplots(1, 2)
    entries = result["entries"]
    greens = _colours("Greens", len(entries), 0.45, 0.95)
    purples = _colours("Purples", len(entries), 0.45, 0.95)
    for k, entry in enumerate(entries):
        sx = entry["sigma_threshold"]
        left.scatter(entry["fsrc"]["per_run"]["spent"], entry["fsrc"]["per_run"]["f1"], s=12, color=greens[k],
                     marker="o", label=f"FSRC (ex-post), σX = {sx:g}")
        for conversion, marker in (("markov", "^"), ("bbghs", "v")):
            if conversion in entry["whitehouse"]:
                wh = entry["whitehouse"][conversion]
                left.scatter(wh["per_run"]["spent"], wh["per_run"]["f1"], s=12, color=purples[k], marker=marker,
                             label=f"Whitehouse filter ({conversion}), σX = {sx:g}")
        right.scatter(entry["fsrc_budget"]["per_run"]["spent"], entry["fsrc_budget"]["per_run"]["f1"], s=12,
                      color=greens[k], marker="o", label=f"FSRC, σX = {sx:g}")
        wh = entry["whitehouse_budget"]["markov"]
        right.scatter(wh["per_run"]["spent"], wh["per_run"]["f1"], s=12, color=purples[k], marker="^",
                      label=f"Whitehouse (markov), σX = {sx:g}")
    right.axvline(result["budget"], color="black", linestyle="--", linewidth=1, label=f"budget ε = {result['budget']}")
    left.set_title(f"{result['label']}: no budget (final spend), ρ = {result['threshold']}", fontsize=9)
    right.set_title(f"budget ε = {result['budget']}, δ = 1/{result['population']}", fontsize=9)
    for ax in (left, right):
        ax.set_xlabel("final privacy spend ε")
        ax.set_ylabel("F1 vs noiseless AT")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    fig.savefig(path, format="png")


def _plot_fsrc_spend(result, c, path):
    fig = _figure(12.0, 4.4)
    left, right = fig.subplots(1, 2)
    entries = result["entries"]
    greens = _colours("Greens", len(entries), 0.45, 0.95)
    purples = _colours("Purples", len(entries), 0.45, 0.95)
    steps = np.arange(1, result["num_days"] + 1)
    for k, entry in enumerate(entries):
        sx = entry["sigma_threshold"]
        left.plot(steps, entry["fsrc"]["spent_by_step_mean"], color=greens[k], label=f"FSRC, σX = {sx:g}")
        left.plot(steps, entry["whitehouse"]["markov"]["spent_by_step_mean"], color=purples[k], linestyle="--",
                  label=f"Whitehouse (markov), σX = {sx:g}")
        right.plot(steps, entry["fsrc_budget"]["spent_by_step_mean"], color=greens[k], label=f"FSRC, σX = {sx:g}")
        right.plot(steps, entry["whitehouse_budget"]["markov"]["spent_by_step_mean"], color=purples[k],
                   linestyle="--", label=f"Whitehouse (markov), σX = {sx:g}")
    right.axhline(result["budget"], color="black", linestyle=":", linewidth=1, label=f"budget ε = {result['budget']}")
    left.set_title(f"{result['label']}: spend over time, no budget (mean of {result['runs']} runs)", fontsize=9)
    right.set_title(f"budget ε = {result['budget']} (FSRC: admits a run while spend + ε_max < ε)", fontsize=9)
    for ax in (left, right):
        ax.set_xlabel("day")
        ax.set_ylabel("privacy spend ε")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    fig.savefig(path, format="png")


# ---------------------------------------------------------------------------------------------
# Running parts, the report, and the registered study.


def run_seed004_part(part: str, out_dir, *, quick: bool = False, progress: bool = False,
                     config: dict | None = None) -> dict:
    """Runs one part of study ``seed004``, writing its PNGs into ``out_dir``.

    Args:
      part: one of ``"figure1"``, ``"figure2"``, ``"figure3"``, ``"figures7_8"``,
        ``"rnm_offline"``, ``"fsrc_online"``.
      out_dir: folder for the PNGs (created if missing).
      quick: use :func:`seed004_config` ``(quick=True)`` (ignored when ``config`` is given).
      progress: progress bars on stderr (when it is a terminal).
      config: a full config from :func:`seed004_config`, possibly edited.

    Returns:
      The part's JSON-ready results: its numbers, ``"comparisons"`` (rows of ours vs spec 004)
      and ``"figures"`` (PNG file names), plus ``"wall_s"``.

    Raises:
      ValueError: for an unknown part.
      ImportError: without matplotlib (``pip install gpuprivacy[plots]``).
    """
    if part not in PARTS:
        raise ValueError(f"unknown seed004 part {part!r}; pick one of {', '.join(PARTS)}.")
    require_matplotlib()
    config = seed004_config(quick=quick) if config is None else config
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    key = jax.random.fold_in(jax.random.key(config["seed"]), PARTS.index(part))
    t0 = time.perf_counter()
    if part == "figure1":
        result = _figure1(config, key, out_dir)
    elif part == "figure2":
        result = _figure2(config, key, out_dir)
    elif part == "figure3":
        result = _figure3(config, key, out_dir)
    elif part == "figures7_8":
        result = _figures7_8(config, key, out_dir)
    elif part == "rnm_offline":
        result = _rnm_offline(config, key, out_dir, progress)
    else:
        result = _fsrc_online(config, key, out_dir, progress)
    result["wall_s"] = time.perf_counter() - t0
    return json.loads(json.dumps(result, default=_json_default))  # plain JSON types (no NumPy scalars)


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _fmt(value, digits=4):
    if value is None:
        return "–"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "NO"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    value = float(value)
    if abs(value) < 1e-12:
        value = 0.0  # round-off (e.g. the sd of identical spends)
    if value != 0 and (abs(value) < 10.0 ** -digits or abs(value) >= 1e5):
        return f"{value:.{max(digits - 2, 1)}e}"
    return f"{value:.{digits}f}"


def _pm(mean, spread, digits=4):
    return f"{_fmt(mean, digits)} ± {_fmt(spread, digits)}"


def _table(header: list[str], rows: list[list], *, text_columns: int = 1) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * text_columns + "---:|" * (len(header) - text_columns)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines + [""]


_GRID_PREFIXES = ("Fig. 2 ε_post(t = ", "Fig. 7 ")


def _comparison_lines(comparisons: list[dict]) -> list[str]:
    def status(row):
        return {"ok": "ok", "differs": "**differs**", "missing": "missing"}[row["status"]]

    def ours(row):
        if row["ours"] is None:
            return "–"
        if "." not in row["spec"] and float(row["ours"]).is_integer():
            return str(int(row["ours"]))
        return _fmt(row["ours"], max(_decimals(row["spec"]) + 2, 4))

    def line(row):
        rel = "–" if row["rel_diff"] is None else f"{row['rel_diff']:.1e}"
        diff = "–" if row["abs_diff"] is None else f"{row['abs_diff']:.1e}"
        return [row["quantity"], f"§{row['section']}", row["spec"], ours(row), diff, rel,
                f"{row['tolerance']:.1e}" if row["tolerance"] is not None else "–", status(row) +
                (f" ({row['note']})" if row["note"] else "")]

    header = ["quantity", "spec", "spec value", "ours", "abs diff", "rel diff", "tolerance", "status"]
    singles = [r for r in comparisons if not r["quantity"].startswith(_GRID_PREFIXES)]
    lines = _table(header, [line(r) for r in singles])
    grids = {"Fig. 2 ε_post grid (8 t × 11 ρ)": "Fig. 2 ε_post(t = ",
             "Fig. 7 pure ε_RNM grid (5 σ × 8 d)": "Fig. 7 pure",
             "Fig. 7 analytic Gaussian grid (5 σ × 8 d)": "Fig. 7 post-processing, analytic",
             "Fig. 7 RDP + BBGHS grid (3 σ × 8 d)": "Fig. 7 post-processing, RDP + BBGHS",
             "Fig. 7 RDP + Markov grid (3 σ × 8 d)": "Fig. 7 post-processing, RDP + Markov"}
    summary = []
    for label, prefix in grids.items():
        rows = [r for r in comparisons if r["quantity"].startswith(prefix) and r["ours"] is not None]
        if not rows:
            continue
        worst = max(rows, key=lambda r: r["abs_diff"])
        summary.append([label, len(rows), f"{max(r['abs_diff'] for r in rows):.1e}",
                        f"{max(r['rel_diff'] for r in rows):.1e}", worst["quantity"],
                        "all ok" if all(r["status"] == "ok" for r in rows)
                        else f"**{sum(r['status'] != 'ok' for r in rows)} differ**"])
    lines += ["Grids (every point is listed below and in `results.csv`; ok = ours rounds to the spec's printed "
              "digits):", ""]
    lines += _table(["grid", "points", "max abs diff", "max rel diff", "worst point", "status"], summary,
                    text_columns=1)
    grid_rows = [r for r in comparisons if r["quantity"].startswith(_GRID_PREFIXES)]
    lines += ["<details><summary>Every grid point</summary>", ""]
    lines += _table(header, [line(r) for r in grid_rows])
    lines += ["</details>", ""]
    return lines


def _report(config: dict, results: dict, comparisons: list[dict], wall: dict) -> str:
    quick = config["quick"]
    f1, f2, f3, f78 = (results[p] for p in ("figure1", "figure2", "figure3", "figures7_8"))
    off, online = results["rnm_offline"], results["fsrc_online"]
    c1, c2, c3, c7 = config["figure1"], config["figure2"], config["figure3"], config["figures7_8"]
    co, cf = config["rnm_offline"], config["fsrc_online"]
    n_ok = sum(r["status"] == "ok" for r in comparisons)
    lines = [
        "# Seed 004: Gaussian selection with pure ex-ante / ex-post DP (`seed004`)",
        "",
        f"Reproduces the numerical content of {PAPER}: Figs 1, 2, 3, 7, 8, the offline report-noisy-max "
        "study of App. B.3 (Figs 13-16) and the online sparse-vector study of Sec. 4.1 / App. D (Figs 4, 17, 18), "
        "following spec 004 (`shared/specs/004_gaussian_selection.md`), which corrects the paper in several "
        "places (see the last sections).",
        "",
        f"**Mode: {'QUICK (smoke test: small grids, few trials and runs; not for citing)' if quick else 'full'}.** "
        f"Seed {config['seed']}; every part draws from `jax.random.fold_in(jax.random.key(seed), part_index)` and "
        f"folds in configuration indices below that. Total wall time {sum(wall.values()):.1f} s "
        "(" + ", ".join(f"{k} {v:.1f} s" for k, v in wall.items()) + ").",
        "",
        f"**Ours vs spec: {n_ok} of {len(comparisons)} reference values agree** (table at the end; "
        "`results.csv`).",
        "",
        "## What was run",
        "",
        "All privacy numbers come from the public API: `gpuprivacy.accounting.gaussian_rnm_epsilon` (Thm 8, as the "
        "log of the ratio), `gaussian_at_epsilon` / `gaussian_at_epsilon_no_top` (corrected Thm 10/17 and the "
        "derived ε_bot), `gaussian_rnm_epsilon_postprocessing` (analytic Gaussian, RDP + BBGHS, RDP + Markov), "
        "`zhu_wang_at_epsilon` (Thm 7); mechanisms from `gpuprivacy.mechanisms` (`gaussian_report_noisy_max`, "
        "`laplace_report_noisy_max` with both calibrations, `exponential_mechanism`, `permute_and_flip`, "
        "`gaussian_above_threshold`, `gaussian_sparse_vector` (FSRC), `gaussian_sparse_vector_whitehouse`). "
        "Accounting values are upper bounds (estimate + error estimate, rounded up), as the library returns them.",
        "",
        f"* **Figure 1** (spec §5.2, §5.4, §4.5): Δ = {c1['sensitivity']}, δ = {c1['delta']}, [a, b] = [0, 1], "
        f"σX = σ, σZ = √3 σ, ρ ∈ {c1['thresholds']}. Ex-ante = Zhu-Wang Thm 7 RDP converted with BBGHS "
        "(Balle et al. 2020 Thm 21, what autodp does; Markov shown too). Ex-post = ε_post(t). t* = largest "
        f"t ≤ {c1['curve_max_time']} with ε_post(t) < ex-ante. Heat map over σ ∈ linspace(0.2, 0.3, "
        f"{len(c1['heatmap_sigmas'])}) × the paper's 20 stopping times. Stopping time T (1-based) on the all-zero "
        "stream from the exact law P(T > k) = E_x[Φ((ρ + σX x)/σZ)^k] (log-space quadrature on a fixed grid, "
        "quantiles by bisection over k), checked by Monte Carlo of `gaussian_above_threshold` "
        f"({c1['simulation_trials']} trials on a {c1['simulation_stream_length']}-step zero stream per "
        f"configuration, {len(c1['simulation_configs'])} configuration(s)) against a DKW band at failure "
        f"probability {c1['dkw_failure_probability']}.",
        f"* **Figure 2** (spec §5.4): ε_post(t) for t ∈ {c2['times']} over {len(c2['thresholds'])} thresholds in "
        f"[0, 1], σX = {c2['sigma_threshold']}, σZ = √3 σX, Δ = {c2['sensitivity']}; plus ε_bot(t) at ρ = "
        f"{c2['no_top_threshold']} and ε_post(t) for t up to 10^8 at ρ = {c2['growth_threshold']}.",
        f"* **Figure 3** (spec §5.3, §6.1): ε_RNM for d ∈ {c3['d']}, σ = {c3['sigma']}, Δ = {c3['sensitivity']}, "
        "by quadrature and by Monte Carlo batched on the device (jit + vmap over d, `lax.fori_loop` over chunks "
        "with `fold_in` keys, float64 sums): common random numbers for numerator and denominator and importance "
        "sampling N(x*, s²) at the mode x* of the denominator's log-integrand with s = max(κ^-1/2, 0.75) "
        f"(κ the curvature at x*; s² > 1/2 keeps the weights' variance finite), {f3['mc_samples']:.2e} samples "
        "per d; standard error by the delta method. Next to it the paper's estimator (plain N(0, 1) samples, "
        f"independent for numerator and denominator), {f3['plain_repeats']} repeats of "
        f"{f3['plain_samples_per_repeat']:.1e} samples.",
        f"* **Figures 7, 8** (spec §5.3, §3.2): Δ = {c7['sensitivity']}, δ = {c7['delta']}, σ ∈ {c7['sigmas']}, "
        f"d ∈ {c7['d']}; post-processing baselines with l2 sensitivity Δ√d: analytic Gaussian (the paper's code), "
        f"RDP + BBGHS, RDP + Markov (= zCDP). Fig. 8: {len(c7['heatmap_sigmas'])} × {len(c7['heatmap_d'])} "
        "grid over (σ, d).",
        f"* **Offline RNM** (App. B.3, spec §4.11, §5.5): σ ∈ {co['sigmas']}, {co['trials']} trials per point; "
        "Gaussian RNM accounted by the pure bound and by post-processing (analytic, δ = 1e-5); at ε = ε_pure(σ) "
        "Laplace RNM with the standard Lap(2Δ/ε) and the post-processing Lap(dΔ/ε) calibrations, the "
        "exponential mechanism and permute-and-flip (all with Δ = 1/N). Accuracy eq. (39) = 1 − mean(q_max − "
        "q_selected) (q_max = 1) ± one standard error. Data: "
        + "; ".join(f"{DATASET_LABELS[ds['name']]} d ∈ {ds['d']} (N = {ds['population']})" for ds in co["datasets"])
        + ".",
        f"* **Online FSRC** (Sec. 4.1, App. D, spec §4.4, §4.12, §5.6): {cf['runs']} runs per σX, σZ = √3 σX, "
        "Δ = δ = 1/N. FSRC = `gaussian_sparse_vector` with the sound δ_j = 6δ/(π² j²) schedule (spec §3.5), "
        "ε_max from Zhu-Wang + Markov (a pDP bound, spec §7.6); a trailing run without a top is charged ε_bot. "
        "The paper's constant-δ mode is run with the same keys only to report the δ it really uses. Baseline = "
        "`gaussian_sparse_vector_whitehouse` (eq. (40)/(41), corrected reading) with δ' = δ'' = 1/N, per-AT "
        f"(ε_j, δ_j) from Zhu-Wang ({', '.join(cf['whitehouse_conversions'])}). Without a budget (ε = "
        f"{UNBOUNDED_BUDGET:g}, i.e. observe the final spend, as the paper) and with a budget ε = {cf['budget']}. "
        "F1 against the noiseless indicator 1[q_t ≥ ρ]. Data: "
        + "; ".join(f"{DATASET_LABELS[ds['name']]} ({ds['num_days']} days, ρ = {ds['threshold']}, σX ∈ "
                    f"{ds['sigma_thresholds']})" for ds in cf["datasets"]) + ".",
        "* **Synthetic energy stand-ins** (spec §5.1; LCL and NEAR are not obtainable offline): per-household daily "
        "kWh x = exp(μ_u + 0.25 cos(2π(t − t_peak)/365.25) + w_weekday + e), μ_u ~ N(log 9, 0.5²), "
        "w ~ N(0, 0.05²), e ~ N(0, 0.3²), clipped to a public cap B = 40 kWh, q_t = mean_u x/B ∈ [0, 1], "
        "Δ = 1/N exactly (replace-one). NumPy PCG64 seeds "
        + ", ".join(f"{k}: {v['seed']} (N = {v['num_users']}, {v['num_days']} days from {v['first_day']}, "
                    f"peak day {v['peak_day']})" for k, v in config["synthetic_energy"].items())
        + ". **These are synthetic: their numbers say nothing about the real LCL or NEAR data.**",
        "",
        "## Results",
        "",
        "### Figure 1: ex-ante vs ex-post accounting of Gaussian above threshold",
        "",
        "![Figure 1 curves](fig1_expost_vs_exante.png)",
        "",
        "![Figure 1 heat map](fig1_heatmap.png)",
        "",
    ]
    lines += _table(["ρ", "σX", "ex-ante BBGHS", "ex-ante Markov", "t*", "median T", "80th pct T", "P(T > 200)",
                     "ε_post increasing"],
                    [[cv["threshold"], cv["sigma"], _fmt(cv["ex_ante_bbghs"], 5), _fmt(cv["ex_ante_markov"], 5),
                      f"{cv['t_star']}{' (censored)' if cv['t_star_censored'] else ''}", cv["median"], cv["p80"],
                      _fmt(cv["survival_200"], 4), _fmt(cv["expost_increasing"])] for cv in f1["curves"]])
    lines += ["Monte Carlo check of the exact stopping-time law (`gaussian_above_threshold` on the all-zero "
              "stream; S(k) = P(T > k)):", ""]
    lines += _table(["ρ", "σX", "trials", "median exact / MC", "80th pct exact / MC",
                     "max over k of abs(S_MC(k) − S(k))", "DKW bound", "within"],
                    [[s["threshold"], s["sigma"], s["trials"], f"{s['median_exact']} / {s['median_mc']}",
                      f"{s['p80_exact']} / {s['p80_mc']}", _fmt(s["max_survival_deviation"], 4),
                      _fmt(s["dkw_bound"], 4), _fmt(s["within_dkw"])] for s in f1["simulations"]])
    f2_post = np.array(f2["epsilon_post"])
    rho_cols = [j for j, r in enumerate(f2["thresholds"]) if abs(r * 10 - round(r * 10)) < 1e-9]
    lines += ["### Figure 2: ex-post ε vs threshold", "", "![Figure 2](fig2_expost_vs_threshold.png)", ""]
    lines += _table(["t \\ ρ"] + [f"{f2['thresholds'][j]:.1f}" for j in rho_cols],
                    [[t] + [_fmt(f2_post[i, j], 5) for j in rho_cols] for i, t in enumerate(f2["times"])])
    lines += [f"ε_post increases with t at every ρ of the grid: {_fmt(f2['increasing_in_t'])}; t = 2 is smallest at "
              f"ρ = {f2['t2_argmin_threshold']} (= (a + b)/2, as the paper's caption says). ε_bot at ρ = "
              f"{f2['no_top']['threshold']}: "
              + ", ".join(f"t = {t}: {_fmt(e, 5)}" for t, e in zip(f2["no_top"]["times"], f2["no_top"]["epsilon"],
                                                                   strict=True))
              + f". Growth at ρ = {f2['growth']['threshold']}: "
              + ", ".join(f"t = {t:.0e}: {_fmt(e, 5)}" for t, e in zip(f2["growth"]["times"],
                                                                      f2["growth"]["epsilon_post"], strict=True))
              + " (slow, unbounded growth: no ex-ante pure DP without a cap).", ""]
    lines += ["### Figure 3: Gaussian RNM, Monte Carlo vs numerical integration", "",
              "![Figure 3](fig3_rnm_mc_vs_quadrature.png)", ""]
    lines += _table(["d", "quadrature", "MC (CRN + IS) ± SE", "z = (MC − quad)/SE", "paper-style plain MC mean ± sd"],
                    [[r["d"], _fmt(r["quadrature"], 6), _pm(r["mc"], r["mc_se"], 6), _fmt(r["mc_z"], 2),
                      _pm(r["plain_mean"], r["plain_sd"], 4) if r["plain_sd"] is not None else _fmt(r["plain_mean"])]
                     for r in f3["records"]])
    lines += [f"Device: {f3['device']}; CRN + IS Monte Carlo took {f3['mc_seconds']:.2f} s for "
              f"{len(f3['records'])} × {f3['mc_samples']:.1e} samples (including compilation). The plain estimator "
              "needs the integrand's mass near the mode x* (≈ 6 standard deviations out at d = 1000), which N(0, 1) "
              "samples almost never reach: its error grows with d, as in the paper's Fig. 3/6.", ""]
    fig7 = f78["figure7"]
    lines += ["### Figures 7 and 8: pure bound vs post-processing baselines", "",
              "![Figure 7](fig7_rnm_pure_vs_postprocessing.png)", "", "![Figure 8](fig8_rnm_difference_heatmap.png)",
              ""]
    lines += _table(["σ", "bound"] + [f"d = {d}" for d in fig7["d"]],
                    [[s, name] + [_fmt(v, 5) for v in np.array(fig7[key])[i]]
                     for i, s in enumerate(fig7["sigmas"])
                     for key, name in (("pure", "pure"), ("analytic", "analytic pp"), ("bbghs", "RDP+BBGHS pp"),
                                       ("markov", "RDP+Markov pp"))], text_columns=2)
    worse = f78["pure_worse_than_analytic"]
    lines += [f"Pure ε increases with d: {_fmt(f78['pure_increasing_in_d'])}; decreases with σ: "
              f"{_fmt(f78['pure_decreasing_in_sigma'])}. The pure bound is looser than the analytic Gaussian "
              "baseline at " + (", ".join(f"(σ = {s}, d = {d})" for s, d in worse) if worse else "no grid point")
              + " (small d, small σ; spec §5.3 notes the crossover near d ≈ 40 at σ = 0.1) and tighter everywhere "
              "else on the Fig. 7 grid.", ""]
    lines += ["### Offline report noisy max (App. B.3)", ""]
    for ds in co["datasets"]:
        lines += [f"#### {DATASET_LABELS[ds['name']]}", "", f"![RNM {ds['name']}](rnm_{ds['name']}.png)", ""]
        for d in ds["d"]:
            summary = next(s for s in off["datasets"] if s["dataset"] == ds["name"] and s["d"] == d)
            lines += [f"d = {d}, Δ = 1/{ds['population']}; uniform-random accuracy {summary['uniform_accuracy']:.4f}; "
                      f"true argmax index {summary['argmax']} (q = {summary['max_query']:.4f}, gap to the second "
                      f"largest {summary['top_gap']:.2e}).", ""]
            rows = []
            for sigma in co["sigmas"]:
                rs = {r["mechanism"]: r for r in off["records"]
                      if r["dataset"] == ds["name"] and r["d"] == d and r["sigma"] == sigma}
                g = rs["gaussian"]
                rows.append([sigma, _fmt(g["epsilon_pure"], 4), _fmt(g["epsilon_pp_analytic"], 4),
                             _fmt(g["epsilon_pp_bbghs"], 4), _fmt(g["epsilon_pp_markov"], 4)]
                            + [_pm(rs[m]["accuracy"], rs[m]["accuracy_se"], 3) for m in RNM_MECHANISMS])
            lines += _table(["σ", "ε_pure", "ε_pp analytic", "ε_pp BBGHS", "ε_pp Markov"]
                            + [f"{RNM_LABELS[m]} acc" + (" (σ)" if m == "gaussian" else " (ε = ε_pure)")
                               for m in RNM_MECHANISMS], rows)
    lines += ["### Online sparse vector: FSRC vs the Whitehouse filter", ""]
    for ds in online["datasets"]:
        lines += [f"#### {ds['label']}, ρ = {ds['threshold']}, {ds['num_days']} days, Δ = δ = 1/{ds['population']}",
                  "", f"![FSRC scatter {ds['dataset']}](fsrc_{ds['dataset']}_scatter.png)", "",
                  f"![FSRC spend {ds['dataset']}](fsrc_{ds['dataset']}_spend.png)", ""]
        rows = []
        for e in ds["entries"]:
            wh = e["whitehouse"]
            rows.append([e["sigma_threshold"], _fmt(e["fraction_true_above"], 3), _fmt(e["epsilon_max_paper"], 4),
                         f"{_fmt(e['epsilon_max_sound_first'], 4)} / {_fmt(e['epsilon_max_sound_last'], 4)}",
                         _fmt(e["fsrc"]["tops"]["mean"], 1),
                         _pm(e["fsrc"]["spent"]["mean"], e["fsrc"]["spent"]["sd"], 3),
                         " / ".join(_pm(wh[k]["spent"]["mean"], wh[k]["spent"]["sd"], 3) for k in wh),
                         _fmt(e["whitehouse_style_spec"], 3), _fmt(e["basic_composition"], 2),
                         _pm(e["fsrc"]["f1"]["mean"], e["fsrc"]["f1"]["sd"], 3),
                         f"{_fmt(ds['delta'], 6)} / {_fmt(e['paper_mode_delta_used']['mean'], 4)}",
                         _fmt(e["paper_mode_same_release"])])
        cheaper = [e["sigma_threshold"] for e in ds["entries"]
                   if e["fsrc"]["spent"]["mean"] < e["whitehouse"]["markov"]["spent"]["mean"]]
        dearer = [e["sigma_threshold"] for e in ds["entries"] if e["sigma_threshold"] not in cheaper]
        lines += [f"FSRC's mean final spend is below the Whitehouse filter's (same runs, markov conversion) at σX ∈ "
                  f"{cheaper or '∅'}" + (f" and above it at σX ∈ {dearer}" if dearer else "") + ". "
                  "Both filters see the same noise, so without a budget they release the same bits and have the "
                  "same F1; only the accounting differs.", ""]
        lines += ["No budget (final spend; mean ± sd over runs):", ""]
        lines += _table(["σX", "share of q_t ≥ ρ", "ε_max/AT paper (δ = 1/N)", "ε_max/AT sound (first / last run)",
                         "tops", "FSRC spend", "Whitehouse spend (" + " / ".join(cf["whitehouse_conversions"]) + ")",
                         "Whitehouse-style, spec formula", "basic k·ε_max", "F1",
                         "δ sound / paper-mode union bound", "paper mode: same release"], rows)
        rows = []
        for e in ds["entries"]:
            fb, wb = e["fsrc_budget"], e["whitehouse_budget"]["markov"]
            rule = e["fsrc_budget_rule"]
            rows.append([e["sigma_threshold"], _pm(fb["spent"]["mean"], fb["spent"]["sd"], 3),
                         _fmt(fb["spent"]["max"], 4), f"{rule['runs_over_budget']}/{ds['runs']}",
                         _fmt(rule["max_admitted_total"], 4), _fmt(rule["holds"]), _fmt(fb["halted_fraction"], 2),
                         _fmt(fb["tops"]["mean"], 1), _pm(fb["f1"]["mean"], fb["f1"]["sd"], 3),
                         _pm(wb["spent"]["mean"], wb["spent"]["sd"], 3), _fmt(wb["tops"]["mean"], 1),
                         _pm(wb["f1"]["mean"], wb["f1"]["sd"], 3)])
        lines += [f"Budget ε = {ds['budget']}. FSRC admits run j only while spent + ε_max,j < ε (checked on every "
                  "released transcript: largest admitted total, and whether every halt had spent + ε_max ≥ ε); its "
                  "realised spend can still pass ε when the last run's ex-post loss exceeds its ε_max. The "
                  "Whitehouse filter's spend is at most ε by construction.", ""]
        lines += _table(["σX", "FSRC spend", "FSRC max spend", "FSRC runs over ε", "max admitted spent + ε_max",
                         "FSRC rule holds", "FSRC halted",
                         "FSRC tops", "FSRC F1", "Whitehouse (markov) spend", "Whitehouse tops", "Whitehouse F1"], rows)
    lines += ["## Ours vs spec 004 reference values", "",
              "Spec §5.3/§5.4 values are the spec author's float64/mpmath recomputations (5 digits); §5.5/§5.6 are "
              "their own Monte Carlo reproductions (\"indicative\"), so Monte Carlo quantities get a tolerance from "
              "the spec's stated noise plus 3 standard errors of this run. Deterministic quantities are ok when ours "
              "rounds to the printed digits.", ""]
    lines += _comparison_lines(comparisons)
    lines += _differences(config, results)
    lines += [
        "## Files",
        "",
        "* `report.md`: this report.",
        "* `results.json`: every number of every part (curves, grids, per-run spends and F1) and the comparison rows.",
        "* `results.csv`: the ours-vs-spec comparison table (one row per reference value).",
        "* `rnm_offline.csv`: one row per (dataset, d, σ, mechanism): ε, accuracy, standard error.",
        "* `fsrc_runs.csv`: one row per sparse-vector run: dataset, σX, method, budget, spend, F1, tops.",
        "* PNGs: " + ", ".join(f"`{name}`" for part in PARTS for name in results[part]["figures"]) + ".",
        "* `metadata.json`: seed, configuration, git SHA, versions, device, wall time.",
        "",
    ]
    return "\n".join(lines)


def _differences(config: dict, results: dict) -> list[str]:
    online = results["fsrc_online"]
    bikes = next((ds for ds in online["datasets"] if ds["dataset"] == "bikes"), None)
    paper_delta = ""
    if bikes is not None:
        e = bikes["entries"][0]
        paper_delta = (f" On Bikes at σX = {e['sigma_threshold']} the paper-mode run starts "
                       f"{e['fsrc']['num_runs']['mean']:.0f} above-threshold instances at δ = 1/N each, a union-bound "
                       f"δ of {e['paper_mode_delta_used']['mean']:.4f} instead of the claimed {bikes['delta']:.2e}; "
                       "the sound schedule keeps δ = 1/N at the price of a larger ε_max for later instances "
                       f"({e['epsilon_max_sound_first']:.4f} for the first, {e['epsilon_max_sound_last']:.4f} for the "
                       f"last vs {e['epsilon_max_paper']:.4f} in paper mode). Realised ex-post spend is unchanged "
                       f"(same release in both modes: {_fmt(e['paper_mode_same_release'])}).")
    max_se = max(r["mc_se"] for r in results["figure3"]["records"])
    lcl_line = ""
    lcl = next((ds for ds in online["datasets"] if ds["dataset"] == "lcl-synthetic"), None)
    if lcl is not None:
        dearer = [e["sigma_threshold"] for e in lcl["entries"]
                  if e["fsrc"]["spent"]["mean"] >= e["whitehouse"]["markov"]["spent"]["mean"]]
        lcl_line = (f"On the LCL-like stream (long stretches below ρ = {lcl['threshold']}) FSRC's final spend is not "
                    f"below the Whitehouse filter's at σX ∈ {dearer}: long runs are charged ε_post(t) > ε_max. "
                    "The paper reports FSRC benefits on the real LCL data at σX = 0.04 (Fig. 5; Fig. 19 says "
                    "σX > 0.06, spec §9); the synthetic data cannot settle this. " if dearer else
                    "On the LCL-like stream FSRC's final spend is below the Whitehouse filter's at every σX. ")
    budget_lines = []
    for ds in online["datasets"]:
        worst = max(ds["entries"], key=lambda e: e["fsrc_budget"]["spent"]["max"])
        over = sum(e["fsrc_budget_rule"]["runs_over_budget"] for e in ds["entries"])
        budget_lines.append(f"{ds['label']}: {over} of {ds['runs'] * len(ds['entries'])} budgeted FSRC runs ended "
                            f"above ε = {ds['budget']} (largest final spend {worst['fsrc_budget']['spent']['max']:.4f} "
                            f"at σX = {worst['sigma_threshold']}); admission rule held in all: "
                            f"{_fmt(all(e['fsrc_budget_rule']['holds'] for e in ds['entries']))}")
    return [
        "## Where and why the numbers differ from the paper",
        "",
        "* **The paper has no tables.** Its numbers are curves in figures; the reference values compared above "
        "come from spec 004 (own float64/mpmath recomputations and Monte Carlo reproductions), which agree with "
        "the paper's qualitative claims.",
        "* **Log of the ratio** (spec §3.1, §3.3, pitfall 7.1). Eq. (1) and Thm 10/17 print ε = E[·]/E[·]; the "
        "privacy loss is the log of that ratio (and the authors' code returns log NUM − log DEN). Every ε here is "
        "the log-ratio; reading the printed formula literally would report e^ε.",
        "* **Theorem 10 typo** (spec §3.3, pitfall 7.1). Thm 10 prints ρ − (b + a) and +σX x in the final factor "
        "(Thm 17 prints ρ − (b − a)); Lemma 18's maximiser gives ρ − b and −σX x. With [a, b] = [0, 1], as in all "
        "of the paper's experiments, the three readings of the shift agree, but the printed +σX x under-estimates "
        "the loss (0.01143 instead of 0.01779 at t = 2, ρ = 0.5, σX = 0.15; spec §3.3) and is never used here. "
        "So our ε_post values follow the authors' code, not the printed Thm 10 (the notebook's printed 0.008 at "
        "t = 3, ρ = 0.75, σX = 0.3 is our 0.007968).",
        "* **FSRC counterexample and the sound δ** (spec §3.5, pitfall 7.13). Thm 11/19 claims (ε, δ)-DP with the "
        "same δ for every mechanism; a two-output counterexample gives Pr[L > ε] ≈ 0.63 for a claimed δ = 0.01. "
        "FSRC here uses δ_j = 6δ/(π² j²) (Σ δ_j ≤ δ), which is valid by a union bound." + paper_delta,
        "* **Baseline calibration fairness** (spec §7.9). At equal ε the standard Laplace RNM Lap(2Δ/ε), the "
        "exponential mechanism and permute-and-flip beat Gaussian RNM under the pure bound on these data (the pure "
        "bound pays for the range c/σ); only the post-processing Laplace calibration Lap(dΔ/ε) loses. Fig. 16's "
        "\"clear improvement\" of Gaussian RNM over Laplace is reproducible only against that calibration, so both "
        "are plotted and labelled.",
        "* **Data-dependent normalisation** (spec §7.8). UCI Bikes queries are registered/6946 with N = 6946 read "
        "from the data (the paper's choice, assumed public) and Δ = 1/N under the assumption that each user "
        "contributes one rental to every day: paper-faithful, not DP-rigorous. The synthetic energy stand-ins use "
        "a public cap and a public N, so their Δ = 1/N is exact; the paper's min-max rescaling of LCL/NEAR is "
        "data-dependent and not reproduced.",
        "* **Monte Carlo of Fig. 3** (spec §3.8, §6.1, pitfall 7.10). The paper drew independent plain samples for "
        "numerator and denominator (100 × 10^10 on a V100) and found the variance \"unwieldy\"; we show that "
        "estimator next to a common-random-numbers importance sampler, whose standard error (at most "
        f"{max_se:.1e} here) is small enough to check the quadrature.",
        "* **Stopping times** (spec §4.5, pitfall 7.10). The authors' notebook reports 0-based stopping times "
        "(one less) capped at 200 steps and a strict '>'; we report the 1-based T of the exact law (uncapped: "
        "ρ = 0.75, σ = 0.2 has an 80th percentile above 200, P(T > 200) = 0.205).",
        "* **Fig. 8 baseline** (spec §9): the text says \"RDP post-processing\", the code used the analytic Gaussian; "
        "all three conversions are shown, at δ = 1e-5.",
        "* **Whitehouse baseline** (spec §3.6, §9): the paper does not state δ', δ'' or the per-AT δ_t. We use "
        "δ' = δ'' = 1/N and the same sound per-AT schedule; the spec's \"Whitehouse-style\" number "
        "(√(2 log(1/δ') k) ε_max + k ε_max²/2 with ε_max at δ = 1/N for the k tops) is reported separately and "
        "is what §5.6 compares; the library's sound filter spends more because later instances get smaller δ_j.",
        "* **FSRC spend vs its budget** (spec §4.3, §3.5): FSRC admits an instance only while spend + ε_max < ε, "
        "and then charges the realised ε_post(t) (or ε_bot(L) for a run cut by the end of the stream), which "
        "exceeds ε_max for long runs (the largest table entry, e.g. ε_post(731), is above ε_max). So the reported "
        "spend can end above ε, by at most max_t ε_post(t) − ε_max; the (ε, δ) guarantee is unaffected (the loss "
        "of the last instance exceeds its ε_max with probability at most δ_j). " + "; ".join(budget_lines) + ".",
        "* **Synthetic LCL / NEAR** (spec §5.1): the real data are not available offline; the stand-ins reproduce "
        "N, d, Δ and a plausible seasonal shape only, so Figs 5, 9-12, 19, 20 are not reproduced, only exercised. "
        + lcl_line
        + ("Quick mode truncates the LCL-like stream to 731 days (to reuse compiled kernels) and leaves out the "
           "NEAR-like data and LCL d = 829 offline." if config["quick"] else
           "The NEAR-like data enter the offline study only (the paper has no online study on NEAR)."),
        "* **Which days** (spec §9): the first d days of each series.",
        "* **Monte Carlo noise**: accuracies, F1 and spends are means over trials/runs; another seed moves them by "
        "about their standard error.",
        "",
    ]


def _write_csv(path: pathlib.Path, rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def _fsrc_rows(online: dict) -> list[dict]:
    rows = []
    for ds in online["datasets"]:
        for e in ds["entries"]:
            methods = {"fsrc": (e["fsrc"], UNBOUNDED_BUDGET), "fsrc_budget": (e["fsrc_budget"], ds["budget"])}
            for conversion in e["whitehouse"]:
                methods[f"whitehouse_{conversion}"] = (e["whitehouse"][conversion], UNBOUNDED_BUDGET)
                methods[f"whitehouse_{conversion}_budget"] = (e["whitehouse_budget"][conversion], ds["budget"])
            for method, (summary, budget) in methods.items():
                per_run = summary["per_run"]
                for run, (spent, f1, tops) in enumerate(zip(per_run["spent"], per_run["f1"], per_run["tops"],
                                                            strict=True)):
                    rows.append({"dataset": ds["dataset"], "sigma_threshold": e["sigma_threshold"],
                                 "method": method, "budget": budget, "run": run, "spent": spent, "f1": f1,
                                 "tops": tops})
    return rows


def _run_seed004(study_dir: pathlib.Path, *, quick: bool, progress: bool) -> dict:
    config = seed004_config(quick=quick)
    results, wall = {}, {}
    with Progress(len(PARTS), "seed004", enabled=progress) as bar:
        for part in PARTS:
            results[part] = run_seed004_part(part, study_dir, progress=progress, config=config)
            wall[part] = results[part]["wall_s"]
            bar.update()
    comparisons = [row for part in PARTS for row in results[part]["comparisons"]]
    _write_csv(study_dir / "results.csv", comparisons)
    _write_csv(study_dir / "rnm_offline.csv", results["rnm_offline"]["records"])
    _write_csv(study_dir / "fsrc_runs.csv", _fsrc_rows(results["fsrc_online"]))
    (study_dir / "results.json").write_text(json.dumps({
        "study": NAME, "quick": quick, "seed": config["seed"], "parts": results, "comparisons": comparisons,
        "num_comparisons_ok": sum(r["status"] == "ok" for r in comparisons),
    }, indent=1, default=_json_default) + "\n", encoding="utf-8")
    (study_dir / "report.md").write_text(_report(config, results, comparisons, wall), encoding="utf-8")
    return {"seed": config["seed"], "parameters": config, "part_wall_s": wall}


register_study(NAME, _run_seed004, "Gaussian selection with pure ex-ante/ex-post DP: Figs 1-3, 7-8, offline RNM "
               "(App. B.3) and online FSRC (Fig. 4) on UCI Bikes and synthetic energy stand-ins "
               "(Lebensold et al. 2024; spec 004)", replace=True)
