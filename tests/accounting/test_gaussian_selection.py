"""Pure-DP bounds of Gaussian selection (spec 004): reference values, errata, worst cases.

Independent checks live in this file only: a float64 grid integral built on scipy's log_ndtr,
explicit worst-case query vectors integrated with scipy.integrate.quad, a naive mpmath
quadrature (the authors' method), the Theorem-10-literal formula (never in the library), and a
Monte Carlo run of the mechanisms on the worst-case pairs.
"""

import json
import math
from pathlib import Path

import jax
import mpmath
import numpy as np
import pytest
from scipy import integrate, special, stats

from gpuprivacy import accounting
from tests.conftest import TEST_FAILURE_RATE

DATA = json.loads((Path(__file__).parents[1] / "data" / "gaussian_selection_pure_dp.json").read_text())
RNM_ROWS = DATA["grnm_pure_dp"]["rows"]
AT_ROWS = DATA["gaussian_above_threshold_expost"]["rows"]
SQRT3 = math.sqrt(3.0)
# Agreement with 60-digit references (the reported values are upper bounds: estimate + error).
RTOL = 1e-9


def _column(rows, name):
    return np.array([row[name] for row in rows], dtype=np.float64)


def _rnm(method="quadrature", **kwargs):
    return accounting.gaussian_rnm_epsilon(kwargs["sigma"], kwargs["d"], kwargs["sensitivity"], kwargs["lower"],
                                           kwargs["upper"], method=method)


# ------------------------------------------------------------------------------------------------
# Independent reference: a dense float64 grid integral with scipy's log_ndtr.

_X = np.linspace(-15.0, 25.0, 40_001)
# A coarser grid for the random searches (thousands of integrals); spacing 0.01 is still far below
# the integrands' widths (>= 0.5 here), where the trapezoid rule is accurate to ~1e-15.
_X_SEARCH = np.linspace(-12.0, 16.0, 2_801)


def _grid_log_expectation(log_factor):
    """log E_{x~N(0,1)}[exp(log_factor(x))] on a dense uniform grid (benign integrands only)."""
    h = _X[1] - _X[0]
    return special.logsumexp(-0.5 * _X * _X + log_factor(_X)) + math.log(h) - 0.5 * math.log(2 * math.pi)


def _at_epsilon_forms(t, sigma_x, sigma_z, rho, delta, a, b, form):
    """eps_post by the corrected formula or by the paper's literal Theorem 10 / Theorem 17 (errata tests)."""
    def log_factor(xi):
        if form == "corrected":  # spec 004 Sec 3.3
            return lambda x: ((t - 1) * special.log_ndtr((sigma_x * x + rho - b + xi) / sigma_z)
                              + special.log_ndtr((-sigma_x * x - rho + a + xi) / sigma_z))
        if form == "theorem10":  # printed: rho - (b + a) and +x in beta -- UNSAFE, tests only
            return lambda x: ((t - 1) * special.log_ndtr((sigma_x * x + rho - (b + a) + xi) / sigma_z)
                              + special.log_ndtr((sigma_x * x - rho + a + xi) / sigma_z))
        if form == "theorem17":  # printed: rho - (b - a)
            return lambda x: ((t - 1) * special.log_ndtr((sigma_x * x + rho - (b - a) + xi) / sigma_z)
                              + special.log_ndtr((-sigma_x * x - rho + a + xi) / sigma_z))
        raise AssertionError(form)
    return _grid_log_expectation(log_factor(delta)) - _grid_log_expectation(log_factor(0.0))


# ------------------------------------------------------------------------------------------------
# Shared reference data (tests/data, 60 digits).


def test_reference_json_rnm_quadrature_matches_and_bounds_from_above():
    eps = accounting.gaussian_rnm_epsilon(_column(RNM_ROWS, "sigma"), _column(RNM_ROWS, "d"),
                                          _column(RNM_ROWS, "Delta"), 0.0, _column(RNM_ROWS, "c"))
    reference = _column(RNM_ROWS, "eps_pure")
    np.testing.assert_allclose(eps, reference, rtol=RTOL, atol=0)
    assert np.all(eps >= reference)  # reported values are upper bounds


def test_reference_json_at_quadrature_matches_and_bounds_from_above():
    eps = accounting.gaussian_at_epsilon(*(_column(AT_ROWS, k) for k in ("t", "sigmaX", "sigmaZ", "rho", "Delta",
                                                                         "a", "b")))
    reference = _column(AT_ROWS, "eps_expost")
    np.testing.assert_allclose(eps, reference, rtol=RTOL, atol=0)
    assert np.all(eps >= reference)


# The shared references were computed at 60 digits from the float64-rounded shifts (e.g.
# (c - 2 Delta) / sigma), so they differ from the exact values for the float64 inputs by up to
# ~7e-14 relative (found by the arb and mpmath evaluators, which build the shifts in high
# precision). Hence rel=RTOL, and no ordering, for the evaluators that are exact for the inputs.


@pytest.mark.parametrize("index", [0, 15, 39])
def test_reference_json_rnm_mpmath(index):
    row = RNM_ROWS[index]  # subsample: about 1 s per value
    eps = accounting.gaussian_rnm_epsilon(row["sigma"], row["d"], row["Delta"], 0.0, row["c"], method="mpmath")
    assert isinstance(eps, float)
    assert eps == pytest.approx(row["eps_pure"], rel=RTOL, abs=0)


@pytest.mark.parametrize("index", [0, 3])
def test_reference_json_at_mpmath(index):
    row = AT_ROWS[index]
    args = [row[k] for k in ("t", "sigmaX", "sigmaZ", "rho", "Delta", "a", "b")]
    eps = accounting.gaussian_at_epsilon(*args, method="mpmath")
    assert eps == pytest.approx(row["eps_expost"], rel=RTOL, abs=0)


@pytest.mark.parametrize("bound, args", [
    ("rnm", (0.1, 1024, 1e-3, 0.0, 1.0)),
    ("rnm", (0.3, 5, 0.1, -1.0, 1.0)),
    ("top", (3, 0.3, 0.3 * SQRT3, 0.75, 1e-3, 0.0, 1.0)),
    ("top", (5, 0.3, 0.05, 0.5, 0.01, 0.0, 1.0)),  # the narrow integrand of spec Sec 6.2
    ("no_top", (20, 0.15, 0.15 * SQRT3, 0.5, 1e-3, 0.0, 1.0)),
])
def test_certified_arb_bound_agrees_with_mpmath_and_bounds_the_quadrature_estimate(bound, args):
    pytest.importorskip("flint")
    fn = {"rnm": accounting.gaussian_rnm_epsilon, "top": accounting.gaussian_at_epsilon,
          "no_top": accounting.gaussian_at_epsilon_no_top}[bound]
    certified = fn(*args, certified=True)
    mp = fn(*args, method="mpmath")
    quadrature = fn(*args)
    # Two independent high-precision evaluators (arb enclosure, mpmath at two precisions).
    assert certified == pytest.approx(mp, rel=1e-14)
    # The float64 quadrature reports estimate + error estimate: above the proven bound, but close.
    assert certified <= quadrature <= certified * (1 + 1e-9)


# ------------------------------------------------------------------------------------------------
# Spec 004 Sec 5.3 / 5.4 reference values (printed to 4-5 decimals: absolute tolerance half a unit).

SPEC_RNM_GRID = {  # Delta = 1e-3, [0, 1]; d = 16, 28, 52, 95, 172, 312, 565, 1024
    0.1: [0.20405, 0.21492, 0.22434, 0.23183, 0.23814, 0.24370, 0.24868, 0.25323],
    0.2: [0.05797, 0.06211, 0.06591, 0.06907, 0.07181, 0.07428, 0.07654, 0.07863],
    0.3: [0.02921, 0.03165, 0.03395, 0.03589, 0.03760, 0.03917, 0.04060, 0.04194],
    0.4: [0.01846, 0.02017, 0.02179, 0.02318, 0.02441, 0.02554, 0.02659, 0.02757],
    0.5: [0.01315, 0.01445, 0.01569, 0.01677, 0.01773, 0.01862, 0.01944, 0.02021],
}
SPEC_D = [16, 28, 52, 95, 172, 312, 565, 1024]


def test_spec_rnm_fig7_grid():
    sigmas = np.array(sorted(SPEC_RNM_GRID))[:, None]
    eps = accounting.gaussian_rnm_epsilon(sigmas, np.array(SPEC_D)[None, :], 1e-3, 0.0, 1.0)
    assert eps.shape == (5, 8)
    np.testing.assert_allclose(eps, np.array([SPEC_RNM_GRID[s] for s in sorted(SPEC_RNM_GRID)]), atol=5.1e-6, rtol=0)


def test_spec_rnm_fig3_row_and_range_scaling():
    d = np.array([2, 3, 5, 10, 20, 50, 100, 200, 500, 1000])
    expected = [0.12594, 0.17443, 0.22036, 0.26614, 0.30067, 0.33636, 0.35867, 0.37829, 0.40127, 0.41699]
    np.testing.assert_allclose(accounting.gaussian_rnm_epsilon(0.3, d, 0.01, 0.0, 1.0), expected, atol=5.1e-6)
    # Sec 3.1: eps grows roughly linearly in c (d = 10, sigma = 0.2, Delta = 1e-3).
    widths = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    np.testing.assert_allclose(accounting.gaussian_rnm_epsilon(0.2, 10, 1e-3, 0.0, widths),
                               [0.0537, 0.0961, 0.1838, 0.3621, 0.7211], atol=5.1e-5)


SPEC_AT_GRID = {  # Fig. 2: Delta = 1e-3, sigmaX = 0.15, sigmaZ = sqrt(3) 0.15, [0, 1]; rho = 0.0, 0.1, ..., 1.0
    1: [0.00266, 0.00340, 0.00421, 0.00508, 0.00599, 0.00693, 0.00791, 0.00890, 0.00991, 0.01094, 0.01198],
    2: [0.01819, 0.01804, 0.01793, 0.01785, 0.01781, 0.01779, 0.01781, 0.01785, 0.01793, 0.01804, 0.01819],
    3: [0.02889, 0.02812, 0.02739, 0.02668, 0.02600, 0.02536, 0.02474, 0.02417, 0.02364, 0.02315, 0.02271],
    5: [0.04287, 0.04132, 0.03980, 0.03831, 0.03685, 0.03543, 0.03405, 0.03271, 0.03142, 0.03019, 0.02902],
    10: [0.06061, 0.05817, 0.05575, 0.05336, 0.05101, 0.04870, 0.04643, 0.04422, 0.04205, 0.03996, 0.03794],
    20: [0.07543, 0.07236, 0.06932, 0.06630, 0.06333, 0.06039, 0.05749, 0.05465, 0.05185, 0.04912, 0.04647],
    50: [0.09058, 0.08702, 0.08349, 0.07998, 0.07650, 0.07306, 0.06966, 0.06629, 0.06298, 0.05971, 0.05651],
    100: [0.09954, 0.09577, 0.09202, 0.08829, 0.08460, 0.08093, 0.07729, 0.07369, 0.07013, 0.06661, 0.06314],
}


def test_spec_at_fig2_grid():
    t = np.array(sorted(SPEC_AT_GRID))[:, None]
    rho = np.round(np.linspace(0.0, 1.0, 11), 10)[None, :]
    eps = accounting.gaussian_at_epsilon(t, 0.15, 0.15 * SQRT3, rho, 1e-3, 0.0, 1.0)
    np.testing.assert_allclose(eps, [SPEC_AT_GRID[k] for k in sorted(SPEC_AT_GRID)], atol=5.1e-6, rtol=0)


def test_spec_at_other_values():
    # Growth in t (rho = 0.3), up to t = 1e8: no ex-ante bound without a cap.
    t = np.array([1e3, 1e4, 1e5, 1e6, 1e8])
    np.testing.assert_allclose(accounting.gaussian_at_epsilon(t, 0.15, 0.15 * SQRT3, 0.3, 1e-3, 0.0, 1.0),
                               [0.10867, 0.12341, 0.13544, 0.14584, 0.16362], atol=5.1e-6)
    # eps_bot [D] at rho = 0.5.
    np.testing.assert_allclose(accounting.gaussian_at_epsilon_no_top([1, 5, 20, 100], 0.15, 0.15 * SQRT3, 0.5, 1e-3,
                                                                     0.0, 1.0),
                               [0.00693, 0.01909, 0.03087, 0.04158], atol=5.1e-6)
    # Fig. 1: sigma = 0.2, rho = 0.5, t = 50, 30, 10, 3.
    np.testing.assert_allclose(accounting.gaussian_at_epsilon([50, 30, 10, 3], 0.2, 0.2 * SQRT3, 0.5, 1e-3, 0.0, 1.0),
                               [0.0469, 0.0423, 0.0305, 0.0156], atol=5.1e-5)
    # Sec 5.6 (UCI Bikes): sigmaX = 0.09, rho = 0.575, Delta = 1/6946.
    np.testing.assert_allclose(accounting.gaussian_at_epsilon([1, 2, 5, 10], 0.09, 0.09 * SQRT3, 0.575, 1 / 6946, 0.0,
                                                              1.0),
                               [0.00277, 0.00643, 0.0122, 0.01635], atol=5.1e-6)


def test_notebook_pair_ex_ante_and_ex_post():
    # Spec 004 Sec 5.4: the only number printed in the authors' notebook (0.028, 0.008, 0.020).
    ex_ante = accounting.zhu_wang_at_epsilon(0.3, 0.3 * SQRT3, 0.75, 1e-3, 1e-5, conversion="bbghs")
    ex_post = accounting.gaussian_at_epsilon(3, 0.3, 0.3 * SQRT3, 0.75, 1e-3, 0.0, 1.0)
    assert ex_ante == pytest.approx(0.027534, abs=5e-7)
    assert ex_post == pytest.approx(0.007968, abs=5e-7)
    assert round(ex_ante - ex_post, 4) == 0.0196


def test_narrow_integrand_hard_point():
    # Spec 004 Sec 6.2: t = 5, sigmaX = 0.3, sigmaZ = 0.05 (kappa large); 9 unit breakpoints gave 6.451399.
    args = (5, 0.3, 0.05, 0.5, 0.01, 0.0, 1.0)
    assert accounting.gaussian_at_epsilon(*args) == pytest.approx(6.4518563586, abs=1e-10)


# ------------------------------------------------------------------------------------------------
# Closed forms [D]: d = 2 and t = 1.


def test_rnm_d2_closed_form():
    rng = np.random.default_rng(1)
    sigma = np.exp(rng.uniform(np.log(0.02), np.log(3.0), 40))
    width = np.exp(rng.uniform(np.log(0.1), np.log(5.0), 40))
    sensitivity = width * rng.uniform(1e-4, 1.0, 40)
    eps = accounting.gaussian_rnm_epsilon(sigma, 2, sensitivity, -0.5 * width, 0.5 * width)
    closed = (special.log_ndtr(-(width - 2 * sensitivity) / (sigma * math.sqrt(2)))
              - special.log_ndtr(-width / (sigma * math.sqrt(2))))
    # 1e-10 absolute; plus 1e-12 relative for the draws with epsilon in the thousands (float64 ulp ~5e-13).
    np.testing.assert_allclose(eps, closed, rtol=1e-12, atol=1e-10)
    assert accounting.gaussian_rnm_epsilon(0.3, 2, 0.01, 0.0, 1.0) == pytest.approx(0.1259421424, abs=1e-10)
    assert accounting.gaussian_rnm_epsilon(0.1, 2, 1e-3, 0.0, 1.0) == pytest.approx(0.1018287960, abs=1e-10)
    exact = 0.0126845931032591553633  # mpmath, 40 digits
    assert exact <= accounting.gaussian_rnm_epsilon(0.3, 2, 1e-3, 0.0, 1.0) <= exact + 1e-10


def test_at_t1_closed_forms():
    rng = np.random.default_rng(2)
    sigma_x = np.exp(rng.uniform(np.log(0.02), np.log(1.0), 40))
    sigma_z = sigma_x * np.exp(rng.uniform(np.log(0.2), np.log(5.0), 40))
    rho = rng.uniform(-0.5, 1.5, 40)
    sensitivity = rng.uniform(1e-4, 1.0, 40)
    lower, upper = -0.25, 0.75
    s = np.hypot(sigma_x, sigma_z)
    eps = accounting.gaussian_at_epsilon(1, sigma_x, sigma_z, rho, sensitivity, lower, upper)
    closed = special.log_ndtr((lower + sensitivity - rho) / s) - special.log_ndtr((lower - rho) / s)
    np.testing.assert_allclose(eps, closed, rtol=1e-12, atol=1e-10)
    no_top = accounting.gaussian_at_epsilon_no_top(1, sigma_x, sigma_z, rho, sensitivity, lower, upper)
    closed = special.log_ndtr((rho - upper + sensitivity) / s) - special.log_ndtr((rho - upper) / s)
    np.testing.assert_allclose(no_top, closed, rtol=1e-12, atol=1e-10)


# ------------------------------------------------------------------------------------------------
# Errata (spec 004 Sec 3.3 and pitfall 7.1). The literal Theorem-10 form exists only here.


def test_theorem10_literal_underestimates_the_loss():
    # t = 2, rho = 0.5, sigmaX = 0.15, sigmaZ = sqrt(3) 0.15 (printed as 0.26), Delta = 1e-3, [0, 1].
    args = (2, 0.15, 0.15 * SQRT3, 0.5, 1e-3, 0.0, 1.0)
    correct = accounting.gaussian_at_epsilon(*args)
    literal = _at_epsilon_forms(*args, form="theorem10")
    assert correct == pytest.approx(0.01779, abs=5e-6)
    assert literal == pytest.approx(0.01143, abs=5e-6)
    assert correct == pytest.approx(_at_epsilon_forms(*args, form="corrected"), rel=1e-9)


def test_errata_at_a_nonzero_range():
    # Pitfall 7.1: t = 3, a = -1, b = 1, rho = 0.2, sigmaX = 0.15, sigmaZ = sqrt(3) 0.15, Delta = 0.05.
    args = (3, 0.15, 0.15 * SQRT3, 0.2, 0.05, -1.0, 1.0)
    correct = accounting.gaussian_at_epsilon(*args)
    assert correct == pytest.approx(2.1155, abs=5e-5)
    assert correct == pytest.approx(_at_epsilon_forms(*args, form="corrected"), rel=1e-9)
    assert _at_epsilon_forms(*args, form="theorem10") == pytest.approx(0.710, abs=5e-4)  # invalid: too small
    assert _at_epsilon_forms(*args, form="theorem17") == pytest.approx(3.299, abs=5e-4)  # valid but loose


def _lemma18_log_ratio(y, y_top, sigma_x, sigma_z, rho, delta):
    """Lemma 18's ratio for query values y[j, i] (i < t) and y_top[j] (one row per draw)."""
    x = _X_SEARCH[None, :]
    def log_factor(xi):
        below = special.log_ndtr((sigma_x * x[:, :, None] + rho - y[:, None, :] + xi) / sigma_z).sum(-1)
        top = special.log_ndtr((-sigma_x * x - rho + y_top[:, None] + xi) / sigma_z)
        return special.logsumexp(-0.5 * x * x + below + top, axis=1)
    return log_factor(delta) - log_factor(0.0)


def test_random_search_over_lemma18_domain_never_exceeds_the_bound():
    t, sigma_x, sigma_z, rho, delta, a, b = 3, 0.15, 0.15 * SQRT3, 0.2, 0.05, -1.0, 1.0
    eps = accounting.gaussian_at_epsilon(t, sigma_x, sigma_z, rho, delta, a, b)
    rng = np.random.default_rng(3)
    best = -np.inf
    for _ in range(6):  # 6 x 500 = 3000 draws
        y = rng.uniform(a + delta, b, (500, t - 1))
        y_top = rng.uniform(a, b - delta, 500)
        best = max(best, _lemma18_log_ratio(y, y_top, sigma_x, sigma_z, rho, delta).max())
    assert best <= eps + 1e-9
    assert best > 0.9 * eps  # the search is not vacuous (spec: max 2.049 of 2.1155)
    # The maximiser y_i = b, y_t = a attains the bound (an independent evaluation of the formula).
    corner = _lemma18_log_ratio(np.full((1, t - 1), b), np.array([a]), sigma_x, sigma_z, rho, delta)[0]
    assert corner == pytest.approx(eps, rel=1e-9)


def test_random_search_over_lemma13_domain_never_exceeds_the_bound():
    d, sigma, delta, a, b = 4, 0.3, 0.05, 0.0, 1.0
    eps = accounting.gaussian_rnm_epsilon(sigma, d, delta, a, b)
    rng = np.random.default_rng(4)
    z = _X_SEARCH[None, :, None]

    def log_ratio(y):  # Lemma 13, eq. (2), y[j, i] in [a - b + 2 Delta, b - a]
        top = special.log_ndtr(z - (y[:, None, :] - 2 * delta) / sigma).sum(-1)
        bottom = special.log_ndtr(z - y[:, None, :] / sigma).sum(-1)
        prior = -0.5 * _X_SEARCH * _X_SEARCH
        return special.logsumexp(prior + top, axis=1) - special.logsumexp(prior + bottom, axis=1)

    draws = np.concatenate([log_ratio(rng.uniform(a - b + 2 * delta, b - a, (400, d - 1))) for _ in range(5)])
    assert draws.max() <= eps + 1e-9
    assert log_ratio(np.full((1, d - 1), b - a))[0] == pytest.approx(eps, rel=1e-9)


# ------------------------------------------------------------------------------------------------
# Pitfall 7.2: the authors' mp.quad over (-inf, inf) fails silently at low precision.


def _naive_log_ratio(numerator, denominator, dps):
    with mpmath.workdps(dps):
        return float(mpmath.log(mpmath.quad(numerator, [-mpmath.inf, mpmath.inf]))
                     - mpmath.log(mpmath.quad(denominator, [-mpmath.inf, mpmath.inf])))


def test_naive_mpmath_quadrature_fails_where_ours_match_the_reference():
    row = next(r for r in RNM_ROWS if r["sigma"] == 0.1 and r["d"] == 1024)
    sigma, d, delta = row["sigma"], row["d"], row["Delta"]
    naive = _naive_log_ratio(lambda z: mpmath.npdf(z) * mpmath.ncdf(z - (1 - 2 * delta) / sigma) ** (d - 1),
                             lambda z: mpmath.npdf(z) * mpmath.ncdf(z - 1 / sigma) ** (d - 1), dps=20)
    assert abs(naive - row["eps_pure"]) > 0.1 * row["eps_pure"]  # spec: 0.0006-0.04 instead of 0.25
    for method in ("quadrature", "mpmath"):
        assert accounting.gaussian_rnm_epsilon(sigma, d, delta, 0.0, 1.0, method=method) == pytest.approx(
            row["eps_pure"], rel=RTOL)


def test_naive_mpmath_quadrature_fails_for_at_t50():
    t, sigma_x, sigma_z, rho, delta = 50, 0.15, 0.15 * SQRT3, 0.0, 1e-3

    def integrand(xi):
        return lambda x: (mpmath.npdf(x) * mpmath.ncdf((sigma_x * x + rho - 1 + xi) / sigma_z) ** (t - 1)
                          * mpmath.ncdf((-sigma_x * x - rho + xi) / sigma_z))

    naive = _naive_log_ratio(integrand(delta), integrand(0.0), dps=25)
    quadrature = accounting.gaussian_at_epsilon(t, sigma_x, sigma_z, rho, delta, 0.0, 1.0)
    reference = _at_epsilon_forms(t, sigma_x, sigma_z, rho, delta, 0.0, 1.0, form="corrected")
    assert quadrature == pytest.approx(0.09058, abs=5e-6)
    assert quadrature == pytest.approx(reference, rel=1e-9)
    assert abs(naive - quadrature) > 0.05  # spec: 0.282 instead of 0.0906


# ------------------------------------------------------------------------------------------------
# Worst-case pairs: exact probabilities of explicit neighbouring query vectors (scipy quad).


def _quad(fn):
    value, _ = integrate.quad(fn, -np.inf, np.inf, epsabs=0.0, epsrel=1e-13, limit=500)
    return value


def _rnm_probability(q, sigma, output):
    """Pr[argmax_i q_i + N(0, sigma^2) = output], by conditioning on the winner's noise."""
    others = np.delete(q, output)
    return _quad(lambda z: stats.norm.pdf(z) * np.prod(stats.norm.cdf((q[output] - others) / sigma + z)))


def _at_probability(q, t, sigma_x, sigma_z, rho):
    """Pr[above threshold halts at step t] for the stream q (Lemma 18's eq. (27))."""
    def integrand(x):
        below = np.prod(stats.norm.cdf((rho + sigma_x * x - q[:t - 1]) / sigma_z))
        return stats.norm.pdf(x) * below * stats.norm.cdf((q[t - 1] - rho - sigma_x * x) / sigma_z)
    return _quad(integrand)


@pytest.mark.parametrize("d", [2, 3, 5])
def test_rnm_worst_case_pair_attains_epsilon(d):
    sigma, delta, a, b = 0.3, 0.1, 0.0, 1.0
    q_prime = np.r_[np.full(d - 1, b), a]
    q = np.r_[np.full(d - 1, b - delta), a + delta]
    loss = math.log(_rnm_probability(q, sigma, d - 1)) - math.log(_rnm_probability(q_prime, sigma, d - 1))
    assert loss == pytest.approx(accounting.gaussian_rnm_epsilon(sigma, d, delta, a, b), rel=1e-9)


@pytest.mark.parametrize("t", [1, 2, 3])
def test_at_worst_case_pair_attains_epsilon(t):
    sigma_x, sigma_z, rho, delta, a, b = 0.15, 0.15 * SQRT3, 0.4, 0.1, -0.5, 1.0
    q_prime = np.r_[np.full(t - 1, b), a]
    q = np.r_[np.full(t - 1, b - delta), a + delta]
    loss = math.log(_at_probability(q, t, sigma_x, sigma_z, rho)) - math.log(
        _at_probability(q_prime, t, sigma_x, sigma_z, rho))
    assert loss == pytest.approx(accounting.gaussian_at_epsilon(t, sigma_x, sigma_z, rho, delta, a, b), rel=1e-9)


# ------------------------------------------------------------------------------------------------
# Monte Carlo of the mechanisms on the worst-case pairs (failure rate TEST_FAILURE_RATE, with power).

NUM_SAMPLES = 2_000_000


def _interval(count, n):
    """Clopper-Pearson interval at confidence 1 - TEST_FAILURE_RATE / 2 (two are combined)."""
    ci = stats.binomtest(int(count), n).proportion_ci(confidence_level=1 - TEST_FAILURE_RATE / 2)
    return ci.low, ci.high


def test_monte_carlo_rnm_worst_case_pair():
    d, sigma, delta = 3, 0.3, 0.1
    rng = np.random.default_rng(5)
    q_prime = np.array([1.0, 1.0, 0.0])
    q = np.array([1.0 - delta, 1.0 - delta, delta])
    hits = [int((np.argmax(v + sigma * rng.standard_normal((NUM_SAMPLES, d)), axis=1) == d - 1).sum())
            for v in (q, q_prime)]
    (lo, hi), (lo_prime, hi_prime) = (_interval(h, NUM_SAMPLES) for h in hits)
    exact, exact_prime = _rnm_probability(q, sigma, d - 1), _rnm_probability(q_prime, sigma, d - 1)
    assert lo <= exact <= hi and lo_prime <= exact_prime <= hi_prime
    eps = accounting.gaussian_rnm_epsilon(sigma, d, delta, 0.0, 1.0)
    assert math.log(lo / hi_prime) <= eps <= math.log(hi / lo_prime)
    # Power: the probabilities at 1.1 sigma (an epsilon off by ~20%) are rejected.
    assert not lo <= _rnm_probability(q, 1.1 * sigma, d - 1) <= hi


def test_monte_carlo_at_worst_case_pair_rejects_theorem10_literal():
    t, sigma_x, sigma_z, rho, delta = 2, 0.15, 0.15 * SQRT3, 0.5, 0.1
    rng = np.random.default_rng(6)
    intervals = []
    for q in (np.array([1.0 - delta, delta]), np.array([1.0, 0.0])):
        threshold = rho + sigma_x * rng.standard_normal(NUM_SAMPLES)
        noisy = q[None, :] + sigma_z * rng.standard_normal((NUM_SAMPLES, t))
        halts_at_t = (noisy[:, 0] < threshold) & (noisy[:, 1] >= threshold)
        intervals.append(_interval(halts_at_t.sum(), NUM_SAMPLES))
    (lo, hi), (lo_prime, hi_prime) = intervals
    eps = accounting.gaussian_at_epsilon(t, sigma_x, sigma_z, rho, delta, 0.0, 1.0)
    assert math.log(lo / hi_prime) <= eps <= math.log(hi / lo_prime)
    literal = _at_epsilon_forms(t, sigma_x, sigma_z, rho, delta, 0.0, 1.0, form="theorem10")
    assert literal < math.log(lo / hi_prime)  # power: the literal Theorem 10 is refuted by sampling


def test_a_bound_computed_while_a_release_is_traced_compiles_the_eager_kernel_alone():
    # The mechanisms compute their bounds while their release is traced, under jax.ensure_compile_time_eval(),
    # which turns on JAX's eager constant folding. The quadrature kernel was traced there with it: about 20 of
    # its constant subexpressions ran as eager programs of their own, and the kernel was another program than
    # the eager one (1-2 s each to compile). Now it is one program, compiled once for both.
    from gpuprivacy.accounting import _gaussian_selection_quadrature as quadrature  # private: its kernel cache

    compiled = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiled.append(kwargs.get("fun_name"))

    def release(x):
        with jax.ensure_compile_time_eval():
            epsilon = accounting.gaussian_rnm_epsilon(1.3, 5, 1.0, 0.0, 4.0, num_points=1025)
        return x * epsilon

    jax.clear_caches()
    quadrature._KERNELS.clear()
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        traced_epsilon = float(jax.jit(release)(1.0))
        during_trace = list(compiled)
        compiled.clear()
        eager = accounting.gaussian_rnm_epsilon(1.7, 5, 1.0, 0.0, 4.0, num_points=1025)  # other rows, the same kernel
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert during_trace.count("jit(_log_integrals_estimate)") == 1 and len(during_trace) <= 3, during_trace
    assert "jit(_log_integrals_estimate)" not in compiled, compiled
    assert traced_epsilon == accounting.gaussian_rnm_epsilon(1.3, 5, 1.0, 0.0, 4.0, num_points=1025) and eager > 0
