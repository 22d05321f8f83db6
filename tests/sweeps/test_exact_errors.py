"""The exact error quantities of the built-in sweepables (``EXACT_ERRORS``) against the real mechanisms.

Each entry's exact quantities are compared with a Monte Carlo run of the public mechanism through the
study engine (``run_cell``) on one fixed dataset: the same cell gives the released values, the
targets and the exact quantities, trial by trial. Means: the sample mean of ``|values - targets|``
must lie within ``Z`` standard errors of ``expected_abs_error``. Medians: with ``m`` the exact
``median_abs_error``, ``P(|e| < m) <= 1/2 <= P(|e| <= m)`` (the definition, atoms included), each
empirical fraction within ``Z`` binomial standard errors ``sqrt(1/(4T))`` of 1/2.

``Z = 6``: the two-sided normal tail beyond 6 is 2e-9 per comparison, so with the CLT the whole
file fails with probability well below TEST_FAILURE_RATE (alpha ~ 1e-6) when the closed forms are
right. Power: each check must reject the exact value at 2 epsilon on the same trials, so a wrong
closed form (a factor of two, a missed clipping) cannot pass.
"""

import math

import jax
import numpy as np
import pytest

from gpuprivacy import datasets
from gpuprivacy.sweeps import DataSpec, run_cell, run_sweep
from gpuprivacy.sweeps._exact import EXACT_ERRORS
from gpuprivacy.sweeps._mechanisms import builtin_sweepables
from gpuprivacy.sweeps._metrics import cell_metrics
from gpuprivacy.sweeps._trials import CellTrials

Z = 6.0
NUM_TRIALS = 16_384  # one chunk of the engine on a CPU at n = 25: no padded trials
N = 25
DOMAIN = dict(lower=-4.0, upper=4.0)

# One case per entry (the smooth-sensitivity median twice: Laplace and Cauchy noise), at epsilon = 1.
CASES = [
    ("piecewise-laplace-median", {}),
    ("inverse-sensitivity-median", {}),
    ("piecewise-laplace-quantile", {"quantile": 0.9}),
    ("inverse-sensitivity-quantile", {"quantile": 0.9}),
    ("piecewise-laplace-clipped-mean", {}),
    ("inverse-sensitivity-clipped-mean", {}),
    ("smooth-sensitivity-median", {"noise": "laplace", "delta": 1e-6}),
    ("smooth-sensitivity-median", {"noise": "cauchy"}),
    ("laplace-median", {}),
]


def _fixed_dataset() -> np.ndarray:
    # Normal draws with two values outside the domain, so clip=True matters (the mechanisms clip them in,
    # and so must the closed forms); the median and the 0.9 quantile stay inside.
    x = np.array(datasets.draw(jax.random.key(20261123), "normal", (N,), scale=1.5))
    x[:2] = (-9.0, 7.5)
    return x


def _params(extra, epsilon=1.0):
    return {"epsilon": epsilon, **DOMAIN, "clip": True, **extra}


def _exact_at(name, extra, epsilon):
    """The entry's exact quantities on the fixed dataset at ``epsilon``, evaluated directly (not via a sweep)."""
    out = EXACT_ERRORS[name](_fixed_dataset(), _params(extra, epsilon))
    return {k: float(v) for k, v in out.items()}


def _mean_agrees(abs_err, expected) -> bool:
    return abs(abs_err.mean() - expected) < Z * abs_err.std(ddof=1) / math.sqrt(abs_err.size)


def _median_agrees(abs_err, median) -> bool:
    band = Z * math.sqrt(0.25 / abs_err.size)
    return np.mean(abs_err < median) <= 0.5 + band and np.mean(abs_err <= median) >= 0.5 - band


def test_every_entry_has_a_case_and_is_wired_into_its_sweepable():
    assert {name for name, _ in CASES} == set(EXACT_ERRORS)
    table = builtin_sweepables()
    for name, fn in EXACT_ERRORS.items():
        assert table[name].exact is fn


@pytest.mark.parametrize("name, extra", CASES, ids=[f"{n}{'-' + e['noise'] if 'noise' in e else ''}"
                                                    for n, e in CASES])
def test_exact_errors_agree_with_the_mechanism_s_monte_carlo(name, extra):
    spec = DataSpec("fixed", N, {}, fixed=_fixed_dataset(), fresh=False)
    trials = run_cell(builtin_sweepables()[name], _params(extra), spec, jax.random.key(7), NUM_TRIALS, exact=True)
    assert trials.valid.all()
    abs_err = np.abs(np.asarray(trials.values, np.float64) - np.asarray(trials.targets, np.float64))
    exact = {k: np.asarray(v) for k, v in trials.exact.items()}
    # One dataset: every trial states the same exact values, and the engine's equal the direct evaluation.
    direct = _exact_at(name, extra, 1.0)
    assert set(exact) == set(direct) and exact
    for k, v in exact.items():
        assert v.shape == (NUM_TRIALS,) and np.all(v == v[0])
        assert float(v[0]) == pytest.approx(direct[k], rel=1e-12)
    doubled = _exact_at(name, extra, 2.0)
    if "expected_abs_error" in direct:
        assert _mean_agrees(abs_err, direct["expected_abs_error"])
        assert not _mean_agrees(abs_err, doubled["expected_abs_error"])  # power: epsilon off by a factor two
    if "median_abs_error" in direct:
        assert _median_agrees(abs_err, direct["median_abs_error"])
        assert not _median_agrees(abs_err, doubled["median_abs_error"])
    # Which quantities exist: a median for the PLM median, the smooth sensitivity and Laplace medians;
    # no mean for Cauchy noise.
    has_median = name in ("piecewise-laplace-median", "smooth-sensitivity-median", "laplace-median")
    assert ("median_abs_error" in direct) == has_median
    assert ("expected_abs_error" in direct) == (extra.get("noise") != "cauchy")


def test_smooth_sensitivity_closed_forms_use_the_mechanism_s_own_scale():
    # NRS07: Laplace noise E|err| = S*/alpha = 2 S*/epsilon, median ln 2 times that; Cauchy median 6 S*/epsilon.
    x = _fixed_dataset()
    release = builtin_sweepables()["smooth-sensitivity-median"].release
    for extra, quantity, factor in ((dict(noise="laplace", delta=1e-6), "expected_abs_error", 1.0),
                                    (dict(noise="laplace", delta=1e-6), "median_abs_error", math.log(2.0)),
                                    (dict(noise="cauchy"), "median_abs_error", 1.0)):
        info = release(jax.random.key(0), x, **_params(extra, 0.7)).info
        assert _exact_at("smooth-sensitivity-median", extra, 0.7)[quantity] == pytest.approx(
            factor * float(info.nonprivate_scale), rel=1e-12)


def test_laplace_median_closed_form_includes_the_release_s_clipping():
    # Without clipping E|err| would be GS/epsilon; the release is clipped into the domain, so it is less,
    # and tends to GS/epsilon when the noise is small against the distances to the domain's ends.
    gs = DOMAIN["upper"] - DOMAIN["lower"]
    assert _exact_at("laplace-median", {}, 1.0)["expected_abs_error"] < gs / 1.0
    small_noise = _exact_at("laplace-median", {}, 1e4)
    assert small_noise["expected_abs_error"] == pytest.approx(gs / 1e4, rel=1e-9)
    assert small_noise["median_abs_error"] == pytest.approx(math.log(2.0) * gs / 1e4, rel=1e-9)


def test_exact_metrics_average_over_released_datasets_and_are_null_where_not_stated():
    valid = np.array([True, True, False, True])
    trials = CellTrials(values=np.zeros(4), targets=np.zeros(4), valid=valid, guarantee=None, population=None,
                        wall_s=0.0, compile_s=0.0, chunk=4, devices=1,
                        exact={"expected_abs_error": np.array([1.0, 2.0, 100.0, 3.0])})
    m = cell_metrics(trials, {}, target_kind="real")
    assert m["expected_abs_error"] == pytest.approx(2.0)
    assert m["expected_abs_error_se"] == pytest.approx(1.0 / math.sqrt(3.0))
    assert math.isnan(m["median_abs_error_exact"])
    none = cell_metrics(trials._replace(exact={}), {}, target_kind="real")
    assert all(math.isnan(none[k]) for k in ("expected_abs_error", "expected_abs_error_se", "median_abs_error_exact"))


def test_exact_metrics_appear_in_a_sweep_row_when_the_config_asks(tmp_path):
    config = {
        "name": "exact-metrics-test", "seed": 3, "trials": 16, "exact": True,
        "mechanism": [{"name": "piecewise-laplace-median", "epsilon": 1.0, "lower": -5.0, "upper": 5.0, "clip": True},
                      {"name": "laplace-mechanism", "epsilon": 1.0}],
        "dataset": {"name": "normal", "n": 15},
    }
    summary = run_sweep(config, results_path=tmp_path / "r.jsonl", progress=False)
    rows = {row["mechanism"]: row["metrics"] for row in summary.rows}
    plm, plain = rows["piecewise-laplace-median"], rows["laplace-mechanism"]
    # PLM: a fresh dataset per trial, so the mean over datasets has a standard error; both exact quantities.
    assert 0 < plm["expected_abs_error"] < 10 and plm["expected_abs_error_se"] > 0
    assert 0 < plm["median_abs_error_exact"] < plm["expected_abs_error"]
    # A mechanism that states no exact errors: null in JSON.
    assert plain["released"] == 1.0
    assert plain["expected_abs_error"] is None and plain["expected_abs_error_se"] is None
    assert plain["median_abs_error_exact"] is None
    # Without `exact = true` they are not computed (they can cost more than the release): null.
    del config["exact"]
    lean = run_sweep(config, results_path=tmp_path / "lean.jsonl", progress=False)
    plm = {row["mechanism"]: row["metrics"] for row in lean.rows}["piecewise-laplace-median"]
    assert plm["expected_abs_error"] is None and plm["mae"] > 0
