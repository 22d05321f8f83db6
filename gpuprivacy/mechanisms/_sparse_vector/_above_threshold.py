"""AboveThreshold and the sparse vector technique (Lyu, Su & Li 2017, Alg. 1).

The queries are known in advance here (a vector of values), so the whole run
is one vectorised pass: all noise is drawn up front and a cumulative count
finds where the algorithm halts. Answers after the halt are never produced
by Alg. 1; they are reported as False and ``info.halt_index`` says where the
run stopped. Drawing the unused noise changes nothing in the output law.

Budget split (Lyu, Su & Li 2017, Alg. 1): :math:`\\varepsilon_1 = \\varepsilon/2`
for the threshold and :math:`\\varepsilon_2 = \\varepsilon - \\varepsilon_1`
for the queries, with cutoff :math:`c` (``max_positives``):

.. math:: \\rho \\sim \\mathrm{Lap}(\\Delta/\\varepsilon_1), \\qquad
          \\nu_i \\sim \\mathrm{Lap}(2c\\Delta/\\varepsilon_2)
          \\ \\big(\\mathrm{Lap}(c\\Delta/\\varepsilon_2) \\text{ for monotonic queries}\\big),

and answer :math:`\\top` for query :math:`i` iff
:math:`q_i(x) + \\nu_i \\ge T + \\rho`. The threshold noise :math:`\\rho` is
drawn once and not refreshed after a :math:`\\top`.

Totality: kernels map NaN queries to ``-finfo(float64).max/4`` (always
answered False) and clamp infinities; the public functions reject non-finite
queries first.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from gpuprivacy import noise as _noise
from gpuprivacy._checks import (
    all_ok,
    check_epsilon,
    check_finite_real,
    check_int,
    check_key,
    check_positive,
    epsilon_ok,
    fail_closed,
    finite_ok,
    positive_ok,
)
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Array, Key
from gpuprivacy.accounting import PureDP
from gpuprivacy._rounding import divide_up
from gpuprivacy.mechanisms._common import (
    check_bool,
    check_scores,
    sanitize,
    unit_noise,
)
from gpuprivacy.mechanisms._release import Release, stated_guarantee

NO_QUERY_ABOVE = -1
"""The ⊥ encoding of :func:`above_threshold`: no query was found above the threshold."""


class AboveThresholdInfo(NamedTuple):
    """Side information of :func:`above_threshold`.

    Attributes:
      threshold_scale: Laplace scale of the threshold noise (public).
      query_scale: Laplace scale of each query's noise (public).
      nonprivate_true_first_index: int32 index of the first query with
        ``q_i >= threshold`` without noise, or -1 (NOT private).
      valid: False when a traced epsilon, sensitivity or threshold was invalid; the release is then -2,
        whatever the queries (fail closed, docs/fail_closed.md).
    """

    threshold_scale: Array
    query_scale: Array
    nonprivate_true_first_index: Array
    valid: Array = True


class SparseVectorInfo(NamedTuple):
    """Side information of :func:`sparse_vector`.

    Attributes:
      threshold_scale: Laplace scale of the threshold noise (public).
      query_scale: Laplace scale of each query's noise (public).
      num_positives: int32 number of True answers, <= max_positives (a function of the release).
      halt_index: int32 index of the query that gave the ``max_positives``-th
        True answer, after which the run stopped; -1 if it never stopped
        (a function of the release).
      nonprivate_true_answers: bool ``[num_queries]``, ``q_i >= threshold``
        without noise (NOT private).
      valid: False when a traced epsilon, sensitivity or threshold was invalid; every answer is then
        False, whatever the queries (fail closed, docs/fail_closed.md).
    """

    threshold_scale: Array
    query_scale: Array
    num_positives: Array
    halt_index: Array
    nonprivate_true_answers: Array
    valid: Array = True


@jax.jit
def _sparse_vector(key: Key, queries: Array, threshold: Array, threshold_scale: Array, query_scale: Array,
                   max_positives: Array) -> tuple[Array, Array, Array, Array, Array]:
    queries = sanitize(queries)
    # One draw of k + 1 standard Laplace samples: the first is rho, the rest nu_1..nu_k.
    unit = unit_noise(_noise.laplace, key, (queries.shape[0] + 1,))
    noisy_threshold = threshold + threshold_scale * unit[0]
    above = queries + query_scale * unit[1:] >= noisy_threshold
    count = jnp.cumsum(above, dtype=jnp.int32)
    answers = above & (count <= max_positives)
    halted = count[-1] >= max_positives
    halt_index = jnp.where(halted, jnp.argmax(count >= max_positives), NO_QUERY_ABOVE).astype(jnp.int32)
    true_answers = queries >= threshold
    true_first = jnp.where(jnp.any(true_answers), jnp.argmax(true_answers), NO_QUERY_ABOVE).astype(jnp.int32)
    return answers, halt_index, jnp.minimum(count[-1], max_positives), true_answers, true_first


def _check_sparse_vector(key, queries, threshold, epsilon, sensitivity, monotonic, max_positives, clip=False):
    """The validated ``(key, queries, threshold, epsilon, sensitivity, monotonic, max_positives)``."""
    require_x64("sparse vector")
    key = check_key(key)
    queries = check_scores(queries, "queries", clip=clip)
    threshold = check_finite_real("threshold", threshold)
    epsilon = check_epsilon(epsilon)
    sensitivity = check_positive("sensitivity", sensitivity)
    monotonic = check_bool("monotonic", monotonic)
    max_positives = check_int("max_positives", max_positives, minimum=1)
    return key, queries, threshold, epsilon, sensitivity, monotonic, max_positives


def _sparse_vector_scales(threshold, epsilon, sensitivity, monotonic, max_positives):
    """The kernel's ``(threshold, threshold_scale, query_scale, cutoff, ok)`` from validated parameters."""
    # Traced parameters skipped the checks: checked by value, the release is withheld if they fail.
    ok = all_ok(epsilon_ok(epsilon), positive_ok("sensitivity", sensitivity), finite_ok("threshold", threshold))
    threshold = jnp.asarray(threshold, jnp.float64)
    # epsilon_1 = epsilon / 2: scale Delta / epsilon_1 = 2 Delta / epsilon.
    threshold_scale = divide_up(sensitivity, epsilon, multiplier=2)
    # epsilon_2 = epsilon / 2: scale 2 c Delta / epsilon_2 = 4 c Delta / epsilon (half if monotonic).
    query_scale = divide_up(sensitivity, epsilon, multiplier=(2 if monotonic else 4) * max_positives)
    return (threshold, jnp.asarray(threshold_scale, jnp.float64), jnp.asarray(query_scale, jnp.float64),
            jnp.asarray(max_positives, jnp.int32), ok)


def above_threshold(key: Key, queries: Array, *, threshold: float, epsilon: float, sensitivity: float = 1.0,
                    monotonic: bool = False, clip: bool = False) -> Release:
    """AboveThreshold: the index of the first query found above a noisy threshold.

    Lyu, Su & Li (2017), Alg. 1 with cutoff :math:`c = 1`:

    .. math:: \\rho \\sim \\mathrm{Lap}(2\\Delta/\\varepsilon), \\quad
              \\nu_i \\sim \\mathrm{Lap}(4\\Delta/\\varepsilon)
              \\ \\big(\\mathrm{Lap}(2\\Delta/\\varepsilon) \\text{ if monotonic}\\big), \\quad
              M(x) = \\min\\{i : q_i(x) + \\nu_i \\ge T + \\rho\\},

    and :math:`M(x) = -1` (the ⊥ encoding, ``NO_QUERY_ABOVE``) if no query
    passes. This is :math:`\\varepsilon`-DP when each query has sensitivity
    :math:`\\Delta`. Idealized numerics (float64 Laplace samples).

    Args:
      key: a single PRNG key.
      queries: float ``[num_queries]`` of exact query values, finite, in the
        order they are asked.
      threshold: the public threshold :math:`T`, finite.
      epsilon: > 0.
      sensitivity: :math:`\\Delta > 0`, a bound on each query's sensitivity.
      monotonic: whether all queries move in the same direction between
        neighbours (halves the query noise).
      clip: map NaN and +-inf queries to public values instead of raising: NaN becomes the lowest
        representable value (never above the threshold), +-inf the largest magnitude. Needed for traced
        queries (under ``jax.jit``/``jax.vmap``/``run_trials(..., batched_args=True)``), which are refused
        otherwise because their values cannot be checked while tracing. Finite queries are untouched.

    Returns:
      ``Release(value, AboveThresholdInfo)``; ``value`` is an int32 index in
      ``[0, num_queries)``, or -1.

    Raises:
      ValueError: for out-of-range parameters, non-1-D, empty or non-finite
        queries, or a batch of keys (use ``jax.vmap``).
      TypeError: for wrongly typed arguments.

    Examples:
      >>> import jax
      >>> from gpuprivacy import mechanisms
      >>> release = mechanisms.above_threshold(jax.random.key(0), [0.0, 0.0, 1e3, 0.0],
      ...                                      threshold=500.0, epsilon=1.0)
      >>> int(release.value)
      2

    References:
      Lyu, Su & Li, `Understanding the Sparse Vector Technique for Differential
      Privacy <https://arxiv.org/abs/1603.01699>`_, PVLDB 10(6), 2017, Alg. 1 and Thm 2;
      Dwork & Roth, The Algorithmic Foundations of Differential Privacy, 2014, Sec. 3.6.
    """
    key, queries, threshold, epsilon, sensitivity, monotonic, one = _check_sparse_vector(
        key, queries, threshold, epsilon, sensitivity, monotonic, 1, clip)
    # The threshold does not enter the guarantee (and is checked above), so a traced threshold keeps it stated.
    guarantee = stated_guarantee(above_threshold_guarantee, epsilon=epsilon, sensitivity=sensitivity,
                                 monotonic=monotonic)
    threshold, threshold_scale, query_scale, one, ok = _sparse_vector_scales(threshold, epsilon, sensitivity,
                                                                             monotonic, one)
    _, halt_index, _, _, true_first = _sparse_vector(key, queries, threshold, threshold_scale, query_scale, one)
    # -2, not -1: -1 is a real answer ("no query above the threshold").
    return Release(fail_closed(halt_index, ok, withheld=-2),
                   AboveThresholdInfo(threshold_scale=threshold_scale, query_scale=query_scale,
                                      nonprivate_true_first_index=true_first, valid=jnp.asarray(ok)), guarantee)


def above_threshold_guarantee(*, epsilon: float, threshold: float | None = None, sensitivity: float = 1.0,
                              monotonic: bool = False) -> PureDP:
    """The guarantee of :func:`above_threshold`: :math:`\\varepsilon`-DP (Lyu, Su & Li 2017, Thm 2).

    Accepts the mechanism's keyword arguments; ``threshold`` does not affect
    the guarantee and may be omitted.
    """
    if threshold is not None:
        check_finite_real("threshold", threshold)
    check_positive("sensitivity", sensitivity)
    check_bool("monotonic", monotonic)
    return PureDP(epsilon)


def sparse_vector(key: Key, queries: Array, *, threshold: float, epsilon: float, max_positives: int,
                  sensitivity: float = 1.0, monotonic: bool = False, clip: bool = False) -> Release:
    """The sparse vector technique: threshold answers that halt after ``max_positives`` positives.

    Lyu, Su & Li (2017), Alg. 1 with cutoff :math:`c` = ``max_positives``:

    .. math:: \\rho \\sim \\mathrm{Lap}(2\\Delta/\\varepsilon), \\quad
              \\nu_i \\sim \\mathrm{Lap}(4c\\Delta/\\varepsilon)
              \\ \\big(\\mathrm{Lap}(2c\\Delta/\\varepsilon) \\text{ if monotonic}\\big), \\quad
              a_i = [\\,q_i(x) + \\nu_i \\ge T + \\rho\\,],

    stopping right after the :math:`c`-th :math:`\\top`. This is
    :math:`\\varepsilon`-DP for any number of queries. Idealized numerics.

    Args:
      key: a single PRNG key.
      queries: float ``[num_queries]`` of exact query values, finite, in order.
      threshold: the public threshold :math:`T`, finite.
      epsilon: > 0.
      max_positives: the cutoff :math:`c \\ge 1`.
      sensitivity: :math:`\\Delta > 0`, a bound on each query's sensitivity.
      monotonic: whether all queries move in the same direction between neighbours.
      clip: map NaN and +-inf queries to public values instead of raising: NaN becomes the lowest
        representable value (never above the threshold), +-inf the largest magnitude. Needed for traced
        queries (under ``jax.jit``/``jax.vmap``/``run_trials(..., batched_args=True)``), which are refused
        otherwise because their values cannot be checked while tracing. Finite queries are untouched.

    Returns:
      ``Release(value, SparseVectorInfo)``; ``value`` is bool ``[num_queries]``:
      True for :math:`\\top`, False for :math:`\\bot` *and* for every query
      after the halt (``info.halt_index``). At most ``max_positives`` entries are True.

    Raises:
      ValueError: for out-of-range parameters, ``max_positives < 1``,
        non-1-D, empty or non-finite queries, or a batch of keys (use ``jax.vmap``).
      TypeError: for wrongly typed arguments, e.g. a non-integer ``max_positives``.

    Examples:
      >>> import jax
      >>> from gpuprivacy import mechanisms
      >>> release = mechanisms.sparse_vector(jax.random.key(0), [1e4, 0.0, 1e4, 1e4],
      ...                                    threshold=5e3, epsilon=1.0, max_positives=2)
      >>> release.value.tolist(), int(release.info.halt_index)
      ([True, False, True, False], 2)

    References:
      Lyu, Su & Li, `Understanding the Sparse Vector Technique for Differential
      Privacy <https://arxiv.org/abs/1603.01699>`_, PVLDB 10(6), 2017, Alg. 1 and Thm 2.
    """
    key, queries, threshold, epsilon, sensitivity, monotonic, max_positives = _check_sparse_vector(
        key, queries, threshold, epsilon, sensitivity, monotonic, max_positives, clip)
    # The threshold does not enter the guarantee (and is checked above), so a traced threshold keeps it stated.
    guarantee = stated_guarantee(sparse_vector_guarantee, epsilon=epsilon, max_positives=max_positives,
                                 sensitivity=sensitivity, monotonic=monotonic)
    threshold, threshold_scale, query_scale, cutoff, ok = _sparse_vector_scales(threshold, epsilon, sensitivity,
                                                                                monotonic, max_positives)
    answers, halt_index, num_positives, true_answers, _ = _sparse_vector(key, queries, threshold, threshold_scale,
                                                                      query_scale, cutoff)
    return Release(fail_closed(answers, ok), SparseVectorInfo(
        threshold_scale=threshold_scale, query_scale=query_scale, num_positives=fail_closed(num_positives, ok, 0),
        halt_index=fail_closed(halt_index, ok), nonprivate_true_answers=true_answers, valid=jnp.asarray(ok)),
        guarantee)


def sparse_vector_guarantee(*, epsilon: float, max_positives: int, threshold: float | None = None,
                            sensitivity: float = 1.0, monotonic: bool = False) -> PureDP:
    """The guarantee of :func:`sparse_vector`: :math:`\\varepsilon`-DP for any number of queries.

    Lyu, Su & Li (2017), Thm 2. Accepts the mechanism's keyword arguments;
    ``threshold`` does not affect the guarantee and may be omitted.
    """
    if threshold is not None:
        check_finite_real("threshold", threshold)
    check_int("max_positives", max_positives, minimum=1)
    check_positive("sensitivity", sensitivity)
    check_bool("monotonic", monotonic)
    return PureDP(epsilon)
