"""One registry of mechanism cases that drives the invariant tests (STYLE rule 22).

``MECHANISM_CASES`` are the classic mechanisms of the flat namespace (also used
by test_validation); ``RELEASE_CASES`` extends them with every other public
function that takes a key and returns a ``Release`` (flat namespace and the
family namespaces ``wrappers``, ``median``, ``instance_optimal`` and
``blackbox``). ``tests/mechanisms/test_invariants.py`` runs every invariant over
``RELEASE_CASES`` and fails when a public release function has no case.
"""

import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from gpuprivacy import designs, mechanisms, oracle
from gpuprivacy.accounting import ZCDP, ApproxDP, PureDP
from gpuprivacy.mechanisms import blackbox, instance_optimal, median, wrappers

SCORES = np.array([0.0, 0.5, 1.0, 2.0, 3.0])
VALUE = np.array([3.0, -1.5])
QUERIES = np.array([0.0, 1.0, 0.5, 2.0])


class Case(NamedTuple):
    name: str
    mechanism: Callable
    data: np.ndarray  # one unbatched input
    kwargs: dict[str, Any]
    guarantee: Callable
    # None: only the keywords are checked. A function of no arguments: computed when the test runs, not while
    # pytest collects (the Gaussian selection guarantees compile a quadrature kernel: 3.6 s in every worker).
    expected_guarantee: Any = None
    value_shape: tuple[int, ...] | None = None  # None: not checked
    value_dtype: Any = None
    args: tuple = ()  # positional arguments after the data (the oracle of blackbox, the radii of a vector)
    jittable: bool = True  # False only with a reason in ``notes["jit"]``
    vmappable: bool = True  # False only with a reason in ``notes["vmap"]`` (host-side work between data and noise)
    trace_data: bool = True  # False: jit/vmap close over the data (host-side oracles need concrete data)
    batch_data: bool = False  # True: vmap over a batch of distinct inputs as well as keys
    run_trials: bool = False  # also compare mechanisms.run_trials with the vmapped release
    guarantee_kwargs: dict = {}  # extra keywords to evaluate ``guarantee`` with (read off the data)
    keyword_exceptions: dict = {}  # keyword -> why it may be on one side only of mechanism vs guarantee
    xfail: dict = {}  # invariant name -> reason (known library bugs; strict)
    notes: dict = {}  # invariant name -> why it is skipped (e.g. "jit": "noise drawn on the host")

    @property
    def traced_kwargs(self) -> dict[str, Any]:
        """The keywords for a call on traced data: ``clip=True`` where the mechanism takes it.

        Traced data cannot be checked, so they are refused at trace time unless the caller chose the
        documented map of out-of-range values (``clip=True``); on the cases' in-range data it changes nothing,
        so the traced release still equals the eager one.
        """
        if "clip" in inspect.signature(self.mechanism).parameters and "clip" not in self.kwargs:
            return {**self.kwargs, "clip": True}
        return self.kwargs


CLASSIC = dict(batch_data=True, run_trials=True)

MECHANISM_CASES = [
    Case("laplace", mechanisms.laplace_mechanism, VALUE, dict(epsilon=1.0, sensitivity=2.0),
         mechanisms.laplace_mechanism_guarantee, PureDP(1.0), (2,), np.float64, **CLASSIC),
    Case("gaussian_analytic", mechanisms.gaussian_mechanism, VALUE, dict(epsilon=2.0, delta=1e-6),
         mechanisms.gaussian_mechanism_guarantee, ApproxDP(2.0, 1e-6), (2,), np.float64, **CLASSIC),
    Case("gaussian_classic", mechanisms.gaussian_mechanism, VALUE,
         dict(epsilon=0.5, delta=1e-6, calibration="classic"),
         mechanisms.gaussian_mechanism_guarantee, ApproxDP(0.5, 1e-6), (2,), np.float64, **CLASSIC),
    Case("gaussian_zcdp", mechanisms.gaussian_mechanism_zcdp, VALUE, dict(rho=0.125),
         mechanisms.gaussian_mechanism_zcdp_guarantee, ZCDP(0.125), (2,), np.float64, **CLASSIC),
    Case("exponential_mechanism", mechanisms.exponential_mechanism, SCORES, dict(epsilon=1.0),
         mechanisms.exponential_mechanism_guarantee, PureDP(1.0), (), np.int32, **CLASSIC),
    Case("noisy_max_gumbel", mechanisms.report_noisy_max, SCORES, dict(epsilon=1.0, noise="gumbel"),
         mechanisms.report_noisy_max_guarantee, PureDP(1.0), (), np.int32, **CLASSIC),
    Case("noisy_max_laplace", mechanisms.report_noisy_max, SCORES,
         dict(epsilon=1.0, noise="laplace", monotonic=True),
         mechanisms.report_noisy_max_guarantee, PureDP(1.0), (), np.int32, **CLASSIC),
    Case("noisy_max_exponential", mechanisms.report_noisy_max, SCORES, dict(epsilon=1.0, noise="exponential"),
         mechanisms.report_noisy_max_guarantee, PureDP(1.0), (), np.int32, **CLASSIC),
    Case("permute_and_flip", mechanisms.permute_and_flip, SCORES, dict(epsilon=1.0, sensitivity=0.5),
         mechanisms.permute_and_flip_guarantee, PureDP(1.0), (), np.int32, **CLASSIC),
    Case("above_threshold", mechanisms.above_threshold, QUERIES, dict(threshold=1.5, epsilon=1.0),
         mechanisms.above_threshold_guarantee, PureDP(1.0), (), np.int32, **CLASSIC),
    Case("sparse_vector", mechanisms.sparse_vector, QUERIES, dict(threshold=1.5, epsilon=1.0, max_positives=2),
         mechanisms.sparse_vector_guarantee, PureDP(1.0), (4,), np.bool_, **CLASSIC),
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
         _gaussian_rnm_guarantee, lambda: mechanisms.gaussian_report_noisy_max_guarantee(num_candidates=5, **GAUSSIAN_RNM),
         (), np.int32, **CLASSIC,
         keyword_exceptions=dict(num_candidates="the guarantee needs the number of candidates, read off the data")),
    Case("gaussian_above_threshold", mechanisms.gaussian_above_threshold, QUERIES, GAUSSIAN_AT,
         _gaussian_at_guarantee, lambda: mechanisms.gaussian_above_threshold_guarantee(num_queries=4, **GAUSSIAN_AT),
         (), np.int32, **CLASSIC,
         keyword_exceptions=dict(num_queries="the guarantee needs the number of queries, read off the data")),
    Case("gaussian_sparse_vector", mechanisms.gaussian_sparse_vector, QUERIES, GAUSSIAN_SV, _gaussian_sv_guarantee,
         ApproxDP(30.0, 1e-6), (4,), np.bool_, **CLASSIC,
         keyword_exceptions=dict(num_queries="optional: caps the charge by the number of queries, read off the data")),
    Case("gaussian_sparse_vector_whitehouse", mechanisms.gaussian_sparse_vector_whitehouse, QUERIES,
         GAUSSIAN_SV_WHITEHOUSE, mechanisms.gaussian_sparse_vector_whitehouse_guarantee, ApproxDP(60.0, 2e-6), (4,),
         np.bool_, **CLASSIC),
]

# ------------------------------------------------------------------------------------------------
# Every other public release function: the flat namespace's Laplace report-noisy-max and the families.

# Keywords that only steer the computation (memory, chunking, progress bars, self-checks), never the
# output distribution, so a guarantee need not take them.
EXECUTION = dict(capacity="memory knob", max_queries="work cap of the oracle evaluations",
                 chunk_size="chunking knob", progress="progress bar", verify_determinism="self-check of the oracle",
                 max_work="work cap of the design evaluation")
HOST_ORACLE = dict(trace_data=False)  # the oracle runs on the host: jit/vmap close over concrete data
ONES = np.ones(6)
MID = np.linspace(0.4, 0.6, 6)
SORTED = np.array([0.5, 1.0, 2.0, 4.5, 5.0, 7.0, 9.0])
BOUNDS = instance_optimal.make_local_bounds([5.0, 5.2, 7.0, 10.0], [5.0, 4.5, 2.0, 0.0])
BB_DATA = np.linspace(0.0, 1.0, 40)
BB_DESIGN = designs.sample_and_aggregate(40, t=10)
BB_RANGE = dict(lower=0.0, upper=1.0, resolution=0.25)
BB_VALUES = blackbox.grid_values(BB_DATA, oracle.median, BB_DESIGN, **BB_RANGE)
BB_CASE = dict(jittable=False, vmappable=False,
               notes=dict(jit="evaluates the oracle over the design on the host",
                          vmap="the exact robust order statistics are computed on the host (NumPy) before any "
                               "noise; batch trials over the jitted release kernels (blackbox.pure_release_kernel, "
                               "zcdp_release_kernel, binary_release_kernel) instead"),
               keyword_exceptions=EXECUTION)


@oracle.trusted
def _always_one(rows, valid):
    return 1.0


FAMILY_CASES = [
    Case("laplace_report_noisy_max", mechanisms.laplace_report_noisy_max, SCORES,
         dict(epsilon=1.0, calibration="post_processing"), mechanisms.laplace_report_noisy_max_guarantee,
         PureDP(1.0), (), np.int32),
    # wrappers (seed 000)
    Case("cummings_durfee", wrappers.cummings_durfee, ONES, dict(oracle_fn=oracle.count, c=1.0, epsilon=1.0),
         wrappers.cummings_durfee_guarantee, **HOST_ORACLE, keyword_exceptions=EXECUTION),
    Case("double_monotonization", wrappers.double_monotonization, ONES,
         dict(oracle_fn=oracle.count, r=100.0, c=1.0, epsilon=8.0, beta=0.05),
         wrappers.double_monotonization_guarantee, **HOST_ORACLE, keyword_exceptions=EXECUTION),
    Case("sens_o_matic", wrappers.sens_o_matic, MID,
         dict(oracle_fn=oracle.mean, grid=np.linspace(0.0, 1.0, 5), epsilon=4.0, beta=0.1),
         wrappers.sens_o_matic_guarantee, **HOST_ORACLE, guarantee_kwargs=dict(grid_size=5),  # len(grid)
         keyword_exceptions=dict(EXECUTION, grid_size="the guarantee needs the grid's size, read off the grid")),
    Case("shifted_inverse", wrappers.shifted_inverse, ONES,
         dict(oracle_fn=oracle.count, grid=np.arange(10.0), epsilon=8.0, beta=0.1, depth=3),
         wrappers.shifted_inverse_guarantee, **HOST_ORACLE, keyword_exceptions=EXECUTION,
         jittable=False, notes=dict(jit="evaluates the oracle on the host with the key")),
    Case("small_diameter_subset_extension", wrappers.small_diameter_subset_extension, ONES,
         dict(oracle_fn=oracle.count, r=8.0, c=1.0, epsilon=1.0),
         wrappers.small_diameter_subset_extension_guarantee, **HOST_ORACLE, keyword_exceptions=EXECUTION),
    Case("subset_extension", wrappers.subset_extension, ONES,
         dict(oracle_fn=oracle.count, c=1.0, epsilon=1.0, delta=1e-6),
         wrappers.subset_extension_guarantee, **HOST_ORACLE, keyword_exceptions=EXECUTION),
    Case("tahoe", wrappers.tahoe, ONES, dict(oracle_fn=oracle.count, c=1.0, epsilon=1.0, delta=1e-6),
         wrappers.tahoe_guarantee, **HOST_ORACLE, keyword_exceptions=EXECUTION),
    Case("white_box_laplace", wrappers.white_box_laplace, ONES,
         dict(oracle_fn=oracle.count, sensitivity=1.0, epsilon=1.0),
         wrappers.white_box_laplace_guarantee, **HOST_ORACLE, keyword_exceptions=EXECUTION),
    # median (seed 003)
    Case("exponential_mechanism_median", median.exponential_mechanism_median, np.arange(11.0),
         dict(epsilon=1.0, lower=-100.0, upper=100.0), median.exponential_mechanism_median_guarantee, PureDP(1.0),
         (), np.float64),
    Case("private_median", median.private_median, np.linspace(-1.0, 1.0, 32),
         dict(epsilon=1.0, min_density=0.5, radius=1.0, median_bound=10.0, grid_resolution=32, max_rows=8),
         median.private_median_guarantee, PureDP(1.0), (), np.float64),
    # instance_optimal (seed 001)
    Case("piecewise_laplace", instance_optimal.piecewise_laplace, BOUNDS, dict(epsilon=1.0),
         instance_optimal.piecewise_laplace_guarantee, PureDP(1.0), (), np.float64),
    Case("inverse_sensitivity", instance_optimal.inverse_sensitivity, BOUNDS, dict(epsilon=1.0),
         instance_optimal.inverse_sensitivity_guarantee, PureDP(1.0), (), np.float64),
    Case("piecewise_laplace_count", instance_optimal.piecewise_laplace_count, 3, dict(epsilon=1.0),
         instance_optimal.piecewise_laplace_count_guarantee, PureDP(1.0), (), np.float64),
    Case("inverse_sensitivity_count", instance_optimal.inverse_sensitivity_count, 3, dict(epsilon=1.0),
         instance_optimal.inverse_sensitivity_count_guarantee, PureDP(1.0), (), np.float64),
    Case("piecewise_laplace_median", instance_optimal.piecewise_laplace_median, SORTED,
         dict(epsilon=1.0, lower=0.0, upper=10.0), instance_optimal.piecewise_laplace_median_guarantee,
         PureDP(1.0), (), np.float64),
    Case("inverse_sensitivity_median", instance_optimal.inverse_sensitivity_median, SORTED,
         dict(epsilon=1.0, lower=0.0, upper=10.0), instance_optimal.inverse_sensitivity_median_guarantee,
         PureDP(1.0), (), np.float64),
    Case("piecewise_laplace_quantile", instance_optimal.piecewise_laplace_quantile, SORTED,
         dict(quantile=0.25, epsilon=1.0, lower=0.0, upper=10.0),
         instance_optimal.piecewise_laplace_quantile_guarantee, PureDP(1.0), (), np.float64),
    Case("inverse_sensitivity_quantile", instance_optimal.inverse_sensitivity_quantile, SORTED,
         dict(quantile=0.25, epsilon=1.0, lower=0.0, upper=10.0),
         instance_optimal.inverse_sensitivity_quantile_guarantee, PureDP(1.0), (), np.float64),
    Case("piecewise_laplace_clipped_mean", instance_optimal.piecewise_laplace_clipped_mean, SORTED / 10.0,
         dict(epsilon=1.0, lower=0.0, upper=1.0), instance_optimal.piecewise_laplace_clipped_mean_guarantee,
         PureDP(1.0), (), np.float64),
    Case("inverse_sensitivity_clipped_mean", instance_optimal.inverse_sensitivity_clipped_mean, SORTED / 10.0,
         dict(epsilon=1.0, lower=0.0, upper=1.0), instance_optimal.inverse_sensitivity_clipped_mean_guarantee,
         PureDP(1.0), (), np.float64),
    Case("laplace_median", instance_optimal.laplace_median, SORTED, dict(epsilon=1.0, lower=0.0, upper=10.0),
         instance_optimal.laplace_median_guarantee, PureDP(1.0), (), np.float64),
    Case("smooth_sensitivity_median", instance_optimal.smooth_sensitivity_median, SORTED,
         dict(epsilon=1.0, lower=0.0, upper=10.0), instance_optimal.smooth_sensitivity_median_guarantee,
         PureDP(1.0), (), np.float64),
    Case("piecewise_laplace_vector", instance_optimal.piecewise_laplace_vector, np.zeros(2),
         dict(epsilon=1.0, global_sensitivity=1.0), instance_optimal.piecewise_laplace_vector_guarantee,
         PureDP(1.0), (2,), np.float64, args=(np.ones(2),)),
    # blackbox (seed 002)
    Case("blackbox_estimate", blackbox.blackbox_estimate, BB_DATA,
         dict(design=BB_DESIGN, epsilon=1.0, beta=0.5, **BB_RANGE), blackbox.blackbox_estimate_guarantee,
         PureDP(1.0), args=(oracle.median,), **BB_CASE),
    Case("blackbox_estimate_zcdp", blackbox.blackbox_estimate_zcdp, BB_DATA,
         dict(design=BB_DESIGN, rho=0.5, beta=0.5, **BB_RANGE), blackbox.blackbox_estimate_zcdp_guarantee,
         ZCDP(0.5), args=(oracle.median,), **BB_CASE),
    Case("blackbox_binary", blackbox.blackbox_binary, BB_DATA, dict(design=BB_DESIGN, epsilon=1.0, beta=0.5),
         blackbox.blackbox_binary_guarantee, PureDP(1.0), args=(_always_one,), **BB_CASE),
    Case("blackbox_estimate_from_values", blackbox.blackbox_estimate_from_values, BB_VALUES,
         dict(design=BB_DESIGN, epsilon=1.0, beta=0.5, **BB_RANGE), blackbox.blackbox_estimate_guarantee,
         PureDP(1.0), **BB_CASE),
    Case("blackbox_estimate_zcdp_from_values", blackbox.blackbox_estimate_zcdp_from_values, BB_VALUES,
         dict(design=BB_DESIGN, rho=0.5, beta=0.5, **BB_RANGE), blackbox.blackbox_estimate_zcdp_guarantee,
         ZCDP(0.5), **BB_CASE),
    Case("blackbox_binary_from_values", blackbox.blackbox_binary_from_values,
         blackbox.grid_values(BB_DATA, _always_one, BB_DESIGN, lower=0.0, upper=1.0, resolution=1.0),
         dict(design=BB_DESIGN, epsilon=1.0, beta=0.5), blackbox.blackbox_binary_guarantee, PureDP(1.0),
         **BB_CASE),
]

RELEASE_CASES = MECHANISM_CASES + FAMILY_CASES
