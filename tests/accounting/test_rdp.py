"""Approximate-DP baselines of spec 004 Sec 3.2 / 3.4: RDP conversions, analytic Gaussian, Zhu-Wang."""

import functools
import json
import math
from pathlib import Path

import mpmath
import numpy as np
import pytest

from gpuprivacy import accounting, mechanisms

DATA = json.loads((Path(__file__).parents[1] / "data" / "gaussian_selection_pure_dp.json").read_text())
SQRT3 = math.sqrt(3.0)


def test_gaussian_rdp_formula():
    assert accounting.gaussian_rdp(2.0, sigma=2.0, sensitivity=1.0) == 0.25
    np.testing.assert_allclose(accounting.gaussian_rdp(np.array([1.5, 10.0]), 0.5, 0.1), [0.03, 0.2])
    with pytest.raises(ValueError, match="alpha"):
        accounting.gaussian_rdp(1.0, 1.0)


@pytest.mark.parametrize("rho", [1e-6, 1e-3, 0.05, 1.0, 20.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-5, 0.1])
def test_markov_conversion_of_gaussian_rdp_equals_zcdp_closed_form(rho, delta):
    # alpha * rho + log(1/delta)/(alpha - 1) is minimised at alpha = 1 + sqrt(log(1/delta)/rho).
    optimised = accounting.rdp_to_dp_epsilon(lambda alpha: alpha * rho, delta, conversion="markov")
    closed = accounting.zcdp_epsilon_bun_steinke(rho, delta)
    assert optimised >= closed * (1 - 1e-14)
    assert optimised == pytest.approx(closed, rel=1e-12)


def test_bbghs_is_never_worse_than_markov():
    for rho in (1e-4, 0.01, 0.5):
        curve = functools.partial(np.multiply, rho)
        markov = accounting.rdp_to_dp_epsilon(curve, 1e-5, conversion="markov")
        bbghs = accounting.rdp_to_dp_epsilon(curve, 1e-5, conversion="bbghs")
        assert 0 <= bbghs < markov


def test_conversion_is_a_minimum_over_the_orders():
    def rdp(a):
        return 0.3 * a + 0.01 * a * a

    grid = 1.0 + np.logspace(-4, 4, 50_001)
    brute = float(np.min(rdp(grid) + math.log(1e5) / (grid - 1)))
    value = accounting.rdp_to_dp_epsilon(rdp, 1e-5)
    assert value <= brute + 1e-12
    assert value == pytest.approx(brute, rel=1e-6)


def test_analytic_gaussian_root_satisfies_delta():
    for sigma, sensitivity, delta in [(1.0, 1.0, 1e-5), (0.3, 0.04, 1e-5), (5.0, 1.0, 1e-3), (0.7, 1.0, 0.2)]:
        epsilon = accounting.gaussian_epsilon_analytic(sigma, delta, sensitivity)
        assert epsilon > 0
        # delta(epsilon) <= delta, and one ulp lower it is violated: the smallest such epsilon.
        assert mechanisms.gaussian_delta_analytic(sigma, epsilon=epsilon, sensitivity=sensitivity) <= delta
        below = math.nextafter(epsilon, 0.0)
        with mpmath.workdps(50):
            s, e, d = mpmath.mpf(sigma), mpmath.mpf(below), mpmath.mpf(sensitivity)
            exact_below = mpmath.ncdf(d / (2 * s) - e * s / d) - mpmath.exp(e) * mpmath.ncdf(-d / (2 * s) - e * s / d)
        assert exact_below > delta * (1 - 1e-12)
    assert accounting.gaussian_epsilon_analytic(1e3, 0.5) == 0.0  # delta(0) = 2 Phi(1/2000) - 1 < 0.5


def test_rnm_postprocessing_reference_values():
    rows = DATA["grnm_pure_dp"]["rows"]
    for row in rows[::6]:
        value = accounting.gaussian_rnm_epsilon_postprocessing(row["sigma"], row["d"], row["Delta"], 1e-5)
        assert value == pytest.approx(row["eps_exante_analytic_gauss_delta1em5"], rel=1e-10)
    # Spec 004 Sec 5.3: BBGHS and Markov rows (4 decimals).
    d = np.array([16, 28, 52, 95, 172, 312, 565, 1024])
    bbghs = accounting.gaussian_rnm_epsilon_postprocessing(0.3, d, 1e-3, 1e-5, conversion="bbghs")
    np.testing.assert_allclose(bbghs, [0.0422, 0.0573, 0.0803, 0.1113, 0.1535, 0.2118, 0.2919, 0.4024], atol=5.1e-5)
    markov = accounting.gaussian_rnm_epsilon_postprocessing(0.5, d, 1e-3, 1e-5, conversion="markov")
    np.testing.assert_allclose(markov, [0.0384, 0.0508, 0.0693, 0.0937, 0.1262, 0.1701, 0.2292, 0.3092], atol=5.1e-5)
    analytic = accounting.gaussian_rnm_epsilon_postprocessing(np.array([0.1, 0.5]), 16, 1e-3, 1e-5)
    np.testing.assert_allclose(analytic, [0.1254, 0.0212], atol=5.1e-5)


def test_zhu_wang_reference_values():
    # Spec 004 Sec 5.4: the authors' notebook ex-ante value (BBGHS) and the Markov one.
    args = (0.3, 0.3 * SQRT3, 0.75, 1e-3, 1e-5)
    assert accounting.zhu_wang_at_epsilon(*args, conversion="bbghs") == pytest.approx(0.027534, abs=5e-7)
    assert accounting.zhu_wang_at_epsilon(*args) == pytest.approx(0.036386, abs=5e-7)
    for row in DATA["gaussian_above_threshold_expost"]["rows"]:
        value = accounting.zhu_wang_at_epsilon(row["sigmaX"], row["sigmaZ"], row["rho"], row["Delta"], 1e-5)
        assert value == pytest.approx(row["eps_exante_thm7_rdp_to_dp_mironov_delta1em5"], rel=1e-10)
    # Fig. 1 ex-ante values (Delta = 1e-3, delta = 1e-5, BBGHS).
    for sigma, rho, expected in [(0.2, 0.5, 0.0421), (0.3, 0.5, 0.0247), (0.2, 0.75, 0.0496), (0.3, 0.65, 0.0263)]:
        value = accounting.zhu_wang_at_epsilon(sigma, SQRT3 * sigma, rho, 1e-3, 1e-5, conversion="bbghs")
        assert value == pytest.approx(expected, abs=5.1e-5)


def test_zhu_wang_rdp_formula_and_conditions():
    alpha, sx, sz, rho, delta = 4.0, 0.3, 0.6, 0.5, 0.01
    moment = math.log(1 + 2 * SQRT3 * math.pi * (1 + 9 * rho**2 / sx**2) * math.exp(rho**2 / sx**2))
    expected = alpha * delta**2 / sx**2 + 2 * alpha * delta**2 / sz**2 + moment / (2 * (alpha - 1))
    assert accounting.zhu_wang_at_rdp(alpha, sx, sz, rho, delta) == pytest.approx(expected, rel=1e-14)
    capped = alpha * delta**2 / sx**2 + 2 * alpha * delta**2 / sz**2 + math.log(10) / (alpha - 1)
    assert accounting.zhu_wang_at_rdp(alpha, sx, sz, rho, delta, max_queries=10) == pytest.approx(
        min(expected, capped), rel=1e-14)
    with pytest.raises(ValueError, match=r"sigma_query >= sqrt\(3\) \* sigma_threshold.*max_queries"):
        accounting.zhu_wang_at_rdp(alpha, sx, 0.5, rho, delta)
    with pytest.raises(ValueError, match="threshold=-0.1 < 0"):
        accounting.zhu_wang_at_epsilon(sx, sz, -0.1, delta, 1e-5)
    # Outside Thm 7, only the capped bound applies.
    assert accounting.zhu_wang_at_rdp(alpha, sx, 0.5, rho, delta, max_queries=10) == pytest.approx(
        alpha * delta**2 / sx**2 + 2 * alpha * delta**2 / 0.25 + math.log(10) / (alpha - 1), rel=1e-14)
    # Huge rho / sigmaX: the moment term stays finite (no overflow).
    assert math.isfinite(accounting.zhu_wang_at_epsilon(0.01, 0.02, 5.0, 1e-3, 1e-5))


def test_bad_inputs():
    with pytest.raises(ValueError, match="conversion must be one of"):
        accounting.rdp_to_dp_epsilon(lambda a: a, 1e-5, conversion="cks")
    with pytest.raises(ValueError, match="delta must lie in the open interval"):
        accounting.gaussian_rnm_epsilon_postprocessing(0.1, 10, 1e-3, 0.0)
    with pytest.raises(ValueError, match="d must be >= 1"):
        accounting.gaussian_rnm_epsilon_postprocessing(0.1, 0, 1e-3, 1e-5)
    with pytest.raises(ValueError, match="sigma must be finite and > 0"):
        accounting.gaussian_epsilon_analytic(-1.0, 1e-5)
