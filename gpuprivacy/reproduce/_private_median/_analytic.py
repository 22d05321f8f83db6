"""The exact parts of the private-median study: the Case-A counterexamples, the constants, the privacy check.

No sampling of the mechanism: exact log-densities of the restricted (3.4) and general (3.6) densities of
Tzamos, Vlatakis-Gkaragkounis & Zadik (2020) on chosen neighbour pairs (see docs/errata.md), the analytic
constants (C_min, Zhat and tails, lower-bound sample sizes), and the worst exact log-ratio over random and
adversarial neighbours.
"""

from __future__ import annotations

import math

import numpy as np

from gpuprivacy.mechanisms import median

def _max_log_ratio(x, y, params):
    px, py = median.private_median_pieces(x, **params), median.private_median_pieces(y, **params)
    points = np.unique(np.r_[px.left, px.right, py.left, py.right])
    points = np.r_[points, 0.5 * (points[1:] + points[:-1])]

    def at(p, w):
        i = np.clip(np.searchsorted(p.left, w, side="right") - 1, 0, p.left.size - 1)
        return p.log_left[i] + p.slope[i] * (w - p.left[i])
    return float(np.max(np.abs(at(px, points) - at(py, points))))


def part_counterexamples():
    params = dict(epsilon=1.0, min_density=0.5, radius=1.0, median_bound=100.0, constant=6.0)
    x4, y4 = np.r_[np.zeros(24), np.full(24, 50.0)], np.r_[np.zeros(23), np.full(25, 50.0)]
    n, delta, K, l = 384, 1 / 32, 16, 192
    x5 = np.r_[-np.arange(l - 1, 0, -1) * delta, 0.0, np.arange(1, K + 2) * delta, 50 + np.arange(n - l - K - 1) * delta]
    y5 = x5.copy()
    y5[:2 * K + 3] = 50 - np.arange(1, 2 * K + 4) * delta
    rows, curves = [], {}
    for label, x, y in (("ties", x4, y4), ("no ties", x5, y5)):
        d = int(np.sum(x != y))
        support = median.median_parameters(len(x), **params).support
        grid = np.linspace(-support, support, 100_001)
        mid = 0.5 * (grid[1:] + grid[:-1])
        mx, my = median.nonprivate_median(x), median.nonprivate_median(y)
        flat = 3 * params["constant"] * params["radius"]
        # The restricted log-densities are piecewise linear with breakpoints m and m +- 3Cr: exact maximum.
        kinks = np.clip(np.r_[mx, my, mx - flat, mx + flat, my - flat, my + flat], -support, support)
        rx = median.flattened_laplace_log_density(mid, mx, len(x), **params)
        ry = median.flattened_laplace_log_density(mid, my, len(x), **params)
        restricted = float(np.max(np.abs(median.flattened_laplace_log_density(kinks, mx, len(x), **params)
                                         - median.flattened_laplace_log_density(kinks, my, len(x), **params))))
        gx = median.private_median_log_density(x, mid, **params)
        tv = 0.5 * float(np.sum(np.abs(np.exp(gx) - np.exp(rx))) * (grid[1] - grid[0]))
        rows.append(dict(pair=label, n=len(x), d_hamming=d, both_in_H=bool(
            median.typical_hulls(x, **params).distance == 0 and median.typical_hulls(y, **params).distance == 0),
            restricted_log_ratio=max(restricted, float(np.max(np.abs(rx - ry)))), restricted_allowance=params["epsilon"] * d / 2,
            general_log_ratio=_max_log_ratio(x, y, params), general_allowance=params["epsilon"] * d,
            tv_general_vs_restricted=tv))
        step = max(1, mid.size // 4000)
        curves[label] = dict(omega=mid[::step], general_x=gx[::step],
                             general_y=median.private_median_log_density(y, mid[::step], **params),
                             restricted_x=rx[::step], restricted_y=ry[::step])
    return rows, curves


def part_constants():
    base = dict(min_density=0.5, radius=1.0)
    table = []
    for n, c, R, eps in ((1000, 6, 10, 1.0), (1000, 6, 10, 0.1), (10000, 105, 1000, 1.0), (100, 6, 1e6, 0.5)):
        p = dict(base, constant=c, median_bound=R, epsilon=eps)
        table.append(dict(n=n, C=c, R=R, epsilon=eps, Zhat=math.exp(median.flattened_laplace_log_normalizer(n, **p)),
                          tail_0_1=median.flattened_laplace_tail(0.1, n, **p),
                          tail_0_5=median.flattened_laplace_tail(0.5, n, **p)))
    lower = [dict(alpha=a, beta=b, epsilon=e, L=L, r=1.0, R=R, **median.lower_bound_sample_sizes(
        alpha=a, beta=b, epsilon=e, min_density=L, radius=1.0, median_bound=R))
        for a, b, L, R, e in ((0.1, 0.05, 0.5, 10.0, 1.0), (0.01, 0.01, 0.25, 1000.0, 0.1))]
    return dict(theory_constant=median.THEORY_CONSTANT, restricted=table, lower_bounds=lower)


def part_privacy(config):
    rng = np.random.default_rng([config["seed"], 5])
    params = dict(epsilon=1.0, min_density=0.5, radius=1.0, median_bound=3.0, constant=2.0)
    worst = []
    for i in range(config["privacy_pairs"]):
        x = [rng.uniform(-1, 1, 41), np.r_[rng.uniform(-2.3, -2, 20), rng.uniform(2, 2.3, 21)],
             (np.arange(41) - 20) * 0.7, np.round(rng.normal(0, 1, 41) * 4) / 4][i % 4]
        y = x.copy()
        y[rng.integers(41)] = rng.choice([rng.uniform(-3, 3), 100.0, x[20]])
        worst.append(_max_log_ratio(x, y, params) / (params["epsilon"] * max(1, int(np.sum(x != y)))))
    return dict(pairs=len(worst), max_ratio_over_eps_d=float(np.max(worst)), mean=float(np.mean(worst)))
