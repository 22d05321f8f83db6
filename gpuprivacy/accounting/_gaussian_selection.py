"""Pure-DP bounds for Gaussian selection: report noisy max and above threshold.

Lebensold, Precup & Balle (AISTATS 2024, arXiv 2402.06137v2) show that with
*bounded* queries :math:`q_i \\in [a, b]` of sensitivity :math:`\\Delta`,
report noisy max with Gaussian noise is pure (ex-ante) DP, and Gaussian above
threshold is pure *ex-post* DP. Both bounds are the log of a ratio of two
one-dimensional Gaussian expectations of powers of :math:`\\Phi`. This module
evaluates them in three independent ways:

* ``method="quadrature"``: a jitted, vmapped float64 log-space trapezoid rule
  (idealized numerics), centred on the mode of the log-concave integrand. It
  carries an a-posteriori error estimate (fine vs. half-resolution grid, a
  concavity bound on the truncated tails, and a round-off allowance) that is
  added to the result before rounding up; if the discretisation or truncation
  error estimate is not negligible it raises instead of returning a number.
* ``method="mpmath"``: ``mpmath.quad`` with breakpoints around the mode at
  spacing at most :math:`1/(3\\sqrt{\\kappa})` (:math:`\\kappa` the curvature
  at the mode, or the local one where larger) within 10 widths of the mode,
  repeated at increasing precision until two precisions agree; the result is
  :math:`\\log(\\mathrm{NUM} + e_N) - \\log(\\mathrm{DEN} - e_D)` rounded up (our
  certified version of Lebensold et al. 2024, Sec. 3.4), where the error terms are mpmath's Gauss-Legendre estimates times a
  safety factor plus the disagreement between the two precisions: careful
  estimates, not proofs. One value at a time, about a second each.
* ``certified=True``: arb ball arithmetic (python-flint, an optional
  dependency): ``acb.integral`` encloses each integral over a finite range with
  proven error bounds, the tails beyond are bounded by concavity in ball
  arithmetic, and the upper end of the enclosure of
  :math:`\\log \\mathrm{NUM} - \\log \\mathrm{DEN}` is rounded up to a float64. This
  is the value to publish as a guarantee (STYLE rule 11); the float quadrature
  is an estimate with an error estimate. The cost grows with d or t (0.1 s
  below 1e5, ~10 s at 1e6, ~1 min at 1e7 on one CPU core).

Every integral here has the form

.. math:: I = \\int_{-\\infty}^{\\infty} \\varphi(x)\\,
          \\Phi(a_1 x + b_1)^{n_1}\\, \\Phi(a_2 x + b_2)^{n_2}\\, dx,

whose log-integrand :math:`l(x)` satisfies :math:`l'' \\le -1` (the Gaussian
contributes curvature -1 and :math:`\\log\\Phi` is concave). Strict
log-concavity gives a unique mode found by bisection on :math:`l'`, and a
rigorous tail bound: for :math:`x_R` right of any :math:`x_0`,
:math:`\\int_{x_R}^\\infty e^{l} \\le e^{l(x_R)} (x_R - x_0)/(l(x_0) - l(x_R))`.

References:
  Lebensold, Precup & Balle, `On the Privacy of Selection Mechanisms with
  Gaussian Noise <https://arxiv.org/abs/2402.06137>`_, AISTATS 2024 (v2),
  Thm 8 = Thm 12 (RNM), Thm 10 = Thm 17 and Lemma 18 (AT).
"""

from __future__ import annotations

import numpy as np

from gpuprivacy._checks import check_int
from gpuprivacy.accounting._gaussian_selection_precise import _arb_epsilon_upper, _mp_upper
from gpuprivacy.accounting._gaussian_selection_quadrature import (
    DEFAULT_NUM_POINTS,
    _log_ratio_estimates,
    _upper_from_estimate,
)

__all__ = [
    "gaussian_at_epsilon",
    "gaussian_at_epsilon_capped",
    "gaussian_at_epsilon_no_top",
    "gaussian_at_epsilon_table",
    "gaussian_rnm_epsilon",
]

_METHODS = ("quadrature", "mpmath")

# ---------------------------------------------------------------------------------------------
# The integrals of each bound (Lebensold et al. 2024, Thm 8 and Thm 10, corrected forms; see docs/errata.md), as parameter rows.


def _rnm_params(sigma, d, sensitivity, lower, upper) -> tuple[np.ndarray, np.ndarray]:
    """Rows [n, 6] of NUM and DEN of eps_RNM: E_z[Phi(z - u)^(d-1)], u = (c - 2 Delta)/sigma, c/sigma.

    Lebensold et al. (arXiv 2402.06137v2), Thm 8 = Thm 12 eq. (1); the paper prints the ratio,
    the privacy loss is its log (Lebensold et al. 2024, Thm 8).
    """
    width = upper - lower
    n, one, zero = d - 1.0, np.ones_like(sigma), np.zeros_like(sigma)
    numerator = np.stack([n, one, -(width - 2.0 * sensitivity) / sigma, zero, zero, zero], axis=-1)
    denominator = np.stack([n, one, -width / sigma, zero, zero, zero], axis=-1)
    return numerator, denominator


def _at_params(kind, t, sigma_threshold, sigma_query, threshold, sensitivity, lower, upper):
    """Rows [n, 6] of NUM and DEN of Gaussian AT's loss for bottom^(t-1) top ("top") or bottom^t ("no_top").

    Corrected Thm 10 / Thm 17 of Lebensold et al. (arXiv 2402.06137v2), from Lemma 18's maximiser
    y_i = b (i < t), y_t = a (Lebensold et al. 2024, Thm 10, Thm 17, Lemma 18): psi_xi(x) = Phi((sigmaX x + rho - b + xi)/sigmaZ),
    beta_xi(x) = Phi((-sigmaX x - rho + a + xi)/sigmaZ); NUM has xi = Delta, DEN xi = 0. For
    "no_top" (our derivation) the factor beta is absent and psi has power t.
    """
    n_below, n_top = (t - 1.0, np.ones_like(t)) if kind == "top" else (t, np.zeros_like(t))
    slope = sigma_threshold / sigma_query
    numerator = np.stack([n_below, slope, (threshold - upper + sensitivity) / sigma_query,
                          n_top, -slope, (lower - threshold + sensitivity) / sigma_query], axis=-1)
    denominator = np.stack([n_below, slope, (threshold - upper) / sigma_query,
                            n_top, -slope, (lower - threshold) / sigma_query], axis=-1)
    return numerator, denominator


# ---------------------------------------------------------------------------------------------
# Validation and broadcasting (the curator's boundary, STYLE rule 17).


def _real_array(name: str, value, fix: str) -> np.ndarray:
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise TypeError(f"{name} must be a real number or an array of real numbers, got {value!r}.")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as err:  # ragged sequences and the like
        raise TypeError(f"{name} must be a real number or an array of real numbers, got {value!r}: {err}") from None
    if array.dtype == object or array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.number) \
            or np.iscomplexobj(array):
        raise TypeError(f"{name} must be a real number or an array of real numbers, got {value!r} "
                        f"(dtype {array.dtype}).")
    array = array.astype(np.float64)
    bad = ~np.isfinite(array)
    if bad.any():
        raise ValueError(f"{name} must be finite, got {float(array[bad].flat[0])!r}. {fix}")
    return array


def _positive_array(name: str, value, fix: str) -> np.ndarray:
    array = _real_array(name, value, fix)
    bad = array <= 0
    if bad.any():
        raise ValueError(f"{name} must be finite and > 0, got {float(array[bad].flat[0])!r}. {fix}")
    return array


def _integer_array(name: str, value, minimum: int, fix: str) -> np.ndarray:
    array = _real_array(name, value, fix)
    bad = array != np.round(array)
    if bad.any():
        raise ValueError(f"{name} must be an integer, got {float(array[bad].flat[0])!r}. {fix}")
    bad = array < minimum
    if bad.any():
        raise ValueError(f"{name} must be an integer >= {minimum}, got {float(array[bad].flat[0])!r}. {fix}")
    if (array > 2.0 ** 53).any():
        raise ValueError(f"{name} must be at most 2^53 (exact in float64), got {float(array.max())!r}.")
    return array


def _check_range(sensitivity: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
    lower, upper, sensitivity = np.broadcast_arrays(lower, upper, sensitivity)
    bad = lower >= upper
    if bad.any():
        raise ValueError(f"lower must be < upper (the queries' public range [lower, upper]), got lower="
                         f"{float(lower[bad].flat[0])!r} and upper={float(upper[bad].flat[0])!r}. Pass the range "
                         "every query is clipped to, e.g. lower=0.0, upper=1.0.")
    width = upper - lower
    bad = sensitivity > width
    if bad.any():
        raise ValueError(f"sensitivity must lie in (0, upper - lower], got sensitivity="
                         f"{float(sensitivity[bad].flat[0])!r} with upper - lower = {float(width[bad].flat[0])!r}. "
                         "A query with values in [lower, upper] cannot change by more than upper - lower.")


def _check_method(method: str, certified: bool) -> str:
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}.")
    if not isinstance(certified, (bool, np.bool_)):
        raise TypeError(f"certified must be True or False, got {certified!r}.")
    return "mpmath" if certified else method


def _check_num_points(num_points) -> int:
    num_points = check_int("num_points", num_points, minimum=65)
    if num_points % 2 == 0:
        raise ValueError(f"num_points must be odd (the half-resolution check uses every other point), got "
                         f"{num_points}. Use e.g. {num_points + 1}.")
    return num_points


_FIX_SIGMA = "Pass the standard deviation of the Gaussian noise, e.g. sigma=0.1."
_FIX_SENSITIVITY = "Pass the per-query sensitivity Delta, with 0 < Delta <= upper - lower."
_FIX_RANGE = "Pass the finite public range [lower, upper] of every query, e.g. lower=0.0, upper=1.0."


def _broadcast(*arrays: np.ndarray) -> tuple[list[np.ndarray], tuple[int, ...]]:
    try:
        broadcast = np.broadcast_arrays(*arrays)
    except ValueError as err:
        raise ValueError(f"the parameter arrays must broadcast together: {err}") from None
    return [np.ascontiguousarray(a).reshape(-1) for a in broadcast], broadcast[0].shape


def _reshape(values: np.ndarray, shape: tuple[int, ...], scalar: bool):
    if scalar:
        return float(values[0])
    return values.reshape(shape)


# ---------------------------------------------------------------------------------------------
# From estimates to reported upper bounds.


def _evaluate(kinds, flat, *, method, certified, num_points, describe) -> np.ndarray:
    """Upper bounds for flat parameter arrays, for each kind in turn (concatenated).

    kinds: ("rnm",) or a tuple of "top" / "no_top"; flat: the raw parameter columns.
    """
    if certified or method == "mpmath":
        one = _arb_epsilon_upper if certified else _mp_upper
        return np.array([one(kind, tuple(float(v) for v in row)) for kind in kinds for row in zip(*flat)])
    rows = [_rnm_params(*flat) if kind == "rnm" else _at_params(kind, *flat) for kind in kinds]
    numerators, denominators = np.concatenate([r[0] for r in rows]), np.concatenate([r[1] for r in rows])
    return _upper_from_estimate(_log_ratio_estimates(numerators, denominators, num_points), describe)


def _describer(names, flat):
    def describe(i):
        return ", ".join(f"{name}={float(flat[k][i])!r}" for k, name in enumerate(names))
    return describe


# ---------------------------------------------------------------------------------------------
# Public API.


def gaussian_rnm_epsilon(sigma, d, sensitivity, lower, upper, *, method: str = "quadrature",
                         certified: bool = False, num_points: int = DEFAULT_NUM_POINTS):
    """Pure (ex-ante) epsilon of report noisy max with Gaussian noise on bounded queries.

    :math:`M(D) = \\arg\\max_{i \\le d} q_i(D) + Z_i` with :math:`Z_i \\sim N(0, \\sigma^2)`,
    queries :math:`q_i \\in [a, b]` of sensitivity :math:`\\Delta`, :math:`c = b - a`, is
    :math:`\\varepsilon`-DP with

    .. math:: \\varepsilon = \\log \\mathbb{E}_{z \\sim N(0,1)}\\Big[\\Phi\\Big(z - \\frac{c - 2\\Delta}{\\sigma}\\Big)^{d-1}\\Big]
              - \\log \\mathbb{E}_{z \\sim N(0,1)}\\Big[\\Phi\\Big(z - \\frac{c}{\\sigma}\\Big)^{d-1}\\Big].

    The paper prints the ratio of expectations; the privacy loss is its log (Lebensold et al. 2024, Thm 8).
    The bound is tight for the class: the pair :math:`q(D') = (b, \\dots, b, a)`,
    :math:`q(D) = (b - \\Delta, \\dots, b - \\Delta, a + \\Delta)` attains it at output :math:`d`.

    Args:
      sigma: noise standard deviation, > 0.
      d: number of candidates, an integer >= 2.
      sensitivity: per-query sensitivity :math:`\\Delta`, in (0, upper - lower].
      lower, upper: the public range [a, b] of every query, lower < upper.
      method: ``"quadrature"`` (jitted float64 log-space trapezoid rule, vmapped over all
        parameter combinations in one call; idealized numerics with an error estimate) or
        ``"mpmath"`` (breakpoint quadrature at increasing precision, one value at a time).
      certified: if True, enclose the bound in arb ball arithmetic (needs python-flint) and
        return the upper end of the enclosure rounded up: a proven upper bound. Overrides
        ``method``.
      num_points: odd number of grid points of the quadrature (static; default 4097).

    Returns:
      epsilon rounded up: a float, or an ``np.ndarray`` of the broadcast shape when any argument
      is an array. Every value is an upper bound on the computed quantity (estimate plus its
      error estimate, rounded up), never a rounded-to-nearest estimate.

    Raises:
      ValueError: on out-of-range parameters, or when the quadrature cannot resolve an integral
        (use a larger ``num_points`` or ``method="mpmath"``); ArithmeticError if the mpmath
        evaluator does not converge.

    Examples:
      >>> from gpuprivacy import accounting
      >>> round(accounting.gaussian_rnm_epsilon(0.3, 2, 0.01, 0.0, 1.0), 10)
      0.1259421424

    References:
      Lebensold, Precup & Balle, `On the Privacy of Selection Mechanisms with Gaussian Noise
      <https://arxiv.org/abs/2402.06137>`_, AISTATS 2024, Thm 8 (= Thm 12, eq. (1)).
    """
    method = _check_method(method, certified)
    num_points = _check_num_points(num_points)
    scalar = all(np.ndim(v) == 0 for v in (sigma, d, sensitivity, lower, upper))
    sigma_a = _positive_array("sigma", sigma, _FIX_SIGMA)
    d_a = _integer_array("d", d, 2, "d is the number of candidates; with d = 1 the output is constant "
                         "(epsilon = 0), so pass d >= 2.")
    sensitivity_a = _positive_array("sensitivity", sensitivity, _FIX_SENSITIVITY)
    lower_a, upper_a = _real_array("lower", lower, _FIX_RANGE), _real_array("upper", upper, _FIX_RANGE)
    _check_range(sensitivity_a, lower_a, upper_a)
    flat, shape = _broadcast(sigma_a, d_a, sensitivity_a, lower_a, upper_a)
    if flat[0].size == 0:
        return np.zeros(shape)
    values = _evaluate(("rnm",), flat, method=method, certified=certified, num_points=num_points,
                       describe=_describer(("sigma", "d", "sensitivity", "lower", "upper"), flat))
    return _reshape(values, shape, scalar)


def _at_checked(t_name, t, sigma_threshold, sigma_query, threshold, sensitivity, lower, upper, minimum_t=1):
    t_a = _integer_array(t_name, t, minimum_t, f"{t_name} is a stopping time (number of queries answered), "
                         "counted from 1.")
    sigma_threshold_a = _positive_array("sigma_threshold", sigma_threshold,
                                        "Pass the standard deviation of the threshold noise, e.g. 0.15.")
    sigma_query_a = _positive_array("sigma_query", sigma_query,
                                    "Pass the standard deviation of the query noise, e.g. sqrt(3) * sigma_threshold.")
    threshold_a = _real_array("threshold", threshold, "Pass the public threshold rho as a finite number.")
    sensitivity_a = _positive_array("sensitivity", sensitivity, _FIX_SENSITIVITY)
    lower_a, upper_a = _real_array("lower", lower, _FIX_RANGE), _real_array("upper", upper, _FIX_RANGE)
    _check_range(sensitivity_a, lower_a, upper_a)
    return t_a, sigma_threshold_a, sigma_query_a, threshold_a, sensitivity_a, lower_a, upper_a


def _at_epsilons(kinds, t, sigma_threshold, sigma_query, threshold, sensitivity, lower, upper, *, method,
                 certified, num_points, t_name="t"):
    """Upper bounds of each kind ("top": eps_post, "no_top": eps_bot), in one vmapped call."""
    method = _check_method(method, certified)
    num_points = _check_num_points(num_points)
    scalar = all(np.ndim(v) == 0 for v in (t, sigma_threshold, sigma_query, threshold, sensitivity, lower, upper))
    arrays = _at_checked(t_name, t, sigma_threshold, sigma_query, threshold, sensitivity, lower, upper)
    flat, shape = _broadcast(*arrays)
    size = flat[0].size
    if size == 0:
        return [np.zeros(shape) for _ in kinds]

    names = (t_name, "sigma_threshold", "sigma_query", "threshold", "sensitivity", "lower", "upper")
    describe = _describer(names, [np.tile(a, len(kinds)) for a in flat])
    values = _evaluate(tuple(kinds), flat, method=method, certified=certified, num_points=num_points,
                       describe=describe)
    return [_reshape(values[j * size:(j + 1) * size], shape, scalar) for j in range(len(kinds))]


def gaussian_at_epsilon(t, sigma_threshold, sigma_query, threshold, sensitivity, lower, upper, *,
                        method: str = "quadrature", certified: bool = False, num_points: int = DEFAULT_NUM_POINTS):
    """Ex-post epsilon of Gaussian above threshold that halts at step t (output bottom^(t-1) top).

    Above threshold draws :math:`\\hat\\rho = \\rho + N(0, \\sigma_X^2)` once and answers top at the
    first t with :math:`q_t(D) + N(0, \\sigma_Z^2) \\ge \\hat\\rho`. For queries in [a, b] of
    sensitivity :math:`\\Delta`, the privacy loss of the output that halts at t is at most

    .. math:: \\varepsilon_{\\mathrm{post}}(t) = \\log \\frac{
              \\mathbb{E}_x[\\Phi((\\sigma_X x + \\rho - b + \\Delta)/\\sigma_Z)^{t-1}
                             \\Phi((-\\sigma_X x - \\rho + a + \\Delta)/\\sigma_Z)]}{
              \\mathbb{E}_x[\\Phi((\\sigma_X x + \\rho - b)/\\sigma_Z)^{t-1}
                             \\Phi((-\\sigma_X x - \\rho + a)/\\sigma_Z)]}, \\quad x \\sim N(0, 1).

    This is the corrected form of Thm 10 / Thm 17 (Lebensold et al. 2024, Thm 10, Thm 17, Lemma 18): "rho - b" (Thm 10 prints
    "rho - (b + a)", Thm 17 "rho - (b - a)"), a minus sign on :math:`\\sigma_X x` in the last
    factor (Thm 10 prints a plus sign, which under-estimates the loss), and the log of the
    ratio. It follows from Lemma 18's maximiser :math:`y_{i<t} = b`, :math:`y_t = a` and is
    attained by the pair :math:`q_{i<t}(D') = b, q_{i<t}(D) = b - \\Delta, q_t(D') = a,
    q_t(D) = a + \\Delta`. It is an *ex-post* guarantee (a function of the realised t), not an
    eps-DP guarantee of the mechanism; see :func:`gaussian_at_epsilon_capped` for a capped,
    ex-ante bound. The paper assumes :math:`\\rho \\ge 0`; the bound only depends on
    :math:`\\rho - a` and :math:`\\rho - b`, so any real threshold is accepted.

    Args:
      t: stopping time, an integer >= 1.
      sigma_threshold: threshold noise standard deviation :math:`\\sigma_X > 0`.
      sigma_query: query noise standard deviation :math:`\\sigma_Z > 0`.
      threshold: the public threshold :math:`\\rho`.
      sensitivity: per-query sensitivity :math:`\\Delta \\in (0, b - a]`.
      lower, upper: the public range [a, b] of every query.
      method, certified, num_points: as in :func:`gaussian_rnm_epsilon`.

    Returns:
      epsilon_post(t) rounded up: a float, or an ``np.ndarray`` of the broadcast shape.

    Examples:
      >>> from gpuprivacy import accounting
      >>> round(accounting.gaussian_at_epsilon(3, 0.3, 0.3 * 3 ** 0.5, 0.75, 1e-3, 0.0, 1.0), 6)
      0.007968

    References:
      Lebensold, Precup & Balle, `On the Privacy of Selection Mechanisms with Gaussian Noise
      <https://arxiv.org/abs/2402.06137>`_, AISTATS 2024, Thm 10 (= Thm 17, eq. (25)), Lemma 18.
    """
    return _at_epsilons(("top",), t, sigma_threshold, sigma_query, threshold, sensitivity, lower, upper,
                        method=method, certified=certified, num_points=num_points)[0]


def gaussian_at_epsilon_no_top(t, sigma_threshold, sigma_query, threshold, sensitivity, lower, upper, *,
                               method: str = "quadrature", certified: bool = False,
                               num_points: int = DEFAULT_NUM_POINTS):
    """Epsilon of the output bottom^t (no query above threshold in t steps) of Gaussian AT.

    .. math:: \\varepsilon_{\\mathrm{bot}}(t) = \\log \\mathbb{E}_x[\\Phi((\\sigma_X x + \\rho - b + \\Delta)/\\sigma_Z)^t]
              - \\log \\mathbb{E}_x[\\Phi((\\sigma_X x + \\rho - b)/\\sigma_Z)^t].

    Derived by us from the proof of Lemma 18 of Lebensold et al. 2024 (not stated in the paper): the
    worst case sets every :math:`q_i(D') = b`, :math:`q_i(D) = b - \\Delta`. Used when the stream
    ends or a cap is reached without a top.

    Args and Returns: as in :func:`gaussian_at_epsilon`.
    """
    return _at_epsilons(("no_top",), t, sigma_threshold, sigma_query, threshold, sensitivity, lower, upper,
                        method=method, certified=certified, num_points=num_points)[0]


def gaussian_at_epsilon_table(t_max, sigma_threshold, sigma_query, threshold, sensitivity, lower, upper, *,
                              method: str = "quadrature", certified: bool = False,
                              num_points: int = DEFAULT_NUM_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Tables of eps_post(t) and eps_bot(t) for t = 1..t_max, in one vmapped call.

    Args:
      t_max: largest stopping time, an integer >= 1.
      sigma_threshold, sigma_query, threshold, sensitivity, lower, upper: scalars, as in
        :func:`gaussian_at_epsilon`.
      method, certified, num_points: as in :func:`gaussian_rnm_epsilon`.

    Returns:
      ``(epsilon_post, epsilon_no_top)``, two float64 arrays of shape [t_max]; entry ``t - 1``
      belongs to stopping time t. Upper bounds, rounded up.
    """
    t_max = check_int("t_max", t_max, minimum=1)
    for name, value in (("sigma_threshold", sigma_threshold), ("sigma_query", sigma_query), ("threshold", threshold),
                        ("sensitivity", sensitivity), ("lower", lower), ("upper", upper)):
        if np.ndim(value) != 0:
            raise ValueError(f"{name} must be a scalar for gaussian_at_epsilon_table, got shape {np.shape(value)}. "
                             "Use gaussian_at_epsilon with broadcast arrays for parameter grids.")
    t = np.arange(1, t_max + 1, dtype=np.float64)
    post, bottom = _at_epsilons(("top", "no_top"), t, sigma_threshold, sigma_query, threshold, sensitivity, lower,
                                upper, method=method, certified=certified, num_points=num_points)
    return post, bottom


def gaussian_at_epsilon_capped(k, sigma_threshold, sigma_query, threshold, sensitivity, lower, upper, *,
                               method: str = "quadrature", certified: bool = False,
                               num_points: int = DEFAULT_NUM_POINTS) -> float:
    """Pure (ex-ante) epsilon of Gaussian AT forced to stop after at most k queries.

    The outputs are bottom^(t-1) top for t <= k and bottom^k, so the mechanism is
    :math:`\\varepsilon`-DP with

    .. math:: \\varepsilon = \\max\\big(\\max_{t \\le k} \\varepsilon_{\\mathrm{post}}(t),\\;
              \\varepsilon_{\\mathrm{bot}}(k)\\big)

    (Lebensold et al. 2024, Thm 10, Thm 17, Lemma 18). The maximum is taken over the whole table; monotonicity in t is
    observed numerically but not assumed.

    Args:
      k: the cap on the number of queries, an integer >= 1.
      Others: scalars as in :func:`gaussian_at_epsilon`.

    Returns:
      epsilon as a float, rounded up.
    """
    k = check_int("k", k, minimum=1)
    post, bottom = gaussian_at_epsilon_table(k, sigma_threshold, sigma_query, threshold, sensitivity, lower, upper,
                                             method=method, certified=certified, num_points=num_points)
    return float(max(post.max(), bottom[-1]))
