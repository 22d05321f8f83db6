"""The fully adaptive Gaussian sparse vector: Gaussian above threshold under a privacy filter.

Sec. 3.3 of Lebensold, Precup & Balle (AISTATS 2024, arXiv
2402.06137v2, Sec. 4.1, App. C and D). Runs of Gaussian above threshold
(:func:`gaussian_above_threshold`) follow each other along a stream, each
with fresh threshold noise, and a privacy filter decides before each run
whether it may start:

* :func:`gaussian_sparse_vector`: filtered self-reporting composition
  (Algorithm 4) with realised ex-post losses and the corrected, summable
  delta schedule of :mod:`gpuprivacy.mechanisms._gaussian_selection._filters`;
* :func:`gaussian_sparse_vector_whitehouse`: the baseline, the Whitehouse
  et al. filter over the runs' Zhu-Wang (epsilon, delta) bounds.

The whole stream is one ``lax.scan`` over time, vmapped over runs by the
caller; epsilons come from :mod:`gpuprivacy.accounting` (computed in Python
from public parameters, then gathered in the kernel). Queries must lie in
``[lower, upper]`` (checked; the kernel maps NaN to ``lower`` and clamps).
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import noise as _noise
from gpuprivacy._checks import (all_ok, check_delta, check_epsilon, check_int, check_key, epsilon_ok, is_tracer,
                                traced_ok)
from gpuprivacy._config import require_x64
from gpuprivacy._rounding import round_up
from gpuprivacy._typing import Array, Key
from gpuprivacy.accounting import ApproxDP, zhu_wang_at_epsilon
from gpuprivacy.mechanisms._common import check_bool, check_choice, check_scores, unit_noise, concrete
from gpuprivacy.mechanisms._gaussian_selection._filters import (
    DELTA_SCHEDULES,
    PaperModeWarning,
    self_reporting_filter_admit,
    self_reporting_filter_charge,
    self_reporting_filter_deltas,
    self_reporting_filter_init,
    whitehouse_filter_guarantee,
    whitehouse_filter_init,
    whitehouse_filter_spend,
    whitehouse_filter_step,
)
from gpuprivacy.mechanisms._gaussian_selection._above_threshold import (
    _above_threshold_tables,
    _check_above_threshold_parameters,
)
from gpuprivacy.mechanisms._gaussian_selection._bounded_queries import _check_in_range, _clamp
from gpuprivacy.mechanisms._release import Release, stated_guarantee, withheld_unless

ZHU_WANG_CONVERSIONS = ("markov", "bbghs")
_SQRT3 = math.sqrt(3.0)


class GaussianSparseVectorInfo(NamedTuple):
    """Side information of :func:`gaussian_sparse_vector` and :func:`gaussian_sparse_vector_whitehouse`.

    Every field except the ``nonprivate_`` one is a function of the released
    bits and public parameters (the halting reason is part of
    the output).

    Attributes:
      sigma_threshold, sigma_query: the noise scales (public).
      spent: float64, the filter's final spend. FSRC: the sum of the realised ex-post
        epsilons of the above-threshold runs (:math:`\\varepsilon^{\\mathrm{post}}(t_j)` per top, plus
        :math:`\\varepsilon^{\\bot}(L)` for a trailing run that met the end of the stream after
        :math:`L` bottoms). Whitehouse: :math:`\\sqrt{2\\log(1/\\delta')\\sum_j \\varepsilon_j^2}
        + \\frac12\\sum_j \\varepsilon_j^2` over the runs admitted.
      spent_by_step: float64 ``[num_queries]``, the spend after each step (non-decreasing).
      num_runs: int32, number of above-threshold runs admitted by the filter (each with fresh threshold noise).
      halted: bool, whether the filter halted before the end of the stream.
      delta_used: float64, :math:`\\sum_j \\delta_j` over the runs admitted (the union-bound delta actually
        consumed; in ``paper_mode`` this, not ``delta``, is the valid delta).
      nonprivate_true_answers: bool ``[num_queries]``, ``q_t >= threshold`` without noise (NOT private).
      valid: False when a traced epsilon or delta was invalid; every answer is then False, whatever the
        queries (fail closed, docs/fail_closed.md).
    """

    sigma_threshold: Array
    sigma_query: Array
    spent: Array
    spent_by_step: Array
    num_runs: Array
    halted: Array
    delta_used: Array
    nonprivate_true_answers: Array
    valid: Array = True


def _where_tree(condition, a, b):
    return jax.tree_util.tree_map(lambda x, y: jnp.where(condition, x, y), a, b)


@functools.partial(jax.jit, static_argnames=("accounting",))
def _sparse_vector_scan(key: Key, queries: Array, threshold: Array, sigma_threshold: Array, sigma_query: Array,
                        lower: Array, upper: Array, epsilon_post_table: Array, epsilon_bottom_table: Array,
                        run_epsilon: Array, run_delta_cumulative: Array, budget: Array, run_delta: Array,
                        delta_prime: Array, delta_double_prime: Array, accounting: str):
    queries = _clamp(queries, lower, upper)
    num_queries = queries.shape[0]
    # Row 0: threshold noise of run j (at most one run starts per step); row 1: query noise of step s.
    unit = unit_noise(_noise.gaussian, key, (2, num_queries))
    threshold_noise, query_noise = unit[0], unit[1]
    fsrc = accounting == "fsrc"
    state0 = self_reporting_filter_init() if fsrc else whitehouse_filter_init()

    def spend(state):
        return state.spent if fsrc else whitehouse_filter_spend(state, delta_prime=delta_prime)

    def step(carry, inputs):
        state, noisy_threshold, run_length = carry
        query, z = inputs
        starting = (run_length == 0) & jnp.logical_not(state.halted)
        run = state.num_run  # 0-based index of the run that would start now; run <= step < num_queries
        if fsrc:
            admitted_state, _ = self_reporting_filter_admit(state, run_epsilon[run], epsilon=budget)
        else:
            admitted_state, _ = whitehouse_filter_step(state, run_epsilon[run], run_delta[run], epsilon=budget,
                                                       delta_prime=delta_prime,
                                                       delta_double_prime=delta_double_prime)
        state = _where_tree(starting, admitted_state, state)
        # Fresh threshold noise for every run.
        noisy_threshold = jnp.where(starting, threshold + sigma_threshold * threshold_noise[run], noisy_threshold)
        active = jnp.logical_not(state.halted)
        run_length = jnp.where(active, run_length + 1, run_length)
        above = active & (query + sigma_query * z >= noisy_threshold)
        if fsrc:
            cost = epsilon_post_table[jnp.maximum(run_length - 1, 0)]
            state = self_reporting_filter_charge(state, jnp.where(above, cost, 0.0))
        run_length = jnp.where(above, 0, run_length)  # the next run starts at the next step
        return (state, noisy_threshold, run_length), (above, spend(state))

    carry0 = (state0, jnp.zeros((), jnp.float64), jnp.zeros((), jnp.int32))
    (state, _, run_length), (bits, spent_by_step) = jax.lax.scan(step, carry0, (queries, query_noise))
    if fsrc:
        # A run that met the end of the stream released bottom^L: charge eps_bot(L) (our bound, not in the paper).
        trailing = jnp.where(run_length > 0, epsilon_bottom_table[jnp.maximum(run_length - 1, 0)], 0.0)
        state = self_reporting_filter_charge(state, trailing)
        spent_by_step = spent_by_step.at[-1].add(trailing)
    return (bits, spend(state), spent_by_step, state.num_run, state.halted, run_delta_cumulative[state.num_run],
            queries >= threshold)


def _check_sparse_vector_common(threshold, sigma_threshold, sigma_query, sensitivity, lower, upper,
                                schedule, max_instances, query_cap, where):
    parameters = _check_above_threshold_parameters(threshold, sigma_threshold, sigma_query, sensitivity, lower,
                                                   upper, where)
    threshold, sigma_threshold, sigma_query, sensitivity, lower, upper = parameters
    schedule = check_choice("schedule", schedule, DELTA_SCHEDULES)
    if max_instances is not None:
        max_instances = check_int("max_instances", max_instances, minimum=1)
    if schedule == "uniform" and max_instances is None:
        raise ValueError("schedule='uniform' needs max_instances (the hard cap J on the number of above-threshold "
                         "runs); pass e.g. max_instances=100, or use schedule='inverse_square'.")
    query_cap = check_bool("query_cap", query_cap)
    if not query_cap and sigma_query < _SQRT3 * sigma_threshold:
        raise ValueError(f"Zhu & Wang's Theorem 7 bound needs sigma_query >= sqrt(3) * sigma_threshold, got "
                         f"sigma_query={sigma_query!r} < {_SQRT3 * sigma_threshold!r}. Pass query_cap=True to use "
                         "the bound capped at the stream length instead, or raise sigma_query.")
    return parameters, schedule, max_instances, query_cap


def _check_sparse_vector_release(key, queries, threshold, sigma_threshold, sigma_query, sensitivity, lower, upper,
                                 schedule, max_instances, query_cap, where, clip=False):
    """The boundary checks shared by both sparse-vector releases (key, queries, parameters)."""
    require_x64(where)
    key = check_key(key)
    queries = check_scores(queries, "queries", clip=clip, what="NaN, inf or values outside [lower, upper]")
    parameters, schedule, max_instances, query_cap = _check_sparse_vector_common(
        threshold, sigma_threshold, sigma_query, sensitivity, lower, upper, schedule, max_instances, query_cap,
        where)
    _check_in_range(queries, "queries", parameters[4], parameters[5], clip)
    return key, queries, parameters, schedule, max_instances, query_cap


@functools.lru_cache(maxsize=8192)
def _zhu_wang_epsilon(sigma_threshold, sigma_query, threshold, sensitivity, delta, conversion, max_queries):
    with jax.ensure_compile_time_eval():  # see _above_threshold_tables
        return float(zhu_wang_at_epsilon(sigma_threshold, sigma_query, threshold, sensitivity, delta,
                                         conversion=conversion, max_queries=max_queries))


def _run_epsilons(deltas, sigma_threshold, sigma_query, threshold, sensitivity, lower, conversion, max_queries):
    """Zhu-Wang (eps_j, delta_j) per run; eps_j = inf where delta_j = 0 (no run allowed).

    Theorem 7 needs a non-negative threshold and non-negative queries. Above
    threshold is unchanged when the threshold and every query move by the same
    shift s, and s = min(lower, threshold) makes both non-negative, with the
    smallest threshold (the bound grows with it): we evaluate Theorem 7 at
    threshold - s = max(threshold - lower, 0) (our reduction). For lower = 0 <= threshold
    (the paper's setting) this is the paper's computation.
    """
    shifted_threshold = max(threshold - lower, 0.0)
    out = np.full(len(deltas), np.inf)
    for j, delta_j in enumerate(deltas):
        if delta_j > 0:
            out[j] = _zhu_wang_epsilon(sigma_threshold, sigma_query, shifted_threshold, sensitivity, float(delta_j),
                                       conversion, max_queries)
    return out


def _sparse_vector_release(key, queries, parameters, run_epsilon, run_delta, budget, delta_prime,
                           delta_double_prime, accounting, guarantee):
    threshold, sigma_threshold, sigma_query, sensitivity, lower, upper = parameters
    num_queries = queries.shape[0]
    post, bottom = _above_threshold_tables(num_queries, threshold, sigma_threshold, sigma_query, sensitivity,
                                           lower, upper)
    f64 = functools.partial(jnp.asarray, dtype=jnp.float64)
    cumulative = np.concatenate([[0.0], np.cumsum(run_delta)])
    bits, spent, spent_by_step, num_runs, halted, delta_used, true_answers = _sparse_vector_scan(
        key, queries, f64(threshold), f64(sigma_threshold), f64(sigma_query), f64(lower), f64(upper), f64(post),
        f64(bottom), f64(run_epsilon), f64(cumulative), f64(budget), f64(run_delta), f64(delta_prime),
        f64(delta_double_prime), accounting=accounting)
    return Release(bits, GaussianSparseVectorInfo(
        sigma_threshold=f64(sigma_threshold), sigma_query=f64(sigma_query), spent=spent,
        spent_by_step=spent_by_step, num_runs=num_runs, halted=halted, delta_used=delta_used,
        nonprivate_true_answers=true_answers), guarantee)


def gaussian_sparse_vector(key: Key, queries: Array, *, threshold: float, sigma_threshold: float,
                           sigma_query: float, sensitivity: float, lower: float, upper: float, epsilon: float,
                           delta: float, schedule: str = "inverse_square", max_instances: int | None = None,
                           query_cap: bool = False, paper_mode: bool = False, clip: bool = False) -> Release:
    """Fully adaptive Gaussian sparse vector: Gaussian above threshold under FSRC.

    Lebensold et al. 2024, Sec. 3.3, Sec. 4.1 and App. D. Runs of
    :func:`gaussian_above_threshold` follow each other along the stream, each
    with fresh threshold noise; after a top at step :math:`s` the next run
    starts at :math:`s + 1`. Before run :math:`j` starts, the filtered
    self-reporting composition filter (Algorithm 4) halts if

    .. math:: \\text{spent} + \\varepsilon^{\\max}_j \\ge \\varepsilon,
              \\qquad \\varepsilon^{\\max}_j = \\min_{\\alpha > 1}
              \\Big[\\varepsilon^{\\mathrm{RDP}}_{\\mathrm{ZW}}(\\alpha)
              + \\frac{\\log(1/\\delta_j)}{\\alpha - 1}\\Big],

    (Zhu & Wang 2020 Theorem 7 with the Markov RDP-to-pDP conversion,
    :func:`gpuprivacy.accounting.zhu_wang_at_epsilon` ``(conversion="markov")``;
    FSRC needs a pDP bound; Lebensold et al. 2024, Algorithm 2), and a run that tops after :math:`t`
    queries adds :math:`\\varepsilon^{\\mathrm{post}}(t)` to ``spent``. A run
    that reaches the end of the stream after :math:`L` bottoms adds
    :math:`\\varepsilon^{\\bot}(L)` (our bound, not in the paper). After a halt the remaining bits are False.

    Privacy: :math:`(\\varepsilon, \\delta)`-DP with the per-run deltas
    :math:`\\delta_j` of :func:`self_reporting_filter_deltas` (``schedule``;
    :math:`\\sum_j \\delta_j \\le \\delta`; see docs/errata.md); see
    :func:`gaussian_sparse_vector_guarantee`. ``paper_mode=True`` uses
    :math:`\\delta_j = \\delta` for every run, as the paper does, which carries
    no :math:`(\\varepsilon, \\delta)` guarantee (a :class:`PaperModeWarning`
    is emitted; ``info.delta_used`` then reports the valid union-bound delta).

    The queries are given in advance (a vector); the whole run is one
    ``lax.scan`` over time, so it vmaps over runs. Queries must lie in
    ``[lower, upper]`` (checked; the kernel clamps). Idealized numerics.

    Args:
      key: a single PRNG key.
      queries: float ``[num_queries]`` in ``[lower, upper]``.
      threshold: :math:`\\rho`, finite.
      sigma_threshold: :math:`\\sigma_X > 0`.
      sigma_query: :math:`\\sigma_Z > 0`; Theorem 7 needs
        :math:`\\sigma_Z \\ge \\sqrt 3\\,\\sigma_X` unless ``query_cap``.
      sensitivity: :math:`\\Delta \\in (0, \\text{upper} - \\text{lower}]`.
      lower, upper: the public range :math:`[a, b]` of every query.
      epsilon: the budget :math:`\\varepsilon > 0` (use a large value to only
        observe the spend, as the paper's experiments do).
      delta: :math:`\\delta \\in (0, 1)`, the total delta.
      schedule: ``"inverse_square"`` (:math:`\\delta_j = 6\\delta/(\\pi^2 j^2)`) or
        ``"uniform"`` (:math:`\\delta/J` for at most ``max_instances`` = :math:`J` runs).
      max_instances: the hard cap :math:`J` on the number of runs (``"uniform"`` only).
      query_cap: also use Zhu-Wang's bound capped at ``num_queries`` queries per
        run (valid since no run sees more; tighter for large
        :math:`\\rho/\\sigma_X`; allows :math:`\\sigma_Z < \\sqrt 3\\,\\sigma_X`).
        Off by default, as in the paper.
      clip: clamp queries outside ``[lower, upper]`` (+-inf included) to it, and NaN to ``lower``, instead of
        raising. Needed for traced queries (under ``jax.jit``/``jax.vmap``/``run_trials(..., batched_args=True)``),
        which are refused otherwise because their values cannot be checked while tracing.
      paper_mode: the paper's unsound constant-delta rule (see above).

    Returns:
      ``Release(value, GaussianSparseVectorInfo)``; ``value`` is bool ``[num_queries]`` (True = top).

    Raises:
      ValueError: for bad parameters (as for :func:`gaussian_above_threshold`, plus
        epsilon, delta, schedule, and ``sigma_query < sqrt(3) sigma_threshold``
        without ``query_cap``).
      TypeError: for wrongly typed arguments.

    Examples:
      >>> import jax
      >>> from gpuprivacy import mechanisms
      >>> release = mechanisms.gaussian_sparse_vector(
      ...     jax.random.key(0), [0.9, 0.1, 0.9, 0.9], threshold=0.5, sigma_threshold=0.05,
      ...     sigma_query=0.1, sensitivity=1e-4, lower=0.0, upper=1.0, epsilon=10.0, delta=1e-6)
      >>> release.value.tolist(), int(release.info.num_runs)
      ([True, False, True, True], 3)

    References:
      Lebensold, Precup & Balle, `On the Privacy of Selection Mechanisms with
      Gaussian Noise <https://arxiv.org/abs/2402.06137>`_, AISTATS 2024
      (arXiv v2), Algorithm 4, Theorem 19 (delta corrected; see docs/errata.md), Sec. 4.1;
      Zhu & Wang, Improving Sparse Vector Technique with Renyi Differential Privacy, NeurIPS 2020, Theorem 7.
    """
    concrete("delta", delta, "gaussian_sparse_vector")  # calibrated in Python
    key, queries, parameters, schedule, max_instances, query_cap = _check_sparse_vector_release(
        key, queries, threshold, sigma_threshold, sigma_query, sensitivity, lower, upper, schedule, max_instances,
        query_cap, "gaussian_sparse_vector", clip)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    paper_mode = check_bool("paper_mode", paper_mode)
    num_queries = queries.shape[0]
    threshold, sigma_threshold, sigma_query, sensitivity, lower, upper = parameters
    guarantee = stated_guarantee(gaussian_sparse_vector_guarantee, threshold=threshold,
                                 sigma_threshold=sigma_threshold, sigma_query=sigma_query, sensitivity=sensitivity,
                                 lower=lower, upper=upper, epsilon=epsilon, delta=delta, schedule=schedule,
                                 max_instances=max_instances, query_cap=query_cap, paper_mode=paper_mode,
                                 num_queries=num_queries)
    with warnings.catch_warnings():  # the guarantee above has warned about paper_mode: once per call
        warnings.simplefilter("ignore", PaperModeWarning)
        run_delta = self_reporting_filter_deltas(num_queries, delta=delta, schedule=schedule,
                                                 max_steps=max_instances, paper_mode=paper_mode)
    run_epsilon = _run_epsilons(run_delta, sigma_threshold, sigma_query, threshold, sensitivity, lower, "markov",
                                num_queries if query_cap else None)
    # delta_prime / delta_double_prime are Whitehouse-only; FSRC ignores the placeholders 0.5 and 0.0.
    release = _sparse_vector_release(key, queries, parameters, run_epsilon, run_delta, epsilon, 0.5, 0.0, "fsrc",
                                     guarantee)
    return withheld_unless(release, _budget_ok(epsilon, delta))


def gaussian_sparse_vector_guarantee(*, threshold: float, sigma_threshold: float, sigma_query: float,
                                     sensitivity: float, lower: float, upper: float, epsilon: float, delta: float,
                                     schedule: str = "inverse_square", max_instances: int | None = None,
                                     query_cap: bool = False, paper_mode: bool = False,
                                     num_queries: int | None = None) -> ApproxDP:
    """The guarantee of :func:`gaussian_sparse_vector`: :math:`(\\varepsilon, \\delta)`-DP.

    By the union-bound version of FSRC (Lebensold et al. 2024, Thm 11 (Algorithm 2); see docs/errata.md) for any sound
    ``schedule``. With ``paper_mode=True`` the paper's claim
    :math:`(\\varepsilon, \\delta)` is false; this returns the valid
    :math:`(\\varepsilon, \\min(J, k)\\,\\delta)`, :math:`k` = ``num_queries``
    (required then) and :math:`J` = ``max_instances``, because at most that
    many runs can start, and emits a :class:`PaperModeWarning`.
    """
    where = "gaussian_sparse_vector_guarantee"
    parameters, schedule, max_instances, query_cap = _check_sparse_vector_common(
        threshold, sigma_threshold, sigma_query, sensitivity, lower, upper, schedule, max_instances,
        query_cap, where)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    paper_mode = check_bool("paper_mode", paper_mode)
    if not paper_mode:
        return ApproxDP(epsilon, delta)
    if num_queries is None:
        raise ValueError("paper_mode=True has no (epsilon, delta) guarantee of its own; pass num_queries so that the "
                         "valid union-bound delta (number of runs) * delta can be returned.")
    num_queries = check_int("num_queries", num_queries, minimum=1)
    self_reporting_filter_deltas(1, delta=delta, paper_mode=True)  # emits the PaperModeWarning
    runs = num_queries if max_instances is None else min(num_queries, max_instances)
    total = runs * delta
    if total >= 1.0:
        raise ValueError(f"paper_mode=True with up to {runs} runs at delta={delta!r} each gives a union-bound delta of "
                         f"{total!r} >= 1: no guarantee. Use the default sound schedule.")
    return ApproxDP(epsilon, round_up(total))  # one ulp for the float product runs * delta


def gaussian_sparse_vector_whitehouse(key: Key, queries: Array, *, threshold: float, sigma_threshold: float,
                                      sigma_query: float, sensitivity: float, lower: float, upper: float,
                                      epsilon: float, delta_prime: float, delta_double_prime: float,
                                      schedule: str = "inverse_square", max_instances: int | None = None,
                                      query_cap: bool = False, conversion: str = "markov",
                                      clip: bool = False) -> Release:
    """Baseline: the same Gaussian above-threshold runs, composed by the Whitehouse et al. filter.

    Lebensold et al. 2024, App. C (Algorithm 5 with Theorem 20).
    Run :math:`j` is :math:`(\\varepsilon_j, \\delta_j)`-DP by Zhu & Wang's
    Theorem 7 converted at :math:`\\delta_j` (``conversion``: ``"markov"``, the
    same :math:`\\varepsilon^{\\max}_j` as :func:`gaussian_sparse_vector`, or the
    tighter ``"bbghs"``, which is valid here because this filter needs only
    approximate DP), with :math:`\\delta_j` from
    :func:`self_reporting_filter_deltas` over :math:`\\delta''`. Before run
    :math:`j` starts the filter admits it iff

    .. math:: \\sqrt{2\\log(1/\\delta')\\textstyle\\sum_{m \\le j}\\varepsilon_m^2}
              + \\tfrac12\\textstyle\\sum_{m \\le j}\\varepsilon_m^2 \\le \\varepsilon
              \\ \\wedge\\ \\textstyle\\sum_{m \\le j}\\delta_m \\le \\delta''

    (eq. (40)/(41), corrected reading), else halts; ``info.spent`` is the
    left-hand side over the runs admitted. Realised stopping times play no
    part in this accounting. Privacy: :math:`(\\varepsilon, \\delta' + \\delta'')`-DP.

    Args:
      key, queries, threshold, sigma_threshold, sigma_query, sensitivity, lower, upper, schedule,
        max_instances, query_cap, clip: as in :func:`gaussian_sparse_vector`.
      epsilon: the budget :math:`\\varepsilon > 0`.
      delta_prime: :math:`\\delta' \\in (0, 1)` of the concentration term.
      delta_double_prime: :math:`\\delta'' \\in (0, 1)`, shared by the runs' deltas.
      conversion: ``"markov"`` (default) or ``"bbghs"``.

    Returns:
      ``Release(value, GaussianSparseVectorInfo)``.

    Examples:
      >>> import jax
      >>> from gpuprivacy import mechanisms
      >>> release = mechanisms.gaussian_sparse_vector_whitehouse(
      ...     jax.random.key(0), [0.9, 0.1, 0.9, 0.9], threshold=0.5, sigma_threshold=0.05,
      ...     sigma_query=0.1, sensitivity=1e-4, lower=0.0, upper=1.0, epsilon=10.0, delta_prime=1e-6,
      ...     delta_double_prime=1e-6)
      >>> release.value.tolist()
      [True, False, True, True]

    References:
      Whitehouse, Ramdas, Rogers & Wu, `Fully-Adaptive Composition in Differential
      Privacy <https://arxiv.org/abs/2203.05481>`_, ICML 2023;
      Lebensold, Precup & Balle (arXiv 2402.06137v2), App. C, Theorem 20, Algorithm 5.
    """
    key, queries, parameters, schedule, max_instances, query_cap = _check_sparse_vector_release(
        key, queries, threshold, sigma_threshold, sigma_query, sensitivity, lower, upper, schedule, max_instances,
        query_cap, "gaussian_sparse_vector_whitehouse", clip)
    epsilon = check_epsilon(epsilon)
    delta_prime = check_delta(delta_prime, "delta_prime")
    delta_double_prime = check_delta(delta_double_prime, "delta_double_prime")
    conversion = check_choice("conversion", conversion, ZHU_WANG_CONVERSIONS)
    num_queries = queries.shape[0]
    threshold, sigma_threshold, sigma_query, sensitivity, lower, upper = parameters
    guarantee = stated_guarantee(gaussian_sparse_vector_whitehouse_guarantee, threshold=threshold,
                                 sigma_threshold=sigma_threshold, sigma_query=sigma_query, sensitivity=sensitivity,
                                 lower=lower, upper=upper, epsilon=epsilon, delta_prime=delta_prime,
                                 delta_double_prime=delta_double_prime, schedule=schedule,
                                 max_instances=max_instances, query_cap=query_cap, conversion=conversion)
    run_delta = self_reporting_filter_deltas(num_queries, delta=delta_double_prime, schedule=schedule,
                                             max_steps=max_instances)
    run_epsilon = _run_epsilons(run_delta, sigma_threshold, sigma_query, threshold, sensitivity, lower, conversion,
                                num_queries if query_cap else None)
    release = _sparse_vector_release(key, queries, parameters, run_epsilon, run_delta, epsilon, delta_prime,
                                     delta_double_prime, "whitehouse", guarantee)
    return withheld_unless(release, all_ok(_budget_ok(epsilon, delta_prime), _budget_ok(epsilon, delta_double_prime)))


def _budget_ok(epsilon, delta):
    """Traced budgets skipped the eager checks: epsilon finite and > 0, delta in (0, 1) (fail closed)."""
    delta_ok = True if not is_tracer(delta) else traced_ok((delta > 0) & (delta < 1),
                                                           "delta must lie in (0, 1), got {value}", value=delta)
    return all_ok(epsilon_ok(epsilon), delta_ok)


def gaussian_sparse_vector_whitehouse_guarantee(*, threshold: float, sigma_threshold: float, sigma_query: float,
                                                sensitivity: float, lower: float, upper: float, epsilon: float,
                                                delta_prime: float, delta_double_prime: float,
                                                schedule: str = "inverse_square", max_instances: int | None = None,
                                                query_cap: bool = False, conversion: str = "markov") -> ApproxDP:
    """The guarantee of :func:`gaussian_sparse_vector_whitehouse`: :math:`(\\varepsilon, \\delta' + \\delta'')`-DP."""
    where = "gaussian_sparse_vector_whitehouse_guarantee"
    _check_sparse_vector_common(threshold, sigma_threshold, sigma_query, sensitivity, lower, upper, schedule,
                                max_instances, query_cap, where)
    check_choice("conversion", conversion, ZHU_WANG_CONVERSIONS)
    epsilon = check_epsilon(epsilon)
    delta_prime = check_delta(delta_prime, "delta_prime")
    delta_double_prime = check_delta(delta_double_prime, "delta_double_prime")
    return whitehouse_filter_guarantee(epsilon=epsilon, delta_prime=delta_prime,
                                       delta_double_prime=delta_double_prime)
