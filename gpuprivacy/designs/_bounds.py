"""Bounds on covering numbers C(n, m, t) and on the oracle calls of any DP black-box estimator.

Steinke & Steinke, *Privately Estimating Black-Box Statistics* (2025, Sec. 3.4 and Sec. 5):

* (3.11)/(3.12): ``binom(n,t)/binom(m,t) <= C(n,m,t)``;
* (3.17): the integer-rounded Schonheim bound;
* (3.16): the random-construction upper bound ``ceil(r log binom(m,t)) + floor(r)``;
* (3.21): Corollary 3.8's closed-form bounds (t > 1);
* Thm 5.1 (5.1): ``k >= r_t (e^{-2 t eps}/2 - delta/(e^eps - 1))`` for every integer t,
  with the finite-range term of Steinke & Steinke 2025, Thm 5.1.

Exact integers (Python ints) where the paper's statement is about integers;
mpmath where binomials overflow float64.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath

from gpuprivacy._checks import check_int, check_nonnegative, check_positive


def _check_nmt(n, m, t):
    n = check_int("n", n, minimum=1)
    m = check_int("m", m, minimum=0)
    t = check_int("t", t, minimum=0)
    if m > n:
        raise ValueError(f"m must be <= n = {n}, got m={m}; a removed set cannot exceed the dataset.")
    if t > m:
        raise ValueError(f"t must be <= m = {m}, got t={t}; an (n, m, t)-covering needs t <= m (Def 3.6).")
    return n, m, t


def schonheim_bound(n: int, m: int, t: int) -> int:
    """Schonheim's lower bound (3.17) on C(n, m, t), in exact integer arithmetic.

    .. math:: C(n,m,t) \\ge \\Big\\lceil \\frac{n}{m}\\Big\\lceil \\frac{n-1}{m-1} \\cdots
              \\Big\\lceil\\frac{n-t+1}{m-t+1}\\Big\\rceil\\cdots\\Big\\rceil\\Big\\rceil.

    Examples:
      >>> from gpuprivacy import designs
      >>> designs.schonheim_bound(7, 3, 2), designs.schonheim_bound(24, 8, 5)
      (7, 759)
    """
    n, m, t = _check_nmt(n, m, t)
    bound = 1
    for i in range(t, 0, -1):
        numerator = (n - i + 1) * bound
        denominator = m - i + 1
        bound = -(-numerator // denominator)
    return bound


def binomial_ratio(n: int, m: int, t: int) -> Fraction:
    """``r = binom(n, t) / binom(m, t)``, exactly: the lower bound (3.11)/(3.12) on C(n, m, t)."""
    n, m, t = _check_nmt(n, m, t)
    return Fraction(math.comb(n, t), math.comb(m, t))


def random_cover_upper_bound(n: int, m: int, t: int) -> int:
    """The random-construction upper bound (3.16): ``C <= ceil(r log binom(m,t)) + floor(r)``.

    Computed with 60-digit mpmath and rounded up; this is the size of the
    patched random design of Prop. 3.7's proof with ``k1 = ceil(r log binom(m, t))``.
    """
    n, m, t = _check_nmt(n, m, t)
    r = binomial_ratio(n, m, t)
    with mpmath.workdps(60):
        first = mpmath.ceil(mpmath.mpf(r.numerator) / r.denominator * mpmath.log(math.comb(m, t)))
    return int(first) + r.numerator // r.denominator


def corollary_3_8_bounds(n: int, m: int, t: int) -> tuple[float, float]:
    """Corollary 3.8 (3.21): ``((2n-t+1)/(2m-t+1))^t <= C(n,m,t) < ... + 1`` (needs t > 1)."""
    n, m, t = _check_nmt(n, m, t)
    if t <= 1:
        raise ValueError(f"Corollary 3.8 needs t > 1, got t={t}.")
    with mpmath.workdps(40):
        lower = (mpmath.mpf(2 * n - t + 1) / (2 * m - t + 1)) ** t
        growth = (mpmath.mpf(n) / m * mpmath.mpf(n - t + 1) / (m - t + 1)) ** (mpmath.mpf(t) / 2)
        factor = min(1 + t + t * mpmath.log(mpmath.mpf(m) / t), 1 + m * mpmath.log(2), 1 + t * mpmath.log(m))
        upper = growth * factor + 1
    return float(lower), float(upper)


def block_design_size(t: int, c: int) -> int:
    """``binom(t + c, c)``: the size of the block design with c kept blocks out of t + c (Table 6.1 rows 1-3)."""
    t = check_int("t", t, minimum=0)
    c = check_int("c", c, minimum=1)
    return math.comb(t + c, c)


def oracle_calls_lower_bound(n: int, m: int, *, epsilon: float, delta: float = 0.0,
                             num_outputs: int | None = None) -> tuple[float, int]:
    """Thm 5.1 (5.1): a lower bound on the oracle calls of ANY (epsilon, delta)-DP estimator.

    .. math:: k \\ge \\max_{t'} \\frac{\\binom{n}{t'}}{\\binom{m}{t'}}
              \\Big(\\tfrac12 e^{-2t'\\varepsilon} - \\frac{3}{|Y|-1} - \\frac{\\delta}{e^\\varepsilon-1}\\Big),

    over ``t' = 0..m``; the ``3/(|Y|-1)`` term is the finite-range extension
    of Steinke & Steinke 2025, Thm 5.1 (omitted when ``num_outputs`` is None, i.e. range Z).
    The bound is vacuous (<= 1/2) when n/m is not large compared with
    ``e^{2 epsilon}``.

    Returns:
      ``(log10 of the bound, the maximising t')``; log10 is ``-inf`` when
      every term is <= 0.
    """
    n = check_int("n", n, minimum=1)
    m = check_int("m", m, minimum=0, maximum=n)
    epsilon = check_positive("epsilon", epsilon)
    delta = check_nonnegative("delta", delta)
    best, best_t = mpmath.mpf("-inf"), 0
    with mpmath.workdps(40):
        finite = mpmath.mpf(0) if num_outputs is None else mpmath.mpf(3) / (check_int(
            "num_outputs", num_outputs, minimum=2) - 1)
        slack = mpmath.mpf(delta) / mpmath.expm1(epsilon)
        for t in range(m + 1):
            term = mpmath.exp(-2 * t * mpmath.mpf(epsilon)) / 2 - finite - slack
            if term <= 0:
                continue
            value = mpmath.log10(mpmath.mpf(math.comb(n, t)) / math.comb(m, t) * term)
            if value > best:
                best, best_t = value, t
    return float(best), best_t
