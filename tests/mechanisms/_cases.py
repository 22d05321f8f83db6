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
