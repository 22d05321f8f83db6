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
