"""Extreme privacy parameters: refused with the smallest (or largest) value that works, never inf, never an
OverflowError, never a minute-long search. Table-driven: (call, expected error class, message fragments)."""

from __future__ import annotations

import time

import jax
import numpy as np
import pytest

from gpuprivacy import mechanisms, oracle
from gpuprivacy.mechanisms import blackbox, instance_optimal as io, wrappers

from tests.mechanisms._cases import RELEASE_CASES  # the registry's own inputs

KEY = jax.random.key(0)
ONES = np.ones(6)
_BB = next(c for c in RELEASE_CASES if c.name == "blackbox_estimate")
BB_DATA = _BB.data
BB_PARAMS = {k: v for k, v in _BB.kwargs.items() if k != "epsilon"}

DOM_DATA = np.linspace(0.0, 10.0, 41)
PM_DATA = np.linspace(-1.0, 1.0, 32)
PM = dict(min_density=0.5, radius=1.0, median_bound=10.0, grid_resolution=32, max_rows=8)

CASES = [
    # The four eager releases that returned +-inf with PureDP(1e-310).
    ("piecewise_laplace_count", lambda: io.piecewise_laplace_count(KEY, 3, epsilon=1e-310),
     ValueError, ("epsilon=1e-310", "smallest epsilon that works")),
    ("inverse_sensitivity_count", lambda: io.inverse_sensitivity_count(KEY, 3, epsilon=1e-310),
     ValueError, ("epsilon=1e-310", "smallest epsilon that works")),
    ("piecewise_laplace_vector", lambda: io.piecewise_laplace_vector(KEY, [0.0, 0.0], [1.0, 1.0], epsilon=1e-310,
                                                                     global_sensitivity=1.0),
     ValueError, ("epsilon=1e-310", "smallest epsilon that works")),
    ("smooth_sensitivity_median", lambda: io.smooth_sensitivity_median(KEY, np.linspace(0, 1, 9), epsilon=1e-310,
                                                                       lower=0.0, upper=1.0),
     ValueError, ("epsilon=1e-310", "smallest epsilon that works")),
    # Wrappers and estimators whose depths grow like 1/epsilon: an OverflowError before.
    ("subset_extension", lambda: wrappers.subset_extension(KEY, ONES, oracle_fn=oracle.count, c=1.0, epsilon=1e-100,
                                                           delta=1e-6),
     ValueError, ("tau", "smallest epsilon that works")),
    ("sens_o_matic", lambda: wrappers.sens_o_matic(KEY, ONES, oracle_fn=oracle.count, grid=np.linspace(0, 6, 7),
                                                   epsilon=1e-100, beta=0.1),
     ValueError, ("depth", "smallest epsilon that works")),
    ("tahoe", lambda: wrappers.tahoe(KEY, ONES, oracle_fn=oracle.count, c=1.0, epsilon=1e-250, delta=1e-6),
     ValueError, ("TAHOE", "smallest epsilon that works")),
    ("blackbox_estimate", lambda: blackbox.blackbox_estimate(KEY, BB_DATA, oracle.median, **BB_PARAMS, epsilon=1e-310),
     ValueError, ("covering design", "smallest epsilon that works")),
    ("gaussian_mechanism(epsilon=1e308)", lambda: mechanisms.gaussian_mechanism(KEY, 1.0, epsilon=1e308, delta=1e-6),
     ValueError, ("epsilon <= 1e+100", "1e+308")),
    # Finite but wrong before (found by experiments/bad_input_probe.py): a subnormal epsilon, or a noise scale
    # that XLA flushes to zero. The bounded statistics released within 0.6 of the exact median on [0, 10] at
    # epsilon=1e-310; the private median released -34 (outside [-R, R]) and permute-and-flip a random index.
    ("piecewise_laplace_median(epsilon=1e-310)",
     lambda: io.piecewise_laplace_median(KEY, DOM_DATA, epsilon=1e-310, lower=0.0, upper=10.0),
     ValueError, ("epsilon=1e-310", "smallest epsilon that works")),
    ("inverse_sensitivity_median(epsilon=1e-310)",
     lambda: io.inverse_sensitivity_median(KEY, DOM_DATA, epsilon=1e-310, lower=0.0, upper=10.0),
     ValueError, ("epsilon=1e-310", "smallest epsilon that works")),
    ("piecewise_laplace(bounds, epsilon=1e-310)",
     lambda: io.piecewise_laplace(KEY, io.make_local_bounds([5.0, 5.2, 7.0, 10.0], [5.0, 4.5, 2.0, 0.0]),
                                  epsilon=1e-310),
     ValueError, ("epsilon=1e-310", "smallest epsilon that works")),
    ("private_median(epsilon=1e308)", lambda: mechanisms.median.private_median(KEY, PM_DATA, epsilon=1e308, **PM),
     ValueError, ("epsilon=1e+308", "largest epsilon that works")),
    ("permute_and_flip(epsilon=1e308)", lambda: mechanisms.permute_and_flip(KEY, [0.0, 1.0, 2.0, 3.0, 4.0],
                                                                             epsilon=1e308),
     ValueError, ("epsilon=1e+308", "largest epsilon that works")),
    ("report_noisy_max(epsilon=1e308)", lambda: mechanisms.report_noisy_max(KEY, [0.0, 1.0, 2.0], epsilon=1e308),
     ValueError, ("epsilon=1e+308", "largest epsilon that works")),
]


@pytest.mark.parametrize("call, error, fragments", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_extreme_parameters_are_refused_with_the_fix(call, error, fragments):
    start = time.perf_counter()
    with pytest.raises(error) as raised:
        call()
    assert all(f in str(raised.value) for f in fragments), str(raised.value)
    assert time.perf_counter() - start < 30  # not a minute-long search


def test_zcdp_gaussian_at_a_huge_rho_is_calibrated_at_once():
    # 2 * rho overflowed: sigma was 0 and the exact step-up searched for a minute before failing.
    start = time.perf_counter()
    release = mechanisms.gaussian_mechanism_zcdp(KEY, 1.0, rho=1e308)
    assert 0 < float(release.info.sigma) < 1e-150 and time.perf_counter() - start < 10


def test_the_smallest_epsilon_named_works():
    # Positive control of the message: the value it names is accepted, and its release is finite.
    with pytest.raises(ValueError) as raised:
        io.piecewise_laplace_count(KEY, 3, epsilon=1e-310)
    smallest = float(str(raised.value).split("smallest epsilon that works is ")[1].split(";")[0])
    assert np.isfinite(float(io.piecewise_laplace_count(KEY, 3, epsilon=smallest).value))


@pytest.mark.parametrize("call", [
    lambda e: mechanisms.median.private_median(KEY, PM_DATA, epsilon=e, **PM),
    lambda e: mechanisms.permute_and_flip(KEY, [0.0, 1.0, 2.0, 3.0, 4.0], epsilon=e),
], ids=["private_median", "permute_and_flip"])
def test_the_largest_epsilon_named_works_and_is_exact(call):
    # Positive control: at the largest epsilon the message names, the release is the exact answer (the noise is
    # negligible), not the garbage a flushed scale gave (-34 for the median, a random index for the selection).
    with pytest.raises(ValueError) as raised:
        call(1e308)
    largest = float(str(raised.value).split("largest epsilon that works is about ")[1].split(";")[0])
    value = float(call(largest).value)
    assert value == pytest.approx(float(call(1e3 * 1e250).value)) and abs(value) <= 10.0
