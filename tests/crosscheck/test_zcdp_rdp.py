"""zCDP and RDP conversions against OpenDP, dp-accounting and autodp.

* zCDP -> (epsilon, delta) by Canonne, Kamath & Steinke (2020, Cor. 13) against OpenDP's
  ``make_zCDP_to_approxDP``, and by Bun & Steinke (2016, Prop. 1.3) against autodp's RDP conversion of
  the zCDP curve (and against OpenDP's tighter CKS value, to say by how much Bun-Steinke is looser);
* the Gaussian RDP curve against dp-accounting's ``RdpAccountant`` and autodp's ``RDP_gaussian``;
* RDP -> (epsilon, delta) (Mironov 2017, Prop. 3 and Balle et al. 2020, Thm 21) against dp-accounting
  and autodp, with k-fold composition.
"""

import math

import numpy as np
import pytest

from tests.crosscheck import _common as c

REASON = "the crosscheck extra is not installed (pip install -e '.[crosscheck]')"
pytest.importorskip("dp_accounting", reason=REASON)
pytest.importorskip("autodp", reason=REASON)
dp = pytest.importorskip("opendp.prelude", reason=REASON)

from autodp import converter, rdp_bank  # noqa: E402
from dp_accounting import dp_event  # noqa: E402
from dp_accounting.rdp import rdp_privacy_accountant  # noqa: E402

from gpuprivacy import accounting  # noqa: E402

dp.enable_features("contrib", "honest-but-curious")

ZCDP_GRID = [(0.01, 1e-5), (0.1, 1e-9), (0.5, 1e-6), (2.0, 1e-5)]


def opendp_zcdp_measurement(rho):
    """A measurement whose privacy map is exactly rho-zCDP at d_in = 1 (OpenDP's user measurement)."""
    return dp.m.make_user_measurement(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float),
                                      dp.zero_concentrated_divergence(), lambda x: x, lambda d_in: rho, TO=float)


def opendp_cks_epsilon(rho, delta):
    return c.peer(lambda: dp.c.make_zCDP_to_approxDP(opendp_zcdp_measurement(rho)).map(1.0).epsilon(delta))


OPENDP_CKS_CALL = "c.make_zCDP_to_approxDP(<rho-zCDP measurement>).map(1.0).epsilon({delta})"


@pytest.mark.parametrize("rho,delta", ZCDP_GRID, ids=str)
def test_zcdp_to_approx_cks(comparison, rho, delta):
    ours = accounting.zcdp_epsilon_cks(rho, delta)
    exact = c.cks_epsilon(rho, delta)
    # Ours is the CKS optimum (a bisection to 1e-12 relative), rounded up.
    assert exact <= ours <= exact * (1 + 1e-11)
    value = opendp_cks_epsilon(rho, delta)
    # OpenDP searches the same optimum over alpha; we agree to ~1e-12 (we bisect to 1e-12 relative).
    c.compare(comparison, topic="zcdp-to-approx-cks", quantity="epsilon", parameters={"rho": rho, "delta": delta},
              ours=ours, ours_call=f"accounting.ZCDP({rho}).to_approx({delta}).epsilon  # method='cks'",
              library="OpenDP", peer_value=value, peer_call=OPENDP_CKS_CALL.format(delta=delta), tol=1e-10,
              exact=exact, ours_safe=c.cks_safe_epsilon(ours, rho, delta),
              peer_safe=c.cks_safe_epsilon(value, rho, delta), allowed=("agree", "agree, peer marginally unsafe"))
    assert accounting.ZCDP(rho).to_approx(delta).epsilon == ours


@pytest.mark.parametrize("rho,delta", ZCDP_GRID, ids=str)
def test_zcdp_to_approx_bun_steinke(comparison, rho, delta):
    ours = accounting.zcdp_epsilon_bun_steinke(rho, delta)
    exact = c.markov_gaussian_epsilon(rho, delta)  # rho + 2 sqrt(rho log(1/delta))
    assert exact <= ours <= exact * (1 + 1e-15)
    common = dict(topic="zcdp-to-approx-bun-steinke", quantity="epsilon", parameters={"rho": rho, "delta": delta},
                  ours=ours, exact=exact, ours_safe=True,
                  ours_call=f"accounting.ZCDP({rho}).to_approx({delta}, method='bun-steinke').epsilon")
    # autodp has no zCDP -> DP call of its own; its RDP conversion with BBGHS_conversion=False (Mironov's
    # Prop. 3) applied to the zCDP curve rho * alpha is Bun & Steinke's bound at the optimal order.
    curve = lambda alpha: rdp_bank.RDP_zCDP({"rho": rho}, alpha)  # noqa: E731
    value = c.peer(converter.rdp_to_approxdp(curve, BBGHS_conversion=False), delta)
    c.compare(comparison, **common, library="autodp", peer_value=float(value), tol=1e-12,
              peer_call=f"converter.rdp_to_approxdp(lambda a: rdp_bank.RDP_zCDP({{'rho': {rho}}}, a), "
                        f"BBGHS_conversion=False)({delta})",
              peer_safe=bool(value >= exact), allowed=("agree", "agree, peer marginally unsafe"))
    # OpenDP converts with CKS, which is always tighter: this row says by how much Bun-Steinke is looser.
    value = opendp_cks_epsilon(rho, delta)
    c.compare(comparison, **common, library="OpenDP", peer_value=value, tol=1e-10,
              peer_call=OPENDP_CKS_CALL.format(delta=delta), peer_safe=None, allowed=("peer tighter",),
              note="OpenDP uses the tighter CKS conversion; gpuprivacy offers it too (the default, method='cks')")


RDP_GRID = [(1.0, 1.0, 1), (2.0, 0.5, 1), (5.0, 1.0, 10), (20.0, 1.0, 100)]
DELTAS = (1e-5, 1e-9)


def _dpa_accountant(orders, sigma, sensitivity, count):
    accountant = rdp_privacy_accountant.RdpAccountant(list(orders))
    accountant.compose(dp_event.GaussianDpEvent(sigma / sensitivity), count=count)
    return accountant


@pytest.mark.parametrize("sigma,sensitivity,count", RDP_GRID, ids=str)
def test_gaussian_rdp_curve(comparison, sigma, sensitivity, count):
    orders = accounting.DEFAULT_ORDERS
    ours = count * accounting.gaussian_rdp(orders, sigma, sensitivity)
    params = {"sigma": sigma, "sensitivity": sensitivity, "count": count, "orders": "DEFAULT_ORDERS (10001)"}
    at_two = int(np.argmin(np.abs(orders - 2.0)))
    call = f"{count} * accounting.gaussian_rdp(DEFAULT_ORDERS, {sigma}, {sensitivity})"
    peers = [
        ("dp-accounting", np.asarray(_dpa_accountant(orders, sigma, sensitivity, count)._rdp),
         f"RdpAccountant(DEFAULT_ORDERS).compose(GaussianDpEvent({sigma / sensitivity}), count={count})._rdp"),
        ("autodp", count * np.array([rdp_bank.RDP_gaussian({"sigma": sigma / sensitivity}, a) for a in orders]),
         f"{count} * rdp_bank.RDP_gaussian({{'sigma': {sigma / sensitivity}}}, alpha)"),
    ]
    for library, curve, peer_call in peers:
        gaps = (ours - curve) / curve
        worst = int(np.argmax(np.abs(gaps)))
        # The same closed form alpha * Delta^2 / (2 sigma^2) in float64: a few ulps.
        c.compare(comparison, topic="gaussian-rdp-curve", quantity="RDP epsilon(alpha), worst order",
                  parameters={**params, "worst alpha": float(orders[worst])}, ours=float(ours[worst]),
                  ours_call=call, library=library, peer_value=float(curve[worst]), peer_call=peer_call,
                  tol=1e-15, ours_safe=True, peer_safe=None, exact=None,
                  note=f"at alpha={float(orders[at_two]):.6g}: ours {float(ours[at_two])!r}, "
                       f"peer {float(curve[at_two])!r}")


@pytest.mark.parametrize("sigma,sensitivity,count", RDP_GRID, ids=str)
@pytest.mark.parametrize("delta", DELTAS, ids=str)
def test_rdp_to_approx(comparison, sigma, sensitivity, count, delta):
    r = count * sensitivity**2 / (2 * sigma**2)
    curve = lambda alpha: count * accounting.gaussian_rdp(alpha, sigma, sensitivity)  # noqa: E731
    autodp_curve = lambda alpha: count * rdp_bank.RDP_gaussian({"sigma": sigma / sensitivity}, alpha)  # noqa: E731
    params = {"sigma": sigma, "sensitivity": sensitivity, "count": count, "delta": delta}
    ours_call = f"accounting.rdp_to_dp_epsilon(lambda a: {count} * gaussian_rdp(a, {sigma}, {sensitivity}), " \
                f"{delta}, conversion='{{}}')"

    # Balle et al. (2020), Thm 21 ("bbghs"), the conversion dp-accounting and autodp use.
    ours = accounting.rdp_to_dp_epsilon(curve, delta, conversion="bbghs")
    exact = c.bbghs_gaussian_epsilon(r, delta)
    # Ours minimises over a dense grid then refines, plus a float round-off allowance: within 1e-12 of the optimum.
    assert exact <= ours <= exact * (1 + 1e-12)
    common = dict(topic="rdp-to-approx", parameters=params, ours=ours, exact=exact, ours_safe=True,
                  ours_call=ours_call.format("bbghs"))
    accountant = _dpa_accountant(accounting.DEFAULT_ORDERS, sigma, sensitivity, count)
    value = c.peer(accountant.get_epsilon, delta)
    # Same orders: dp-accounting takes the grid minimum, we refine between grid points (spacing 0.3% in
    # alpha - 1), so we are lower by up to ~1e-6; the exact optimum lies below both.
    c.compare(comparison, **common, quantity="epsilon (Thm 21), same 10001 orders", library="dp-accounting",
              peer_value=value, tol=1e-5, peer_safe=bool(value >= exact), allowed=("agree",),
              peer_call=f"RdpAccountant(DEFAULT_ORDERS).compose(GaussianDpEvent({sigma / sensitivity}), "
                        f"count={count}).get_epsilon({delta})")
    default = _dpa_accountant(rdp_privacy_accountant.DEFAULT_RDP_ORDERS, sigma, sensitivity, count)
    value = c.peer(default.get_epsilon, delta)
    # dp-accounting's default orders are a coarse grid: we are tighter, by how much is the row's gap.
    c.compare(comparison, **common, quantity="epsilon (Thm 21), peer's default orders", library="dp-accounting",
              peer_value=value, tol=1e-5, peer_safe=bool(value >= exact), allowed=("agree", "ours tighter"),
              peer_call=f"RdpAccountant().compose(GaussianDpEvent({sigma / sensitivity}), count={count})"
                        f".get_epsilon({delta})")
    value = float(c.peer(converter.rdp_to_approxdp(autodp_curve, BBGHS_conversion=True), delta))
    # autodp minimises the same objective over continuous alpha (Brent): agreement to ~1e-14.
    c.compare(comparison, **common, quantity="epsilon (Thm 21)", library="autodp", peer_value=value, tol=1e-12,
              peer_safe=bool(value >= exact), allowed=("agree", "agree, peer marginally unsafe"),
              peer_call=f"converter.rdp_to_approxdp(lambda a: {count} * rdp_bank.RDP_gaussian("
                        f"{{'sigma': {sigma / sensitivity}}}, a), BBGHS_conversion=True)({delta})")

    # Mironov (2017), Prop. 3 ("markov"): equals Bun & Steinke's r + 2 sqrt(r log(1/delta)) here.
    ours = accounting.rdp_to_dp_epsilon(curve, delta, conversion="markov")
    exact = c.markov_gaussian_epsilon(r, delta)
    assert exact <= ours <= exact * (1 + 1e-12)
    value = float(c.peer(converter.rdp_to_approxdp(autodp_curve, BBGHS_conversion=False), delta))
    c.compare(comparison, topic="rdp-to-approx", quantity="epsilon (Prop. 3)", parameters=params, ours=ours,
              exact=exact, ours_safe=True, ours_call=ours_call.format("markov"), library="autodp",
              peer_value=value, tol=1e-12, peer_safe=bool(value >= exact),
              allowed=("agree", "agree, peer marginally unsafe"),
              peer_call=f"converter.rdp_to_approxdp(lambda a: {count} * rdp_bank.RDP_gaussian("
                        f"{{'sigma': {sigma / sensitivity}}}, a), BBGHS_conversion=False)({delta})")
    assert math.isfinite(ours)
