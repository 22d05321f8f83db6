"""Auditor entries for the Gaussian selection mechanisms of Lebensold, Precup & Balle (2024).

A dataset is the vector of exact query answers in the public range
``[lower, upper]``; neighbours differ by at most the sensitivity in every
coordinate and stay in the range. Parameters are chosen so that the loss
is measurable with 10^5 samples (a few candidates or queries, sensitivity
0.2, noise 0.3-0.5 on the range [0, 1]). Worst-case pairs:

* Gaussian report noisy max (Lebensold et al. 2024, Thm 8; paper App. A.1):
  :math:`q = (b - \\Delta, \\dots, b - \\Delta, a + \\Delta)` vs
  :math:`q' = (b, \\dots, b, a)`; the ratio at output :math:`d` is exactly
  :math:`e^{\\varepsilon}`.
* Gaussian above threshold (Lebensold et al. 2024, Thm 10 / Thm 17, Lemma 18, corrected; see docs/errata.md): for stopping
  time :math:`t`, :math:`q_i = b - \\Delta` vs :math:`b` before :math:`t` and
  :math:`q_t = a + \\Delta` vs :math:`a`; for the all-bottom output, every
  query :math:`b - \\Delta` vs :math:`b`. The claim is the capped ex-ante
  pure DP of a short stream (the largest table entry).
* Gaussian sparse vector (FSRC and the Whitehouse baseline): the same
  pairs, on a stream of 3 queries. The claim is (epsilon, delta)-DP with
  delta = 1e-3. Each run's Zhu-Wang eps_max is about 6.6-7.1 at these
  parameters, so the FSRC budget 7.5 admits a second run only after a top
  at t = 1 (ex-post 0.42), and the Whitehouse budget 60 admits exactly one
  run; the audit can only see the ex-post losses (about 1.1 of the claim),
  so it checks the release, not the tightness of the filter.
* Laplace report noisy max (both calibrations): the classic selection pairs.

Each claim is the guarantee the audited release carries (:func:`~gpuprivacy.audit._classic.claim_of`).
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from gpuprivacy import mechanisms
from gpuprivacy.audit._classic import _random_scores, _selection_pairs, _vmapped_sampler, claim_of
from gpuprivacy.audit._mechanism import AuditableMechanism, neighbours_within
from gpuprivacy.audit._registry import register


def rnm_worst_case_pair(num_candidates, sensitivity, lower, upper):
    """Lebensold et al. App. A.1: (b - D, ..., b - D, a + D) vs (b, ..., b, a)."""
    x = np.full(num_candidates, upper - sensitivity)
    x[-1] = lower + sensitivity
    x_prime = np.full(num_candidates, float(upper))
    x_prime[-1] = lower
    return x, x_prime


def above_threshold_worst_case_pairs(num_queries, sensitivity, lower, upper):
    """Lemma 18's maximiser for every stopping time t = 1..k, then the all-bottom pair."""
    pairs = []
    for t in range(1, num_queries + 1):
        x = np.full(num_queries, upper - sensitivity)
        x_prime = np.full(num_queries, float(upper))
        x[t - 1], x_prime[t - 1] = lower + sensitivity, lower
        pairs.append((x, x_prime))
    pairs.append((np.full(num_queries, upper - sensitivity), np.full(num_queries, float(upper))))
    return tuple(pairs)


def _bounded_neighbour(sensitivity, lower, upper):
    def neighbour(key, x):
        x = np.asarray(x, dtype=np.float64)
        shift = np.asarray(jax.random.uniform(key, x.shape, minval=-sensitivity, maxval=sensitivity))
        return np.clip(x + shift, lower, upper)
    return neighbour


def _bounded_dataset(size, lower, upper):
    return lambda key: np.asarray(jax.random.uniform(key, (size,), minval=lower, maxval=upper))


def gaussian_rnm_entry(sigma=0.5, num_candidates=3, sensitivity=0.2, lower=0.0, upper=1.0):
    params = dict(sigma=sigma, sensitivity=sensitivity, lower=lower, upper=upper)
    sample = _vmapped_sampler(lambda k, x: mechanisms.gaussian_report_noisy_max(k, x, **params))
    pairs = (rnm_worst_case_pair(num_candidates, sensitivity, lower, upper),)
    return AuditableMechanism(
        name="gaussian-report-noisy-max", sample=sample, claim=claim_of(sample, pairs[0][0]),
        output_kind="discrete", worst_case_pairs=pairs,
        random_dataset=_bounded_dataset(num_candidates, lower, upper),
        random_neighbour=_bounded_neighbour(sensitivity, lower, upper),
        neighbours=neighbours_within(sensitivity, lower, upper), output_range_size=num_candidates,
        audits=("gaussian_report_noisy_max",),
        description="Gaussian report noisy max, pure DP for bounded scores (Lebensold et al. Thm 8)")


def gaussian_above_threshold_entry(threshold=0.5, sigma_threshold=0.3, sigma_query=0.3 * 3**0.5, sensitivity=0.2,
                                   lower=0.0, upper=1.0, num_queries=3):
    params = dict(threshold=threshold, sigma_threshold=sigma_threshold, sigma_query=sigma_query,
                  sensitivity=sensitivity, lower=lower, upper=upper)
    sample = _vmapped_sampler(lambda k, x: mechanisms.gaussian_above_threshold(k, x, **params))
    pairs = above_threshold_worst_case_pairs(num_queries, sensitivity, lower, upper)
    return AuditableMechanism(
        name="gaussian-above-threshold", sample=sample, claim=claim_of(sample, pairs[0][0]),
        output_kind="discrete", worst_case_pairs=pairs,
        random_dataset=_bounded_dataset(num_queries, lower, upper),
        random_neighbour=_bounded_neighbour(sensitivity, lower, upper),
        neighbours=neighbours_within(sensitivity, lower, upper), output_range_size=num_queries + 1,
        audits=("gaussian_above_threshold",),
        description="Gaussian above threshold on a stream of known length (capped ex-ante pure DP)")


def gaussian_sparse_vector_entry(whitehouse=False, threshold=0.5, sigma_threshold=0.3, sigma_query=0.3 * 3**0.5,
                                 sensitivity=0.2, lower=0.0, upper=1.0, num_queries=3, epsilon=7.5, delta=1e-3):
    params = dict(threshold=threshold, sigma_threshold=sigma_threshold, sigma_query=sigma_query,
                  sensitivity=sensitivity, lower=lower, upper=upper, epsilon=epsilon)
    if whitehouse:
        params.update(delta_prime=delta / 2, delta_double_prime=delta / 2)
        mechanism = mechanisms.gaussian_sparse_vector_whitehouse
        name, audits = "gaussian-sparse-vector-whitehouse", ("gaussian_sparse_vector_whitehouse",)
    else:
        params.update(delta=delta)
        mechanism = mechanisms.gaussian_sparse_vector
        name, audits = "gaussian-sparse-vector", ("gaussian_sparse_vector",)
    sample = _vmapped_sampler(lambda k, x: mechanism(k, x, **params), lambda r: r.value.astype(np.int8))
    pairs = above_threshold_worst_case_pairs(num_queries, sensitivity, lower, upper)
    return AuditableMechanism(
        name=name, sample=sample, claim=claim_of(sample, pairs[0][0]), output_kind="discrete",
        worst_case_pairs=pairs,
        random_dataset=_bounded_dataset(num_queries, lower, upper),
        random_neighbour=_bounded_neighbour(sensitivity, lower, upper),
        neighbours=neighbours_within(sensitivity, lower, upper), output_range_size=2**num_queries,
        audits=audits, description=f"fully adaptive Gaussian sparse vector ({name})")


def laplace_rnm_entry(calibration="standard", epsilon=1.0, sensitivity=1.0, num_candidates=3):
    params = dict(epsilon=epsilon, sensitivity=sensitivity, calibration=calibration)
    sample = _vmapped_sampler(lambda k, x: mechanisms.laplace_report_noisy_max(k, x, **params))
    pairs = _selection_pairs(num_candidates, sensitivity)
    return AuditableMechanism(
        name=f"laplace-report-noisy-max[calibration={calibration}]", sample=sample,
        claim=claim_of(sample, pairs[0][0]),
        output_kind="discrete", worst_case_pairs=pairs,
        random_dataset=_random_scores(num_candidates), random_neighbour=_bounded_neighbour(sensitivity, -np.inf,
                                                                                           np.inf),
        neighbours=neighbours_within(sensitivity),
        output_range_size=num_candidates, audits=("laplace_report_noisy_max",),
        description=f"Laplace report noisy max, {calibration} calibration")


register("gaussian-report-noisy-max", gaussian_rnm_entry, sigma=0.5, num_candidates=3, sensitivity=0.2)
register("gaussian-above-threshold", gaussian_above_threshold_entry, num_queries=3)
register("gaussian-sparse-vector", gaussian_sparse_vector_entry, num_queries=3, epsilon=7.5)
register("gaussian-sparse-vector-whitehouse", functools.partial(gaussian_sparse_vector_entry, whitehouse=True),
         num_queries=3, epsilon=60.0)
register("laplace-report-noisy-max[calibration=standard]", laplace_rnm_entry, epsilon=1.0)
register("laplace-report-noisy-max[calibration=post_processing]", laplace_rnm_entry, epsilon=2.0)
