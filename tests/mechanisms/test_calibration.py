"""Gaussian noise calibration against independent mpmath references."""

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from gpuprivacy import accounting, mechanisms
from tests.mechanisms import _reference as reference

GRID = [(0.05, 1e-5, 1.0), (0.5, 1e-6, 2.0), (0.9, 0.1, 1.0), (1.0, 1e-5, 1.0), (3.0, 1e-10, 0.5),
        (10.0, 1e-3, 1.0), (50.0, 1e-20, 4.0)]


@pytest.mark.parametrize("epsilon, delta, sensitivity", GRID)
def test_analytic_sigma_meets_the_balle_wang_condition_tightly(epsilon, delta, sensitivity):
    sigma = mechanisms.gaussian_sigma_analytic(epsilon, delta, sensitivity)
    achieved = reference.balle_wang_delta(sigma, epsilon, sensitivity)
    assert achieved <= delta
    assert achieved >= delta * (1 - 1e-9)
    # One float below no longer satisfies the condition: sigma is the smallest float that does.
    assert reference.balle_wang_delta(np.nextafter(sigma, 0.0), epsilon, sensitivity) > delta


@pytest.mark.parametrize("epsilon, delta, sensitivity", GRID)
def test_analytic_sigma_matches_bruteforce_bisection(epsilon, delta, sensitivity):
    sigma = mechanisms.gaussian_sigma_analytic(epsilon, delta, sensitivity)
    exact = reference.balle_wang_sigma(epsilon, delta, sensitivity)
    assert mpmath.mpf(sigma) >= exact  # rounded up
    assert (mpmath.mpf(sigma) - exact) / exact < 4e-16


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 0.5, 0.99])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-12])
def test_analytic_never_exceeds_classic(epsilon, delta):
    classic = mechanisms.gaussian_sigma_classic(epsilon, delta, 1.7)
    assert mechanisms.gaussian_sigma_analytic(epsilon, delta, 1.7) <= classic
    # The classic sigma is itself (epsilon, delta)-DP by the exact condition.
    assert reference.balle_wang_delta(classic, epsilon, 1.7) <= delta


def test_classic_sigma_value():
    expected = math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5
    sigma = mechanisms.gaussian_sigma_classic(0.5, 1e-5)
    assert sigma == pytest.approx(expected, rel=1e-15)
    with mpmath.workdps(50):
        exact = mpmath.sqrt(2 * mpmath.log(mpmath.mpf("1.25") / mpmath.mpf(1e-5))) / mpmath.mpf(0.5)
        assert mpmath.mpf(sigma) >= exact
        assert mpmath.mpf(np.nextafter(sigma, 0.0)) < exact


def test_known_analytic_value():
    # Balle & Wang (2018), Alg. 1 at epsilon = 1, delta = 1e-5, Delta = 1: sigma ~ 3.7306.
    assert mechanisms.gaussian_sigma_analytic(1.0, 1e-5) == pytest.approx(3.730631634815942, rel=1e-15)


def test_gaussian_delta_analytic():
    delta = mechanisms.gaussian_delta_analytic(3.0, epsilon=1.0, sensitivity=1.0)
    exact = reference.balle_wang_delta(3.0, 1.0, 1.0)
    assert delta >= exact and (delta - exact) / exact < 1e-15
    assert mechanisms.gaussian_delta_analytic(1e-3, epsilon=1.0) == 1.0
    assert 0.0 < mechanisms.gaussian_delta_analytic(1e3, epsilon=1.0) < 1e-300


@pytest.mark.parametrize("rho, sensitivity", [(0.5, 1.0), (0.3, 1.0), (1e-4, 3.0), (7.0, 0.2)])
def test_zcdp_sigma_rounded_up_exactly(rho, sensitivity):
    sigma = mechanisms.gaussian_sigma_zcdp(rho, sensitivity)
    assert Fraction(sensitivity) ** 2 <= 2 * Fraction(rho) * Fraction(sigma) ** 2
    below = np.nextafter(sigma, 0.0)
    assert Fraction(sensitivity) ** 2 > 2 * Fraction(rho) * Fraction(below) ** 2


@pytest.mark.parametrize("epsilon, delta, sensitivity", [(1.0, 1e-6, 1.0), (0.3, 1e-9, 2.5)])
def test_discrete_sigma_goes_through_zcdp(epsilon, delta, sensitivity):
    sigma = mechanisms.gaussian_sigma_discrete(epsilon, delta, sensitivity)
    rho = float(Fraction(sensitivity) ** 2 / (2 * Fraction(sigma) ** 2))
    assert accounting.zcdp_delta_cks(rho, epsilon) <= delta
    # Near-tight: 0.01% less noise would miss the target.
    assert accounting.zcdp_delta_cks(rho * 1.0002, epsilon) > delta
    assert sigma > mechanisms.gaussian_sigma_analytic(epsilon, delta, sensitivity)


@pytest.mark.parametrize("function, args, match", [
    (mechanisms.gaussian_sigma_classic, (1.5, 1e-5), "epsilon < 1"),
    (mechanisms.gaussian_sigma_classic, (0.5, 0.0), "delta"),
    (mechanisms.gaussian_sigma_analytic, (0.0, 1e-5), "epsilon"),
    (mechanisms.gaussian_sigma_analytic, (1.0, 1.0), "delta"),
    (mechanisms.gaussian_sigma_analytic, (1.0, 1e-5, -1.0), "sensitivity"),
    (mechanisms.gaussian_sigma_zcdp, (0.0,), "rho"),
])
def test_calibration_validation(function, args, match):
    with pytest.raises(ValueError, match=match):
        function(*args)
