"""High-precision evaluators for the Gaussian selection bounds (Lebensold et al. 2024, Sec. 3.4).

``method="mpmath"`` (breakpoint quadrature at two agreeing precisions, estimated error terms)
and ``certified=True`` (arb ball arithmetic through python-flint, proven enclosures) of
:mod:`gpuprivacy.accounting._gaussian_selection`. Both build the integrands from the raw
float64 inputs in high precision (:func:`_exact_terms`).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import mpmath

from gpuprivacy._rounding import float_up, step_up_until

# ---------------------------------------------------------------------------------------------
# mpmath evaluator (Lebensold et al. 2024, Sec. 3.4): breakpoints around the mode, precision raised until two
# precisions agree. Independent of the float64 quadrature (they share only the formulas).

# Starting precision (decimal digits) and the largest one tried before giving up.
_MP_START_DPS = 30
_MP_MAX_DPS = 480
# Target relative accuracy of each integral: 10^-(dps - _MP_GUARD_DIGITS) at the working precision,
# and never looser than 10^-_MP_MIN_DIGITS.
_MP_GUARD_DIGITS = 8
_MP_MIN_DIGITS = 20
# Breakpoint spacing: 1/(_MP_POINTS_PER_WIDTH sqrt(kappa)), kappa the curvature at the mode (or the
# local one where larger), within 10 widths of the mode; see _mp_log_integral_at.
_MP_POINTS_PER_WIDTH = 3
# Past the bulk (integrand below e^-_MP_BULK_DROP of the peak) the spacing grows by this factor.
_MP_BULK_DROP = 8
_MP_STEP_GROWTH = 1.5
_MP_QUAD_METHOD = "gauss-legendre"
# The second, higher precision of each pair.
_MP_EXTRA_DPS = 15
# Safety factor applied to the error estimates (quadrature estimate, disagreement of precisions).
_MP_SAFETY = 10


class _MpLogIntegral(NamedTuple):
    log_value: mpmath.mpf  # log I at the higher of the two precisions
    relative_error: mpmath.mpf  # stated bound on |I_true - I| / I (an estimate, see module docstring)
    dps: int
    num_intervals: int


def _mp_log_ndtr(u):
    if u < 0:
        return mpmath.log(mpmath.ncdf(u))
    return mpmath.log1p(-mpmath.ncdf(-u))


def _mp_inverse_mills(u):
    if u < 0:
        # phi(u)/Phi(u) with both factors tiny: work with logs.
        return mpmath.exp(-u * u / 2 - mpmath.log(mpmath.sqrt(2 * mpmath.pi)) - _mp_log_ndtr(u))
    return mpmath.npdf(u) / mpmath.ncdf(u)


def _exact_terms(kind: str, raw: tuple[float, ...], numerator: bool, real):
    """The (n, a, b) terms of NUM or DEN from the raw float64 inputs, in the arithmetic `real`.

    ``real`` is ``mpmath.mpf`` (at the working precision) or ``flint.arb`` (balls at the context
    precision). Building a and b from the inputs in high precision, rather than from the float64
    rows of _rnm_params / _at_params, makes the mpmath and arb values exact for the given inputs
    (the float rows carry a rounding error of a few ulps in b, which moves epsilon by ~1e-14
    relative; the quadrature's round-off allowance covers it). Same formulas as those functions.
    """
    if kind == "rnm":
        sigma, d, sensitivity, lower, upper = raw
        width = real(upper) - real(lower)
        shift = width - 2 * real(sensitivity) if numerator else width
        terms = [(int(d) - 1, real(1), -shift / real(sigma))]
    else:
        t, sigma_threshold, sigma_query, threshold, sensitivity, lower, upper = raw
        xi = real(sensitivity) if numerator else real(0)
        slope = real(sigma_threshold) / real(sigma_query)
        below = (real(threshold) - real(upper) + xi) / real(sigma_query)
        if kind == "top":
            terms = [(int(t) - 1, slope, below), (1, -slope, (real(lower) - real(threshold) + xi) / real(sigma_query))]
        else:
            terms = [(int(t), slope, below)]
    return [term for term in terms if term[0] != 0]


def _mp_log_integrand(x, terms):
    value = -x * x / 2 - mpmath.log(2 * mpmath.pi) / 2
    for n, a, b in terms:
        value += n * _mp_log_ndtr(a * x + b)
    return value


def _mp_slope(x, terms):
    return -x + mpmath.fsum(n * a * _mp_inverse_mills(a * x + b) for n, a, b in terms)


def _mp_curvature(x, terms):
    total = mpmath.mpf(1)
    for n, a, b in terms:
        u = a * x + b
        lam = _mp_inverse_mills(u)
        total += n * a * a * lam * (u + lam)
    return total


def _mp_log_integral_at(key: tuple, dps: int) -> tuple[mpmath.mpf, mpmath.mpf, int]:
    """(I, quadrature error estimate, number of intervals) at working precision dps.

    key: (kind, raw parameters, numerator?) as for _exact_terms.
    """
    with mpmath.workdps(dps):
        terms = [(mpmath.mpf(n), a, b) for n, a, b in _exact_terms(*key, mpmath.mpf)]
        # Mode by bisection: l' decreases, l'' <= -1, so the root lies between 0 and l'(0).
        slope0 = _mp_slope(mpmath.mpf(0), terms)
        lo, hi = min(mpmath.mpf(0), slope0), max(mpmath.mpf(0), slope0)
        for _ in range(200):
            mid = (lo + hi) / 2
            if _mp_slope(mid, terms) > 0:
                lo = mid
            else:
                hi = mid
            if hi - lo < mpmath.mpf(10) ** -12 * (1 + abs(mid)):
                break
        mode = (lo + hi) / 2
        peak = _mp_log_integrand(mode, terms)
        # Breakpoints: walk away from the mode (steps below) until the integrand has dropped by
        # `drop`; one more interval each side reaches mode +- cut, where
        # l <= peak + |l'(mode)| cut - cut^2/2 (curvature >= 1) is below peak - drop - 50. The mass
        # beyond +-cut is bounded by the same Gaussian bound and added to the error.
        drop = dps * math.log(10) + 10
        cut = mpmath.sqrt(2 * (drop + 60)) + 2 * abs(_mp_slope(mode, terms))
        kappa = _mp_curvature(mode, terms)
        points = [mode]
        for direction in (1, -1):
            x, step = mode, None
            while abs(x - mode) < cut:
                # Spacing: a third of the width 1/sqrt(kappa) within 10 widths of the mode
                # (Lebensold et al. 2024, Sec. 3.4), a third of the local width 1/sqrt(kappa(x)) elsewhere in the bulk; past
                # the bulk, where the integrand is below e^-_MP_BULK_DROP of its peak, steps grow
                # geometrically.
                curvature = _mp_curvature(x, terms)
                if abs(x - mode) * mpmath.sqrt(kappa) <= 10:
                    curvature = max(curvature, kappa)
                local = 1 / (_MP_POINTS_PER_WIDTH * mpmath.sqrt(curvature))
                bulk = _mp_log_integrand(x, terms) > peak - _MP_BULK_DROP
                step = local if bulk or step is None else _MP_STEP_GROWTH * step
                x = x + direction * step
                points.append(x)
                if _mp_log_integrand(x, terms) < peak - drop:
                    break
            points.append(mode + direction * cut)
        nodes = sorted(set(points))

        # mp.quad's stopping rule is absolute (about 2^-prec), so integrate exp(l - peak), of order 1.
        def integrand(x):
            return mpmath.exp(_mp_log_integrand(x, terms) - peak)

        value, error = mpmath.quad(integrand, nodes, error=True, method=_MP_QUAD_METHOD)
        slope = abs(_mp_slope(mode, terms))
        tail = 2 * mpmath.exp(slope * cut - cut * cut / 2) / (cut - slope)
        scale = mpmath.exp(peak)
        value, error, tail = value * scale, error * scale, tail * scale
        return value, error + tail, len(nodes) - 1


@functools.lru_cache(maxsize=8192)
def _mp_log_integral(key: tuple) -> _MpLogIntegral:
    """log I with a stated relative error: two precisions must agree (Lebensold et al. 2024, Sec. 3.4).

    Raises:
      ArithmeticError: if no precision up to _MP_MAX_DPS gives agreement (never returns silently).
    """
    dps = _MP_START_DPS
    while dps <= _MP_MAX_DPS:
        low, low_error, _ = _mp_log_integral_at(key, dps)
        high_dps = dps + _MP_EXTRA_DPS
        high, high_error, intervals = _mp_log_integral_at(key, high_dps)
        with mpmath.workdps(high_dps):
            if high > 0 and low > 0:
                error = _MP_SAFETY * max(abs(high - low), abs(low_error), abs(high_error))
                relative = error / high
                target = mpmath.mpf(10) ** -max(_MP_MIN_DIGITS, dps - _MP_GUARD_DIGITS)
                if relative <= target:
                    return _MpLogIntegral(log_value=mpmath.log(high), relative_error=relative, dps=high_dps,
                                          num_intervals=intervals)
        dps *= 2
    raise ArithmeticError(f"mpmath quadrature did not converge up to {_MP_MAX_DPS} digits for the integral "
                          f"{key}; the bound cannot be evaluated reliably.")


class _MpEpsilon(NamedTuple):
    epsilon: mpmath.mpf  # log NUM - log DEN at high precision
    epsilon_upper: mpmath.mpf  # log(NUM (1 + r_N)) - log(DEN (1 - r_D))
    error: mpmath.mpf  # epsilon_upper - epsilon


def _mp_log_ratio(kind: str, raw: tuple[float, ...]) -> _MpEpsilon:
    """log NUM - log DEN by mpmath for one bound ("rnm", "top" or "no_top") and raw parameters."""
    top, bottom = _mp_log_integral((kind, raw, True)), _mp_log_integral((kind, raw, False))
    with mpmath.workdps(max(top.dps, bottom.dps) + 10):
        epsilon = top.log_value - bottom.log_value
        upper = epsilon + mpmath.log1p(top.relative_error) - mpmath.log1p(-bottom.relative_error)
        return _MpEpsilon(epsilon=epsilon, epsilon_upper=upper, error=upper - epsilon)


# ---------------------------------------------------------------------------------------------
# Certified evaluator (certified=True): arb ball arithmetic via python-flint (optional dependency).
# acb.integral returns a ball that provably contains the integral over [x_L, x_R]; the tails
# beyond are bounded by concavity, evaluated in ball arithmetic; so NUM and DEN are enclosed in
# proven intervals and eps_cert = log(NUM_upper) - log(DEN_lower) is a proven upper bound (up to
# the correctness of arb and of the formula).

_ARB_START_PREC = 128  # bits
_ARB_MAX_PREC = 1024
# The enclosure of epsilon must be narrower than this (relative to max(epsilon, 1e-300)).
_ARB_RELATIVE_WIDTH = 1e-20


def _require_flint():
    try:
        import flint
    except ImportError:
        raise ImportError("certified=True evaluates the bound in arb ball arithmetic and needs python-flint: "
                          "pip install python-flint (or gpuprivacy[certified]). method='mpmath' gives an upper "
                          "bound with estimated, not proven, error terms.") from None
    return flint


def _arb_log_integral_bounds(key: tuple, prec: int):
    """Proven (lower, upper) arb bounds on log I at `prec` bits; None if not resolved at prec.

    key: (kind, raw parameters, numerator?) as for _exact_terms.
    """
    flint = _require_flint()
    arb, acb = flint.arb, flint.acb
    drop = prec * math.log(2.0) + 30.0
    with mpmath.workdps(20):  # a rough mode and truncation points; any choice keeps the bound valid
        terms = [(mpmath.mpf(n), a, b) for n, a, b in _exact_terms(*key, mpmath.mpf)]
        slope0 = _mp_slope(mpmath.mpf(0), terms)
        lo, hi = min(mpmath.mpf(0), slope0), max(mpmath.mpf(0), slope0)
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _mp_slope(mid, terms) > 0 else (lo, mid)
            if hi - lo < mpmath.mpf(10) ** -10 * (1 + abs(mid)):
                break
        mode = (lo + hi) / 2
        peak = _mp_log_integrand(mode, terms)
        ends = []
        for direction in (-1, 1):
            lo, hi = mpmath.mpf(0), mpmath.sqrt(2 * drop) + 2 * abs(_mp_slope(mode, terms)) + 1
            for _ in range(80):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if _mp_log_integrand(mode + direction * mid, terms) > peak - drop else (lo, mid)
            ends.append(float(mode + direction * hi))
        mode, peak = float(mode), float(peak)
    saved = flint.ctx.prec
    flint.ctx.prec = prec
    try:
        sqrt2 = arb(2).sqrt()
        shift = arb(peak)
        exact_terms = _exact_terms(*key, arb)

        def integrand(x, analytic):  # exp(l(x) - peak) without the 1/sqrt(2 pi); entire in x
            value = (-(x * x) / 2 - shift).exp()
            for n, a, b in exact_terms:
                value *= ((-(a * x + b)) / sqrt2).erfc() ** n / 2 ** n
            return value

        def log_integrand(x):  # the same, real, in log form
            value = -(x * x) / 2 - shift
            for n, a, b in exact_terms:
                value += n * (((-(a * x + b)) / sqrt2).erfc() / 2).log()
            return value

        inner = acb.integral(integrand, ends[0], ends[1]).real
        # Tails: for concave l, int_{x_R}^inf e^l <= e^{l(x_R)} (x_R - x0) / (l(x0) - l(x_R)), x0 = mode.
        at_mode = log_integrand(arb(mode))
        tails = arb(0)
        for end in ends:
            at_end = log_integrand(arb(end))
            gap = at_mode - at_end
            if not gap > 0:
                return None
            tails += at_end.exp() * abs(arb(end) - arb(mode)) / gap
        lower = inner.lower()
        upper = (inner + tails).upper()
        if not lower > 0:
            return None
        offset = shift - (2 * arb.pi()).sqrt().log()
        return lower.log() + offset, upper.log() + offset
    finally:
        flint.ctx.prec = saved


def _arb_float_up(value) -> float:
    """A float64 >= every point of the arb ball `value` (python-flint is optional: imported lazily)."""
    from flint import arb

    return step_up_until(float(value.mid() + value.rad()), lambda x: bool(arb(x) >= value))


@functools.lru_cache(maxsize=8192)
def _arb_epsilon_upper(kind: str, raw: tuple[float, ...]) -> float:
    """Proven upper bound on log NUM - log DEN, rounded up to a float64; precision doubles until tight.

    kind: "rnm" (raw = sigma, d, sensitivity, lower, upper), or "top" / "no_top" for above
    threshold (raw = t, sigma_threshold, sigma_query, threshold, sensitivity, lower, upper).
    """
    flint = _require_flint()
    prec = _ARB_START_PREC
    while prec <= _ARB_MAX_PREC:
        top = _arb_log_integral_bounds((kind, raw, True), prec)
        bottom = _arb_log_integral_bounds((kind, raw, False), prec)
        if top is not None and bottom is not None:
            saved = flint.ctx.prec
            flint.ctx.prec = prec
            try:
                lower, upper = top[0] - bottom[1], top[1] - bottom[0]
                width = upper - lower
                if width.upper() <= abs(upper).upper() * _ARB_RELATIVE_WIDTH + flint.arb(1e-300):
                    return max(0.0, _arb_float_up(upper))
            finally:
                flint.ctx.prec = saved
        prec *= 2
    raise ArithmeticError(f"arb could not enclose the bound tightly up to {_ARB_MAX_PREC} bits for {kind} with "
                          f"parameters {raw}.")


def _mp_upper(kind: str, raw: tuple[float, ...]) -> float:
    result = _mp_log_ratio(kind, raw)
    with mpmath.workdps(60):
        # epsilon_upper = log(NUM + err_N) - log(DEN - err_D) (Lebensold et al. 2024, Sec. 3.4), with the
        # estimated error terms of the mpmath evaluator.
        return float_up(max(result.epsilon_upper, mpmath.mpf(0)))
