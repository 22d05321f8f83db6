"""Gaussian above threshold under bounded queries: pure ex-post DP (Lebensold et al. 2024).

Releasing stopping time :math:`t` costs :math:`\\varepsilon^{\\mathrm{post}}(t)` (Theorem 10 =
Theorem 17, eq. (25)), which grows with :math:`t`; a stream of known length :math:`k` makes it
pure ex-ante DP with the largest table entry (our capped bound, not in the paper). The fully adaptive
Gaussian sparse vector (:mod:`gpuprivacy.mechanisms._gaussian_selection._sparse_vector`) runs
it again and again. The epsilons are computed in Python from public parameters
(:mod:`gpuprivacy.accounting`); kernels only gather precomputed table entries.

Validation and totality: :mod:`._bounded_queries`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import noise as _noise
from gpuprivacy._checks import check_finite_real, check_int, check_key
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Array, Key
from gpuprivacy.accounting import PureDP, gaussian_at_epsilon_table
from gpuprivacy.mechanisms._common import check_scores, concrete, unit_noise
from gpuprivacy.mechanisms._gaussian_selection._bounded_queries import _check_bounded_class, _check_in_range, _check_sigma, _clamp
from gpuprivacy.mechanisms._release import Release, stated_guarantee


NO_STOPPING_TIME = 0
"""The value of :func:`gaussian_above_threshold` when no query passes the noisy threshold."""


# ---------------------------------------------------------------------------------------------
# Gaussian above threshold with ex-post accounting (Lebensold et al. 2024, Algorithm 1 = 3, Thm 10 = 17).


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
                             sigma_query: float, sensitivity: float, lower: float, upper: float,
                             clip: bool = False) -> Release:
    """Gaussian above threshold with ex-post accounting: the first query above a noisy threshold.

    Zhu & Wang (2020) / Lebensold et al. Algorithm 1 = Algorithm 3:

    .. math:: \\hat\\rho = \\rho + X,\\ X \\sim \\mathcal N(0, \\sigma_X^2); \\qquad
              \\hat q_t = q_t(x) + Z_t,\\ Z_t \\sim \\mathcal N(0, \\sigma_Z^2); \\qquad
              M(x) = \\min\\{t \\ge 1 : \\hat q_t \\ge \\hat\\rho\\},

    and :math:`M(x) = 0` if no query of the stream passes (the stream ended
    after :math:`k` bottoms). Values are 1-based stopping times; ``0``
    (``NO_STOPPING_TIME``) is the all-bottom output :math:`\\bot^k`.

    Privacy (pure *ex-post* DP): the privacy loss of output :math:`t` is at most
    (Theorem 10 = Theorem 17, eq. (25) with the corrections of docs/errata.md: log of the
    ratio, :math:`\\rho - b`, and :math:`-\\sigma_X x` in the last factor)

    .. math:: \\varepsilon^{\\mathrm{post}}(t) = \\log
        \\frac{\\mathbb E_x\\big[\\Phi(\\tfrac{\\sigma_X x + \\rho - b + \\Delta}{\\sigma_Z})^{t-1}
                                 \\Phi(\\tfrac{-\\sigma_X x - \\rho + a + \\Delta}{\\sigma_Z})\\big]}
             {\\mathbb E_x\\big[\\Phi(\\tfrac{\\sigma_X x + \\rho - b}{\\sigma_Z})^{t-1}
                                 \\Phi(\\tfrac{-\\sigma_X x - \\rho + a}{\\sigma_Z})\\big]},

    and of output 0 at most :math:`\\varepsilon^{\\bot}(k)` (our bound for
    the all-bottom output, not in the paper). ``info.epsilon_post`` is that value for the released output, read
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
      clip: clamp queries outside ``[lower, upper]`` (+-inf included) to it, and NaN to ``lower``, instead of
        raising. Needed for traced queries (under ``jax.jit``/``jax.vmap``/``run_trials(..., batched_args=True)``),
        which are refused otherwise because their values cannot be checked while tracing.

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
      (arXiv v2), Algorithm 3, Theorem 17, Lemma 18 (corrections: see docs/errata.md);
      Zhu & Wang, `Improving Sparse Vector Technique with Renyi Differential Privacy
      <https://proceedings.neurips.cc/paper/2020/hash/e9bf14a419d77534105016f5ec122d62-Abstract.html>`_,
      NeurIPS 2020.
    """
    where = "gaussian_above_threshold"
    require_x64(where)
    key = check_key(key)
    queries = check_scores(queries, "queries", clip=clip, what="NaN, inf or values outside [lower, upper]")
    threshold, sigma_threshold, sigma_query, sensitivity, lower, upper = _check_above_threshold_parameters(
        threshold, sigma_threshold, sigma_query, sensitivity, lower, upper, where)
    _check_in_range(queries, "queries", lower, upper, clip)
    num_queries = queries.shape[0]
    guarantee = stated_guarantee(gaussian_above_threshold_guarantee, threshold=threshold,
                                 sigma_threshold=sigma_threshold, sigma_query=sigma_query, sensitivity=sensitivity,
                                 lower=lower, upper=upper, num_queries=num_queries)
    post, bottom = _above_threshold_tables(num_queries, threshold, sigma_threshold, sigma_query, sensitivity,
                                           lower, upper)
    epsilon_by_value = jnp.asarray(np.concatenate([bottom[-1:], post]), jnp.float64)
    f64 = functools.partial(jnp.asarray, dtype=jnp.float64)
    stopping, epsilon_post, true_stopping = _gaussian_above_threshold(
        key, queries, f64(threshold), f64(sigma_threshold), f64(sigma_query), f64(lower), f64(upper),
        epsilon_by_value)
    return Release(stopping, GaussianAboveThresholdInfo(
        sigma_threshold=f64(sigma_threshold), sigma_query=f64(sigma_query), epsilon_post=epsilon_post,
        nonprivate_true_stopping_time=true_stopping), guarantee)


def gaussian_above_threshold_guarantee(*, threshold: float, sigma_threshold: float, sigma_query: float,
                                       sensitivity: float, lower: float, upper: float, num_queries: int) -> PureDP:
    """The capped ex-ante guarantee of :func:`gaussian_above_threshold` on a stream of ``num_queries``.

    The outputs are :math:`t \\in \\{1, \\dots, k\\}` and :math:`0 = \\bot^k`, so
    the mechanism is pure :math:`\\varepsilon`-DP with (our capped bound, not in the paper)

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
