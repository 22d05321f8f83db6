"""Float64 device quadrature for the Gaussian selection bounds; idealized numerics.

The jitted, vmapped kernel behind ``method="quadrature"`` of
:mod:`gpuprivacy.accounting._gaussian_selection`: log-space trapezoid rule centred on the
mode of the log-concave integrand, with an a-posteriori error estimate. Its results are
estimates (``*_estimate``); the public functions add the error estimate and round up.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erfcx as _jax_erfcx

from gpuprivacy._config import require_x64
from gpuprivacy._lru import LRUCache
from gpuprivacy._rounding import round_up

# ---------------------------------------------------------------------------------------------
# Quadrature settings.
# The grid spans [x_L, x_R], where the log-integrand has dropped by _TAIL_DROP below its peak on
# both sides; the neglected tails are then below e^-_TAIL_DROP of the peak (bounded rigorously by
# concavity and added to the error estimate).
_TAIL_DROP = 80.0
# Default number of grid points (odd, so that every other point is a half-resolution grid with
# the same end points). Validated against 60-digit mpmath on our hard points (far modes, narrow integrands).
DEFAULT_NUM_POINTS = 4097
# Quadrature raises when the estimated discretisation + truncation error on epsilon exceeds
# this absolute tolerance plus _MAX_RELATIVE_ERROR times epsilon.
_MAX_ABSOLUTE_ERROR = 1e-12
_MAX_RELATIVE_ERROR = 1e-10
_BISECTION_STEPS = 90
# Parameter rows evaluated together (vmapped) inside the jitted kernel, and the padded size of
# small batches (see _log_integrals_chunked).
_ROWS_PER_BATCH = 128
_SMALL_ROWS = 16
_EPS64 = float(np.finfo(np.float64).eps)
# Round-off allowance, in units of eps64 times the magnitude of the terms of l(x). Each l(x_k)
# is a sum of three terms each computed to a few ulps; logsumexp adds a few more.
_ROUNDOFF_ULPS = 8.0

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)


# ---------------------------------------------------------------------------------------------
# float64 special functions, accurate in the far tails.
#
# jax.scipy.special.log_ndtr loses ~1e-11 relative accuracy around u = -20..-40 and
# jax.scipy.special.erfcx (jax 0.10) returns exactly 0 for x in about [26.54, 26.64] (an overflow in
# an intermediate exp(x^2)); both were measured against mpmath. We therefore evaluate erfcx with
# jax only below _ERFCX_SWITCH and with its asymptotic series above, and build log Phi and the
# inverse Mills ratio on it.
_ERFCX_SWITCH = 25.0


def _erfcx(x):
    """exp(x^2) erfc(x) for x >= 0, to a few ulps."""
    small = _jax_erfcx(jnp.minimum(x, _ERFCX_SWITCH))
    # Asymptotic series erfcx(x) ~ 1/(x sqrt(pi)) sum_k (-1)^k (2k-1)!! / (2x^2)^k; at x >= 25 the
    # 10th term is below 1e-19 relative.
    big_x = jnp.maximum(x, _ERFCX_SWITCH)
    w = 1.0 / (2.0 * big_x * big_x)
    series = jnp.ones_like(big_x)
    term = jnp.ones_like(big_x)
    for k in range(1, 10):
        term = -term * (2 * k - 1) * w
        series = series + term
    big = series / (big_x * math.sqrt(math.pi))
    return jnp.where(x < _ERFCX_SWITCH, small, big)


def _log_ndtr_and_mills(u):
    """(log Phi(u), phi(u)/Phi(u)), both from one erfcx(|u|/sqrt 2); accurate on the real line.

    u < 0: Phi(u) = erfcx(|u|/sqrt2) e^{-u^2/2} / 2, so log Phi = log(erfcx/2) - u^2/2 and the
    inverse Mills ratio is sqrt(2/pi)/erfcx. u >= 0: Phi(u) = 1 - Phi(-u), with Phi(-u) from the
    same erfcx; log Phi = log1p(-Phi(-u)). (The Mills ratio underflows to 0 for u > ~38.)
    """
    tail = jnp.exp(-0.5 * u * u)
    e = _erfcx(jnp.abs(u) * _SQRT_HALF)
    upper_tail = 0.5 * e * tail  # Phi(-|u|)
    negative = u < 0.0
    log_phi_cdf = jnp.where(negative, jnp.log(0.5 * e) - 0.5 * u * u, jnp.log1p(-upper_tail))
    mills = jnp.where(negative, _SQRT_2_OVER_PI / e, tail / (_SQRT_2PI * (1.0 - upper_tail)))
    return log_phi_cdf, mills


def _log_ndtr(u):
    """log Phi(u), accurate to a few ulps (see _log_ndtr_and_mills)."""
    return _log_ndtr_and_mills(u)[0]


def _inverse_mills(u):
    """phi(u) / Phi(u) = d/du log Phi(u) (see _log_ndtr_and_mills)."""
    return _log_ndtr_and_mills(u)[1]


# ---------------------------------------------------------------------------------------------
# The integral I(p) = int phi(x) Phi(a1 x + b1)^n1 Phi(a2 x + b2)^n2 dx, p = (n1, a1, b1, n2, a2, b2).
# Every bound is a difference of two such log-integrals; the parameter rows are built in NumPy
# (float64) by _rnm_params / _at_params below and shared by both evaluators.


class _LogIntegralEstimate(NamedTuple):
    """Float64 estimates for a batch of integrals (idealized numerics; not guarantees)."""

    log_value_estimate: jax.Array  # log I on the fine grid
    discretisation_error: jax.Array  # |log I(h) - log I(2h)| + concavity bound on the tails (relative)
    roundoff_error: jax.Array  # allowance for float64 round-off in log I
    mode: jax.Array
    curvature: jax.Array  # kappa = -l''(mode) >= 1
    scaled_spacing: jax.Array  # h * sqrt(kappa), grid spacing in units of the width at the mode


def _log_integrand(x, p, two_terms: bool):
    n1, a1, b1, n2, a2, b2 = p
    value = -0.5 * x * x - _HALF_LOG_2PI + n1 * _log_ndtr(a1 * x + b1)
    return value + n2 * _log_ndtr(a2 * x + b2) if two_terms else value


def _log_integrand_slope(x, p, two_terms: bool):
    n1, a1, b1, n2, a2, b2 = p
    value = -x + n1 * a1 * _inverse_mills(a1 * x + b1)
    return value + n2 * a2 * _inverse_mills(a2 * x + b2) if two_terms else value


def _bisect(fn, lo, hi, steps):
    """Root of a decreasing fn on [lo, hi] (fn(lo) >= 0 >= fn(hi)) by a fixed number of bisections."""

    def body(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        positive = fn(mid) > 0.0
        return jnp.where(positive, mid, lo), jnp.where(positive, hi, mid)

    lo, hi = jax.lax.fori_loop(0, steps, body, (lo, hi))
    return 0.5 * (lo + hi)


def _log_integral_estimate(p, num_points: int, two_terms: bool) -> _LogIntegralEstimate:
    """log I for one parameter row p (shape [6]) by a mode-centred trapezoid rule.

    two_terms=False skips the second factor (rows with n2 = 0), halving the work.
    """
    n1, a1, b1, n2, a2, b2 = p
    if not two_terms:  # keep the formulas below uniform: the second term contributes exactly 0
        n2, a2, b2 = 0.0 * n2, 0.0 * a2, 0.0 * b2
    # 1. Mode: l' is strictly decreasing with l'' <= -1, so the root lies between 0 and l'(0), and
    # 90 bisections shrink the bracket by 2^-90.
    slope0 = _log_integrand_slope(jnp.zeros((), jnp.float64), p, two_terms)
    mode = _bisect(lambda x: _log_integrand_slope(x, p, two_terms), jnp.minimum(0.0, slope0),
                   jnp.maximum(0.0, slope0), _BISECTION_STEPS)
    u1, u2 = a1 * mode + b1, a2 * mode + b2
    (log_cdf1, lam1), (log_cdf2, lam2) = _log_ndtr_and_mills(u1), _log_ndtr_and_mills(u2)
    peak = -0.5 * mode * mode - _HALF_LOG_2PI + n1 * log_cdf1 + n2 * log_cdf2
    curvature = 1.0 + n1 * a1 * a1 * lam1 * (u1 + lam1) + n2 * a2 * a2 * lam2 * (u2 + lam2)
    # 2. Truncation: l(mode + s) <= peak - s^2/2 (curvature >= 1), so l has dropped by _TAIL_DROP
    # within |s| = sqrt(2 _TAIL_DROP) on both sides; locate the exact points (both sides at once).
    reach = math.sqrt(2.0 * _TAIL_DROP)
    directions = jnp.array([-1.0, 1.0])
    offsets = _bisect(lambda s: _log_integrand(mode + directions * s, p, two_terms) - peak + _TAIL_DROP,
                      jnp.zeros(2), jnp.full(2, reach), 60)
    left, right = mode - offsets[0], mode + offsets[1]
    # 3. Trapezoid rule on a uniform grid. The end values are <= e^-80 of the peak, so unit end
    # weights (instead of 1/2) change nothing measurable and keep the half grid nested.
    h = (right - left) / (num_points - 1)
    grid = left + h * jnp.arange(num_points, dtype=jnp.float64)
    values = _log_integrand(grid, p, two_terms)
    log_fine = jax.scipy.special.logsumexp(values) + jnp.log(h)
    log_coarse = jax.scipy.special.logsumexp(values[::2]) + jnp.log(2.0 * h)
    # 4. Tails beyond the grid, by concavity with x_0 = mode: int_{x_R}^inf e^l <= e^{l(x_R)}
    # (x_R - mode) / (peak - l(x_R)); relative to I.
    ends = jnp.stack([values[0], values[-1]])
    log_tails = ends + jnp.log(offsets / jnp.maximum(peak - ends, 1e-300))
    discretisation = jnp.abs(log_fine - log_coarse) + jnp.sum(jnp.exp(log_tails - log_fine))
    # 5. Round-off allowance (heuristic, evaluated at the mode where the mass is): rounding of x^2
    # and of the node positions (~eps x^2, eps |x| sqrt(kappa)), relative error of log Phi
    # (~eps n |log Phi|), rounding of the arguments u = a x + b (~eps n lam (|a x| + |b|)), and of
    # the final log (~eps |log I|).
    x = jnp.abs(mode) + 1.0
    scale = (x * x + x * jnp.sqrt(curvature) + jnp.abs(log_fine) + jnp.log(float(num_points))
             + n1 * (jnp.abs(log_cdf1) + lam1 * (jnp.abs(a1 * mode) + jnp.abs(b1)))
             + n2 * (jnp.abs(log_cdf2) + lam2 * (jnp.abs(a2 * mode) + jnp.abs(b2))))
    roundoff = _ROUNDOFF_ULPS * _EPS64 * scale
    ok = jnp.isfinite(log_fine) & jnp.isfinite(discretisation)
    return _LogIntegralEstimate(log_value_estimate=log_fine,
                                discretisation_error=jnp.where(ok, discretisation, jnp.inf),
                                roundoff_error=roundoff, mode=mode, curvature=curvature,
                                scaled_spacing=h * jnp.sqrt(curvature))


@functools.partial(jax.jit, static_argnames=("num_points", "two_terms"))
def _log_integrals_estimate(params, *, num_points: int = DEFAULT_NUM_POINTS,
                            two_terms: bool = True) -> _LogIntegralEstimate:
    """The one jitted kernel: log-integral estimates for a batch of parameter rows [N, 6], vmapped.

    Rows are processed _ROWS_PER_BATCH at a time (jax.lax.map over vmapped batches), which bounds
    memory at about _ROWS_PER_BATCH * num_points * 100 bytes.
    """
    kernel = functools.partial(_log_integral_estimate, num_points=num_points, two_terms=two_terms)
    return jax.lax.map(kernel, params, batch_size=min(_ROWS_PER_BATCH, params.shape[0]))


# The kernel compiled ahead of time, by (rows, num_points, two_terms): _log_integrals_chunked uses two row counts
# per (num_points, two_terms), so 16 entries hold every kernel a process uses.
_KERNELS = LRUCache(16)


def _staged_constants():
    """A context in which tracing stages constant expressions instead of running them.

    The mechanisms compute their bounds while their release is traced, under ``jax.ensure_compile_time_eval()``
    (so that a jitted or vmapped release carries its guarantee). That context turns on JAX's eager constant
    folding, which also holds while the kernel is traced there: each constant subexpression of the kernel (its
    grid, broadcasts of constants) then runs as an eager program of its own (about 20, 15-25 ms each to
    compile), and the kernel is another program than the one an eager release compiles (its constants folded
    into literals): the same kernel compiled twice in a process, 1-2 s each. JAX has no public switch back;
    ``jax._src.config.eager_constant_folding`` is the state ``ensure_compile_time_eval`` sets. Without it (a
    JAX that moved it) the kernel is still right, only compiled twice.
    """
    from jax._src import config as jax_config

    state = getattr(jax_config, "eager_constant_folding", None)
    return state(False) if callable(state) else contextlib.nullcontext()


def _compiled_kernel(num_rows: int, num_points: int, two_terms: bool):
    """``_log_integrals_estimate`` for rows ``[num_rows, 6]``, traced without constant folding and compiled
    ahead of time: one program whether the caller is eager or tracing a release (:func:`_staged_constants`).
    Calling a compiled program runs it, so under a release's trace it returns values, never a staged call."""
    def build():
        with _staged_constants():
            return _log_integrals_estimate.lower(jax.ShapeDtypeStruct((num_rows, 6), jnp.float64),
                                                 num_points=num_points, two_terms=two_terms).compile()
    return _KERNELS.get_or_build((num_rows, num_points, two_terms), build)


def _chunk_rows() -> int:
    """Rows per call of the jitted kernel for large batches: small on CPU, large on accelerators."""
    return 256 if jax.default_backend() == "cpu" else 8192


def _log_integrals_chunked(rows: np.ndarray, num_points: int) -> _LogIntegralEstimate:
    """Runs the jitted kernel on rows [N, 6] with only two static shapes per num_points.

    Batches of up to _SMALL_ROWS rows are padded to _SMALL_ROWS; larger ones are padded to a
    multiple of _chunk_rows() and evaluated chunk by chunk with the same compiled kernel, so a
    process compiles (a few seconds each) at most twice per (num_points, one or two factors)
    however many parameter grids it evaluates. Rows are independent, so padding and chunking do
    not change any value.
    """
    total = rows.shape[0]
    chunk = _SMALL_ROWS if total <= _SMALL_ROWS else _chunk_rows()
    padded = -(-total // chunk) * chunk
    rows = np.concatenate([rows, np.broadcast_to(rows[:1], (padded - total, 6))], axis=0)
    two_terms = bool(np.any(rows[:, 3] != 0.0))
    kernel = _compiled_kernel(chunk, num_points, two_terms)
    parts = [jax.device_get(kernel(np.ascontiguousarray(rows[i:i + chunk], dtype=np.float64)))
             for i in range(0, padded, chunk)]
    return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs)[:total], *parts)


class _EpsilonEstimate(NamedTuple):
    epsilon_estimate: np.ndarray  # log NUM - log DEN (float64 estimate, not a guarantee)
    discretisation_error: np.ndarray
    roundoff_error: np.ndarray


def _log_ratio_estimates(numerators: np.ndarray, denominators: np.ndarray, num_points: int) -> _EpsilonEstimate:
    """Estimates of log NUM - log DEN for rows [n, 6] of each, by the vmapped jitted kernel."""
    require_x64("gpuprivacy.accounting (Gaussian selection quadrature)")
    size = numerators.shape[0]
    rows = np.concatenate([numerators, denominators], axis=0)
    out = _log_integrals_chunked(rows, num_points)
    top, bottom = slice(0, size), slice(size, 2 * size)
    return _EpsilonEstimate(
        epsilon_estimate=out.log_value_estimate[top] - out.log_value_estimate[bottom],
        discretisation_error=out.discretisation_error[top] + out.discretisation_error[bottom],
        roundoff_error=out.roundoff_error[top] + out.roundoff_error[bottom])


def _upper_from_estimate(estimate: _EpsilonEstimate, describe) -> np.ndarray:
    """epsilon_estimate + error estimates, rounded up; raises where the resolution was insufficient."""
    value = estimate.epsilon_estimate
    discretisation, roundoff = estimate.discretisation_error, estimate.roundoff_error
    tolerance = _MAX_ABSOLUTE_ERROR + _MAX_RELATIVE_ERROR * np.abs(value) + roundoff
    bad = ~(np.isfinite(value) & (discretisation <= tolerance))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"the quadrature could not resolve the integral at {describe(i)}: estimated error "
                         f"{float(discretisation[i])!r} on epsilon {float(value[i])!r} exceeds the tolerance "
                         f"{float(tolerance[i])!r}. "
                         "Pass a larger odd num_points (e.g. 4 * num_points + 1) or method='mpmath'.")
    upper = value + discretisation + roundoff
    return np.maximum(round_up(upper), 0.0)  # one ulp for the float sum above
