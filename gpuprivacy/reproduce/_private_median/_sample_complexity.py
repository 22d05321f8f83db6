"""The ``sample_complexity`` part of the private-median study: the n that reaches (alpha, beta), against
the Theorem 3.1 rate of Tzamos, Vlatakis-Gkaragkounis & Zadik (2020) with constants fitted by nonnegative
least squares.
"""

from __future__ import annotations

import math

import numpy as np

def rate_terms(n_alpha, alpha, beta, epsilon, config):
    """The three Theorem 3.1 terms (without constants): non-private, local privacy, range."""
    L, r, R = config["min_density"], config["radius"], config["median_bound"]
    return (math.log(1 / beta) / (L**2 * alpha**2), math.log(1 / beta) / (epsilon * L * alpha),
            math.log(R / alpha + 1) / (epsilon * L * r))


def part_sample_complexity(config, rates):
    """n needed for P(|error| >= alpha) <= beta (log-interpolated on the grid), and NNLS constants."""
    rows = []
    for dist in config["distributions"]:
        for eps in config["epsilons"]:
            sub = sorted((r for r in rates if r["distribution"] == dist and r["epsilon"] == eps), key=lambda r: r["n"])
            ns = np.array([r["n"] for r in sub], float)
            q = np.array([r["error_q90"] for r in sub])
            for alpha in config["alphas"]:
                reached = np.flatnonzero(q <= alpha)
                if reached.size == 0:
                    continue
                i = reached[0]
                if i == 0:
                    needed = ns[0]
                else:  # log-log interpolation between the bracketing grid points
                    x0, x1, y0, y1 = np.log(ns[i - 1]), np.log(ns[i]), np.log(q[i - 1]), np.log(q[i])
                    needed = float(np.exp(x0 + (np.log(alpha) - y0) * (x1 - x0) / (y1 - y0))) if y1 != y0 else ns[i]
                rows.append(dict(distribution=dist, epsilon=eps, alpha=alpha, n_needed=float(needed),
                                 censored_below=bool(i == 0),
                                 terms=rate_terms(needed, alpha, config["beta"], eps, config)))
    fit = {}
    usable = [r for r in rows if not r["censored_below"]]
    if len(usable) >= 3:
        design = np.array([r["terms"] for r in usable])
        target = np.array([r["n_needed"] for r in usable])
        weights = 1 / target  # relative error
        from scipy import optimize  # here, not at import: SciPy is a quarter of `import gpuprivacy`'s own time

        coef, _ = optimize.nnls(design * weights[:, None], target * weights)
        predicted = design @ coef
        fit = dict(constants=[float(c) for c in coef], num_points=len(usable),
                   median_ratio=float(np.median(target / np.maximum(predicted, 1e-300))),
                   max_ratio=float(np.max(np.maximum(target / np.maximum(predicted, 1e-300),
                                                     predicted / target))))
    return rows, fit
