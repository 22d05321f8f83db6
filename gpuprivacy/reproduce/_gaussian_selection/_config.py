"""Study "lebensold2024-gaussian-selection": constants, labels and the configuration (:func:`gaussian_selection_config`)."""

from __future__ import annotations

import math

import numpy as np

from gpuprivacy import datasets


NAME = "lebensold2024-gaussian-selection"
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


def gaussian_selection_config(*, quick: bool = False) -> dict:
    """All parameters of study ``lebensold2024-gaussian-selection`` as a JSON-ready dict.

    Full mode uses the paper's sizes (10,000 stopping-time simulations,
    1,000 RNM trials, 50 sparse-vector runs, the paper's grids); quick mode
    keeps every part but shrinks grids, trials and runs so that the whole
    study runs in well under a minute on two CPU cores. Quick mode keeps
    every grid point that has one of our reference values.

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
        # sigmaZ = sqrt(3) sigma.
        "heatmap_sigmas": [round(float(s), 12) for s in np.linspace(0.2, 0.3, 6 if quick else 20)],
        "heatmap_times": [int(t) for t in np.linspace(50, 3, 20).astype(int)],
        "curve_sigmas": [0.2, 0.3],
        "curve_max_time": 200,
        # All-zero stream; 1000 steps instead of the notebook's 200, so that every
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
        # Synthetic stand-ins for the energy data of Lebensold et al. 2024, Sec. 4: x_{u,t} = exp(mu_u + A cos(2 pi (t - t_peak)/365.25)
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



DATASET_LABELS = {"bikes": "UCI Bikes (real data)", "lcl-synthetic": "LCL-like (SYNTHETIC stand-in)",
                  "near-synthetic": "NEAR-like (SYNTHETIC stand-in)"}

RNM_MECHANISMS = ("gaussian", "laplace_standard", "laplace_post_processing", "exponential_mechanism",
                  "permute_and_flip")
RNM_LABELS = {
    "gaussian": "Gaussian RNM",
    "laplace_standard": "Laplace RNM, Lap(2Δ/ε) (standard)",
    "laplace_post_processing": "Laplace RNM, Lap(dΔ/ε) (post-processing)",
    "exponential_mechanism": "Exponential mechanism",
    "permute_and_flip": "Permute-and-flip",
}
