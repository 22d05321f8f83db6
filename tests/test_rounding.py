"""gpuprivacy._rounding: the one directed-rounding contract, and guarantees that report the user's epsilon."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from gpuprivacy import _rounding as rounding
from gpuprivacy import accounting
from gpuprivacy.mechanisms import blackbox, instance_optimal, median, wrappers
import gpuprivacy.mechanisms as mechanisms


@pytest.mark.parametrize("value", [1.0, 0.1, 1e-300, 5e-324, 2.0**60, 1.7976931348623157e308, -3.5, 0.0])
def test_exact_floats_unchanged(value):
    for f in (rounding.float_up, rounding.float_down):
        assert f(value) == value
        assert f(Fraction(value)) == value
        assert f(mpmath.mpf(value)) == value
    assert rounding.sum_up([value]) == value


def test_ints_are_exact():
    assert rounding.float_up(3) == 3.0
    big = 2**60 + 1  # not a float: rounded outward
    assert Fraction(rounding.float_up(big)) >= big > Fraction(rounding.float_down(big))


@pytest.mark.parametrize("value", [1.0, 0.1, 1e-300, 2.0**60, -3.5])
def test_fractions_just_above_and_below(value):
    up_neighbour, down_neighbour = math.nextafter(value, math.inf), math.nextafter(value, -math.inf)
    above = Fraction(value) + (Fraction(up_neighbour) - Fraction(value)) / 10**9
    below = Fraction(value) - (Fraction(value) - Fraction(down_neighbour)) / 10**9
    assert rounding.float_up(above) == up_neighbour
    assert rounding.float_down(above) == value
    assert rounding.float_up(below) == value
    assert rounding.float_down(below) == down_neighbour


def test_mpmath():
    with mpmath.workdps(50):
        third = mpmath.mpf(1) / 3
        up, down = rounding.float_up(third), rounding.float_down(third)
        assert mpmath.mpf(down) < third < mpmath.mpf(up)
        assert up == math.nextafter(down, math.inf)
        pi = +mpmath.pi
        assert mpmath.mpf(rounding.float_down(pi)) < pi < mpmath.mpf(rounding.float_up(pi))


@pytest.mark.parametrize("huge", [Fraction(10) ** 400, -(Fraction(10) ** 400), mpmath.mpf("1e400"),
                                  Fraction(2) ** 1024, math.inf, math.nan, mpmath.inf])
def test_huge_or_non_finite_raises(huge):
    with pytest.raises(ValueError, match="float64|finite"):
        rounding.float_up(huge)
    with pytest.raises(ValueError, match="float64|finite"):
        rounding.float_down(huge)


def test_just_above_max_float_raises_up_but_not_down():
    largest = np.finfo(np.float64).max
    above = Fraction(float(largest)) + 1
    with pytest.raises(ValueError, match="float64"):
        rounding.float_up(above)
    assert rounding.float_down(above) == largest


def test_bad_type():
    with pytest.raises(TypeError):
        rounding.float_up("1.0")


def test_divide_up_bounds_the_exact_quotient():
    rng = random.Random(0)
    for _ in range(2000):
        num = Fraction(rng.uniform(1e-6, 1e6))
        den = Fraction(rng.uniform(1e-6, 1e6))
        multiplier = rng.choice([1, 2, 3, 4, 7])
        exact = multiplier * num / den
        out = rounding.divide_up(float(num), float(den), multiplier=multiplier)
        assert Fraction(out) >= exact
        assert Fraction(math.nextafter(out, 0.0)) < exact  # and tight
    assert rounding.divide_up(1.0, 0.5) == 2.0  # exact quotients are unchanged
    assert rounding.divide_up(2, 1.0) == 2.0


def test_sum_up():
    assert rounding.sum_up([0.5, 0.25]) == 0.75
    total = rounding.sum_up([0.1, 0.2])
    assert Fraction(total) >= Fraction(0.1) + Fraction(0.2)
    assert Fraction(math.nextafter(total, 0.0)) < Fraction(0.1) + Fraction(0.2)


def test_round_up_and_down_bump_unconditionally():
    assert rounding.round_up(1.0) == math.nextafter(1.0, math.inf)
    assert rounding.round_up(1.0, ulps=2) == math.nextafter(math.nextafter(1.0, math.inf), math.inf)
    assert rounding.round_down(1.0) == math.nextafter(1.0, -math.inf)
    assert rounding.round_up(1.0, ulps=0) == 1.0
    array = rounding.round_up(np.array([0.0, 1.0]))
    assert np.all(array > np.array([0.0, 1.0]))
    assert accounting.round_up is rounding.round_up  # public name kept
    with pytest.raises(ValueError):
        rounding.round_up(1.0, ulps=-1)


def test_step_up_until():
    assert rounding.step_up_until(2.0, lambda r: Fraction(r) ** 2 >= 4) == 2.0
    root = rounding.step_up_until(math.sqrt(2), lambda r: Fraction(r) ** 2 >= 2)
    assert Fraction(root) ** 2 >= 2 > Fraction(math.nextafter(root, 0.0)) ** 2


def test_cast():
    assert rounding.cast_up(0.1, np.float32) >= 0.1 >= rounding.cast_down(0.1, np.float32)
    assert rounding.cast_up(0.5, np.float32) == 0.5 == rounding.cast_down(0.5, np.float32)
    assert np.float32(rounding.cast_up(0.1, np.float32)) == rounding.cast_up(0.1, np.float32)


# --------------------------------------------------------------------------------------------
# Every guarantee whose mathematics is exactly epsilon reports the user's epsilon unchanged.

_GUARANTEES = {
    "laplace_mechanism_guarantee": lambda e: mechanisms.laplace_mechanism_guarantee(epsilon=e),
    "report_noisy_max_guarantee": lambda e: mechanisms.report_noisy_max_guarantee(epsilon=e),
    "exponential_mechanism_guarantee": lambda e: mechanisms.exponential_mechanism_guarantee(epsilon=e),
    "permute_and_flip_guarantee": lambda e: mechanisms.permute_and_flip_guarantee(epsilon=e),
    "laplace_report_noisy_max_guarantee": lambda e: mechanisms.laplace_report_noisy_max_guarantee(epsilon=e),
    "above_threshold_guarantee": lambda e: mechanisms.above_threshold_guarantee(epsilon=e),
    "sparse_vector_guarantee": lambda e: mechanisms.sparse_vector_guarantee(epsilon=e, max_positives=3),
    "private_median_guarantee": lambda e: median.private_median_guarantee(epsilon=e, min_density=0.1, radius=1.0,
                                                                         median_bound=10.0),
    "exponential_mechanism_median_guarantee": lambda e: median.exponential_mechanism_median_guarantee(
        epsilon=e, lower=-1.0, upper=1.0),
    "sens_o_matic_guarantee": lambda e: wrappers.sens_o_matic_guarantee(epsilon=e, beta=0.1, grid_size=41),
    "sens_o_matic_guarantee(max_depth)": lambda e: wrappers.sens_o_matic_guarantee(epsilon=e, beta=0.1,
                                                                                 grid_size=41, max_depth=5000),
    "shifted_inverse_guarantee": lambda e: wrappers.shifted_inverse_guarantee(epsilon=e),
    "double_monotonization_guarantee": lambda e: wrappers.double_monotonization_guarantee(epsilon=e, r=1e4, c=1.0,
                                                                                       beta=0.1),
    "small_diameter_subset_extension_guarantee": lambda e: wrappers.small_diameter_subset_extension_guarantee(
        epsilon=e, r=8.0, c=1.0),
    "cummings_durfee_guarantee": lambda e: wrappers.cummings_durfee_guarantee(epsilon=e, c=1.0),
    "white_box_laplace_guarantee": lambda e: wrappers.white_box_laplace_guarantee(epsilon=e, sensitivity=1.0),
    "blackbox_estimate_guarantee": lambda e: blackbox.blackbox_estimate_guarantee(epsilon=e),
    "inverse_sensitivity_count_guarantee": lambda e: instance_optimal.inverse_sensitivity_count_guarantee(epsilon=e),
}


@pytest.mark.parametrize("name", sorted(_GUARANTEES))
@pytest.mark.parametrize("epsilon", [1.0, 0.1, 3.0])
def test_exact_epsilon_reported_unchanged(name, epsilon):
    guarantee = _GUARANTEES[name](epsilon)
    assert guarantee.epsilon == epsilon, f"{name} reported {guarantee.epsilon!r} for epsilon={epsilon!r}"


def test_computed_epsilon_still_rounded_up():
    total = accounting.compose(accounting.PureDP(0.1), accounting.PureDP(0.2))
    assert Fraction(total.epsilon) >= Fraction(0.1) + Fraction(0.2)
    assert accounting.compose(accounting.PureDP(0.5), accounting.PureDP(0.25)).epsilon == 0.75
    zcdp = accounting.PureDP(0.1).to_zcdp()
    assert zcdp.rho > 0.1**2 / 2
