"""Noise calibration against dp-accounting, autodp, diffprivlib and OpenDP.

Analytic Gaussian (Balle & Wang 2018) sigma, delta and epsilon; the classic Gaussian sigma; the
Laplace scale; the zCDP Gaussian sigma. Each value is checked against an independent exact
reference (mpmath, `_common`) and against every peer that computes the same quantity.
"""

import math
import subprocess
import sys
from fractions import Fraction

import jax
import mpmath
import pytest

from tests.crosscheck import _common as c

REASON = "the crosscheck extra is not installed (pip install -e '.[crosscheck]')"
dp_accounting = pytest.importorskip("dp_accounting", reason=REASON)
pytest.importorskip("autodp", reason=REASON)
pytest.importorskip("diffprivlib", reason=REASON)
dp = pytest.importorskip("opendp.prelude", reason=REASON)

from autodp import dp_bank  # noqa: E402  (imports autodp.rdp_acct first: see the note below)
from autodp import privacy_calibrator  # noqa: E402  (importing it first fails: a circular import in autodp 0.2.3.1)
from autodp.calibrator_zoo import ana_gaussian_calibrator  # noqa: E402
from autodp.mechanism_zoo import ExactGaussianMechanism  # noqa: E402
from diffprivlib.mechanisms import Gaussian, GaussianAnalytic, Laplace  # noqa: E402
from dp_accounting import gaussian_mechanism as dpa_gaussian  # noqa: E402
from dp_accounting.pld import privacy_loss_mechanism  # noqa: E402

from gpuprivacy import accounting, mechanisms  # noqa: E402

dp.enable_features("contrib")

# Analytic sigma: typical (epsilon, delta) and the corners where float peers lose accuracy.
SIGMA_GRID = [(0.1, 1e-5, 1.0), (0.5, 1e-6, 1.0), (1.0, 1e-5, 1.0), (1.0, 1e-6, 2.5), (2.0, 1e-6, 1.0),
              (5.0, 1e-3, 1.0), (0.2, 1e-12, 1.0), (0.5, 1e-10, 1.0), (1.0, 1e-10, 1.0), (10.0, 1e-10, 1.0),
              (15.0, 1e-10, 1.0)]

# dp-accounting's get_sigma_gaussian / get_epsilon_gaussian use brentq with xtol=1e-12 (absolute) on
# logcdf-based log-deltas: with sigma >= 0.1 here that is below 1e-10 relative.
DPA_TOL = 1e-10
# autodp's ana_gaussian_calibrator and diffprivlib's GaussianAnalytic evaluate Phi through erf in float
# (1 + erf(-x) cancels for large x) and stop on an *absolute* tolerance of the delta (autodp: 1e-12),
# so at delta <= 1e-10 or large epsilon they drift by up to a few percent, in either direction. Within
# 1e-6 they agree; beyond it the row says which side is wrong (the exact check decides), and the
# unsafe corners are asserted in test_float_peers_are_unsafe_at_small_delta.
FLOAT_PEER_TOL = 1e-6
FLOAT_PEER_ALLOWED = ("agree", "agree, peer marginally unsafe", "ours tighter", "peer unsafe")
# Closed forms evaluated in float64 by the peer: a few ulps.
ULP_TOL = 1e-15


def _params(**kwargs):
    return {k: v for k, v in kwargs.items()}


def _excess(sigma, epsilon, delta, sensitivity):
    """For a sigma that misses the target: how far its exact delta exceeds it."""
    ratio = float(c.bw_delta(sigma, epsilon, sensitivity) / delta)
    if ratio <= 1:
        return ""
    excess = f"(1 + {ratio - 1:.2e})" if ratio < 1.001 else f"{ratio:.4g}"
    return f"the exact delta of this sigma is {excess} x the target"


@pytest.mark.parametrize("epsilon,delta,sensitivity", SIGMA_GRID, ids=str)
def test_analytic_gaussian_sigma(comparison, epsilon, delta, sensitivity):
    ours = accounting.gaussian_sigma_analytic(epsilon, delta, sensitivity)
    exact = c.bw_sigma(epsilon, delta, sensitivity)
    ours_safe = c.bw_safe_sigma(ours, epsilon, delta, sensitivity)
    # Ours is the smallest float passing the exact condition: at most an ulp or two above the real root.
    assert exact <= ours <= exact * (1 + 1e-13)
    common = dict(topic="analytic-gaussian-sigma", quantity="sigma", ours=ours, exact=exact, ours_safe=ours_safe,
                  parameters=_params(epsilon=epsilon, delta=delta, sensitivity=sensitivity),
                  ours_call=f"accounting.gaussian_sigma_analytic({epsilon}, {delta}, {sensitivity})")
    scale = f" * {sensitivity}" if sensitivity != 1.0 else ""
    args = (epsilon, delta, sensitivity)

    value = c.peer(dpa_gaussian.get_sigma_gaussian, epsilon, delta) * sensitivity
    c.compare(comparison, **common, library="dp-accounting", peer_value=value, note=_excess(value, *args),
              peer_call=f"dp_accounting.gaussian_mechanism.get_sigma_gaussian({epsilon}, {delta}){scale}",
              tol=DPA_TOL, peer_safe=c.bw_safe_sigma(value, epsilon, delta, sensitivity),
              allowed=("agree", "agree, peer marginally unsafe"))

    value = c.peer(lambda: ana_gaussian_calibrator()(ExactGaussianMechanism, epsilon, delta).params["sigma"])
    value *= sensitivity
    c.compare(comparison, **common, library="autodp", peer_value=value, note=_excess(value, *args),
              peer_call=f"calibrator_zoo.ana_gaussian_calibrator()(ExactGaussianMechanism, {epsilon}, {delta})"
                        f".params['sigma']{scale}",
              tol=FLOAT_PEER_TOL, peer_safe=c.bw_safe_sigma(value, epsilon, delta, sensitivity),
              allowed=FLOAT_PEER_ALLOWED)

    value = float(c.peer(GaussianAnalytic, epsilon=epsilon, delta=delta, sensitivity=sensitivity)._scale)
    c.compare(comparison, **common, library="diffprivlib", peer_value=value, note=_excess(value, *args),
              peer_call=f"mechanisms.GaussianAnalytic(epsilon={epsilon}, delta={delta}, "
                        f"sensitivity={sensitivity})._scale",
              tol=FLOAT_PEER_TOL, peer_safe=c.bw_safe_sigma(value, epsilon, delta, sensitivity),
              allowed=FLOAT_PEER_ALLOWED)


# The corners docs/comparison.md reports as unsafe: the peer's sigma gives an exact delta above the target.
KNOWN_UNSAFE = [
    ("autodp", 0.2, 1e-12, 1.3), ("autodp", 0.5, 1e-10, 1.003), ("autodp", 10.0, 1e-10, 1.001),
    ("autodp", 15.0, 1e-10, 1.1), ("diffprivlib", 10.0, 1e-10, 1.001), ("diffprivlib", 15.0, 1e-10, 1.1),
]


@pytest.mark.parametrize("library,epsilon,delta,at_least", KNOWN_UNSAFE, ids=str)
def test_float_peers_are_unsafe_at_small_delta(library, epsilon, delta, at_least):
    if library == "autodp":
        sigma = c.peer(lambda: ana_gaussian_calibrator()(ExactGaussianMechanism, epsilon, delta).params["sigma"])
    else:
        sigma = float(c.peer(GaussianAnalytic, epsilon=epsilon, delta=delta, sensitivity=1.0)._scale)
    assert c.bw_delta(sigma, epsilon) / delta >= at_least  # the peer's noise misses the target delta
    assert c.bw_safe_sigma(accounting.gaussian_sigma_analytic(epsilon, delta), epsilon, delta)


DELTA_GRID = [(0.5, 0.1), (0.5, 1.0), (1.0, 1.0), (1.0, 3.0), (3.0, 1.0), (3.0, 3.0), (10.0, 0.1), (10.0, 1.0)]


@pytest.mark.parametrize("sigma,epsilon", DELTA_GRID, ids=str)
def test_analytic_gaussian_delta(comparison, sigma, epsilon):
    ours = accounting.gaussian_delta_analytic(sigma, epsilon=epsilon)
    exact = c.bw_delta(sigma, epsilon)
    assert exact <= ours <= exact * (1 + 1e-15)  # rounded up, and tight
    common = dict(topic="analytic-gaussian-delta", quantity="delta", ours=ours, exact=float(exact), ours_safe=True,
                  parameters=_params(sigma=sigma, epsilon=epsilon),
                  ours_call=f"accounting.gaussian_delta_analytic({sigma}, epsilon={epsilon})")
    # Both peers evaluate the same formula with scipy's log-cdf in float64: about 1e-12 relative here.
    value = c.peer(privacy_loss_mechanism.GaussianPrivacyLoss(sigma, sensitivity=1.0).get_delta_for_epsilon, epsilon)
    c.compare(comparison, **common, library="dp-accounting", peer_value=float(value), tol=1e-10,
              peer_call=f"pld.privacy_loss_mechanism.GaussianPrivacyLoss({sigma}, sensitivity=1.0)"
                        f".get_delta_for_epsilon({epsilon})",
              peer_safe=bool(value >= exact), allowed=("agree", "agree, peer marginally unsafe"))
    value = math.exp(c.peer(dp_bank.get_logdelta_ana_gaussian, sigma, epsilon))
    c.compare(comparison, **common, library="autodp", peer_value=value, tol=1e-10,
              peer_call=f"exp(dp_bank.get_logdelta_ana_gaussian({sigma}, {epsilon}))",
              peer_safe=bool(value >= exact), allowed=("agree", "agree, peer marginally unsafe"))


def test_analytic_gaussian_delta_below_the_float_range(comparison):
    # The exact delta at sigma = 10, epsilon = 10 is about 2e-2175: below every float64. We round up to
    # the smallest subnormal; both peers return 0.0, i.e. claim pure DP. Harmless in practice, but a
    # claim the theorem does not make.
    sigma, epsilon = 10.0, 10.0
    exact = c.bw_delta(sigma, epsilon)
    ours = accounting.gaussian_delta_analytic(sigma, epsilon=epsilon)
    assert 0 < exact <= ours <= 1e-300
    common = dict(topic="analytic-gaussian-delta", quantity="delta", ours=ours, exact=None, ours_safe=True,
                  parameters=_params(sigma=sigma, epsilon=epsilon),
                  ours_call=f"accounting.gaussian_delta_analytic({sigma}, epsilon={epsilon})",
                  note=f"exact delta {mpmath.nstr(exact, 3)} underflows float64; 0.0 claims pure DP")
    value = c.peer(privacy_loss_mechanism.GaussianPrivacyLoss(sigma, sensitivity=1.0).get_delta_for_epsilon, epsilon)
    c.compare(comparison, **common, library="dp-accounting", peer_value=float(value), tol=1e-10,
              peer_call=f"pld.privacy_loss_mechanism.GaussianPrivacyLoss({sigma}, sensitivity=1.0)"
                        f".get_delta_for_epsilon({epsilon})",
              peer_safe=bool(value >= exact), allowed=("peer unsafe",))
    value = math.exp(c.peer(dp_bank.get_logdelta_ana_gaussian, sigma, epsilon))
    c.compare(comparison, **common, library="autodp", peer_value=value, tol=1e-10,
              peer_call=f"exp(dp_bank.get_logdelta_ana_gaussian({sigma}, {epsilon}))",
              peer_safe=bool(value >= exact), allowed=("peer unsafe",))


EPSILON_GRID = [(0.5, 1e-3), (0.5, 1e-10), (1.0, 1e-6), (3.0, 1e-3), (3.0, 1e-6), (3.0, 1e-10), (10.0, 1e-6)]


@pytest.mark.parametrize("sigma,delta", EPSILON_GRID, ids=str)
def test_analytic_gaussian_epsilon(comparison, sigma, delta):
    ours = accounting.gaussian_epsilon_analytic(sigma, delta)
    exact = c.bw_epsilon(sigma, delta)
    assert exact <= ours <= exact * (1 + 1e-13)
    common = dict(topic="analytic-gaussian-epsilon", quantity="epsilon", ours=ours, exact=exact,
                  ours_safe=bool(c.bw_delta(sigma, ours) <= delta), parameters=_params(sigma=sigma, delta=delta),
                  ours_call=f"accounting.gaussian_epsilon_analytic({sigma}, {delta})")
    allowed = ("agree", "agree, peer marginally unsafe")
    value = c.peer(dpa_gaussian.get_epsilon_gaussian, sigma, delta)
    c.compare(comparison, **common, library="dp-accounting", peer_value=value, tol=DPA_TOL,
              peer_call=f"dp_accounting.gaussian_mechanism.get_epsilon_gaussian({sigma}, {delta})",
              peer_safe=bool(c.bw_delta(sigma, value) <= delta), allowed=allowed)
    # autodp's root_scalar (brentq, default xtol 2e-12) on the log-delta: 1e-10 relative here.
    value = c.peer(dp_bank.get_eps_ana_gaussian, sigma, delta)
    c.compare(comparison, **common, library="autodp", peer_value=value, tol=DPA_TOL,
              peer_call=f"dp_bank.get_eps_ana_gaussian({sigma}, {delta})",
              peer_safe=bool(c.bw_delta(sigma, value) <= delta), allowed=allowed)


CLASSIC_GRID = [(0.1, 1e-5, 1.0), (0.5, 1e-10, 1.0), (0.9, 1e-6, 3.0)]


def _classic_exact(epsilon, delta, sensitivity):
    with mpmath.workdps(50):
        return mpmath.mpf(sensitivity) * mpmath.sqrt(2 * mpmath.log(mpmath.mpf("1.25") / mpmath.mpf(delta))) / epsilon


@pytest.mark.parametrize("epsilon,delta,sensitivity", CLASSIC_GRID, ids=str)
def test_classic_gaussian_sigma(comparison, epsilon, delta, sensitivity):
    ours = accounting.gaussian_sigma_classic(epsilon, delta, sensitivity)
    exact = _classic_exact(epsilon, delta, sensitivity)
    assert exact <= ours <= exact * (1 + 1e-15)
    common = dict(topic="classic-gaussian-sigma", quantity="sigma", ours=ours, exact=float(exact), ours_safe=True,
                  parameters=_params(epsilon=epsilon, delta=delta, sensitivity=sensitivity),
                  ours_call=f"accounting.gaussian_sigma_classic({epsilon}, {delta}, {sensitivity})")
    # Both peers evaluate the closed form in float64 (round to nearest): a few ulps, either side.
    allowed = ("agree", "agree, peer marginally unsafe")
    value = float(c.peer(Gaussian, epsilon=epsilon, delta=delta, sensitivity=sensitivity)._scale)
    c.compare(comparison, **common, library="diffprivlib", peer_value=value, tol=ULP_TOL, allowed=allowed,
              peer_call=f"mechanisms.Gaussian(epsilon={epsilon}, delta={delta}, sensitivity={sensitivity})._scale",
              peer_safe=bool(value >= exact))
    value = c.peer(privacy_calibrator.classical_gaussian_mech, epsilon, delta)["sigma"] * sensitivity
    scale = f" * {sensitivity}" if sensitivity != 1.0 else ""
    c.compare(comparison, **common, library="autodp", peer_value=value, tol=ULP_TOL, allowed=allowed,
              peer_call=f"privacy_calibrator.classical_gaussian_mech({epsilon}, {delta})['sigma']{scale}",
              peer_safe=bool(value >= exact))


def test_classic_gaussian_at_epsilon_one(comparison):
    # Dwork & Roth's Thm A.1 is stated for epsilon < 1; we refuse epsilon = 1, both peers accept it. The
    # exact (Balle & Wang) delta of their sigma is far below the target, so accepting it is safe.
    epsilon, delta = 1.0, 1e-5
    with pytest.raises(ValueError, match="epsilon < 1"):
        accounting.gaussian_sigma_classic(epsilon, delta)
    for library, call, sigma in [
        ("diffprivlib", f"mechanisms.Gaussian(epsilon={epsilon}, delta={delta}, sensitivity=1.0)._scale",
         float(c.peer(Gaussian, epsilon=epsilon, delta=delta, sensitivity=1.0)._scale)),
        ("autodp", f"privacy_calibrator.classical_gaussian_mech({epsilon}, {delta})['sigma']",
         c.peer(privacy_calibrator.classical_gaussian_mech, epsilon, delta)["sigma"]),
    ]:
        ratio = float(c.bw_delta(sigma, epsilon) / delta)
        assert ratio < 0.01
        comparison.record(topic="classic-gaussian-sigma", kind="refusal", quantity="sigma",
                          parameters=_params(epsilon=epsilon, delta=delta, sensitivity=1.0), ours=None,
                          ours_call=f"accounting.gaussian_sigma_classic({epsilon}, {delta}) raises ValueError",
                          library=library, peer=sigma, peer_call=call, verdict="ours refuses", peer_safe=True,
                          note=f"outside Thm A.1 (epsilon < 1); exact delta of the peer's sigma is "
                               f"{ratio:.3g} x the target, so safe")


LAPLACE_GRID = [(0.1, 1.0), (0.3, 0.7), (1.0, 1.0), (3.0, 2.5), (1e-3, 1.0)]


@pytest.mark.parametrize("epsilon,sensitivity", LAPLACE_GRID, ids=str)
def test_laplace_scale(comparison, epsilon, sensitivity):
    release = mechanisms.laplace_mechanism(jax.random.key(0), 0.0, epsilon=epsilon, sensitivity=sensitivity)
    ours = float(release.info.scale)
    exact = Fraction(sensitivity) / Fraction(epsilon)
    assert Fraction(ours) >= exact and ours <= float(exact) * (1 + 1e-15)
    common = dict(topic="laplace-scale", quantity="scale", ours=ours, exact=float(exact), ours_safe=True,
                  parameters=_params(epsilon=epsilon, sensitivity=sensitivity),
                  ours_call=f"mechanisms.laplace_mechanism(key, x, epsilon={epsilon}, "
                            f"sensitivity={sensitivity}).info.scale")
    allowed = ("agree", "agree, peer marginally unsafe")
    space = (dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float))
    value = c.peer(dp.binary_search_param, lambda s: dp.m.make_laplace(*space, scale=s), d_in=sensitivity,
                   d_out=epsilon)
    c.compare(comparison, **common, library="OpenDP", peer_value=value, tol=ULP_TOL, allowed=allowed,
              peer_call=f"binary_search_param(lambda s: m.make_laplace(atom_domain(T=float, nan=False), "
                        f"absolute_distance(T=float), scale=s), d_in={sensitivity}, d_out={epsilon})",
              peer_safe=Fraction(value) >= exact)
    # diffprivlib keeps the scale local to randomise(); variance(0) = 2 b^2 gives it back (2 roundings).
    value = math.sqrt(c.peer(Laplace, epsilon=epsilon, sensitivity=sensitivity).variance(0) / 2)
    c.compare(comparison, **common, library="diffprivlib", peer_value=value, tol=ULP_TOL, allowed=allowed,
              peer_call=f"sqrt(mechanisms.Laplace(epsilon={epsilon}, sensitivity={sensitivity}).variance(0) / 2)",
              peer_safe=Fraction(value) >= exact)
    value = c.peer(privacy_calibrator.laplace_mech, epsilon, 0)["b"] * sensitivity
    c.compare(comparison, **common, library="autodp", peer_value=value, tol=ULP_TOL, allowed=allowed,
              peer_call=f"privacy_calibrator.laplace_mech({epsilon}, 0)['b'] * {sensitivity}",
              peer_safe=Fraction(value) >= exact)
    # OpenDP's own privacy map, applied to our scale, must not exceed our claim.
    charged = dp.m.make_laplace(*space, scale=ours).map(sensitivity)
    assert charged <= epsilon
    c.compare(comparison, topic="laplace-scale", quantity="epsilon charged for our scale",
              parameters=_params(epsilon=epsilon, sensitivity=sensitivity), ours=epsilon,
              ours_call=f"mechanisms.laplace_mechanism_guarantee(epsilon={epsilon}).epsilon", library="OpenDP",
              peer_value=charged, peer_call=f"m.make_laplace(..., scale={ours!r}).map({sensitivity})",
              tol=ULP_TOL, ours_safe=True, allowed=("agree",))


ZCDP_GRID = [(0.1, 1.0), (0.5, 1.0), (0.02, 3.0), (2.0, 0.25)]


@pytest.mark.parametrize("rho,sensitivity", ZCDP_GRID, ids=str)
def test_zcdp_gaussian_sigma(comparison, rho, sensitivity):
    ours = accounting.gaussian_sigma_zcdp(rho, sensitivity)
    exact_ok = lambda s: Fraction(sensitivity) ** 2 <= 2 * Fraction(rho) * Fraction(s) ** 2  # noqa: E731
    space = (dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float))
    value = c.peer(dp.binary_search_param, lambda s: dp.m.make_gaussian(*space, scale=s), d_in=sensitivity,
                   d_out=rho)
    c.compare(comparison, topic="zcdp-gaussian-sigma", quantity="sigma",
              parameters=_params(rho=rho, sensitivity=sensitivity), ours=ours,
              ours_call=f"accounting.gaussian_sigma_zcdp({rho}, {sensitivity})", library="OpenDP",
              peer_value=value, exact=sensitivity / math.sqrt(2 * rho), ours_safe=exact_ok(ours),
              peer_call=f"binary_search_param(lambda s: m.make_gaussian(atom_domain(T=float, nan=False), "
                        f"absolute_distance(T=float), scale=s), d_in={sensitivity}, d_out={rho})",
              peer_safe=exact_ok(value), tol=ULP_TOL, allowed=("agree", "agree, peer marginally unsafe"))
    charged = dp.m.make_gaussian(*space, scale=ours).map(sensitivity)
    assert charged <= rho
    c.compare(comparison, topic="zcdp-gaussian-sigma", quantity="rho charged for our sigma",
              parameters=_params(rho=rho, sensitivity=sensitivity), ours=rho,
              ours_call=f"mechanisms.gaussian_mechanism_zcdp_guarantee(rho={rho}).rho", library="OpenDP",
              peer_value=charged, peer_call=f"m.make_gaussian(..., scale={ours!r}).map({sensitivity})",
              tol=ULP_TOL, ours_safe=True, allowed=("agree",))


def test_autodp_privacy_calibrator_cannot_be_imported_first():
    # A library issue that docs/comparison.md reports (and this module works around by importing
    # autodp.dp_bank first): in autodp 0.2.3.1, privacy_calibrator -> rdp_acct -> privacy_calibrator.
    proc = subprocess.run([sys.executable, "-c", "import autodp.privacy_calibrator"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0 and "circular import" in proc.stderr
