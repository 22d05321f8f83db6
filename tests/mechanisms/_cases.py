"""One registry of mechanism cases that drives the invariant tests (STYLE rule 22)."""

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from gpuprivacy import mechanisms
from gpuprivacy.accounting import ZCDP, ApproxDP, PureDP

SCORES = np.array([0.0, 0.5, 1.0, 2.0, 3.0])
VALUE = np.array([3.0, -1.5])
QUERIES = np.array([0.0, 1.0, 0.5, 2.0])


class Case(NamedTuple):
    name: str
    mechanism: Callable
    data: np.ndarray  # one unbatched input
    kwargs: dict[str, Any]
    guarantee: Callable
    expected_guarantee: Any
    value_shape: tuple[int, ...]
    value_dtype: Any


MECHANISM_CASES = [
    Case("laplace", mechanisms.laplace_mechanism, VALUE, dict(epsilon=1.0, sensitivity=2.0),
         mechanisms.laplace_mechanism_guarantee, PureDP(1.0), (2,), np.float64),
    Case("gaussian_analytic", mechanisms.gaussian_mechanism, VALUE, dict(epsilon=2.0, delta=1e-6),
         mechanisms.gaussian_mechanism_guarantee, ApproxDP(2.0, 1e-6), (2,), np.float64),
    Case("gaussian_classic", mechanisms.gaussian_mechanism, VALUE,
         dict(epsilon=0.5, delta=1e-6, calibration="classic"),
         mechanisms.gaussian_mechanism_guarantee, ApproxDP(0.5, 1e-6), (2,), np.float64),
    Case("gaussian_zcdp", mechanisms.gaussian_mechanism_zcdp, VALUE, dict(rho=0.125),
         mechanisms.gaussian_mechanism_zcdp_guarantee, ZCDP(0.125), (2,), np.float64),
    Case("exponential_mechanism", mechanisms.exponential_mechanism, SCORES, dict(epsilon=1.0),
         mechanisms.exponential_mechanism_guarantee, PureDP(1.0), (), np.int32),
    Case("noisy_max_gumbel", mechanisms.report_noisy_max, SCORES, dict(epsilon=1.0, noise="gumbel"),
         mechanisms.report_noisy_max_guarantee, PureDP(1.0), (), np.int32),
    Case("noisy_max_laplace", mechanisms.report_noisy_max, SCORES,
         dict(epsilon=1.0, noise="laplace", monotonic=True),
         mechanisms.report_noisy_max_guarantee, PureDP(1.0), (), np.int32),
    Case("noisy_max_exponential", mechanisms.report_noisy_max, SCORES, dict(epsilon=1.0, noise="exponential"),
         mechanisms.report_noisy_max_guarantee, PureDP(1.0), (), np.int32),
    Case("permute_and_flip", mechanisms.permute_and_flip, SCORES, dict(epsilon=1.0, sensitivity=0.5),
         mechanisms.permute_and_flip_guarantee, PureDP(1.0), (), np.int32),
    Case("above_threshold", mechanisms.above_threshold, QUERIES, dict(threshold=1.5, epsilon=1.0),
         mechanisms.above_threshold_guarantee, PureDP(1.0), (), np.int32),
    Case("sparse_vector", mechanisms.sparse_vector, QUERIES, dict(threshold=1.5, epsilon=1.0, max_positives=2),
         mechanisms.sparse_vector_guarantee, PureDP(1.0), (4,), np.bool_),
]

# Spec 004 (Gaussian selection). Their guarantees also need the number of candidates or queries, which
# the mechanisms read off the data; each wrapper fixes it and takes exactly the mechanism's keywords.
UNIT_RANGE = dict(lower=0.0, upper=4.0)  # covers SCORES and QUERIES plus the batch offsets of test_invariants
GAUSSIAN_RNM = dict(sigma=1.0, sensitivity=0.5, **UNIT_RANGE)
GAUSSIAN_AT = dict(threshold=1.5, sigma_threshold=1.0, sigma_query=2.0, sensitivity=0.5, **UNIT_RANGE)
GAUSSIAN_SV = dict(GAUSSIAN_AT, epsilon=30.0, delta=1e-6)
GAUSSIAN_SV_WHITEHOUSE = dict(GAUSSIAN_AT, epsilon=60.0, delta_prime=1e-6, delta_double_prime=1e-6)


def _gaussian_rnm_guarantee(*, sigma, sensitivity, lower, upper):
    return mechanisms.gaussian_report_noisy_max_guarantee(sigma=sigma, num_candidates=len(SCORES),
                                                          sensitivity=sensitivity, lower=lower, upper=upper)


def _gaussian_at_guarantee(*, threshold, sigma_threshold, sigma_query, sensitivity, lower, upper):
    return mechanisms.gaussian_above_threshold_guarantee(
        threshold=threshold, sigma_threshold=sigma_threshold, sigma_query=sigma_query, sensitivity=sensitivity,
        lower=lower, upper=upper, num_queries=len(QUERIES))


def _gaussian_sv_guarantee(*, threshold, sigma_threshold, sigma_query, sensitivity, lower, upper, epsilon, delta,
                           schedule="inverse_square", max_instances=None, query_cap=False, paper_mode=False):
    return mechanisms.gaussian_sparse_vector_guarantee(
        threshold=threshold, sigma_threshold=sigma_threshold, sigma_query=sigma_query, sensitivity=sensitivity,
        lower=lower, upper=upper, epsilon=epsilon, delta=delta, schedule=schedule, max_instances=max_instances,
        query_cap=query_cap, paper_mode=paper_mode, num_queries=len(QUERIES))


MECHANISM_CASES += [
    Case("gaussian_report_noisy_max", mechanisms.gaussian_report_noisy_max, SCORES, GAUSSIAN_RNM,
         _gaussian_rnm_guarantee, mechanisms.gaussian_report_noisy_max_guarantee(num_candidates=5, **GAUSSIAN_RNM),
         (), np.int32),
    Case("gaussian_above_threshold", mechanisms.gaussian_above_threshold, QUERIES, GAUSSIAN_AT,
         _gaussian_at_guarantee, mechanisms.gaussian_above_threshold_guarantee(num_queries=4, **GAUSSIAN_AT),
         (), np.int32),
    Case("gaussian_sparse_vector", mechanisms.gaussian_sparse_vector, QUERIES, GAUSSIAN_SV, _gaussian_sv_guarantee,
         ApproxDP(30.0, 1e-6), (4,), np.bool_),
    Case("gaussian_sparse_vector_whitehouse", mechanisms.gaussian_sparse_vector_whitehouse, QUERIES,
         GAUSSIAN_SV_WHITEHOUSE, mechanisms.gaussian_sparse_vector_whitehouse_guarantee, ApproxDP(60.0, 2e-6), (4,),
         np.bool_),
]
