"""Privacy guarantee values and their conversions.

A guarantee is an immutable record of what the mathematics proves for a
mechanism; it depends only on public parameters and is computed in Python
(float64), never inside a kernel (STYLE rule 9). Every conversion returns an
upper bound on the resulting epsilon, rounded up to the next float.
"""

from __future__ import annotations

import dataclasses
import functools

import mpmath

from gpuprivacy._checks import check_delta, check_epsilon, check_finite_real
from gpuprivacy._rounding import round_up as round_up  # public as gpuprivacy.accounting.round_up
from gpuprivacy._rounding import sum_up


@dataclasses.dataclass(frozen=True)
class PureDP:
    """epsilon-differential privacy (Dwork, McSherry, Nissim, Smith 2006).

    .. math:: \\Pr[M(x) \\in S] \\le e^{\\varepsilon} \\Pr[M(x') \\in S]
    """

    epsilon: float

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))

    def to_approx(self) -> "ApproxDP":
        """Pure DP is (epsilon, 0)-DP; returned as an ApproxDP with delta = 0."""
        return ApproxDP.__new_unchecked__(self.epsilon, 0.0)

    def to_zcdp(self) -> "ZCDP":
        """epsilon-DP implies (epsilon^2 / 2)-zCDP (Bun & Steinke 2016, Prop. 1.4)."""
        return ZCDP(round_up(self.epsilon**2 / 2))


@dataclasses.dataclass(frozen=True)
class ApproxDP:
    """(epsilon, delta)-differential privacy.

    .. math:: \\Pr[M(x) \\in S] \\le e^{\\varepsilon} \\Pr[M(x') \\in S] + \\delta
    """

    epsilon: float
    delta: float

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "delta", check_delta(self.delta))

    @classmethod
    def __new_unchecked__(cls, epsilon: float, delta: float) -> "ApproxDP":
        # Only for delta = 0 (pure DP seen as approximate DP), which the public
        # constructor rejects because a user asking for (eps, 0) should say PureDP.
        obj = object.__new__(cls)
        object.__setattr__(obj, "epsilon", float(epsilon))
        object.__setattr__(obj, "delta", float(delta))
        return obj


@dataclasses.dataclass(frozen=True)
class ZCDP:
    """rho-zero-concentrated DP (Bun & Steinke 2016, Def. 1.1).

    .. math:: D_\\alpha(M(x) \\| M(x')) \\le \\rho\\,\\alpha \\quad \\forall \\alpha > 1
    """

    rho: float

    def __post_init__(self):
        rho = check_finite_real("rho", self.rho)
        if rho <= 0:
            raise ValueError(f"rho must be finite and > 0, got {rho!r}.")
        object.__setattr__(self, "rho", rho)

    def to_approx(self, delta: float, *, method: str = "cks") -> ApproxDP:
        """Converts to (epsilon, delta)-DP.

        Args:
          delta: target delta in (0, 1).
          method: ``"bun-steinke"`` for
            :math:`\\varepsilon = \\rho + 2\\sqrt{\\rho \\log(1/\\delta)}`
            (Bun & Steinke 2016, Prop. 1.3) or ``"cks"`` (default) for the
            tighter Canonne, Kamath & Steinke (2020, Cor. 13) conversion.

        Returns:
          An ApproxDP whose epsilon is an upper bound, rounded up.
        """
        delta = check_delta(delta)
        if method == "bun-steinke":
            return ApproxDP(zcdp_epsilon_bun_steinke(self.rho, delta), delta)
        if method == "cks":
            return ApproxDP(zcdp_epsilon_cks(self.rho, delta), delta)
        raise ValueError(f"method must be 'bun-steinke' or 'cks', got {method!r}.")


def _check_rho(rho) -> float:
    rho = check_finite_real("rho", rho)
    if rho <= 0:
        raise ValueError(f"rho must be finite and > 0, got {rho!r}.")
    return rho


def zcdp_epsilon_bun_steinke(rho: float, delta: float) -> float:
    """Bun & Steinke (2016), Prop. 1.3: rho + 2 sqrt(rho log(1/delta)), rounded up."""
    rho, delta = _check_rho(rho), check_delta(delta)
    with mpmath.workdps(40):
        value = mpmath.mpf(rho) + 2 * mpmath.sqrt(mpmath.mpf(rho) * mpmath.log(1 / mpmath.mpf(delta)))
    return round_up(float(value))


def _cks_log_delta(rho, epsilon, alpha):
    # Canonne, Kamath, Steinke (arXiv 2004.00010v5), Cor. 13 with tau = alpha*rho:
    # delta = exp((alpha-1)(alpha rho - eps)) / (alpha - 1) * (1 - 1/alpha)^alpha.
    return ((alpha - 1) * (alpha * rho - epsilon) - mpmath.log(alpha - 1)
            + alpha * mpmath.log1p(-1 / alpha))


def zcdp_delta_cks(rho: float, epsilon: float) -> float:
    """Smallest delta such that rho-zCDP implies (epsilon, delta)-DP by CKS Cor. 13.

    Minimises the CKS bound over alpha > 1 (it is convex in alpha on the
    region of interest) with a golden-section search in 50-digit arithmetic,
    then rounds up. Any alpha gives a valid delta, so an inexact minimiser only
    loosens the bound; it never breaks it.
    """
    rho = _check_rho(rho)
    epsilon = check_finite_real("epsilon", epsilon)
    if epsilon < 0:
        raise ValueError(f"epsilon must be finite and >= 0, got {epsilon!r}.")
    with mpmath.workdps(50):
        r, e = mpmath.mpf(rho), mpmath.mpf(epsilon)
        # Optimal alpha is near (eps + rho) / (2 rho) + 1; search on log(alpha - 1).
        lo, hi = mpmath.log(mpmath.mpf("1e-9")), mpmath.log(max(mpmath.mpf(10), 10 * (e / r + 1)))
        f = lambda s: _cks_log_delta(r, e, 1 + mpmath.exp(s))
        g = (mpmath.sqrt(5) - 1) / 2
        a, b = lo, hi
        c, d = b - g * (b - a), a + g * (b - a)
        fc, fd = f(c), f(d)
        for _ in range(200):
            if fc < fd:
                b, d, fd = d, c, fc
                c = b - g * (b - a)
                fc = f(c)
            else:
                a, c, fc = c, d, fd
                d = a + g * (b - a)
                fd = f(d)
        best = min(fc, fd)
        delta = mpmath.exp(best)
    return min(1.0, round_up(float(delta)))


def zcdp_epsilon_cks(rho: float, delta: float) -> float:
    """Smallest epsilon with zcdp_delta_cks(rho, epsilon) <= delta (bisection, rounded up).

    Results are cached: each call runs about 40 high-precision minimisations.
    """
    return _zcdp_epsilon_cks(_check_rho(rho), check_delta(delta))


@functools.lru_cache(maxsize=4096)
def _zcdp_epsilon_cks(rho: float, delta: float) -> float:
    lo, hi = 0.0, zcdp_epsilon_bun_steinke(rho, delta)
    if zcdp_delta_cks(rho, hi) > delta:  # CKS is never worse than Bun-Steinke; guard anyway
        return hi
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if zcdp_delta_cks(rho, mid) <= delta:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-12 * hi:
            break
    return round_up(hi)


def compose(*guarantees):
    """Basic sequential composition of guarantees of one kind.

    PureDP epsilons add, ApproxDP epsilons and deltas add (Dwork et al. 2006),
    ZCDP rhos add (Bun & Steinke 2016, Lemma 2.3). Mixed kinds raise: convert
    first, so the conversion chosen is explicit. Sums are exact, rounded up
    to the next float only when they are not representable. ApproxDP deltas
    adding up to 1 or more raise a ValueError (the bound would be vacuous).
    """
    if not guarantees:
        raise ValueError("compose needs at least one guarantee.")
    kinds = {type(g) for g in guarantees}
    if len(kinds) != 1:
        raise TypeError(f"compose needs guarantees of one kind, got {sorted(k.__name__ for k in kinds)}. "
                        "Convert them first, e.g. PureDP(e).to_zcdp().")
    kind = kinds.pop()
    if kind is PureDP:
        return PureDP(sum_up((g.epsilon for g in guarantees), what="the composed epsilon",
                             hint="the guarantees' epsilons add up past any float; compose fewer or smaller ones."))
    if kind is ZCDP:
        return ZCDP(sum_up((g.rho for g in guarantees), what="the composed rho",
                           hint="the guarantees' rhos add up past any float; compose fewer or smaller ones."))
    if kind is ApproxDP:
        epsilon = sum_up((g.epsilon for g in guarantees), what="the composed epsilon",
                         hint="the guarantees' epsilons add up past any float; compose fewer or smaller ones.")
        delta = sum_up(g.delta for g in guarantees)
        if delta >= 1.0:
            raise ValueError(f"compose: the deltas add up to {delta!r} >= 1, a vacuous guarantee. "
                             "Use smaller deltas (or an advanced composition theorem).")
        if delta == 0.0:  # all inputs were pure DP seen as ApproxDP
            return ApproxDP.__new_unchecked__(epsilon, 0.0)
        return ApproxDP(epsilon, delta)
    raise TypeError(f"compose does not know guarantees of type {kind.__name__}.")


def check_guarantee(value, name: str = "claim"):
    """A PureDP, ApproxDP or ZCDP; anything else raises a TypeError."""
    if not isinstance(value, (PureDP, ApproxDP, ZCDP)):
        raise TypeError(f"{name} must be a privacy guarantee (PureDP, ApproxDP or ZCDP), got {value!r}.")
    return value
