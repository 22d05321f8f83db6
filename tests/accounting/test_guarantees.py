"""PureDP / ApproxDP / ZCDP: validation, conversions, composition and rounding."""

import dataclasses
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import optimize

from gpuprivacy import accounting
from gpuprivacy.accounting import ZCDP, ApproxDP, PureDP


@pytest.mark.parametrize("make, error, match", [
    (lambda: PureDP(0.0), ValueError, "epsilon must be finite and > 0, got 0.0"),
    (lambda: PureDP(-1.0), ValueError, "epsilon must be finite and > 0"),
    (lambda: PureDP(math.nan), ValueError, "epsilon must be finite"),
    (lambda: PureDP(math.inf), ValueError, "epsilon must be finite"),
    (lambda: PureDP("1"), TypeError, "epsilon must be a real number"),
    (lambda: PureDP(True), TypeError, "epsilon must be a real number"),
    (lambda: ApproxDP(1.0, 0.0), ValueError, r"delta must lie in the open interval \(0, 1\), got 0.0"),
    (lambda: ApproxDP(1.0, 1.0), ValueError, r"delta must lie in the open interval \(0, 1\)"),
    (lambda: ApproxDP(1.0, -1e-9), ValueError, "delta"),
    (lambda: ApproxDP(0.0, 1e-6), ValueError, "epsilon must be finite and > 0"),
    (lambda: ZCDP(0.0), ValueError, "rho must be finite and > 0, got 0.0"),
    (lambda: ZCDP(-0.5), ValueError, "rho must be finite and > 0"),
    (lambda: ZCDP(math.nan), ValueError, "rho must be finite"),
    (lambda: ZCDP(None), TypeError, "rho must be a real number"),
])
def test_constructor_validation(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_guarantees_are_frozen_and_canonical():
    guarantee = PureDP(np.float32(0.5))
    assert type(guarantee.epsilon) is float and guarantee == PureDP(0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        guarantee.epsilon = 2.0
    assert ApproxDP(1, 1e-6) == ApproxDP(1.0, 1e-6)
    assert hash(ZCDP(0.25)) == hash(ZCDP(0.25))


def test_round_up():
    for value in [0.1, 1.0, 1e-300, 3.0e300]:
        assert accounting.round_up(value) > value
        assert accounting.round_up(value) == np.nextafter(value, np.inf)


def test_pure_conversions():
    approx = PureDP(0.7).to_approx()
    assert isinstance(approx, ApproxDP) and approx.epsilon == 0.7 and approx.delta == 0.0
    rho = PureDP(0.1).to_zcdp().rho  # Bun & Steinke (2016), Prop. 1.4: epsilon^2 / 2
    assert Fraction(rho) >= Fraction(0.1) ** 2 / 2
    assert Fraction(rho) - Fraction(0.1) ** 2 / 2 <= 2 * Fraction(np.spacing(rho))


GRID = [(0.01, 1e-6), (0.5, 1e-6), (2.0, 1e-10), (0.5, 0.1)]


def bun_steinke_exact(rho, delta):
    with mpmath.workdps(60):
        return mpmath.mpf(rho) + 2 * mpmath.sqrt(mpmath.mpf(rho) * mpmath.log(1 / mpmath.mpf(delta)))


@pytest.mark.parametrize("rho, delta", GRID)
def test_bun_steinke_formula_rounded_up(rho, delta):
    epsilon = accounting.zcdp_epsilon_bun_steinke(rho, delta)
    exact = bun_steinke_exact(rho, delta)
    assert mpmath.mpf(epsilon) >= exact
    assert (mpmath.mpf(epsilon) - exact) / exact < 5e-16
    assert ZCDP(rho).to_approx(delta, method="bun-steinke") == ApproxDP(epsilon, delta)


def cks_log_delta_min(rho, epsilon):
    """Independent float64 minimisation of CKS (arXiv 2004.00010v5) Cor. 13 over alpha > 1.

    delta(alpha) = exp((alpha - 1)(alpha rho - eps)) / alpha * (1 - 1/alpha)^(alpha - 1).
    """
    def log_delta(log_alpha_minus_one):
        alpha = 1 + math.exp(log_alpha_minus_one)
        return ((alpha - 1) * (alpha * rho - epsilon) - math.log(alpha)
                + (alpha - 1) * math.log1p(-1 / alpha))
    result = optimize.minimize_scalar(log_delta, bounds=(-20.0, math.log(20 * (epsilon / rho + 1))),
                                      method="bounded", options=dict(xatol=1e-12))
    return result.fun


@pytest.mark.parametrize("rho, delta", GRID)
def test_cks_conversion(rho, delta):
    epsilon = accounting.zcdp_epsilon_cks(rho, delta)
    # Never worse than Bun-Steinke, and strictly better here.
    assert epsilon < accounting.zcdp_epsilon_bun_steinke(rho, delta)
    # The returned epsilon achieves the target delta, and is tight to the bisection tolerance.
    assert accounting.zcdp_delta_cks(rho, epsilon) <= delta
    assert accounting.zcdp_delta_cks(rho, epsilon * (1 - 1e-9)) > delta
    # The library's delta agrees with an independent minimisation and is never below the true minimum.
    library = math.log(accounting.zcdp_delta_cks(rho, epsilon))
    independent = cks_log_delta_min(rho, epsilon)
    assert library >= independent - 1e-9
    assert library <= independent + 1e-6
    assert ZCDP(rho).to_approx(delta) == ApproxDP(epsilon, delta)


def test_cks_monotone_in_parameters():
    assert accounting.zcdp_epsilon_cks(0.5, 1e-8) > accounting.zcdp_epsilon_cks(0.5, 1e-6)
    assert accounting.zcdp_epsilon_cks(0.6, 1e-6) > accounting.zcdp_epsilon_cks(0.5, 1e-6)
    assert accounting.zcdp_delta_cks(0.5, 1.0) > accounting.zcdp_delta_cks(0.5, 2.0)
    assert accounting.zcdp_delta_cks(0.5, 0.0) <= 1.0


@pytest.mark.parametrize("call, error, match", [
    (lambda: accounting.zcdp_epsilon_bun_steinke(0.0, 1e-6), ValueError, "rho must be finite and > 0"),
    (lambda: accounting.zcdp_epsilon_bun_steinke(0.5, 0.0), ValueError, "delta"),
    (lambda: accounting.zcdp_epsilon_cks(-1.0, 1e-6), ValueError, "rho"),
    (lambda: accounting.zcdp_epsilon_cks(0.5, 2.0), ValueError, "delta"),
    (lambda: accounting.zcdp_delta_cks(0.5, -1.0), ValueError, "epsilon must be finite and >= 0"),
    (lambda: ZCDP(0.5).to_approx(1e-6, method="rdp"), ValueError, "method must be 'bun-steinke' or 'cks'"),
    (lambda: ZCDP(0.5).to_approx(0.0), ValueError, "delta"),
])
def test_conversion_validation(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_compose_pure_is_exact_when_representable():
    assert accounting.compose(PureDP(1.0), PureDP(1.0)) == PureDP(2.0)
    assert accounting.compose(PureDP(0.25), PureDP(0.5), PureDP(0.25)) == PureDP(1.0)


def test_compose_rounds_up():
    total = accounting.compose(PureDP(0.1), PureDP(0.2)).epsilon
    exact = Fraction(0.1) + Fraction(0.2)
    assert Fraction(total) >= exact and Fraction(np.nextafter(total, 0.0)) < exact
    rho = accounting.compose(ZCDP(0.1), ZCDP(0.7)).rho
    assert Fraction(rho) >= Fraction(0.1) + Fraction(0.7)


def test_compose_approx():
    composed = accounting.compose(ApproxDP(1.0, 1e-6), ApproxDP(0.5, 2e-6))
    assert composed.epsilon == 1.5
    assert Fraction(composed.delta) >= Fraction(1e-6) + Fraction(2e-6)
    # Pure DP seen as ApproxDP keeps delta exactly 0.
    pure = accounting.compose(PureDP(1.0).to_approx(), PureDP(2.0).to_approx())
    assert pure.epsilon == 3.0 and pure.delta == 0.0
    mixed = accounting.compose(PureDP(1.0).to_approx(), ApproxDP(1.0, 1e-9))
    assert mixed.delta == 1e-9


def test_compose_rejects_vacuous_delta():
    with pytest.raises(ValueError, match="deltas add up to 1.0 >= 1"):
        accounting.compose(ApproxDP(1.0, 0.5), ApproxDP(1.0, 0.5))
    with pytest.raises(ValueError, match=">= 1"):
        accounting.compose(*[ApproxDP(0.1, 0.3)] * 4)


def test_compose_validation():
    with pytest.raises(ValueError, match="at least one"):
        accounting.compose()
    with pytest.raises(TypeError, match="one kind.*Convert them first"):
        accounting.compose(PureDP(1.0), ZCDP(0.5))
    with pytest.raises(TypeError, match="does not know"):
        accounting.compose("not a guarantee")


def test_check_guarantee():
    assert accounting.check_guarantee(PureDP(1.0)) == PureDP(1.0)
    with pytest.raises(TypeError, match="claim must be a privacy guarantee"):
        accounting.check_guarantee(1.0)
