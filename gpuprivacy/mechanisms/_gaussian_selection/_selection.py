"""Selection with Gaussian noise under bounded queries: report noisy max, above threshold, sparse vector.

Lebensold, Precup & Balle, "On the Privacy of Selection Mechanisms with
Gaussian Noise", AISTATS 2024 (arXiv 2402.06137v2), as corrected in spec 004.
Every query lies in a PUBLIC interval :math:`[a, b]` (``lower``, ``upper``;
:math:`c = b - a`) and has sensitivity :math:`\\Delta \\in (0, c]`. Under
that assumption

* Gaussian report noisy max is pure (ex-ante) :math:`\\varepsilon`-DP
  (Theorem 8 = Theorem 12, eq. (1));
* Gaussian above threshold is pure *ex-post* DP: releasing stopping time
  :math:`t` costs :math:`\\varepsilon^{\\mathrm{post}}(t)` (Theorem 10 =
  Theorem 17, eq. (25)), which grows with :math:`t`; a stream of known length
  :math:`k` makes it pure ex-ante DP with the largest table entry (spec 004,
  Sec. 3.3 [D]);
* the fully adaptive Gaussian sparse vector runs Gaussian above threshold
  again and again under filtered self-reporting composition (Algorithm 4;
  :mod:`gpuprivacy.mechanisms._gaussian_selection._sparse_vector`, with the corrected
  delta rule of :mod:`gpuprivacy.mechanisms._gaussian_selection._filters`).

This module also holds Laplace report noisy max with its two calibrations,
the baselines of the paper's Fig. 16.

The epsilons are computed in Python from public parameters
(:mod:`gpuprivacy.accounting`); kernels only gather precomputed table entries.

Totality (STYLE "errors vs totality"): the public functions reject queries
outside ``[lower, upper]`` (and non-finite ones) before any release; kernels
map NaN to ``lower`` and clamp every value to ``[lower, upper]``, so a value
that slips past validation (e.g. under ``jax.jit``) is released as if it
were clamped and the guarantee still holds.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import noise as _noise
from gpuprivacy._checks import (
    check_epsilon,
    check_finite_real,
    check_int,
    check_key,
    check_positive,
    is_tracer,
)
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Array, Key, Scores
from gpuprivacy.accounting import PureDP, gaussian_at_epsilon_table, gaussian_rnm_epsilon
from gpuprivacy.mechanisms._common import (
    check_choice,
    check_scores,
    concrete,
    divide_up,
    sanitize,
    unit_noise,
)
from gpuprivacy.mechanisms._release import Release
from gpuprivacy.mechanisms._selection._selection import SelectionInfo, _check_selection, _noisy_argmax, _selection_info

NO_STOPPING_TIME = 0
"""The value of :func:`gaussian_above_threshold` when no query passes the noisy threshold."""

LAPLACE_CALIBRATIONS = ("standard", "post_processing")


# ---------------------------------------------------------------------------------------------
# Validation shared by the bounded-query mechanisms.


def _check_bounded_class(sensitivity, lower, upper, where):
    """Finite lower < upper and 0 < sensitivity <= upper - lower (spec 004, 7.12)."""
    for name, value in (("sensitivity", sensitivity), ("lower", lower), ("upper", upper)):
        concrete(name, value, where)
    lower = check_finite_real("lower", lower)
    upper = check_finite_real("upper", upper)
    if not lower < upper:
        raise ValueError(f"lower must be < upper (the public range [lower, upper] of every query), got "
                         f"lower={lower!r}, upper={upper!r}.")
    sensitivity = check_positive("sensitivity", sensitivity)
    if sensitivity > upper - lower:
        raise ValueError(f"sensitivity must lie in (0, upper - lower] = (0, {upper - lower!r}]: a query with values "
                         f"in [{lower!r}, {upper!r}] cannot change by more than that; got {sensitivity!r}.")
    return sensitivity, lower, upper


def _check_sigma(name, value, where):
    concrete(name, value, where)
    return check_positive(name, value)


def _check_in_range(values, name, lower, upper):
    """Rejects concrete values outside [lower, upper]; skipped on tracers (the kernel clamps)."""
    if is_tracer(values):
        return
    arr = np.asarray(values)
    outside = (arr < lower) | (arr > upper)
    if outside.any():
        index = int(np.argmax(outside))
        raise ValueError(
            f"{name} must lie in [lower, upper] = [{lower!r}, {upper!r}] (the bounded-query assumption behind the "
            f"pure-DP bound); {int(outside.sum())} value(s) lie outside, the first at index {index}: "
            f"{float(arr[index])!r}. Clip each query to a PUBLIC range before release, never to one read from the "
            "data (spec 004, 7.8).")


def _clamp(values, lower, upper):
    return jnp.clip(sanitize(values), lower, upper)  # NaN -> -SCORE_BOUND -> lower


# ---------------------------------------------------------------------------------------------
# Gaussian report noisy max (spec 004, Sec. 3.1 and 4.1).


def _check_num_candidates(num_candidates):
    num_candidates = check_int("num_candidates", num_candidates)
    if num_candidates < 2:
        raise ValueError(f"Gaussian report noisy max needs num_candidates >= 2, got {num_candidates}: with one "
                         "candidate the output is constant (Lebensold et al. Thm 8 assumes d > 1); release 0 "
                         "without noise instead.")
    return num_candidates


@jax.jit
def _gaussian_noisy_argmax(key: Key, scores: Array, sigma: Array, lower: Array,
                           upper: Array) -> tuple[Array, SelectionInfo]:
    scores = _clamp(scores, lower, upper)
    noisy = scores + sigma * unit_noise(_noise.gaussian, key, scores.shape)
    selected = jnp.argmax(noisy).astype(jnp.int32)
    return selected, _selection_info(scores, selected, sigma)


def gaussian_report_noisy_max(key: Key, scores: Scores, *, sigma: float, sensitivity: float, lower: float,
                              upper: float) -> Release:
    """Report noisy max with Gaussian noise: pure DP for bounded scores.

    .. math:: M(x) = \\arg\\max_{i \\in [d]}\\; q_i(x) + Z_i, \\qquad Z_i \\sim \\mathcal N(0, \\sigma^2)
              \\text{ i.i.d.},

    releasing only the index. If every score lies in :math:`[a, b]` and has
    sensitivity :math:`\\Delta`, this is pure :math:`\\varepsilon`-DP with
    (Theorem 8 = Theorem 12, eq. (1), as the log of the printed ratio)

    .. math:: \\varepsilon = \\log \\frac{\\mathbb E_{z}\\big[\\Phi(z - (c - 2\\Delta)/\\sigma)^{d-1}\\big]}
                                         {\\mathbb E_{z}\\big[\\Phi(z - c/\\sigma)^{d-1}\\big]},
              \\qquad z \\sim \\mathcal N(0, 1),\\ c = b - a,

    attained by the neighbours :math:`q = (b - \\Delta, \\dots, b - \\Delta, a + \\Delta)`,
    :math:`q' = (b, \\dots, b, a)` at output :math:`d`. See
    :func:`gaussian_report_noisy_max_guarantee`. Ties (probability zero)
    resolve to the first index. Idealized numerics (float64 Gaussian samples,
    resolved to about 8 standard deviations).

    Privacy: the bound needs every score in ``[lower, upper]``; scores
    outside raise here. Inside the kernel NaN scores become ``lower`` and all
    scores are clamped to ``[lower, upper]`` (so a traced input that skipped
    validation is still covered).

    Args:
      key: a single PRNG key.
      scores: float ``[num_candidates]``, finite, in ``[lower, upper]``, ``num_candidates >= 2``.
      sigma: the noise standard deviation, > 0.
      sensitivity: :math:`\\Delta \\in (0, \\text{upper} - \\text{lower}]`.
      lower: :math:`a`, the public lower end of every score's range.
      upper: :math:`b > a`.

    Returns:
      ``Release(value, SelectionInfo)``; ``value`` is the int32 selected index and
      ``info.scale`` is :math:`\\sigma`.

    Raises:
      ValueError: for non-positive ``sigma``, ``lower >= upper``, ``sensitivity``
        outside ``(0, upper - lower]``, scores outside ``[lower, upper]``,
        non-finite scores, fewer than two candidates, or a batch of keys (use ``jax.vmap``).
      TypeError: for wrongly typed arguments, or traced privacy parameters.

    Examples:
      >>> import jax
      >>> from gpuprivacy import mechanisms
      >>> release = mechanisms.gaussian_report_noisy_max(jax.random.key(0), [0.1, 0.9, 0.2], sigma=0.05,
      ...                                                sensitivity=0.01, lower=0.0, upper=1.0)
      >>> int(release.value)
      1

    References:
      Lebensold, Precup & Balle, `On the Privacy of Selection Mechanisms with
      Gaussian Noise <https://arxiv.org/abs/2402.06137>`_, AISTATS 2024
      (arXiv v2), Theorem 8 = Theorem 12, eq. (1); App. A.1 (worst-case pair).
    """
    where = "gaussian_report_noisy_max"
    require_x64(where)
    key = check_key(key)
    scores = check_scores(scores)
    sigma = _check_sigma("sigma", sigma, where)
    sensitivity, lower, upper = _check_bounded_class(sensitivity, lower, upper, where)
    _check_num_candidates(scores.shape[0])
    _check_in_range(scores, "scores", lower, upper)
    selected, info = _gaussian_noisy_argmax(key, scores, jnp.asarray(sigma, jnp.float64),
                                            jnp.asarray(lower, jnp.float64), jnp.asarray(upper, jnp.float64))
    return Release(selected, info)


def gaussian_report_noisy_max_guarantee(*, sigma: float, num_candidates: int, sensitivity: float, lower: float,
                                        upper: float) -> PureDP:
    """The guarantee of :func:`gaussian_report_noisy_max`: pure :math:`\\varepsilon`-DP (Theorem 8).

    :math:`\\varepsilon` = :func:`gpuprivacy.accounting.gaussian_rnm_epsilon`
    ``(sigma, num_candidates, sensitivity, lower, upper)`` (an upper bound on
    the log of eq. (1)'s ratio). Depends on :math:`c/\\sigma` as well as
    :math:`\\Delta/\\sigma`, and grows without bound as :math:`c \\to \\infty`.

    Examples:
      >>> from gpuprivacy import mechanisms
      >>> guarantee = mechanisms.gaussian_report_noisy_max_guarantee(sigma=0.3, num_candidates=2,
      ...                                                            sensitivity=0.01, lower=0.0, upper=1.0)
      >>> round(guarantee.epsilon, 8)
      0.12594214
    """
    where = "gaussian_report_noisy_max_guarantee"
    sigma = _check_sigma("sigma", sigma, where)
    sensitivity, lower, upper = _check_bounded_class(sensitivity, lower, upper, where)
    num_candidates = _check_num_candidates(num_candidates)
    with jax.ensure_compile_time_eval():  # callable under a trace, like the mechanisms' tables
        return PureDP(gaussian_rnm_epsilon(sigma, num_candidates, sensitivity, lower, upper))


# ---------------------------------------------------------------------------------------------
# Laplace report noisy max with its two calibrations (spec 004, Sec. 3.7 and 4.7; pitfall 7.9).


def _laplace_scale(epsilon, sensitivity, num_candidates, calibration):
    multiplier = 2 if calibration == "standard" else num_candidates
    return divide_up(sensitivity, epsilon, multiplier=multiplier)


def laplace_report_noisy_max(key: Key, scores: Scores, *, epsilon: float, sensitivity: float = 1.0,
                             calibration: str = "standard") -> Release:
    """Laplace report noisy max with a named calibration (the two baselines of spec 004, 4.7).

    .. math:: M(x) = \\arg\\max_i\\; q_i(x) + b\\,L_i, \\qquad L_i \\sim \\mathrm{Lap}(1), \\qquad
              b = \\begin{cases} 2\\Delta/\\varepsilon & \\texttt{"standard"} \\\\
                                 d\\,\\Delta/\\varepsilon & \\texttt{"post\\_processing"} \\end{cases}

    * ``"standard"``: report noisy max (Dwork & Roth 2014, Claim 3.9, with the
      factor 2 for scores that may move in opposite directions); identical,
      bit for bit, to ``report_noisy_max(..., noise="laplace")`` with the same key.
    * ``"post_processing"``: the Laplace mechanism on the whole score vector
      (:math:`\\ell_1` sensitivity :math:`d\\Delta`) followed by an argmax.
      Much noisier for :math:`d > 2`; this is the calibration under which
      Lebensold et al.'s Fig. 16 shows Gaussian RNM winning (spec 004, 7.9).

    Both are :math:`\\varepsilon`-DP. Idealized numerics (float64 Laplace samples).

    Args:
      key: a single PRNG key.
      scores: float ``[num_candidates]``, finite.
      epsilon: > 0.
      sensitivity: :math:`\\Delta > 0`, a bound on each score's change.
      calibration: ``"standard"`` or ``"post_processing"``.

    Returns:
      ``Release(value, SelectionInfo)``; ``value`` is the int32 selected index.

    Raises:
      ValueError: for out-of-range parameters, an unknown calibration, non-1-D,
        empty or non-finite scores, or a batch of keys (use ``jax.vmap``).
      TypeError: for wrongly typed arguments.

    Examples:
      >>> import jax
      >>> from gpuprivacy import mechanisms
      >>> release = mechanisms.laplace_report_noisy_max(jax.random.key(0), [0.0, 30.0, 1.0], epsilon=1.0,
      ...                                               calibration="post_processing")
      >>> int(release.value), float(release.info.scale)
      (1, 3.0)

    References:
      Dwork & Roth, The Algorithmic Foundations of Differential Privacy, 2014, Claim 3.9 and Sec. 3.3;
      Lebensold, Precup & Balle (arXiv 2402.06137v2), App. B.3 and Fig. 16.
    """
    calibration = check_choice("calibration", calibration, LAPLACE_CALIBRATIONS)
    key, scores, _ = _check_selection(key, scores, epsilon, sensitivity, False)
    scale = jnp.asarray(_laplace_scale(epsilon, sensitivity, scores.shape[0], calibration), jnp.float64)
    selected, info = _noisy_argmax(key, scores, scale, noise="laplace")
    return Release(selected, info)


def laplace_report_noisy_max_guarantee(*, epsilon: float, sensitivity: float = 1.0,
                                       calibration: str = "standard") -> PureDP:
    """The guarantee of :func:`laplace_report_noisy_max`: :math:`\\varepsilon`-DP under either calibration."""
    check_choice("calibration", calibration, LAPLACE_CALIBRATIONS)
    check_positive("sensitivity", sensitivity)
    return PureDP(check_epsilon(epsilon))


# ---------------------------------------------------------------------------------------------
# Gaussian above threshold with ex-post accounting (spec 004, Sec. 3.3 and 4.2).


class GaussianAboveThresholdInfo(NamedTuple):
    """Side information of :func:`gaussian_above_threshold`.

    Attributes:
      sigma_threshold: :math:`\\sigma_X` (public).
      sigma_query: :math:`\\sigma_Z` (public).
      epsilon_post: float64, the ex-post epsilon of the released value: :math:`\\varepsilon^{\\mathrm{post}}(t)`
        for a stopping time :math:`t \\ge 1` and :math:`\\varepsilon^{\\bot}(k)` for value 0 on a stream of
        length :math:`k` (a function of the release and public parameters).
      nonprivate_true_stopping_time: int32, 1-based index of the first query with ``q_t >= threshold``
        without noise, or 0 (NOT private).
    """

    sigma_threshold: Array
    sigma_query: Array
    epsilon_post: Array
    nonprivate_true_stopping_time: Array


# Tables are requested for at least this many stopping times, rounded up to a power of two, and sliced:
# the accounting compiles one kernel per table length, so a few lengths serve every stream.
_MIN_TABLE_LENGTH = 16


@functools.lru_cache(maxsize=256)
def _above_threshold_tables(num_queries, threshold, sigma_threshold, sigma_query, sensitivity, lower,
                            upper) -> tuple[np.ndarray, np.ndarray]:
    """(eps_post[1..k], eps_bot[1..k]) as read-only float64 arrays (computed once per configuration).

    Arguments after ``num_queries`` are in the order of
    :func:`_check_above_threshold_parameters`' result.
    """
    length = max(_MIN_TABLE_LENGTH, 1 << (num_queries - 1).bit_length())
    # The public wrappers may run under a caller's jax.jit / vmap trace (data traced, parameters concrete):
    # evaluate the accounting's own JAX code eagerly, never as part of the caller's trace.
    with jax.ensure_compile_time_eval():
        post, bottom = gaussian_at_epsilon_table(length, sigma_threshold, sigma_query, threshold, sensitivity,
                                                 lower, upper)
    post = np.array(post, dtype=np.float64)[:num_queries]
    bottom = np.array(bottom, dtype=np.float64)[:num_queries]
    if post.shape != (num_queries,) or bottom.shape != (num_queries,):
        raise RuntimeError(f"gaussian_at_epsilon_table returned shapes {post.shape}, {bottom.shape}; expected "
                           f"({length},) each.")  # pragma: no cover (accounting contract)
    post.setflags(write=False)
    bottom.setflags(write=False)
    return post, bottom


def _check_above_threshold_parameters(threshold, sigma_threshold, sigma_query, sensitivity, lower, upper, where):
    concrete("threshold", threshold, where)
    threshold = check_finite_real("threshold", threshold)
    sigma_threshold = _check_sigma("sigma_threshold", sigma_threshold, where)
    sigma_query = _check_sigma("sigma_query", sigma_query, where)
    sensitivity, lower, upper = _check_bounded_class(sensitivity, lower, upper, where)
    return threshold, sigma_threshold, sigma_query, sensitivity, lower, upper


def _stopping_time(above: Array) -> Array:
    return jnp.where(jnp.any(above), jnp.argmax(above) + 1, NO_STOPPING_TIME).astype(jnp.int32)


@jax.jit
def _gaussian_above_threshold(key: Key, queries: Array, threshold: Array, sigma_threshold: Array,
                              sigma_query: Array, lower: Array, upper: Array,
                              epsilon_by_value: Array) -> tuple[Array, Array, Array]:
    queries = _clamp(queries, lower, upper)
    # One draw: the first sample is the threshold noise X, the rest Z_1..Z_k.
    unit = unit_noise(_noise.gaussian, key, (queries.shape[0] + 1,))
    noisy_threshold = threshold + sigma_threshold * unit[0]
    stopping = _stopping_time(queries + sigma_query * unit[1:] >= noisy_threshold)
    return stopping, epsilon_by_value[stopping], _stopping_time(queries >= threshold)


def gaussian_above_threshold(key: Key, queries: Array, *, threshold: float, sigma_threshold: float,
                             sigma_query: float, sensitivity: float, lower: float, upper: float) -> Release:
    """Gaussian above threshold with ex-post accounting: the first query above a noisy threshold.

    Zhu & Wang (2020) / Lebensold et al. Algorithm 1 = Algorithm 3:

    .. math:: \\hat\\rho = \\rho + X,\\ X \\sim \\mathcal N(0, \\sigma_X^2); \\qquad
              \\hat q_t = q_t(x) + Z_t,\\ Z_t \\sim \\mathcal N(0, \\sigma_Z^2); \\qquad
              M(x) = \\min\\{t \\ge 1 : \\hat q_t \\ge \\hat\\rho\\},

    and :math:`M(x) = 0` if no query of the stream passes (the stream ended
    after :math:`k` bottoms). Values are 1-based stopping times; ``0``
    (``NO_STOPPING_TIME``) is the all-bottom output :math:`\\bot^k`.

    Privacy (pure *ex-post* DP): the privacy loss of output :math:`t` is at most
    (Theorem 10 = Theorem 17, eq. (25) with the spec's corrections: log of the
    ratio, :math:`\\rho - b`, and :math:`-\\sigma_X x` in the last factor)

    .. math:: \\varepsilon^{\\mathrm{post}}(t) = \\log
        \\frac{\\mathbb E_x\\big[\\Phi(\\tfrac{\\sigma_X x + \\rho - b + \\Delta}{\\sigma_Z})^{t-1}
                                 \\Phi(\\tfrac{-\\sigma_X x - \\rho + a + \\Delta}{\\sigma_Z})\\big]}
             {\\mathbb E_x\\big[\\Phi(\\tfrac{\\sigma_X x + \\rho - b}{\\sigma_Z})^{t-1}
                                 \\Phi(\\tfrac{-\\sigma_X x - \\rho + a}{\\sigma_Z})\\big]},

    and of output 0 at most :math:`\\varepsilon^{\\bot}(k)` (spec 004, Sec. 3.3
    [D]). ``info.epsilon_post`` is that value for the released output, read
    from a table computed in Python from the public parameters
    (:func:`gpuprivacy.accounting.gaussian_at_epsilon_table`) before the
    kernel runs. The ex-ante guarantee for a stream of length :math:`k` is
    :func:`gaussian_above_threshold_guarantee`. Idealized numerics (float64
    Gaussian samples).

    The queries are known in advance (a vector), so all noise is drawn at
    once; noise after the stopping time is unused, which does not change the
    output law. Queries must lie in ``[lower, upper]`` (checked here; inside
    the kernel NaN becomes ``lower`` and values are clamped).

    Args:
      key: a single PRNG key.
      queries: float ``[num_queries]`` of exact query values in ``[lower, upper]``, in order.
      threshold: the public threshold :math:`\\rho`, finite.
      sigma_threshold: :math:`\\sigma_X > 0`, the threshold noise.
      sigma_query: :math:`\\sigma_Z > 0`, the query noise.
      sensitivity: :math:`\\Delta \\in (0, \\text{upper} - \\text{lower}]`, each query's sensitivity.
      lower: :math:`a`, the public lower end of every query's range.
      upper: :math:`b > a`.

    Returns:
      ``Release(value, GaussianAboveThresholdInfo)``; ``value`` is an int32 in ``0..num_queries``.

    Raises:
      ValueError: for non-positive noise scales, ``lower >= upper``, ``sensitivity``
        outside ``(0, upper - lower]``, queries outside ``[lower, upper]`` or non-finite,
        or a batch of keys (use ``jax.vmap``).
      TypeError: for wrongly typed arguments, or traced privacy parameters.

    Examples:
      >>> import jax
      >>> from gpuprivacy import mechanisms
      >>> release = mechanisms.gaussian_above_threshold(
      ...     jax.random.key(0), [0.0, 0.1, 1.0, 0.0], threshold=0.5, sigma_threshold=0.02,
      ...     sigma_query=0.04, sensitivity=1e-3, lower=0.0, upper=1.0)
      >>> int(release.value)
      3
      >>> float(release.info.epsilon_post) == mechanisms.gaussian_above_threshold_epsilon_post(
      ...     3, threshold=0.5, sigma_threshold=0.02, sigma_query=0.04, sensitivity=1e-3, lower=0.0,
      ...     upper=1.0, num_queries=4)
      True

    References:
      Lebensold, Precup & Balle, `On the Privacy of Selection Mechanisms with
      Gaussian Noise <https://arxiv.org/abs/2402.06137>`_, AISTATS 2024
      (arXiv v2), Algorithm 3, Theorem 17, Lemma 18 (corrections: spec 004, Sec. 3.3);
      Zhu & Wang, `Improving Sparse Vector Technique with Renyi Differential Privacy
      <https://proceedings.neurips.cc/paper/2020/hash/e9bf14a419d77534105016f5ec122d62-Abstract.html>`_,
      NeurIPS 2020.
    """
    where = "gaussian_above_threshold"
    require_x64(where)
    key = check_key(key)
    queries = check_scores(queries, "queries")
    threshold, sigma_threshold, sigma_query, sensitivity, lower, upper = _check_above_threshold_parameters(
        threshold, sigma_threshold, sigma_query, sensitivity, lower, upper, where)
    _check_in_range(queries, "queries", lower, upper)
    num_queries = queries.shape[0]
    post, bottom = _above_threshold_tables(num_queries, threshold, sigma_threshold, sigma_query, sensitivity,
                                           lower, upper)
    epsilon_by_value = jnp.asarray(np.concatenate([bottom[-1:], post]), jnp.float64)
    f64 = functools.partial(jnp.asarray, dtype=jnp.float64)
    stopping, epsilon_post, true_stopping = _gaussian_above_threshold(
        key, queries, f64(threshold), f64(sigma_threshold), f64(sigma_query), f64(lower), f64(upper),
        epsilon_by_value)
    return Release(stopping, GaussianAboveThresholdInfo(
        sigma_threshold=f64(sigma_threshold), sigma_query=f64(sigma_query), epsilon_post=epsilon_post,
        nonprivate_true_stopping_time=true_stopping))


def gaussian_above_threshold_guarantee(*, threshold: float, sigma_threshold: float, sigma_query: float,
                                       sensitivity: float, lower: float, upper: float, num_queries: int) -> PureDP:
    """The capped ex-ante guarantee of :func:`gaussian_above_threshold` on a stream of ``num_queries``.

    The outputs are :math:`t \\in \\{1, \\dots, k\\}` and :math:`0 = \\bot^k`, so
    the mechanism is pure :math:`\\varepsilon`-DP with (spec 004, Sec. 3.3 [D])

    .. math:: \\varepsilon = \\max\\Big(\\max_{t \\le k} \\varepsilon^{\\mathrm{post}}(t),\\;
              \\varepsilon^{\\bot}(k)\\Big),

    the largest entry of the table (no monotonicity in :math:`t` is assumed).
    This grows (slowly, without bound) with :math:`k`: Gaussian above
    threshold has no ex-ante pure DP guarantee without a cap. For the cost of
    one observed output use :func:`gaussian_above_threshold_epsilon_post`.

    Examples:
      >>> from gpuprivacy import mechanisms
      >>> guarantee = mechanisms.gaussian_above_threshold_guarantee(
      ...     threshold=0.5, sigma_threshold=0.15, sigma_query=0.15 * 3 ** 0.5, sensitivity=1e-3,
      ...     lower=0.0, upper=1.0, num_queries=5)
      >>> guarantee.epsilon == mechanisms.gaussian_above_threshold_epsilon_post(
      ...     5, threshold=0.5, sigma_threshold=0.15, sigma_query=0.15 * 3 ** 0.5, sensitivity=1e-3,
      ...     lower=0.0, upper=1.0, num_queries=5)
      True
    """
    where = "gaussian_above_threshold_guarantee"
    parameters = _check_above_threshold_parameters(threshold, sigma_threshold, sigma_query, sensitivity, lower,
                                                   upper, where)
    num_queries = check_int("num_queries", num_queries, minimum=1)
    post, bottom = _above_threshold_tables(num_queries, *parameters)
    return PureDP(float(max(np.max(post), bottom[-1])))


def gaussian_above_threshold_epsilon_post(value, *, threshold: float, sigma_threshold: float, sigma_query: float,
                                          sensitivity: float, lower: float, upper: float, num_queries: int):
    """The ex-post epsilon of an output of :func:`gaussian_above_threshold` (Theorem 17, corrected).

    ``value`` :math:`t \\in \\{1, \\dots, k\\}` costs :math:`\\varepsilon^{\\mathrm{post}}(t)`
    and ``value`` 0 costs :math:`\\varepsilon^{\\bot}(k)`, :math:`k` = ``num_queries``.
    This equals ``info.epsilon_post`` of the release.

    Args:
      value: an int, or an integer array, of outputs in ``0..num_queries``.
      num_queries: the length :math:`k \\ge 1` of the stream the output came from.
      (other arguments as in :func:`gaussian_above_threshold`.)

    Returns:
      A Python float for a scalar ``value``, else a float64 NumPy array of the same shape.

    Raises:
      ValueError: a value outside ``0..num_queries`` (a stopping time t < 1
        other than the 0 of "no query passed"), or bad parameters.
    """
    where = "gaussian_above_threshold_epsilon_post"
    parameters = _check_above_threshold_parameters(threshold, sigma_threshold, sigma_query, sensitivity, lower,
                                                   upper, where)
    num_queries = check_int("num_queries", num_queries, minimum=1)
    arr = np.asarray(value)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"value must be an integer stopping time (or an integer array), got {value!r}.")
    if np.any(arr < 0) or np.any(arr > num_queries):
        raise ValueError(f"value must be a stopping time in 1..num_queries={num_queries}, or 0 for 'no query "
                         f"passed'; got {value!r}.")
    post, bottom = _above_threshold_tables(num_queries, *parameters)
    table = np.concatenate([bottom[-1:], post])
    out = table[arr]
    return float(out) if out.ndim == 0 else out
